//! The HTTP API: routing of kube-apiserver paths, request accounting and fault injection, and the read and write handlers.
//!
//! Map: the shared state ([`App`]), the one handler (accounting, faults, dispatch) and discovery answers are here;
//! `route` parses paths, `read` holds get, list and watch, and `write` create, replace, patch, delete and eviction.

mod read;
mod route;
#[cfg(test)]
mod tests;
mod write;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use route::{ResourcePath, Route, parse_route, verb};

use crate::error::ApiError;
use crate::faults::{ApiFaults, RequestRecord};
use crate::openapi;
use crate::ops::{Inner, Written};
use crate::registry::ResourceType;
use crate::table::{self, TableVersion};

/// Shared state of a running emulator.
#[derive(Debug)]
pub struct App {
    inner: Mutex<Inner>,
    /// Fault injection.
    pub faults: Mutex<ApiFaults>,
    /// Every request served, in order.
    pub log: Mutex<Vec<RequestRecord>>,
    seq: AtomicU64,
    /// Closing every open watch.
    pub cut: broadcast::Sender<()>,
    /// The resources (plurals) whose watches send nothing for now: their events wait,
    /// in order, until the hold is lifted.
    pub held: tokio::sync::watch::Sender<std::collections::BTreeSet<String>>,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` the server listens on.
    pub address: String,
    /// Set when the emulator stops: local clients' requests fail from then on.
    stopped: AtomicBool,
    /// Writes being served, and the most served at once, by User-Agent.
    writes_in_flight: Mutex<HashMap<String, InFlight>>,
}

/// Writes of one client being served now, and the most at once so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// Being served now.
    pub now: usize,
    /// The most at once so far.
    pub most: usize,
}

/// One write being served: counted in [`App::writes_in_flight`] until dropped (also when
/// the client goes away mid-request).
struct Serving<'a> {
    app: &'a App,
    user_agent: String,
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.app.in_flight().get_mut(&self.user_agent) {
            n.now = n.now.saturating_sub(1);
        }
    }
}

impl App {
    /// A fresh server state.
    pub fn new(
        address: String,
        history_limit: usize,
        fanout: usize,
        bookmark_interval: Duration,
    ) -> Self {
        let (cut, _) = broadcast::channel(4);
        App {
            inner: Mutex::new(Inner::new(history_limit, fanout)),
            faults: Mutex::new(ApiFaults::default()),
            log: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            cut,
            held: tokio::sync::watch::Sender::default(),
            bookmark_interval,
            address,
            stopped: AtomicBool::new(false),
            writes_in_flight: Mutex::new(HashMap::new()),
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, InFlight>> {
        self.writes_in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// A write of `user_agent` begins being served.
    fn serving(&self, user_agent: &str) -> Serving<'_> {
        let mut all = self.in_flight();
        let n = all.entry(user_agent.to_owned()).or_default();
        n.now += 1;
        n.most = n.most.max(n.now);
        Serving {
            app: self,
            user_agent: user_agent.to_owned(),
        }
    }

    /// The writes being served and the most at once so far, by User-Agent.
    pub fn writes_in_flight(&self) -> HashMap<String, InFlight> {
        self.in_flight().clone()
    }

    /// Marks the emulator stopped: requests of local clients ([`crate::local`]) fail from
    /// now on, as requests to a closed port do.
    pub fn stop_serving(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the emulator stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The state behind the lock. A panic while holding it is a bug in the emulator; the
    /// state is still used afterwards rather than failing every later request.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn faults(&self) -> MutexGuard<'_, ApiFaults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The request log.
    pub fn log(&self) -> MutexGuard<'_, Vec<RequestRecord>> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The printer columns of `t`.
    pub fn columns(t: &ResourceType) -> Vec<table::Column> {
        match &t.crd_version {
            Some(v) => table::crd_columns(v),
            None => table::builtin_columns(&t.kind),
        }
    }

    /// Objects of `t` as a Table for kubectl.
    pub fn table_of(
        &self,
        version: TableVersion,
        t: &ResourceType,
        objects: &[Value],
        include_object: &str,
        list_metadata: Value,
    ) -> Value {
        table::to_table(
            version,
            &Self::columns(t),
            objects,
            include_object,
            list_metadata,
            chrono::Utc::now(),
        )
    }
}

/// The router serving everything through one handler.
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let route = parse_route(&app.lock(), uri.path());
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut record = RequestRecord {
        seq: app.seq.fetch_add(1, Ordering::SeqCst),
        verb: verb(&method, &route, &query).into(),
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        user_agent,
        code: 0,
        injected: false,
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        path: uri.path().to_string(),
    };
    if let Route::Resource(p) = &route {
        record.group = p.resource.group.clone();
        record.resource = p.resource.plural.clone();
        record.subresource = p.subresource.clone().unwrap_or_default();
        record.namespace = p.namespace.clone().unwrap_or_default();
        record.name = p.name.clone().unwrap_or_default();
    }
    // Counted from arrival, the injected latency included: what the client waits for.
    let _serving = record.is_write().then(|| app.serving(&record.user_agent));
    let (latency, injected) = {
        let mut faults = app.faults();
        (
            crate::faults::latency(&faults, &record),
            faults.decide(&record),
        )
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let response = match injected {
        Some(err) => {
            record.injected = true;
            error_response(&err)
        }
        None => {
            let req = RouteRequest {
                query: &query,
                headers: &headers,
                body: &body,
            };
            dispatch(&app, route, &method, &req).await
        }
    };
    record.code = response.status().as_u16();
    app.log().push(record);
    response
}

fn json_response(code: u16, value: &Value, warnings: &[String]) -> Response {
    // Serialized into bytes directly: `to_string` goes through `fmt` a piece at a time.
    let body = serde_json::to_vec(value).unwrap_or_else(|_| value.to_string().into_bytes());
    let mut response = (
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {w:?}")) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// The `Status` answer for an error.
pub fn error_response(err: &ApiError) -> Response {
    let mut response = json_response(err.code, &err.status(), &[]);
    if let Some(r) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&r.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

async fn dispatch(
    app: &Arc<App>,
    route: Route,
    method: &Method,
    req: &RouteRequest<'_>,
) -> Response {
    let result = match route {
        Route::Version => Ok(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-emulator", "gitCommit": "", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "", "compiler": "emulator", "platform": "linux/amd64",
        })),
        Route::Health => return (StatusCode::OK, "ok").into_response(),
        Route::CoreVersions => Ok(app.lock().registry.api_versions(&app.address)),
        Route::Groups => Ok(app.lock().registry.api_group_list()),
        Route::Group(g) => app
            .lock()
            .registry
            .api_group(&g)
            .ok_or_else(|| ApiError::no_route(&g)),
        Route::Resources(g, v) => app
            .lock()
            .registry
            .api_resource_list(&g, &v)
            .ok_or_else(|| ApiError::no_route(&format!("{g}/{v}"))),
        Route::OpenApiV3Root => Ok(openapi_v3_root(app)),
        Route::OpenApiV3(g, v) => openapi_v3(app, &g, &v),
        // kubectl decodes v2 only as protobuf; a minimal document lets it fall back to its
        // compiled-in types instead of failing.
        Route::OpenApiV2 => {
            return (
                [(header::CONTENT_TYPE, openapi::V2_CONTENT_TYPE)],
                openapi::v2_document(),
            )
                .into_response();
        }
        Route::NotFound => Err(ApiError::no_route("")),
        Route::Resource(p) => return resource(app, p, method, req).await,
    };
    match result {
        Ok(v) => json_response(200, &v, &[]),
        Err(e) => error_response(&e),
    }
}

/// `GET /openapi/v3`, with each group version's URL carrying the hash of its current document,
/// so a changed CRD schema is never served from kubectl's cache.
fn openapi_v3_root(app: &Arc<App>) -> Value {
    let group_versions = app.lock().registry.group_versions();
    let hashed: Vec<(String, String, String)> = group_versions
        .into_iter()
        .map(|(g, v)| {
            let hash = openapi_v3(app, &g, &v)
                .map(|d| openapi::document_hash(&d))
                .unwrap_or_default();
            (g, v, hash)
        })
        .collect();
    openapi::v3_root_hashed(&hashed)
}

fn openapi_v3(app: &Arc<App>, group: &str, version: &str) -> Result<Value, ApiError> {
    let inner = app.lock();
    let kinds: Vec<openapi::KindDoc> = inner
        .registry
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .map(|t| openapi::KindDoc {
            kind: t.kind.clone(),
            plural: t.plural.clone(),
            namespaced: t.namespaced,
            schema: t.schema().cloned().unwrap_or_else(|| json!({})),
        })
        .collect();
    if kinds.is_empty() {
        return Err(ApiError::no_route(&format!(
            "/openapi/v3/{group}/{version}"
        )));
    }
    Ok(openapi::v3_group_version(group, version, &kinds))
}

/// The parts of a request the handlers read besides its method and path.
#[derive(Debug, Clone, Copy)]
struct RouteRequest<'a> {
    query: &'a HashMap<String, String>,
    headers: &'a HeaderMap,
    body: &'a Bytes,
}

async fn resource(
    app: &Arc<App>,
    p: ResourcePath,
    method: &Method,
    req: &RouteRequest<'_>,
) -> Response {
    let accept = req
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let table = table::wants_table(accept);
    let query = req.query;
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let write = || write::Write::new(app, &p, req);
    let result: Result<Written, ApiError> = match (method.as_str(), &p.name) {
        ("GET", None) if watch => return read::start_watch(app, &p, query, table),
        ("GET", None) => read::list(app, &p, query, table).map(Written::ok),
        ("GET", Some(name)) => read::get(app, &p, name, query, table),
        ("POST", None) => write().and_then(|w| w.create()),
        ("POST", Some(name)) if p.subresource.as_deref() == Some("eviction") => {
            write().and_then(|w| w.evict(name))
        }
        ("PUT", Some(name)) => write().and_then(|w| w.replace(name)),
        ("PATCH", Some(name)) => write().and_then(|w| w.patch(name)),
        ("DELETE", Some(name)) => write().and_then(|w| w.delete(name)),
        ("DELETE", None) => write().and_then(|w| w.delete_collection()),
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}",
            p.resource.qualified()
        ))),
    };
    match result {
        Ok(w) => json_response(w.code, &w.object, &w.warnings),
        Err(e) => error_response(&e),
    }
}
