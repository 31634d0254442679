//! The controller's small HTTP server: `GET /metrics`, `GET /healthz`, `GET /readyz`.
//!
//! - `/metrics`: [`Metrics::encode`] as `application/openmetrics-text; version=1.0.0;
//!   charset=utf-8`.
//! - `/healthz`: 200 `ok` while the process serves requests (liveness).
//! - `/readyz`: 200 `ok` once [`Health::set_ready`]`(true)` was called (the controller's
//!   caches have synced), else 503 with the reason.
//!
//! Use [`serve`] to run on a fixed address, or [`Server::bind`] then [`Server::run`] to
//! learn the bound address first (port 0 in tests).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The reason `/readyz` gives before the first [`Health::set_ready`].
const NOT_STARTED: &str = "caches not synced";

/// Readiness shared between the controller and `/readyz`. Clones share the state.
#[derive(Debug, Clone)]
pub struct Health {
    /// `Ok` when ready, else the reason it is not.
    state: Arc<Mutex<Result<(), String>>>,
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

impl Health {
    /// Not ready ("caches not synced").
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(Err(NOT_STARTED.to_owned()))),
        }
    }

    /// Marks the controller ready (its caches have synced) or not ready again.
    pub fn set_ready(&self, ready: bool) {
        self.set(if ready {
            Ok(())
        } else {
            Err(NOT_STARTED.to_owned())
        });
    }

    /// Marks the controller not ready, with the reason `/readyz` reports.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        self.set(Err(reason.into()));
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }

    /// `Ok` when ready, else the reason it is not.
    pub fn readiness(&self) -> Result<(), String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, state: Result<(), String>) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }
}

#[derive(Debug, Clone)]
struct AppState {
    metrics: Metrics,
    health: Health,
}

/// The routes, for embedding in another server or for tests without a socket.
pub fn router(metrics: Metrics, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, health })
}

async fn metrics_handler(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.health.readiness() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        )
            .into_response(),
    }
}

/// A bound, not yet serving, metrics and health server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    router: Router,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub async fn bind(addr: SocketAddr, metrics: Metrics, health: Health) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            router: router(metrics, health),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then finishes the requests in flight.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
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
