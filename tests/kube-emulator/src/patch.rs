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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

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

/// How the elements of a list field combine when a patch or an apply touches the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// The list is replaced as a whole.
    Atomic,
    /// A set of scalars: union.
    Set,
    /// An associative list: elements are identified by these keys and merged.
    Map(Vec<String>),
}

/// Tells the patch engine how a list field merges.
pub trait ListSemantics {
    /// The kind of the list at `path`: object field names from the root, list indices omitted,
    /// e.g. `["status", "conditions"]` or `["spec", "containers", "ports"]`.
    fn list_kind(&self, path: &[&str]) -> ListKind;
}

fn by(key: &str) -> ListKind {
    ListKind::Map(vec![key.to_string()])
}

/// The lists of `metadata` (ObjectMeta) every kind shares.
fn metadata_list(field: &str) -> Option<ListKind> {
    match field {
        "finalizers" => Some(ListKind::Set),
        "ownerReferences" => Some(by("uid")),
        "managedFields" => Some(ListKind::Atomic),
        _ => None,
    }
}

/// `[..., "metadata", field]` where field is one of ObjectMeta's lists.
fn object_meta_list(path: &[&str]) -> Option<ListKind> {
    match path {
        [.., "metadata", field] => metadata_list(field),
        _ => None,
    }
}

/// List semantics read from a CRD's `openAPIV3Schema`: walks `properties`, `items` and
/// `additionalProperties` and reads `x-kubernetes-list-type` (`atomic`, `set`, `map`) and
/// `x-kubernetes-list-map-keys`. Lists the schema does not describe are atomic, except the
/// ObjectMeta lists under `metadata` (`finalizers` set, `ownerReferences` by `uid`,
/// `managedFields` atomic), which CRD schemas do not spell out.
#[derive(Debug, Clone, Copy)]
pub struct SchemaLists<'a>(pub &'a Value);

impl ListSemantics for SchemaLists<'_> {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        if let [.., "metadata", _] = path
            && let Some(kind) = object_meta_list(path)
        {
            return kind;
        }
        let mut node = self.0;
        for seg in path {
            while let Some(items) = node.get("items").filter(|i| i.is_object()) {
                node = items;
            }
            if let Some(child) = node.get("properties").and_then(|p| p.get(*seg)) {
                node = child;
            } else if let Some(ap) = node.get("additionalProperties").filter(|a| a.is_object()) {
                node = ap;
            } else {
                return ListKind::Atomic;
            }
        }
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = node
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|ks| {
                        ks.iter()
                            .filter_map(|k| k.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }
}

/// List semantics of built-in kinds: a static table of the `patchMergeKey`/`patchStrategy`
/// kube-apiserver uses for the fields the emulator's clients touch. Everything else is atomic.
///
/// | Kind | Path | Kind of list |
/// |---|---|---|
/// | every kind (also pod templates' `metadata`) | `metadata.finalizers` | set |
/// | every kind | `metadata.ownerReferences` | map by `uid` |
/// | every kind | `metadata.managedFields` | atomic |
/// | Node, Pod, PodDisruptionBudget, Deployment, DaemonSet, ReplicaSet, StatefulSet, ReplicationController, Job, Namespace, CustomResourceDefinition, Service, PersistentVolumeClaim | `status.conditions` | map by `type` |
/// | Node | `spec.taints` | **atomic** (kube-apiserver has no merge key for taints: a strategic merge patch replaces them all) |
/// | Node | `spec.podCIDRs` | set |
/// | Node | `status.addresses` | map by `type` |
/// | Pod | `status.podIPs`, `status.hostIPs` | map by `ip` |
/// | Service | `spec.ports` | map by `port` |
/// | pod specs¹ | `containers`, `initContainers`, `ephemeralContainers` | map by `name` |
/// | pod specs¹ | `<containers>[].ports` | map by `containerPort` |
/// | pod specs¹ | `<containers>[].env` | map by `name` |
/// | pod specs¹ | `<containers>[].volumeMounts` | map by `mountPath` |
/// | pod specs¹ | `<containers>[].volumeDevices` | map by `devicePath` |
/// | pod specs¹ | `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` | map by `name` |
/// | pod specs¹ | `hostAliases` | map by `ip` |
/// | pod specs¹ | `topologySpreadConstraints` | map by `topologyKey` |
/// | pod specs¹ | `tolerations`, `readinessGates`, `<containers>[].args/command/envFrom/resizePolicy` | atomic |
/// | Role, ClusterRole, RoleBinding, ClusterRoleBinding | `rules`, `subjects` | atomic |
///
/// ¹ `spec` of a Pod, `template.spec` of a PodTemplate, `spec.template.spec` of a Deployment,
/// ReplicaSet, DaemonSet, StatefulSet, Job or ReplicationController, and
/// `spec.jobTemplate.spec.template.spec` of a CronJob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinLists {
    kind: String,
}

