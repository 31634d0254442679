//! Clients that reach the emulator without sockets: each request is handed straight to
//! the emulator's router ([`crate::server::router`], the one the TCP server serves), so it
//! goes through the same handler, request log, fault injection and watches as one sent
//! over HTTP, but holds no connection and no file descriptor. A simulator running
//! thousands of in-process clients, each with a long-lived watch, would otherwise hold two
//! descriptors per watch (the client's end and the server's) in one process.
//!
//! The client is stacked as kube-rs stacks one made from a [`kube::Config`] by default,
//! minus the parts that only concern a network: the User-Agent it is given is set on every
//! request (as the config's extra headers would be; the request log counts requests by
//! it), and 429 and 503 answers are retried with kube-rs's own [`RetryPolicy`]. kube-rs
//! builds path-only URIs and sets `Accept` and `Content-Type` itself, which is all the
//! router needs. Once the emulator stops, every request fails, as a refused connection
//! would.
//!
//! [`RetryPolicy`]: kube::client::retry::RetryPolicy

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::http::header::{self, InvalidHeaderValue};
use axum::http::{HeaderValue, Request, Response};
use kube::client::retry::RetryPolicy;
use tower::retry::Retry;
use tower::{BoxError, Service, ServiceExt as _};

use crate::server::{self, App};

/// The default namespace of local clients, as of a kubeconfig context without one.
const DEFAULT_NAMESPACE: &str = "default";

/// A [`tower::Service`] that answers kube-rs requests with the emulator's router, setting
/// the User-Agent it was made with.
#[derive(Clone)]
pub struct LocalService {
    app: Arc<App>,
    router: Router,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for LocalService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalService")
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

/// What a stopped emulator answers a local request with.
#[derive(Debug, thiserror::Error)]
#[error("the API emulator has stopped")]
pub struct Stopped;

impl LocalService {
    /// A service for `app` whose requests carry `user_agent`.
    pub fn new(app: Arc<App>, user_agent: &str) -> Result<Self, InvalidHeaderValue> {
        Ok(LocalService {
            router: server::router(app.clone()),
            app,
            user_agent: HeaderValue::from_str(user_agent)?,
        })
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<axum::body::Body>, BoxError>> + Send>>;

impl Service<Request<kube::client::Body>> for LocalService {
    type Response = Response<axum::body::Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<kube::client::Body>) -> Self::Future {
        if self.app.is_stopped() {
            return Box::pin(std::future::ready(Err(Box::new(Stopped) as BoxError)));
        }
        request
            .headers_mut()
            .insert(header::USER_AGENT, self.user_agent.clone());
        let router = self.router.clone();
        Box::pin(async move {
            let response = router
                .oneshot(request.map(axum::body::Body::new))
                .await
                .unwrap_or_else(|never| match never {});
            Ok(response)
        })
    }
}

/// A kube-rs client for `app` that needs no socket: see the module's documentation.
pub fn client(app: Arc<App>, user_agent: &str) -> Result<kube::Client, InvalidHeaderValue> {
    let service = LocalService::new(app, user_agent)?;
    let service = Retry::new(RetryPolicy::server_retry(), service);
    Ok(kube::Client::new(service, DEFAULT_NAMESPACE))
}

#[cfg(test)]
mod tests;
