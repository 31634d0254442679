//! The controller's small HTTP server: `GET /metrics`, `GET /healthz`, `GET /readyz`.
//!
//! - `/metrics`: [`Metrics::encode`] as `application/openmetrics-text; version=1.0.0;
//!   charset=utf-8`.
//! - `/healthz` and `/readyz`: as every process of the updater serves them (see
//!   [`bootc_pool_common::health`]); `/readyz` answers 200 once [`Health::set_ready`]`(true)`
//!   was called (the controller's caches have synced).
//!
//! Use [`serve`] to run on a fixed address, or [`Server::bind`] then [`Server::run`] to
//! learn the bound address first (port 0 in tests).

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
pub use bootc_pool_common::health::Health;
use bootc_pool_common::health::{self, MetricsEndpoint};

use crate::metrics::Metrics;

/// Content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The routes, for embedding in another server or for tests without a socket.
pub fn router(metrics: Metrics, health: Health) -> Router {
    let metrics = MetricsEndpoint::new(OPENMETRICS_CONTENT_TYPE, move || metrics.encode());
    health::router(health, Some(metrics))
}

/// A bound, not yet serving, metrics and health server.
#[derive(Debug)]
pub struct Server(health::HttpServer);

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub async fn bind(addr: SocketAddr, metrics: Metrics, health: Health) -> io::Result<Self> {
        health::HttpServer::bind(addr, router(metrics, health))
            .await
            .map(Self)
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// Serves until `shutdown` completes, then finishes the requests in flight.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        self.0.run(shutdown).await
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` until `shutdown`
/// completes.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    Server::bind(addr, metrics, health)
        .await?
        .run(shutdown)
        .await
}