/// Kinds whose `status.conditions` merge by `type`.
const CONDITION_KINDS: &[&str] = &[
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "Deployment",
    "DaemonSet",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Job",
    "Namespace",
    "CustomResourceDefinition",
    "Service",
    "PersistentVolumeClaim",
];

fn pod_spec_prefix(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Pod" => Some(&["spec"]),
        "PodTemplate" => Some(&["template", "spec"]),
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => Some(&["spec", "template", "spec"]),
        "CronJob" => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

fn pod_spec_list(rest: &[&str]) -> ListKind {
    const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
    match rest {
        [c] if CONTAINERS.contains(c) => by("name"),
        [c, "ports"] if CONTAINERS.contains(c) => by("containerPort"),
        [c, "env"] if CONTAINERS.contains(c) => by("name"),
        [c, "volumeMounts"] if CONTAINERS.contains(c) => by("mountPath"),
        [c, "volumeDevices"] if CONTAINERS.contains(c) => by("devicePath"),
        ["volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims"] => by("name"),
        ["hostAliases"] => by("ip"),
        ["topologySpreadConstraints"] => by("topologyKey"),
        _ => ListKind::Atomic,
    }
}

impl BuiltinLists {
    /// The list semantics of the built-in kind `kind` (e.g. `"Node"`, `"Pod"`, `"Deployment"`).
    /// Unknown kinds only get the `metadata` rules.
    pub fn new(kind: &str) -> Self {
        BuiltinLists {
            kind: kind.to_string(),
        }
    }
}

impl ListSemantics for BuiltinLists {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        let kind = self.kind.as_str();
        if let Some(prefix) = pod_spec_prefix(kind)
            && let Some(rest) = path.strip_prefix(prefix)
        {
            return pod_spec_list(rest);
        }
        if let Some(k) = object_meta_list(path) {
            return k;
        }
        match (kind, path) {
            (k, ["status", "conditions"]) if CONDITION_KINDS.contains(&k) => by("type"),
            ("Node", ["spec", "podCIDRs"]) => ListKind::Set,
            ("Node", ["status", "addresses"]) => by("type"),
            ("Pod", ["status", "podIPs" | "hostIPs"]) => by("ip"),
            ("Service", ["spec", "ports"]) => by("port"),
            _ => ListKind::Atomic,
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
        PatchType::Merge => merge_patch(live, body)?,
        PatchType::Json => json_patch_doc(live, body)?,
        PatchType::Strategic => strategic_merge_patch(live, body, lists)?,
        PatchType::Apply => server_side_apply(live, body, lists)?,
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
fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------------------------
// JSON merge patch (RFC 7386)
// ---------------------------------------------------------------------------------------------

fn merge_patch(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::InvalidBody(format!("Invalid JSON Patch: {e}")))?;
    if !patch.is_object() {
        return Err(PatchError::InvalidBody(format!(
            "Invalid JSON Patch: a merge patch must be a JSON object, got {}",
            go_json_type(&patch)
        )));
    }
    let mut doc = live.clone();
    json_patch::merge(&mut doc, &patch);
    Ok(doc)
}

// ---------------------------------------------------------------------------------------------
// JSON patch (RFC 6902)
// ---------------------------------------------------------------------------------------------

fn json_patch_doc(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let parsed: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::InvalidBody(e.to_string()))?;
    let Value::Array(ops) = parsed else {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            go_json_type(&parsed)
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_json_type(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_JSON_PATCH_OPERATIONS,
            got: ops.len(),
        });
    }
    let mut doc = live.clone();
    for (index, op) in ops.iter().enumerate() {
        let kind = match op.get("op") {
            Some(Value::String(s)) => s.as_str(),
            _ => "unknown",
        };
        let fail = |message: String| PatchError::OperationFailed {
            index,
            op: kind.to_string(),
            message,
        };
        let path = match op.get("path") {
            Some(Value::String(p)) => p.as_str(),
            _ => {
                return Err(fail(
                    "operation missing path field: missing value".to_string(),
                ));
            }
        };
        match kind {
            "test" => {
                let expected = op.get("value").unwrap_or(&Value::Null);
                match doc.pointer(path) {
                    Some(found) if found == expected => {}
                    None if expected.is_null() => {}
                    _ => {
                        return Err(fail(format!("testing value {path} failed: test failed")));
                    }
                }
            }
            "add" | "remove" | "replace" | "move" | "copy" => {
                let parsed: json_patch::PatchOperation = serde_json::from_value(op.clone())
                    .map_err(|e| fail(format!("invalid operation: {e}")))?;
                let from = match op.get("from") {
                    Some(Value::String(f)) => f.as_str(),
                    _ => "",
                };
                let added_depth = match kind {
                    "add" | "replace" => op.get("value").map_or(0, value_depth),
                    "move" | "copy" => doc.pointer(from).map_or(0, value_depth),
                    _ => 0,
                };
                if path.matches('/').count() + added_depth > MAX_OBJECT_DEPTH {
                    return Err(fail(format!(
                        "the patched object would be nested more than {MAX_OBJECT_DEPTH} levels deep"
                    )));
                }
                json_patch::patch_unsafe(&mut doc, std::slice::from_ref(&parsed))
                    .map_err(|e| fail(json_patch_message(kind, path, from, &e.kind)))?;
            }
            other => return Err(fail(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

/// Nesting depth of a value (scalars 0, `[]`/`{}` 1), computed without recursion.
fn value_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Object(m) => {
                max = max.max(level + 1);
                stack.extend(m.values().map(|c| (c, level + 1)));
            }
            Value::Array(a) => {
                max = max.max(level + 1);
                stack.extend(a.iter().map(|c| (c, level + 1)));
            }
            _ => {}
        }
    }
    max
}

fn json_patch_message(
    kind: &str,
    path: &str,
    from: &str,
    err: &json_patch::PatchErrorKind,
) -> String {
    use json_patch::PatchErrorKind as K;
    match (kind, err) {
        (_, K::CannotMoveInsideItself) => {
            format!("move operation does not apply: cannot move {from} into its own child {path}")
        }
        ("move" | "copy", K::InvalidFromPointer) => {
            format!(
                "{kind} operation does not apply: doc is missing from path: {from}: missing value"
            )
        }
        ("move" | "copy", _) => format!(
            "{kind} operation does not apply: doc is missing destination path: {path}: missing value"
        ),
        ("replace", _) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        _ => format!(
            "{kind} operation does not apply: doc is missing path: \"{path}\": missing value"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------------

fn strategic_merge_patch(
    live: &Value,
    body: &[u8],
    lists: &dyn ListSemantics,
) -> Result<Value, PatchError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::InvalidBody(e.to_string()))?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_json_type(&patch)
        )));
    };
    let original = match live {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut smp = Merger {
        lists,
        path: Vec::new(),
    };
    Ok(Value::Object(smp.smp_map(original, &patch)?))
}

