//! An in-memory Kubernetes API server for tests: behaves like kube-apiserver for what this project and its real clients (kubectl, kube-rs) use.
//!
//! Start one with [`Emulator::start`]; [`Handle`] inspects it and injects faults. Map of the modules:
//!
//! - `server`: the HTTP API ([`server::router`]): routing (`server/route`), the read handlers (`server/read`: get,
//!   list, watch) and the write handlers (`server/write`), request accounting and fault injection.
//! - [`ops`]: the write path ([`ops::Inner`]): `ops/create`, `ops/update` (PUT and PATCH), `ops/delete`, and what a
//!   stored write sets off (`ops/effects`).
//! - [`store`]: stored objects, resourceVersions and the event history; `watch`: watches streamed from it.
//! - [`registry`]: the served kinds (`registry/builtins`, CRDs) and the discovery documents (`registry/discovery`).
//! - [`patch`]: PATCH bodies: list semantics (`patch/lists`), JSON merge patch and JSON patch (`patch/json`),
//!   strategic merge patch (`patch/strategic`), server-side apply (`patch/apply`).
//! - [`selectors`]: label selectors (`selectors/label`, `selectors/label_parser`), field selectors
//!   (`selectors/field`) and the apimachinery validation they share (`selectors/validation`).
//! - [`table`]: server-side printing for kubectl: Accept negotiation (`table/negotiate`), columns (`table/columns`,
//!   built-in kinds in `table/builtin` with the Node, Pod and Event printers in `table/node`, `table/pod`,
//!   `table/event`) and the `Table` documents (`table/render`).
//! - [`jsonpath`]: Kubernetes JSONPath for printer columns (`jsonpath/parser`, `jsonpath/eval`).
//! - [`openapi`]: the OpenAPI v3 documents (REST paths in `openapi/paths`, built-in schemas in `openapi/schemas`) and
//!   the minimal v2 one (`openapi/v2`).
//! - [`policy`]: PodDisruptionBudgets and eviction; `gc`: garbage collection of dependents and namespaces.
//! - [`local`]: kube-rs clients that hand their requests straight to the router, without sockets.
//! - [`kubectl`]: the real kubectl run against an emulator by tests, with a HOME and cache of its own.
//! - [`tls`]: HTTPS with a certificate authority made at start ([`EmulatorOptions::tls`]).
//! - [`error`]: API errors as `Status` objects; [`faults`]: fault injection and the request log; [`audit`]: the
//!   request log written for the audit check.

pub mod audit;
pub mod error;
pub mod faults;
mod gc;
pub mod jsonpath;
pub mod kubectl;
pub mod local;
pub mod openapi;
pub mod ops;
pub mod patch;
pub mod policy;
pub mod registry;
pub mod selectors;
pub mod server;
pub mod store;
pub mod table;
#[cfg(test)]
mod test_support;
pub mod tls;
mod watch;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

pub use faults::{FaultConfig, RequestCounts, RequestRecord};
pub use store::{Event, EventType, object_rv_order, rv_order, rv_text};

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    /// Where to listen; port 0 picks a free one. Loopback only.
    pub listen: SocketAddr,
    /// Events kept for watches to resume from; older versions get 410 Gone.
    pub history_limit: usize,
    /// Events buffered per watcher before a slow watcher is disconnected.
    pub fanout: usize,
    /// Events buffered for the followers of [`Handle::events`] (the invariant checks)
    /// before a slow one is told it lagged.
    pub observer_buffer: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// Serve HTTPS with a certificate authority made at start (see [`tls`]) instead of
    /// plain HTTP.
    pub tls: bool,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 100_000,
            fanout: 16_384,
            observer_buffer: 16_384,
            bookmark_interval: Duration::from_secs(5),
            tls: false,
        }
    }
}

