//! The write path: create, update, patch and delete with kube-apiserver's rules for metadata, status subresources, generation, preconditions, finalizers and custom-resource schemas.
//!
//! Map: what every write shares (identity checks, custom-resource admission) is here; `create`, `update` (PUT and
//! PATCH) and `delete` hold the writes, and `effects` what a stored write sets off (CRDs registered or dropped,
//! garbage collection, disruption budgets).

mod create;
mod delete;
mod effects;
mod events;
mod secret;
mod update;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::patch::{BuiltinLists, ListSemantics, PatchType, SchemaLists};
use crate::registry::{ResourceRegistry, ResourceType};
use crate::store::Store;

/// Everything behind the emulator's one lock.
#[derive(Debug)]
pub struct Inner {
    /// Objects and history.
    pub store: Store,
    /// Served kinds.
    pub registry: ResourceRegistry,
}

/// `?fieldValidation=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Unknown fields are dropped silently.
    Ignore,
    /// Unknown fields are dropped with a warning (the default).
    #[default]
    Warn,
    /// Unknown fields refuse the request.
    Strict,
}

impl FieldValidation {
    /// Parses the query value (kube-apiserver accepts these three, case-sensitively).
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "Ignore" => Ok(Self::Ignore),
            "Warn" | "" => Ok(Self::Warn),
            "Strict" => Ok(Self::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation {other:?} is invalid: must be one of Ignore, Warn, Strict"
            ))),
        }
    }
}

/// EmulatorOptions common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: check everything, store nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
}

/// A successful write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as it would be, for a dry run).
    pub object: Value,
    /// 200, or 201 when created.
    pub code: u16,
    /// `Warning` headers to send.
    pub warnings: Vec<String>,
}

impl Written {
    /// A 200 answer without warnings.
    pub fn ok(object: Value) -> Self {
        Self {
            object,
            code: 200,
            warnings: Vec::new(),
        }
    }
}

/// A PATCH body: its type (from the `Content-Type`) and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct PatchBody<'a> {
    /// How to apply the body.
    pub patch_type: PatchType,
    /// The body, untrusted.
    pub body: &'a [u8],
}

/// RFC 3339 with seconds, as kube-apiserver writes timestamps.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Namespaces that exist from the start.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

fn strip_server_fields(metadata: &mut Map<String, Value>) {
    for f in ["managedFields", "selfLink"] {
        metadata.remove(f);
    }
}

/// Everything that is neither `metadata` nor `status`.
fn spec_part(object: &Value) -> Value {
    match object {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Inner {
    /// A fresh emulator state with the initial namespaces.
    pub fn new(history_limit: usize, fanout: usize) -> Self {
        let mut inner = Inner {
            store: Store::new(history_limit, fanout),
            registry: ResourceRegistry::default(),
        };
        if let Some(t) = inner.registry.find("", "v1", "namespaces") {
            for ns in INITIAL_NAMESPACES {
                let object =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                // Creating a fixed, valid namespace in an empty store cannot fail.
                let _ = inner.create(&t, None, object, &WriteOptions::default());
            }
        }
        inner
    }

    fn check_identity(
        &self,
        t: &ResourceType,
        ns: Option<&str>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        if let Some(k) = kind
            && k != t.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind {k:?} in the body does not match the resource {} (kind {:?})",
                t.qualified(),
                t.kind
            )));
        }
        if let Some(av) = api_version {
            let group = av.rsplit_once('/').map_or("", |(g, _)| g);
            if group != t.group {
                return Err(ApiError::bad_request(format!(
                    "the API version {av:?} in the body does not match the resource {}",
                    t.qualified()
                )));
            }
        }
        object["apiVersion"] = json!(t.api_version());
        object["kind"] = json!(t.kind);
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        match (t.namespaced, ns) {
            (true, Some(ns)) => {
                if let Some(body_ns) = meta_str(object, "namespace")
                    && body_ns != ns
                {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                object["metadata"]["namespace"] = json!(ns);
            }
            (true, None) => {
                return Err(ApiError::bad_request(format!(
                    "{} is namespaced: use a namespace path",
                    t.plural
                )));
            }
            (false, _) => {
                if let Some(m) = object["metadata"].as_object_mut() {
                    m.remove("namespace");
                }
            }
        }
        Ok(())
    }

    /// Prunes, defaults and validates a custom resource against its schema.
    fn admit_custom(
        &self,
        t: &ResourceType,
        name: &str,
        mut object: Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let Some(schema) = t.schema() else {
            return Ok((object, Vec::new()));
        };
        let pruned = apischema::prune_in_place(schema, &mut object);
        let mut warnings = Vec::new();
        if !pruned.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => {
                    let fields: Vec<String> = pruned
                        .iter()
                        .map(|p| format!("unknown field {p:?}"))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
                        t.kind,
                        t.version,
                        t.kind,
                        fields.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(pruned.iter().map(|p| format!("unknown field {p:?}")))
                }
                FieldValidation::Ignore => {}
            }
        }
        let old = old.filter(|_| t.reads_old_self);
        match apischema::admit_pruned(schema, object, old) {
            Ok(stored) => Ok((stored, warnings)),
            Err(errors) => {
                let causes: Vec<(String, String)> = errors
                    .iter()
                    .map(|e| {
                        let text = e.to_string();
                        let message = text
                            .strip_prefix(&format!("{}: ", e.path))
                            .map_or(text.clone(), str::to_string);
                        (e.path.clone(), message)
                    })
                    .collect();
                Err(ApiError::invalid(t, name, &causes))
            }
        }
    }

    /// List semantics for patches of this type.
    fn lists(t: &ResourceType) -> Box<dyn ListSemantics + '_> {
        match t.schema() {
            Some(schema) => Box::new(SchemaLists(schema)),
            None => Box::new(BuiltinLists::new(&t.kind)),
        }
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.registry
            .find("", "v1", "namespaces")
            .is_some_and(|nt| self.store.get(&nt.key(), "", ns).is_some())
    }
}
