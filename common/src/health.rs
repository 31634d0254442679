//! The small HTTP server of a long-running process: `GET /healthz`, `GET /readyz`, and
//! `GET /metrics` when the process has metrics.
//!
//! - `/healthz`: 200 `ok` while the process serves requests (liveness).
//! - `/readyz`: 200 `ok` once [`Health::set_ready`]`(true)` was called (the process's
//!   caches have synced), else 503 with the reason.
//! - `/metrics`: what the [`MetricsEndpoint`] renders, with its content type.
//!
//! [`HttpServer::bind`] then [`HttpServer::run`] serves a [`router`]; binding first tells the
//! bound address (port 0 in tests).

use std::fmt;
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

/// The reason `/readyz` gives before the first [`Health::set_ready`].
const NOT_STARTED: &str = "caches not synced";

/// Readiness shared between the process and `/readyz`. Clones share the state.
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

    /// Marks the process ready (its caches have synced) or not ready again.
    pub fn set_ready(&self, ready: bool) {
        self.set(if ready {
            Ok(())
        } else {
            Err(NOT_STARTED.to_owned())
        });
    }

    /// Marks the process not ready, with the reason `/readyz` reports.
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

/// What `/metrics` serves: a text rendered afresh for every request.
#[derive(Clone)]
pub struct MetricsEndpoint {
    content_type: &'static str,
    render: Arc<dyn Fn() -> String + Send + Sync>,
}

impl MetricsEndpoint {
    /// Serves `render()` as `content_type`.
    pub fn new(
        content_type: &'static str,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        Self {
            content_type,
            render: Arc::new(render),
        }
    }
}

impl fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

/// The routes, for embedding in another server or for tests without a socket.
pub fn router(health: Health, metrics: Option<MetricsEndpoint>) -> Router {
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    match metrics {
        None => router,
        Some(metrics) => router.route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, metrics.content_type)],
                        (metrics.render)(),
                    )
                        .into_response()
                }
            }),
        ),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(health): State<Health>) -> Response {
    match health.readiness() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        )
            .into_response(),
    }
}

/// A bound, not yet serving, HTTP server.
#[derive(Debug)]
pub struct HttpServer {
    listener: TcpListener,
    router: Router,
}

impl HttpServer {
    /// Binds `addr` (port 0 picks a free port; see [`HttpServer::local_addr`]) for `router`.
    pub async fn bind(addr: SocketAddr, router: Router) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self { listener, router })
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

#[cfg(test)]
mod tests;