/// A running emulator. Dropping it stops the server.
#[derive(Debug)]
pub struct Emulator {
    addr: SocketAddr,
    app: Arc<server::App>,
    certificates: Option<tls::Certificates>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Starts on a free loopback port with default options.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(EmulatorOptions::default()).await
    }

    /// Starts with `options`.
    pub async fn start_with(options: EmulatorOptions) -> std::io::Result<Self> {
        if !options.listen.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the emulator listens on loopback addresses only",
            ));
        }
        let listener = tokio::net::TcpListener::bind(options.listen).await?;
        let addr = listener.local_addr()?;
        let app = Arc::new(server::App::new(
            addr.to_string(),
            options.history_limit,
            options.fanout,
            options.bookmark_interval,
        ));
        app.lock()
            .store
            .set_observer_buffer(options.observer_buffer);
        let router = server::router(app.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let certificates = match options.tls {
            true => Some(tls::Certificates::generate()?),
            false => None,
        };
        let task = match certificates.clone() {
            Some(certs) => tokio::spawn(tls::serve(listener, router, certs, stopped)),
            None => tokio::spawn(serve_http(listener, router, stopped)),
        };
        Ok(Emulator {
            addr,
            app,
            certificates,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`, or `https://…` when serving TLS.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    fn scheme(&self) -> &'static str {
        match self.certificates {
            Some(_) => "https",
            None => "http",
        }
    }

    /// The certificate authority clients must trust (PEM), when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.certificates.as_ref().map(|c| c.ca_pem())
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kube-rs configuration for this server, without credentials; over TLS it
    /// trusts the emulator's authority.
    pub fn config(&self) -> kube::Config {
        // A SocketAddr always renders as a valid authority.
        let uri = axum::http::Uri::builder()
            .scheme(self.scheme())
            .authority(self.addr.to_string())
            .path_and_query("/")
            .build()
            .unwrap_or_default();
        let mut config = kube::Config::new(uri);
        config.root_cert = self.certificates.as_ref().map(|c| vec![c.ca_der()]);
        config
    }

    /// A kube-rs client for this server, configured as kube-rs configures clients by default
    /// (including its retries of 429 and 503 answers).
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        kube::Client::try_from(self.config())
    }

    /// A kube-rs client that reaches this emulator without a socket, its requests carrying
    /// `user_agent`: see [`local`]. Fails only for a User-Agent that is no valid header value.
    pub fn local_client(
        &self,
        user_agent: &str,
    ) -> Result<kube::Client, axum::http::header::InvalidHeaderValue> {
        local::client(self.app.clone(), user_agent)
    }

    /// A kubeconfig for kubectl and kube-rs: over plain HTTP without credentials; over
    /// TLS trusting the emulator's authority, with a bearer token (the emulator takes any).
    pub fn kubeconfig(&self) -> String {
        match self.ca_pem() {
            Some(ca) => tls_kubeconfig(&self.url(), ca, "emulator-admin"),
            None => kubeconfig(&self.url()),
        }
    }

    /// Writes [`Emulator::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// Inspection and fault injection.
    pub fn handle(&self) -> Handle {
        Handle {
            app: self.app.clone(),
        }
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        self.shutdown();
        let _ = self.app.cut.send(());
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn shutdown(&mut self) {
        self.app.stop_serving();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        flush_audit(&self.app);
        self.shutdown();
        let _ = self.app.cut.send(());
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Copies the request log to the audit directory when the environment names one; an
/// audit that cannot be written is logged, since losing it must not fail the test that
/// happened to drop the emulator (the audit check counts what it finds).
fn flush_audit(app: &server::App) {
    let Some(dir) = audit::dir_from_env() else {
        return;
    };
    let records = app.log().clone();
    if let Err(e) = audit::write(&dir, &records) {
        tracing::error!(dir = %dir.display(), error = %e, "cannot write the request audit");
        eprintln!(
            "kube-emulator: cannot write the request audit to {}: {e}",
            dir.display()
        );
    }
}

/// A kubeconfig pointing at `url` with an empty user (kubectl sends no token over HTTP).
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {url}\ncontexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator\ncurrent-context: emulator\nusers:\n- name: emulator\n  user: {{}}\npreferences: {{}}\n"
    )
}

/// A kubeconfig pointing at the HTTPS `url`, trusting the authority `ca_pem` and
/// sending `token` (the emulator authenticates nobody; kubectl sends it over TLS).
pub fn tls_kubeconfig(url: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator\ncurrent-context: emulator\nusers:\n- name: emulator\n  user:\n    token: {token}\npreferences: {{}}\n"
    )
}

