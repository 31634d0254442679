//! PATCH bodies applied the way kube-apiserver does: JSON merge patch, JSON patch, strategic merge patch and an approximate server-side apply.
//!
//! [`apply_patch`] takes the live object, the raw (untrusted) body and the list semantics of the
//! kind ([`BuiltinLists`] for built-in kinds, [`SchemaLists`] for custom resources) and returns
//! the patched object, or a [`PatchError`] that knows its HTTP status. The result never contains
//! strategic-merge-patch directive keys (`$patch`, `$retainKeys`, `$setElementOrder/…`,
//! `$deleteFromPrimitiveList/…`).
//!
//! Known differences from kube-apiserver:
//! - **Server-side apply is approximated**: there is no field-manager tracking, so an apply never
//!   removes fields that a previous apply set and the new one omits, never reports conflicts
//!   (`force` is meaningless) and does not write `metadata.managedFields`. Maps merge
//!   recursively, lists merge by [`ListKind`] (associative lists by key, sets by union, atomic
//!   lists are replaced), scalars are replaced. New list elements are appended after the live
//!   ones. A `null` in the applied configuration removes the field. Maps and structs marked
//!   `x-kubernetes-map-type: atomic` are still merged key by key.
//! - List semantics come from a static table ([`BuiltinLists`]) for built-in kinds rather than
//!   from the Go struct tags; fields not in the table are atomic. Associative lists use the
//!   strategic-merge-patch `patchMergeKey` (one key, e.g. `containerPort` for container ports)
//!   for both strategic merge patch and apply, whereas apply in kube-apiserver uses the
//!   `listMapKeys` (e.g. `containerPort`+`protocol`).
//! - Strategic merge patch: `$patch: merge` is accepted (and ignored) in maps and list elements,
//!   where kube-apiserver rejects it; the consistency of a `$setElementOrder` list with its patch
//!   list is not validated; `$deleteFromPrimitiveList` removes by JSON equality from any list;
//!   a list whose strategy is "set" merges by JSON equality even when its elements are objects;
//!   directives inside a value that is added where the live object has none are processed
//!   (kube-apiserver copies such a value verbatim). A merge-key element missing its key is a 422
//!   here (kube-apiserver answers 500). Strategic merge patch for custom resources must be
//!   refused (415) by the caller, as kube-apiserver does.
//! - JSON patch: error messages follow evanphx/json-patch in spirit, prefixed with the index of
//!   the failing operation; values are compared by their JSON value (`1` and `1.0` differ).
//! - Merge patch and JSON patch results must be JSON objects (422 otherwise), and a JSON patch
//!   may not nest the object more than [`MAX_OBJECT_DEPTH`] levels deep (422; what serde_json
//!   can read back).

//!
//! Map: `lists` holds the list semantics ([`ListKind`], [`BuiltinLists`], [`SchemaLists`]),
//! `json` JSON merge patch and JSON patch, `strategic` strategic merge patch (and the
//! recursive walk apply shares), and `apply` the server-side apply approximation.

mod apply;
mod json;
mod lists;
mod strategic;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

pub use lists::{BuiltinLists, ListKind, ListSemantics, SchemaLists};

/// The maximum number of operations kube-apiserver accepts in one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The deepest nesting a JSON patch may produce (what serde_json can read back).
pub const MAX_OBJECT_DEPTH: usize = 128;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER_PREFIX: &str = "$setElementOrder";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList";

/// The four PATCH content types kube-apiserver understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; YAML or JSON body).
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header value, ignoring parameters such as
    /// `; charset=utf-8` and letter case. `None` for anything else (the server answers 415).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media = content_type.split(';').next()?.trim().to_ascii_lowercase();
        match media.as_str() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }

    /// The canonical content type of this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch was refused; [`PatchError::status_code`] is the HTTP status kube-apiserver uses.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not decodable or has the wrong shape (400 BadRequest).
    #[error("{0}")]
    InvalidBody(String),
    /// A strategic-merge-patch directive is malformed (400 BadRequest).
    #[error("{0}")]
    InvalidDirective(String),
    /// A server-side apply body that kube-apiserver refuses: apiVersion or kind differ from the
    /// live object's, or `metadata.managedFields` is set (400 BadRequest).
    #[error("{0}")]
    InvalidApply(String),
    /// A JSON-patch operation could not be applied, e.g. a failed `test` or a missing path
    /// (422 Unprocessable Entity).
    #[error("json patch operation {index} ({op}) failed: {message}")]
    OperationFailed {
        /// Index of the failing operation in the patch array.
        index: usize,
        /// Its `op` (`unknown` when missing).
        op: String,
        /// What went wrong.
        message: String,
    },
    /// The patch is well-formed but cannot be merged into the object, e.g. a merge-key element
    /// without its key or a list of lists (422 Unprocessable Entity).
    #[error("{0}")]
    CannotApply(String),
    /// More operations than kube-apiserver accepts in one JSON patch (413).
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations {
        /// The limit.
        max: usize,
        /// How many the body had.
        got: usize,
    },
}

impl PatchError {
    /// The HTTP status kube-apiserver answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::InvalidBody(_)
            | PatchError::InvalidDirective(_)
            | PatchError::InvalidApply(_) => 400,
            PatchError::OperationFailed { .. } | PatchError::CannotApply(_) => 422,
            PatchError::TooManyOperations { .. } => 413,
        }
    }

    /// The `reason` of the `metav1.Status` kube-apiserver answers with.
    pub fn reason(&self) -> &'static str {
        match self.status_code() {
            400 => "BadRequest",
            413 => "RequestEntityTooLarge",
            _ => "Invalid",
        }
    }
}

/// Applies a PATCH body of type `patch_type` to `live` and returns the patched object.
///
/// `lists` gives the list semantics of the object's kind (used by strategic merge patch and
/// apply). For "create on apply", pass `live = {}`. The body is untrusted: any input yields
/// `Ok` or `Err`, never a panic. See the module documentation for the known differences from
/// kube-apiserver.
pub fn apply_patch(
    patch_type: PatchType,
    live: &Value,
    body: &[u8],
    lists: &dyn ListSemantics,
) -> Result<Value, PatchError> {
    let mut out = match patch_type {
        PatchType::Merge => json::merge_patch(live, body)?,
        PatchType::Json => json::json_patch_doc(live, body)?,
        PatchType::Strategic => strategic::strategic_merge_patch(live, body, lists)?,
        PatchType::Apply => apply::server_side_apply(live, body, lists)?,
    };
    if !out.is_object() {
        return Err(PatchError::CannotApply(
            "the patched object is not a JSON object".to_string(),
        ));
    }
    strip_directives(&mut out);
    Ok(out)
}

/// Removes a key keeping the order of the others (whether or not serde_json preserves order).
fn remove_key(map: &mut Map<String, Value>, key: &str) {
    if map.contains_key(key) {
        map.retain(|k, _| k != key);
    }
}

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(SET_ORDER_PREFIX)
        || k.starts_with(DELETE_PRIMITIVE_PREFIX)
}

/// Removes every directive key, at any depth (iteratively: no recursion on deep input).
fn strip_directives(v: &mut Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if m.keys().any(|k| is_directive_key(k)) {
                    m.retain(|k, _| !is_directive_key(k));
                }
                stack.extend(m.values_mut());
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
}

/// The name Go's encoding/json gives a JSON value's type in "cannot unmarshal" errors.
pub(crate) fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