fn bad_retain_keys() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of retainKeys".to_string())
}

fn bad_set_order() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of setElementOrder list".to_string())
}

fn bad_primitive_list() -> PatchError {
    PatchError::InvalidDirective("invalid patch format of primitive list".to_string())
}

fn bad_patch_type(directive: &Value, container: &Map<String, Value>) -> PatchError {
    let shown = match directive {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    PatchError::InvalidDirective(format!(
        "unknown patch type: {shown} in map: {}",
        Value::Object(container.clone())
    ))
}

/// `$setElementOrder/field` -> `field` (the prefix must be followed by exactly a `/`).
fn directive_field<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    key.strip_prefix(prefix)?.strip_prefix('/')
}

/// Identity of list elements when ordering or merging.
#[derive(Debug, Clone, Copy)]
enum Ident<'k> {
    /// Scalars (and set elements): JSON equality.
    Equal,
    /// Associative lists: equal values of all the keys.
    Keys(&'k [String]),
}

impl Ident<'_> {
    fn same(&self, a: &Value, b: &Value) -> bool {
        match self {
            Ident::Equal => a == b,
            Ident::Keys(keys) => keys_match(a, b, keys),
        }
    }
}

fn keys_match(a: &Value, b: &Value, keys: &[String]) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            keys.iter().all(|k| a.get(k.as_str()) == b.get(k.as_str()))
        }
        _ => false,
    }
}