/// Serves `router` over plain HTTP on `listener` until `stopped` fires.
async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stopped: oneshot::Receiver<()>,
) {
    let shutdown = async {
        let _ = stopped.await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "kube-emulator server failed");
    }
}

/// Looks inside a running emulator and injects faults into it.
#[derive(Debug, Clone)]
pub struct Handle {
    app: Arc<server::App>,
}

impl Handle {
    /// Replaces the fault configuration.
    pub fn set_faults(&self, config: FaultConfig) {
        self.app
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(config);
    }

    /// A kube-rs client that reaches the emulator without a socket: see
    /// [`Emulator::local_client`].
    pub fn local_client(
        &self,
        user_agent: &str,
    ) -> Result<kube::Client, axum::http::header::InvalidHeaderValue> {
        local::client(self.app.clone(), user_agent)
    }

    /// Stops injecting faults.
    pub fn clear_faults(&self) {
        self.set_faults(FaultConfig::default());
    }

    /// Closes every open watch stream now (clients resume from their last version).
    pub fn cut_watches(&self) {
        let _ = self.app.cut.send(());
    }

    /// Holds every watch of `plural` (in any group): from now on they send nothing, not
    /// even bookmarks, and watches of it begun while held send nothing either, until
    /// [`Handle::release_watches`]. Their events are then sent in order, none lost: a
    /// client sees the world as it was when the hold began, as behind a slow watch cache.
    /// Reads and writes are served as usual.
    pub fn hold_watches(&self, plural: &str) {
        self.app.held.send_modify(|held| {
            held.insert(plural.to_owned());
        });
    }

    /// Lifts the hold [`Handle::hold_watches`] put on `plural`'s watches.
    pub fn release_watches(&self, plural: &str) {
        self.app.held.send_modify(|held| {
            held.remove(plural);
        });
    }

    /// Forgets the event history, so a watch resuming from any earlier version gets 410
    /// Gone and must list again; open watches are cut.
    pub fn expire_history(&self) {
        self.app.lock().store.compact();
        self.cut_watches();
    }

    /// The most writes served at once so far to the clients whose User-Agent contains
    /// `user_agent` (each client counted apart; the most of any of them).
    pub fn most_writes_in_flight(&self, user_agent: &str) -> usize {
        self.app
            .writes_in_flight()
            .iter()
            .filter(|(agent, _)| agent.contains(user_agent))
            .map(|(_, n)| n.most)
            .max()
            .unwrap_or(0)
    }

    /// How many watches were cut so far for falling behind (their queue of
    /// [`EmulatorOptions::fanout`] events was full), by resource (plural).
    pub fn watches_cut_behind(&self) -> std::collections::BTreeMap<String, u64> {
        self.app.lock().store.cut_behind().clone()
    }

    /// Every request served so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.app.log().clone()
    }

    /// Counts of the requests served so far.
    pub fn counters(&self) -> RequestCounts {
        RequestCounts::of(self.app.log().iter())
    }

    /// Forgets the request log (after writing it to the audit directory, when
    /// `KUBE_EMULATOR_AUDIT_DIR` names one).
    pub fn clear_requests(&self) {
        flush_audit(&self.app);
        self.app.log().clear();
    }

    /// The newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.app.lock().store.rv()
    }

    /// Every future change, in resourceVersion order (for invariant checks).
    pub fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.app.lock().store.subscribe()
    }

    /// A stored object, by group, plural, namespace (`""` when cluster-scoped) and name.
    pub fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = registry::ResourceKey::new(group, plural);
        self.app
            .lock()
            .store
            .get(&key, namespace, name)
            .map(|o| (*o).clone())
    }

    /// Stored objects of a resource (all namespaces).
    pub fn list(&self, group: &str, plural: &str) -> Vec<Value> {
        let key = registry::ResourceKey::new(group, plural);
        self.app
            .lock()
            .store
            .list(&key, None)
            .iter()
            .map(|o| (**o).clone())
            .collect()
    }
}
