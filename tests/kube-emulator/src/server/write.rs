//! The write handlers: create, replace, patch, delete (one object or a collection) and eviction.

use std::collections::HashMap;

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

/// A write to a resource path: the request, with its `dryRun` and `fieldValidation` options read.
pub(super) struct Write<'a> {
    app: &'a App,
    p: &'a ResourcePath,
    req: &'a RouteRequest<'a>,
    opts: WriteOptions,
}

impl<'a> Write<'a> {
    /// Reads the write options of the query; refuses invalid ones.
    pub(super) fn new(
        app: &'a App,
        p: &'a ResourcePath,
        req: &'a RouteRequest<'a>,
    ) -> Result<Self, ApiError> {
        let opts = write_options(req.query)?;
        Ok(Self { app, p, req, opts })
    }

    fn body(&self) -> Result<Value, ApiError> {
        parse_body(self.req.headers, self.req.body)
    }

    fn namespace(&self) -> Option<&'a str> {
        self.p.namespace.as_deref()
    }

    /// Whether the write is to the `status` subresource.
    fn to_status(&self) -> bool {
        self.p.subresource.as_deref() == Some("status")
    }

    /// `POST` of a new object.
    pub(super) fn create(&self) -> Result<Written, ApiError> {
        let object = self.body()?;
        self.app
            .lock()
            .create(&self.p.resource, self.namespace(), object, &self.opts)
    }

    /// `POST pods/NAME/eviction`.
    pub(super) fn evict(&self, name: &str) -> Result<Written, ApiError> {
        let eviction = self.body()?;
        let ns = self.namespace().unwrap_or_default();
        policy::evict(&mut self.app.lock(), ns, name, &eviction, &self.opts).map(|object| Written {
            object,
            code: 201,
            warnings: Vec::new(),
        })
    }

    /// `PUT` of an object or its status.
    pub(super) fn replace(&self, name: &str) -> Result<Written, ApiError> {
        let object = self.body()?;
        self.app.lock().update(
            &self.p.resource,
            self.namespace(),
            name,
            self.to_status(),
            object,
            &self.opts,
        )
    }

    /// `PATCH` of an object or its status, in the patch type of the `Content-Type`.
    pub(super) fn patch(&self, name: &str) -> Result<Written, ApiError> {
        let content_type = self
            .req
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let patch_type = PatchType::from_content_type(content_type)
            .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
        let body = PatchBody {
            patch_type,
            body: self.req.body,
        };
        self.app.lock().patch(
            &self.p.resource,
            self.namespace(),
            name,
            self.to_status(),
            body,
            &self.opts,
        )
    }

    /// `DELETE` of an object, with the delete options of the body and `?propagationPolicy=`.
    pub(super) fn delete(&self, name: &str) -> Result<Written, ApiError> {
        let mut options = if self.req.body.is_empty() {
            json!({})
        } else {
            self.body()?
        };
        if let Some(pp) = self.req.query.get("propagationPolicy") {
            options["propagationPolicy"] = json!(pp);
        }
        self.app.lock().delete(
            &self.p.resource,
            self.namespace(),
            name,
            &options,
            self.opts.dry_run,
        )
    }

    /// `DELETE` of a collection: every object the selectors match.
    pub(super) fn delete_collection(&self) -> Result<Written, ApiError> {
        let t = &self.p.resource;
        let (labels, fields) = selectors(t, self.req.query)?;
        let mut inner = self.app.lock();
        let victims: Vec<(String, String)> = inner
            .store
            .list(&t.key(), self.namespace())
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
            if let Ok(w) = inner.delete(t, ns.as_deref(), &name, &json!({}), self.opts.dry_run) {
                items.push(w.object);
            }
        }
        Ok(Written::ok(
            json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": {}, "items": items}),
        ))
    }
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