fn require_keys(m: &Map<String, Value>, keys: &[String]) -> Result<(), PatchError> {
    match keys.iter().find(|k| !m.contains_key(k.as_str())) {
        None => Ok(()),
        Some(missing) => Err(PatchError::CannotApply(format!(
            "map: {} does not contain declared merge key: {missing}",
            Value::Object(m.clone())
        ))),
    }
}

/// kube-apiserver's `normalizeElementOrder`: the elements named by `patch_order` come in that
/// order, the others keep the order they had in `server_order`, and the two sequences are
/// interleaved by their positions in `server_order` (elements new to the server come first).
fn normalize_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    ident: Ident<'_>,
) -> Vec<Value> {
    let pos = |list: &[Value], item: &Value| list.iter().position(|x| ident.same(x, item));
    // (value, position in server_order)
    let mut patch_items: Vec<(usize, Option<usize>, Value)> = Vec::new();
    let mut server_only: Vec<(usize, Option<usize>, Value)> = Vec::new();
    for item in merged {
        let s = pos(server_order, &item);
        match pos(patch_order, &item) {
            Some(p) => patch_items.push((p, s, item)),
            None => server_only.push((s.unwrap_or(usize::MAX), s, item)),
        }
    }
    patch_items.sort_by_key(|(p, _, _)| *p);
    server_only.sort_by_key(|(p, _, _)| *p);
    let mut left: VecDeque<_> = server_only.into();
    let mut right: VecDeque<_> = patch_items.into();
    let mut out = Vec::with_capacity(left.len() + right.len());
    loop {
        let take_left = match (left.front(), right.front()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((_, l, _)), Some((_, r, _))) => matches!((l, r), (Some(l), Some(r)) if l < r),
        };
        let next = if take_left {
            left.pop_front()
        } else {
            right.pop_front()
        };
        if let Some((_, _, v)) = next {
            out.push(v);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elements {
    None,
    Scalars,
    Maps,
}

/// The common element type of the lists being merged (kube-apiserver's `sliceElementType`).
fn element_type(path: &[String], lists: &[&[Value]]) -> Result<Elements, PatchError> {
    let mut seen: Option<&'static str> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        if v.is_array() {
            return Err(PatchError::CannotApply(
                "lists of lists are not supported".to_string(),
            ));
        }
        let t = go_json_type(v);
        match seen {
            None => seen = Some(t),
            Some(s) if s == t => {}
            Some(_) => {
                return Err(PatchError::CannotApply(format!(
                    "list element types are not identical in {}",
                    path.join(".")
                )));
            }
        }
    }
    Ok(match seen {
        None => Elements::None,
        Some("object") => Elements::Maps,
        Some(_) => Elements::Scalars,
    })
}

/// Shared state of the recursive strategic merge patch and apply walks: the list semantics
/// and the current field path.
struct Merger<'a> {
    lists: &'a dyn ListSemantics,
    path: Vec<String>,
}

