//! The write handlers: create, replace, patch, delete (one object or a collection) and eviction.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::{Value, json};

use super::read::selectors;
use super::route::ResourcePath;
use super::{App, RouteRequest};
use crate::error::ApiError;
use crate::ops::{FieldValidation, PatchBody, WriteOptions, Written};
use crate::patch::PatchType;
use crate::policy;

/// `POST` of a new object.
pub(super) fn create(
    app: &App,
    p: &ResourcePath,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let object = parse_body(req.headers, req.body)?;
    app.lock()
        .create(&p.resource, p.namespace.as_deref(), object, &opts)
}

/// `POST pods/NAME/eviction`.
pub(super) fn evict(
    app: &App,
    p: &ResourcePath,
    name: &str,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let eviction = parse_body(req.headers, req.body)?;
    let ns = p.namespace.as_deref().unwrap_or_default();
    policy::evict(&mut app.lock(), ns, name, &eviction, &opts).map(|object| Written {
        object,
        code: 201,
        warnings: Vec::new(),
    })
}

/// `PUT` of an object or its status.
pub(super) fn replace(
    app: &App,
    p: &ResourcePath,
    name: &str,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let object = parse_body(req.headers, req.body)?;
    let status = p.subresource.as_deref() == Some("status");
    app.lock().update(
        &p.resource,
        p.namespace.as_deref(),
        name,
        status,
        object,
        &opts,
    )
}

/// `PATCH` of an object or its status, in the patch type of the `Content-Type`.
pub(super) fn patch(
    app: &App,
    p: &ResourcePath,
    name: &str,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let content_type = req
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let patch_type = PatchType::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    let status = p.subresource.as_deref() == Some("status");
    app.lock().patch(
        &p.resource,
        p.namespace.as_deref(),
        name,
        status,
        PatchBody {
            patch_type,
            body: req.body,
        },
        &opts,
    )
}

/// `DELETE` of an object, with the delete options of the body and `?propagationPolicy=`.
pub(super) fn delete(
    app: &App,
    p: &ResourcePath,
    name: &str,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let options = if req.body.is_empty() {
        json!({})
    } else {
        parse_body(req.headers, req.body)?
    };
    let mut options = options;
    if let Some(pp) = req.query.get("propagationPolicy") {
        options["propagationPolicy"] = json!(pp);
    }
    app.lock().delete(
        &p.resource,
        p.namespace.as_deref(),
        name,
        &options,
        opts.dry_run,
    )
}

/// `DELETE` of a collection: every object the selectors match.
pub(super) fn delete_collection(
    app: &Arc<App>,
    p: &ResourcePath,
    req: &RouteRequest<'_>,
) -> Result<Written, ApiError> {
    let opts = write_options(req.query)?;
    let t = &p.resource;
    let (labels, fields) = selectors(t, req.query)?;
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

/// The options of a write: `dryRun` and `fieldValidation`.
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

pub(super) fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
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
