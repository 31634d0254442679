//! The HTTP API: routing of kube-apiserver paths, request accounting and fault injection, and the read and write handlers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::ApiError;
use crate::faults::{Faults, RequestRecord};
use crate::ops::{FieldValidation, Inner, PatchBody, WriteOptions, Written};
use crate::patch::PatchType;
use crate::registry::ResourceType;
use crate::selectors::{self, FieldSelector, LabelSelector};
use crate::table::{self, TableVersion};
use crate::watch::{self, WatchRequest};
use crate::{openapi, policy};

/// Shared state of a running emulator.
#[derive(Debug)]
pub struct App {
    inner: Mutex<Inner>,
    /// Fault injection.
    pub faults: Mutex<Faults>,
    /// Every request served, in order.
    pub log: Mutex<Vec<RequestRecord>>,
    seq: AtomicU64,
    /// Closing every open watch.
    pub cut: broadcast::Sender<()>,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` the server listens on.
    pub address: String,
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
            faults: Mutex::new(Faults::default()),
            log: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            cut,
            bookmark_interval,
            address,
        }
    }

    /// The state behind the lock. A panic while holding it is a bug in the emulator; the
    /// state is still used afterwards rather than failing every later request.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
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

/// What a path addresses.
#[derive(Debug)]
enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    OpenApiV3Root,
    OpenApiV3(String, String),
    OpenApiV2,
    Resource(ResourcePath),
    NotFound,
}

#[derive(Debug)]
struct ResourcePath {
    resource: Arc<ResourceType>,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_route(inner: &Inner, path: &str) -> Route {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", g] => return Route::Group((*g).to_string()),
        ["api", v] => return Route::Resources(String::new(), (*v).to_string()),
        ["apis", g, v] => return Route::Resources((*g).to_string(), (*v).to_string()),
        ["openapi", "v2"] => return Route::OpenApiV2,
        ["openapi", "v3"] => return Route::OpenApiV3Root,
        ["openapi", "v3", "api", v] => return Route::OpenApiV3(String::new(), (*v).to_string()),
        ["openapi", "v3", "apis", g, v] => {
            return Route::OpenApiV3((*g).to_string(), (*v).to_string());
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NotFound,
    };
    let find = |plural: &str| inner.registry.find(group, version, plural);
    let (resource, namespace, name, subresource) = match rest {
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            (find("namespaces"), None, Some(*ns), Some(*sub))
        }
        ["namespaces", ns, plural, tail @ ..] => match tail {
            [] => (find(plural), Some(*ns), None, None),
            [name] => (find(plural), Some(*ns), Some(*name), None),
            [name, sub] => (find(plural), Some(*ns), Some(*name), Some(*sub)),
            _ => return Route::NotFound,
        },
        [plural] => (find(plural), None, None, None),
        [plural, name] => (find(plural), None, Some(*name), None),
        [plural, name, sub] => (find(plural), None, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(resource) = resource else {
        return Route::NotFound;
    };
    // A namespaced object needs its namespace in the path; a cluster-scoped one must not have one.
    let bad_scope = (resource.namespaced && name.is_some() && namespace.is_none())
        || (!resource.namespaced && namespace.is_some());
    let known_sub = match subresource {
        None => true,
        Some("status") => resource.status_subresource,
        Some("eviction") => resource.group.is_empty() && resource.plural == "pods",
        Some(_) => false,
    };
    if bad_scope || !known_sub {
        return Route::NotFound;
    }
    Route::Resource(ResourcePath {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: subresource.map(str::to_string),
    })
}

fn verb(method: &Method, route: &Route, query: &HashMap<String, String>) -> &'static str {
    let Route::Resource(p) = route else {
        return "discovery";
    };
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    match (method.as_str(), p.name.is_some()) {
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
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
    let (latency, injected) = {
        let mut faults = app.faults();
        (crate::faults::latency(&faults), faults.decide(&record))
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let response = match injected {
        Some(err) => {
            record.injected = true;
            error_response(&err)
        }
        None => dispatch(&app, route, &method, &query, &headers, &body).await,
    };
    record.code = response.status().as_u16();
    app.log().push(record);
    response
}

fn json_response(code: u16, value: &Value, warnings: &[String]) -> Response {
    let mut response = (
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
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
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
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
        Route::Resource(p) => return resource(app, p, method, query, headers, body).await,
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

fn write_options(query: &HashMap<String, String>) -> Result<WriteOptions, ApiError> {
    Ok(WriteOptions {
        dry_run: match query.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun {other:?} is invalid: only All is supported"
                )));
            }
        },
        field_validation: FieldValidation::parse(
            query.get("fieldValidation").map_or("", String::as_str),
        )?,
    })
}

fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if content_type.contains("yaml") {
        serde_yaml_ng::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
    }
}

/// Fields a field selector may use, as kube-apiserver allows them per kind.
fn allowed_field(t: &ResourceType, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    let builtin: &[&str] = match (t.group.as_str(), t.plural.as_str()) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &[],
    };
    if builtin.contains(&field) {
        return true;
    }
    t.crd_version
        .as_deref()
        .and_then(|v| v.get("selectableFields"))
        .and_then(Value::as_array)
        .is_some_and(|fs| {
            fs.iter()
                .any(|f| f["jsonPath"].as_str().map(|p| p.trim_start_matches('.')) == Some(field))
        })
}

fn selectors(
    t: &ResourceType,
    query: &HashMap<String, String>,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = match query.get("labelSelector") {
        Some(s) if !s.is_empty() => {
            selectors::parse_label_selector(s).map_err(ApiError::bad_request)?
        }
        _ => LabelSelector::everything(),
    };
    let fields = match query.get("fieldSelector") {
        Some(s) if !s.is_empty() => {
            selectors::parse_field_selector(s).map_err(ApiError::bad_request)?
        }
        _ => FieldSelector::everything(),
    };
    if let Some(bad) = fields.fields().find(|f| !allowed_field(t, f)) {
        return Err(ApiError::bad_request(format!(
            "field label not supported: {bad}"
        )));
    }
    Ok((labels, fields))
}

/// `?includeObject=` for Table answers (default Metadata).
fn include_object(query: &HashMap<String, String>) -> Result<&str, ApiError> {
    match query.get("includeObject").map(String::as_str) {
        None | Some("") => Ok("Metadata"),
        Some(v) if table::valid_include_object(v) => Ok(v),
        Some(v) => Err(ApiError::bad_request(format!(
            "includeObject {v:?} is invalid: use None, Metadata or Object"
        ))),
    }
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    format!("{rv}:{ns}:{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Option<(u64, String, String)> {
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let mut parts = text.splitn(3, ':');
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.to_string(),
        parts.next()?.to_string(),
    ))
}

fn list(
    app: &Arc<App>,
    p: &ResourcePath,
    query: &HashMap<String, String>,
    table: Option<TableVersion>,
) -> Result<Value, ApiError> {
    let t = &p.resource;
    let (labels, fields) = selectors(t, query)?;
    let limit: Option<usize> = match query.get("limit").map(|l| l.parse::<i64>()) {
        None => None,
        Some(Ok(n)) if n > 0 => Some(n as usize),
        Some(Ok(_)) => None,
        Some(Err(_)) => return Err(ApiError::bad_request("limit must be an integer")),
    };
    let inner = app.lock();
    let mut rv = inner.store.rv();
    let mut start: Option<(String, String)> = None;
    if let Some(token) = query.get("continue").filter(|c| !c.is_empty()) {
        let (token_rv, ns, name) = decode_continue(token)
            .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
        if token_rv < inner.store.window().0 {
            return Err(ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ));
        }
        rv = token_rv;
        start = Some((ns, name));
    }
    let matching: Vec<Arc<Value>> = inner
        .store
        .list(&t.key(), p.namespace.as_deref())
        .into_iter()
        .filter(|o| {
            start.as_ref().is_none_or(|(ns, name)| {
                let key = (
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                );
                key > (ns.as_str(), name.as_str())
            })
        })
        .filter(|o| labels.matches_object(o) && fields.matches(o))
        .collect();
    drop(inner);
    let (page, more) = match limit {
        Some(n) if matching.len() > n => (&matching[..n], matching.len() - n),
        _ => (&matching[..], 0),
    };
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if more > 0
        && let Some(last) = page.last()
    {
        let ns = last["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = last["metadata"]["name"].as_str().unwrap_or_default();
        metadata["continue"] = json!(encode_continue(rv, ns, name));
        metadata["remainingItemCount"] = json!(more);
    }
    let items: Vec<Value> = page
        .iter()
        .map(|o| {
            let mut o = (**o).clone();
            o["apiVersion"] = json!(t.api_version());
            o
        })
        .collect();
    if let Some(version) = table {
        return Ok(app.table_of(version, t, &items, include_object(query)?, metadata));
    }
    Ok(
        json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": metadata, "items": items}),
    )
}

async fn resource(
    app: &Arc<App>,
    p: ResourcePath,
    method: &Method,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let table = table::wants_table(accept);
    let t = p.resource.clone();
    let status = p.subresource.as_deref() == Some("status");
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let result: Result<Written, ApiError> = match (method.as_str(), &p.name) {
        ("GET", None) if watch => return start_watch(app, &p, query, table),
        ("GET", None) => list(app, &p, query, table).map(|object| Written {
            object,
            code: 200,
            warnings: Vec::new(),
        }),
        ("GET", Some(name)) => {
            let found =
                app.lock()
                    .store
                    .get(&t.key(), p.namespace.as_deref().unwrap_or_default(), name);
            match found {
                None => Err(ApiError::not_found(&t, name)),
                Some(o) => {
                    let mut o = (*o).clone();
                    o["apiVersion"] = json!(t.api_version());
                    let object = match table {
                        Some(v) => match include_object(query) {
                            Ok(include) => app.table_of(v, &t, &[o], include, json!({})),
                            Err(e) => return error_response(&e),
                        },
                        None => o,
                    };
                    Ok(Written {
                        object,
                        code: 200,
                        warnings: Vec::new(),
                    })
                }
            }
        }
        ("POST", None) => write_options(query).and_then(|opts| {
            let object = parse_body(headers, body)?;
            app.lock().create(&t, p.namespace.as_deref(), object, &opts)
        }),
        ("POST", Some(name)) if p.subresource.as_deref() == Some("eviction") => {
            write_options(query).and_then(|opts| {
                let eviction = parse_body(headers, body)?;
                let ns = p.namespace.as_deref().unwrap_or_default();
                policy::evict(&mut app.lock(), ns, name, &eviction, &opts).map(|object| Written {
                    object,
                    code: 201,
                    warnings: Vec::new(),
                })
            })
        }
        ("PUT", Some(name)) => write_options(query).and_then(|opts| {
            let object = parse_body(headers, body)?;
            app.lock()
                .update(&t, p.namespace.as_deref(), name, status, object, &opts)
        }),
        ("PATCH", Some(name)) => write_options(query).and_then(|opts| {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let patch_type = PatchType::from_content_type(content_type)
                .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
            app.lock().patch(
                &t,
                p.namespace.as_deref(),
                name,
                status,
                PatchBody { patch_type, body },
                &opts,
            )
        }),
        ("DELETE", Some(name)) => write_options(query).and_then(|opts| {
            let options = if body.is_empty() {
                json!({})
            } else {
                parse_body(headers, body)?
            };
            let mut options = options;
            if let Some(pp) = query.get("propagationPolicy") {
                options["propagationPolicy"] = json!(pp);
            }
            app.lock()
                .delete(&t, p.namespace.as_deref(), name, &options, opts.dry_run)
        }),
        ("DELETE", None) => {
            write_options(query).and_then(|opts| delete_collection(app, &p, query, &opts))
        }
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}",
            t.qualified()
        ))),
    };
    match result {
        Ok(w) => json_response(w.code, &w.object, &w.warnings),
        Err(e) => error_response(&e),
    }
}

fn delete_collection(
    app: &Arc<App>,
    p: &ResourcePath,
    query: &HashMap<String, String>,
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    let t = &p.resource;
    let (labels, fields) = selectors(t, query)?;
    let mut inner = app.lock();
    let victims: Vec<(String, String)> = inner
        .store
        .list(&t.key(), p.namespace.as_deref())
        .into_iter()
        .filter(|o| labels.matches_object(o) && fields.matches(o))
        .map(|o| {
            (
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mut items = Vec::new();
    for (ns, name) in victims {
        let ns = (!ns.is_empty()).then_some(ns);
        if let Ok(w) = inner.delete(t, ns.as_deref(), &name, &json!({}), opts.dry_run) {
            items.push(w.object);
        }
    }
    Ok(Written {
        object: json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": {}, "items": items}),
        code: 200,
        warnings: Vec::new(),
    })
}

fn start_watch(
    app: &Arc<App>,
    p: &ResourcePath,
    query: &HashMap<String, String>,
    table: Option<TableVersion>,
) -> Response {
    let flag = |k: &str| query.get(k).is_some_and(|v| v == "true" || v == "1");
    let request = (|| -> Result<WatchRequest, ApiError> {
        let (labels, fields) = selectors(&p.resource, query)?;
        let resource_version = match query.get("resourceVersion").map(String::as_str) {
            None | Some("") => None,
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("resourceVersion {rv:?} is invalid"))
            })?),
        };
        let timeout = match query.get("timeoutSeconds") {
            None => None,
            Some(s) => Some(Duration::from_secs(s.parse().map_err(|_| {
                ApiError::bad_request("timeoutSeconds must be an integer")
            })?)),
        };
        Ok(WatchRequest {
            resource: p.resource.clone(),
            namespace: p.namespace.clone(),
            resource_version,
            labels,
            fields,
            bookmarks: flag("allowWatchBookmarks"),
            send_initial_events: flag("sendInitialEvents"),
            timeout,
            table,
            include_object: include_object(query)?.to_string(),
        })
    })();
    let stream = request.and_then(|r| watch::start(app, r));
    match stream {
        Err(e) => error_response(&e),
        Ok(rx) => {
            let mut response = Response::new(Body::from_stream(ReceiverStream::new(rx)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache, private"),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "ns", "a.b-c");
        assert_eq!(
            decode_continue(&token),
            Some((42, "ns".into(), "a.b-c".into()))
        );
        assert_eq!(decode_continue("zz"), None);
        assert_eq!(decode_continue("abc"), None);
    }

    #[test]
    fn routes() {
        let inner = Inner::new(100, 16);
        let r = |p: &str| match parse_route(&inner, p) {
            Route::Resource(rp) => format!(
                "{}|{}|{}|{}",
                rp.resource.plural,
                rp.namespace.unwrap_or_default(),
                rp.name.unwrap_or_default(),
                rp.subresource.unwrap_or_default()
            ),
            other => format!("{other:?}"),
        };
        assert_eq!(r("/api/v1/nodes"), "nodes|||");
        assert_eq!(r("/api/v1/nodes/n1/status"), "nodes||n1|status");
        assert_eq!(
            r("/api/v1/namespaces/default/pods/p/eviction"),
            "pods|default|p|eviction"
        );
        assert_eq!(r("/api/v1/pods"), "pods|||");
        assert_eq!(
            r("/api/v1/namespaces/kube-system"),
            "namespaces||kube-system|"
        );
        assert_eq!(r("/api/v1/namespaces/x/status"), "namespaces||x|status");
        assert_eq!(
            r("/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
            "leases|x|l|"
        );
        assert_eq!(
            r("/api/v1/pods/p"),
            "NotFound",
            "namespaced object without namespace"
        );
        assert_eq!(
            r("/api/v1/namespaces/x/nodes"),
            "NotFound",
            "cluster-scoped type in a namespace"
        );
        assert_eq!(r("/api/v1/secrets/s/status"), "NotFound");
        assert_eq!(r("/apis/nope/v1/things"), "NotFound");
        assert_eq!(r("/apis"), "Groups");
        assert_eq!(
            r("/openapi/v3/apis/policy/v1"),
            "OpenApiV3(\"policy\", \"v1\")"
        );
    }
}
