//! API errors as kube-apiserver reports them: a `Status` object with a reason and an HTTP code.

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// An error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, …).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when there are any.
    pub details: Option<Value>,
    /// `Retry-After` seconds (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 for a named object.
    pub fn not_found(t: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", t.qualified()),
        );
        e.details = Some(json!({"name": name, "group": t.group, "kind": t.plural}));
        e
    }

    /// 404 for a path that serves nothing.
    pub fn no_route(path: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        e.details = Some(
            json!({"causes": [{"reason": "UnexpectedServerResponse", "message": format!("404 page not found: {path}")}]}),
        );
        e
    }

    /// 409 on create.
    pub fn already_exists(t: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", t.qualified()),
        );
        e.details = Some(json!({"name": name, "group": t.group, "kind": t.plural}));
        e
    }

    /// 409 on a stale update.
    pub fn conflict(t: &ResourceType, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                t.qualified()
            ),
        );
        e.details = Some(json!({"name": name, "group": t.group, "kind": t.plural}));
        e
    }

    /// The message of a stale-`resourceVersion` conflict.
    pub const MODIFIED: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// 422 with field causes, worded as kube-apiserver words it.
    pub fn invalid(t: &ResourceType, name: &str, causes: &[(String, String)]) -> Self {
        let list: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let joined = match list.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} {name:?} is invalid: {joined}", t.qualified_kind()),
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f}))
            .collect();
        e.details = Some(json!({"name": name, "group": t.group, "kind": t.kind, "causes": causes}));
        e
    }

    /// 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 410 for a watch or continue token older than the kept history.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type:?}"
            ),
        )
    }

    /// 429.
    pub fn too_many_requests(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = Some(retry_after);
        e
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(r) = self.retry_after {
            s["details"]["retryAfterSeconds"] = json!(r);
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
