//! The read handlers: get, list (with selectors and continue tokens) and watch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use super::route::ResourcePath;
use super::{App, error_response};
use crate::error::ApiError;
use crate::ops::Written;
use crate::registry::ResourceType;
use crate::selectors::{self, FieldSelector, LabelSelector};
use crate::table::{self, TableVersion};
use crate::watch::{self, WatchRequest};

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

pub(super) fn selectors(
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
pub(super) fn include_object(query: &HashMap<String, String>) -> Result<&str, ApiError> {
    match query.get("includeObject").map(String::as_str) {
        None | Some("") => Ok("Metadata"),
        Some(v) if table::valid_include_object(v) => Ok(v),
        Some(v) => Err(ApiError::bad_request(format!(
            "includeObject {v:?} is invalid: use None, Metadata or Object"
        ))),
    }
}

/// The `continue` token of a list page ending at `ns/name` at version `rv`.
pub(super) fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    format!("{rv}:{ns}:{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The version, namespace and name of a `continue` token.
pub(super) fn decode_continue(token: &str) -> Option<(u64, String, String)> {
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

/// `GET` of a collection: a (paged) list, or a Table of it.
pub(super) fn list(
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
        .list_named(
            &t.key(),
            p.namespace.as_deref(),
            fields.single_name(),
            t.namespaced,
        )
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
    let mut metadata = json!({"resourceVersion": crate::store::rv_text(rv)});
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

/// `GET` of one object, or a one-row Table of it.
pub(super) fn get(
    app: &Arc<App>,
    p: &ResourcePath,
    name: &str,
    query: &HashMap<String, String>,
    table: Option<TableVersion>,
) -> Result<Written, ApiError> {
    let t = &p.resource;
    let found = app
        .lock()
        .store
        .get(&t.key(), p.namespace.as_deref().unwrap_or_default(), name);
    let Some(o) = found else {
        return Err(ApiError::not_found(t, name));
    };
    let mut o = (*o).clone();
    o["apiVersion"] = json!(t.api_version());
    let object = match table {
        Some(v) => app.table_of(v, t, &[o], include_object(query)?, json!({})),
        None => o,
    };
    Ok(Written::ok(object))
}

/// `GET ?watch=true`: the stream of watch events.
pub(super) fn start_watch(
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
            Some(rv) => Some(crate::store::rv_order(rv).ok_or_else(|| {
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