impl Merger<'_> {
    fn list_kind(&self) -> ListKind {
        let path: Vec<&str> = self.path.iter().map(String::as_str).collect();
        match self.lists.list_kind(&path) {
            ListKind::Map(keys) if keys.is_empty() => ListKind::Atomic,
            other => other,
        }
    }

    fn with_field<T>(&mut self, field: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(field.to_string());
        let out = f(self);
        self.path.pop();
        out
    }

    // ----- strategic merge patch -----

    fn smp_map(
        &mut self,
        mut orig: Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(d) = patch.get(DIRECTIVE) {
            match d.as_str() {
                Some("replace") => {
                    let mut content = patch.clone();
                    remove_key(&mut content, DIRECTIVE);
                    return self.smp_map(Map::new(), &content);
                }
                Some("delete") => return Ok(Map::new()),
                Some("merge") => {}
                _ => return Err(bad_patch_type(d, patch)),
            }
        }

        if let Some(rk) = patch.get(RETAIN_KEYS) {
            let Value::Array(list) = rk else {
                return Err(bad_retain_keys());
            };
            let keep: BTreeSet<&str> = list.iter().filter_map(Value::as_str).collect();
            for (k, v) in patch {
                if v.is_null() || is_directive_key(k) {
                    continue;
                }
                if !keep.contains(k.as_str()) {
                    return Err(bad_retain_keys());
                }
            }
            orig.retain(|k, _| keep.contains(k.as_str()));
        }

        let mut orders: BTreeMap<&str, &[Value]> = BTreeMap::new();
        for (k, v) in patch {
            if k.starts_with(SET_ORDER_PREFIX) {
                let field = directive_field(k, SET_ORDER_PREFIX).ok_or_else(bad_set_order)?;
                let Value::Array(list) = v else {
                    return Err(bad_set_order());
                };
                orders.insert(field, list.as_slice());
            }
        }
        for (k, v) in patch {
            if k.starts_with(DELETE_PRIMITIVE_PREFIX) {
                directive_field(k, DELETE_PRIMITIVE_PREFIX).ok_or_else(bad_primitive_list)?;
                if !v.is_array() {
                    return Err(bad_primitive_list());
                }
            }
        }

        for (k, pv) in patch {
            if is_directive_key(k) {
                continue;
            }
            if pv.is_null() {
                remove_key(&mut orig, k);
                continue;
            }
            let order = orders.get(k.as_str()).copied();
            let current = orig.get_mut(k.as_str()).map(Value::take);
            let merged = self.with_field(k, |m| m.smp_value(current, pv, order))?;
            orig.insert(k.clone(), merged);
        }

        // `$setElementOrder` alone reorders the live list.
        for (field, order) in &orders {
            if patch.contains_key(*field) {
                continue;
            }
            let kind = self.with_field(field, |m| m.list_kind());
            if let Some(Value::Array(list)) = orig.get_mut(*field) {
                let ident = match &kind {
                    ListKind::Atomic => continue,
                    ListKind::Set => Ident::Equal,
                    ListKind::Map(keys) => Ident::Keys(keys),
                };
                let server = list.clone();
                let merged = std::mem::take(list);
                *list = normalize_order(merged, order, &server, ident);
            }
        }

        for (k, v) in patch {
            let (Some(field), Value::Array(delete)) =
                (directive_field(k, DELETE_PRIMITIVE_PREFIX), v)
            else {
                continue;
            };
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|e| !delete.contains(e));
            }
        }
        Ok(orig)
    }

    fn smp_value(
        &mut self,
        orig: Option<Value>,
        patch: &Value,
        order: Option<&[Value]>,
    ) -> Result<Value, PatchError> {
        match (orig, patch) {
            (Some(Value::Object(om)), Value::Object(pm)) => {
                Ok(Value::Object(self.smp_map(om, pm)?))
            }
            (_, Value::Object(pm)) => Ok(Value::Object(self.smp_map(Map::new(), pm)?)),
            (Some(Value::Array(oa)), Value::Array(pa)) => {
                Ok(Value::Array(self.smp_list(Some(oa), pa, order)?))
            }
            (_, Value::Array(pa)) => Ok(Value::Array(self.smp_list(None, pa, order)?)),
            (_, other) => Ok(other.clone()),
        }
    }

    /// A list the live object does not have (or whose strategy is to replace): the patch
    /// elements, with delete/replace markers dropped and directives inside elements processed.
    fn smp_new_list(
        &mut self,
        patch: &[Value],
        order: Option<&[Value]>,
        kind: &ListKind,
    ) -> Result<Vec<Value>, PatchError> {
        let mut out = Vec::with_capacity(patch.len());
        for e in patch {
            match e {
                Value::Object(em) => {
                    if let ListKind::Map(_) = kind {
                        match em.get(DIRECTIVE).and_then(Value::as_str) {
                            Some("delete") => continue,
                            Some("replace") | Some("merge") if em.len() == 1 => continue,
                            _ => {}
                        }
                    }
                    out.push(Value::Object(self.smp_map(Map::new(), em)?));
                }
                other => out.push(other.clone()),
            }
        }
        let ident = match kind {
            ListKind::Atomic => return Ok(out),
            ListKind::Set => Ident::Equal,
            ListKind::Map(keys) => Ident::Keys(keys),
        };
        Ok(match order {
            Some(order) => normalize_order(out, order, &[], ident),
            None => out,
        })
    }

    fn smp_list(
        &mut self,
        orig: Option<Vec<Value>>,
        patch: &[Value],
        order: Option<&[Value]>,
    ) -> Result<Vec<Value>, PatchError> {
        let kind = self.list_kind();
        let Some(orig) = orig else {
            return self.smp_new_list(patch, order, &kind);
        };
        let keys = match &kind {
            ListKind::Atomic => return self.smp_new_list(patch, None, &kind),
            ListKind::Set => None,
            ListKind::Map(keys) => Some(keys.as_slice()),
        };
        let elements = element_type(&self.path, &[&orig, patch])?;
        match (elements, keys) {
            (Elements::None, _) => Ok(orig),
            (Elements::Scalars, _) | (Elements::Maps, None) => {
                let mut merged: Vec<Value> = Vec::with_capacity(orig.len() + patch.len());
                for v in orig.iter().chain(patch.iter()) {
                    if !merged.contains(v) {
                        merged.push(v.clone());
                    }
                }
                Ok(normalize_order(
                    merged,
                    order.unwrap_or(patch),
                    &orig,
                    Ident::Equal,
                ))
            }
            (Elements::Maps, Some(keys)) => self.smp_merge_map_list(orig, patch, order, keys),
        }
    }

    fn smp_merge_map_list(
        &mut self,
        orig: Vec<Value>,
        patch: &[Value],
        order: Option<&[Value]>,
        keys: &[String],
    ) -> Result<Vec<Value>, PatchError> {
        let ident = Ident::Keys(keys);
        let mut working = orig;
        let mut normal: Vec<&Map<String, Value>> = Vec::new();
        let mut replace = false;
        for e in patch {
            let Value::Object(em) = e else {
                continue; // element_type guarantees objects
            };
            match em.get(DIRECTIVE) {
                None => normal.push(em),
                Some(d) => match d.as_str() {
                    Some("delete") => {
                        require_keys(em, keys)?;
                        working.retain(|o| !keys_match(o, e, keys));
                    }
                    Some("replace") => replace = true,
                    Some("merge") => {
                        if em.len() > 1 {
                            normal.push(em);
                        }
                    }
                    _ => return Err(bad_patch_type(d, em)),
                },
            }
        }
        if replace {
            let mut out = Vec::with_capacity(normal.len());
            for em in normal {
                out.push(Value::Object(self.smp_map(Map::new(), em)?));
            }
            return Ok(match order {
                Some(order) => {
                    let server = out.clone();
                    normalize_order(out, order, &server, ident)
                }
                None => out,
            });
        }
        let server = working.clone();
        for em in &normal {
            require_keys(em, keys)?;
            let wanted = Value::Object((*em).clone());
            match working.iter().position(|o| keys_match(o, &wanted, keys)) {
                Some(i) => {
                    let current = match working[i].take() {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    working[i] = Value::Object(self.smp_map(current, em)?);
                }
                None => working.push(Value::Object(self.smp_map(Map::new(), em)?)),
            }
        }
        let patch_order: Vec<Value> = match order {
            Some(order) => order.to_vec(),
            None => normal.iter().map(|m| Value::Object((*m).clone())).collect(),
        };
        Ok(normalize_order(working, &patch_order, &server, ident))
    }

    // ----- server-side apply (approximation) -----

    fn apply_value(&mut self, live: Option<Value>, applied: &Value) -> Result<Value, PatchError> {
        match (live, applied) {
            (Some(Value::Object(mut lm)), Value::Object(am)) => {
                for (k, av) in am {
                    if av.is_null() {
                        remove_key(&mut lm, k);
                        continue;
                    }
                    let current = lm.get_mut(k.as_str()).map(Value::take);
                    let merged = self.with_field(k, |m| m.apply_value(current, av))?;
                    lm.insert(k.clone(), merged);
                }
                Ok(Value::Object(lm))
            }
            (_, Value::Object(_)) => self.apply_value(Some(Value::Object(Map::new())), applied),
            (Some(Value::Array(la)), Value::Array(aa)) => self.apply_list(la, aa),
            (_, Value::Array(aa)) => {
                let mut out = Vec::with_capacity(aa.len());
                for e in aa {
                    out.push(self.apply_value(None, e)?);
                }
                Ok(Value::Array(out))
            }
            (_, other) => Ok(other.clone()),
        }
    }

    fn apply_list(&mut self, live: Vec<Value>, applied: &[Value]) -> Result<Value, PatchError> {
        match self.list_kind() {
            ListKind::Atomic => self.apply_value(None, &Value::Array(applied.to_vec())),
            ListKind::Set => {
                let mut out = live;
                for e in applied {
                    if !out.contains(e) {
                        out.push(e.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            ListKind::Map(keys) => {
                let mut out = live;
                for e in applied {
                    if !e.is_object() {
                        return Err(PatchError::CannotApply(format!(
                            "{}: element {e} of an associative list is not an object",
                            self.path.join(".")
                        )));
                    }
                    match out.iter().position(|o| keys_match(o, e, &keys)) {
                        Some(i) => {
                            let current = out[i].take();
                            out[i] = self.apply_value(Some(current), e)?;
                        }
                        None => out.push(self.apply_value(None, e)?),
                    }
                }
                Ok(Value::Array(out))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------------

fn server_side_apply(
    live: &Value,
    body: &[u8],
    lists: &dyn ListSemantics,
) -> Result<Value, PatchError> {
    let applied: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => serde_yaml_ng::from_slice(body)
            .map_err(|e| PatchError::InvalidBody(format!("error decoding YAML: {e}")))?,
    };
    if !applied.is_object() {
        return Err(PatchError::InvalidBody(format!(
            "error decoding YAML: the applied configuration must be an object, got {}",
            go_json_type(&applied)
        )));
    }
    let managed = applied.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null() && m.as_array().is_none_or(|a| !a.is_empty())) {
        return Err(PatchError::InvalidApply(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    for (field, what) in [("apiVersion", "version"), ("kind", "kind")] {
        let Some(expected) = live.get(field).and_then(Value::as_str) else {
            continue;
        };
        if expected.is_empty() {
            continue;
        }
        let specified = applied.get(field).and_then(Value::as_str).unwrap_or("");
        if specified != expected {
            return Err(PatchError::InvalidApply(format!(
                "Incorrect {what} specified in apply patch. Specified patch {what}: {specified}, expected: {expected}"
            )));
        }
    }
    let mut merger = Merger {
        lists,
        path: Vec::new(),
    };
    let base = if live.is_object() {
        live.clone()
    } else {
        Value::Object(Map::new())
    };
    merger.apply_value(Some(base), &applied)
}

#[cfg(test)]
mod tests;
