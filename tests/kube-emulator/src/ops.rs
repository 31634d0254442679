//! The write path: create, update, patch and delete with kube-apiserver's rules for metadata, status subresources, generation, preconditions, finalizers and custom-resource schemas.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::gc;
use crate::patch::{self, BuiltinLists, ListSemantics, PatchType, SchemaLists};
use crate::policy;
use crate::registry::{Generation, Registry, ResourceType};
use crate::store::Store;

/// Everything behind the emulator's one lock.
#[derive(Debug)]
pub struct Inner {
    /// Objects and history.
    pub store: Store,
    /// Served kinds.
    pub registry: Registry,
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

/// Options common to writes.
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

/// A random suffix for `generateName`, from the alphabet kube-apiserver uses.
fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

impl Inner {
    /// A fresh emulator state with the initial namespaces.
    pub fn new(history_limit: usize, fanout: usize) -> Self {
        let mut inner = Inner {
            store: Store::new(history_limit, fanout),
            registry: Registry::default(),
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
        object: Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let Some(schema) = t.schema() else {
            return Ok((object, Vec::new()));
        };
        let (_, pruned) = apischema::prune(schema, &object);
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
        match apischema::admit(schema, &object, old) {
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

    /// `POST` a new object.
    pub fn create(
        &mut self,
        t: &Arc<ResourceType>,
        ns: Option<&str>,
        mut object: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.check_identity(t, ns, &mut object)?;
        let metadata = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        strip_server_fields(metadata);
        if metadata
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            match metadata.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let name = format!("{prefix}{}", name_suffix());
                    metadata.insert("name".into(), json!(name));
                }
                _ => {
                    return Err(ApiError::invalid(
                        t,
                        "",
                        &[(
                            "metadata.name".into(),
                            "Required value: name or generateName is required".into(),
                        )],
                    ));
                }
            }
        }
        let name = metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Err(m) = check_object_name(&name) {
            return Err(ApiError::invalid(
                t,
                &name,
                &[(
                    "metadata.name".into(),
                    format!("Invalid value: {name:?}: {m}"),
                )],
            ));
        }
        if let Some(rv) = metadata.get("resourceVersion").and_then(Value::as_str)
            && !rv.is_empty()
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), json!(now()));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
        ] {
            metadata.remove(f);
        }
        if t.generation == Generation::Spec {
            metadata.insert("generation".into(), json!(1));
        } else {
            metadata.remove("generation");
        }
        let ns_str = ns.unwrap_or_default().to_string();
        if t.namespaced && !self.namespace_exists(&ns_str) {
            let ns_type = self.registry.find("", "v1", "namespaces");
            return Err(match ns_type {
                Some(nt) => ApiError::not_found(&nt, &ns_str),
                None => ApiError::internal("namespaces are not served"),
            });
        }
        if self.store.get(&t.key(), &ns_str, &name).is_some() {
            return Err(ApiError::already_exists(t, &name));
        }
        reset_status_on_create(t, &mut object);
        let (object, warnings) = self.admit_custom(t, &name, object, None, opts)?;
        if t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions" {
            let mut scratch = self.registry.clone();
            scratch.register_crd(&object).map_err(|m| {
                ApiError::invalid(
                    t,
                    &name,
                    &[(
                        m.split(':').next().unwrap_or_default().to_string(),
                        m.split_once(": ").map_or(m.clone(), |(_, r)| r.to_string()),
                    )],
                )
            })?;
        }
        if opts.dry_run {
            return Ok(Written {
                object,
                code: 201,
                warnings,
            });
        }
        let has_owners = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let stored = self.store.insert(&t.key(), object);
        self.after_write(t, &ns_str, &stored, has_owners);
        let object = self
            .store
            .get(&t.key(), &ns_str, &name)
            .map_or_else(|| (*stored).clone(), |o| (*o).clone());
        Ok(Written {
            object,
            code: 201,
            warnings,
        })
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.registry
            .find("", "v1", "namespaces")
            .is_some_and(|nt| self.store.get(&nt.key(), "", ns).is_some())
    }

    /// `PUT` an object (or its status).
    pub fn update(
        &mut self,
        t: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        status: bool,
        mut object: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.check_identity(t, ns, &mut object)?;
        let body_name = meta_str(&object, "name").unwrap_or_default();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        object["metadata"]["name"] = json!(name);
        let ns_str = ns.unwrap_or_default();
        let Some(old) = self.store.get(&t.key(), ns_str, name) else {
            return Err(ApiError::not_found(t, name));
        };
        match meta_str(&object, "resourceVersion") {
            Some(rv) if !rv.is_empty() && Some(rv) != meta_str(&old, "resourceVersion") => {
                return Err(ApiError::conflict(t, name, ApiError::MODIFIED));
            }
            Some(rv) if !rv.is_empty() => {}
            _ if t.crd_name.is_some() => {
                return Err(ApiError::invalid(
                    t,
                    name,
                    &[(
                        "metadata.resourceVersion".into(),
                        "Invalid value: 0x0: must be specified for an update".into(),
                    )],
                ));
            }
            _ => {}
        }
        self.commit_update(t, &old, object, status, opts)
    }

    /// `PATCH` an object (or its status). An apply patch creates a missing object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        t: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        status: bool,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        if patch_type == PatchType::Strategic && t.crd_name.is_some() {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let ns_str = ns.unwrap_or_default();
        let old = self.store.get(&t.key(), ns_str, name);
        let live = match (&old, patch_type) {
            (Some(o), _) => (**o).clone(),
            (None, PatchType::Apply) if !status => json!({}),
            (None, _) => return Err(ApiError::not_found(t, name)),
        };
        let lists = Self::lists(t);
        let mut patched =
            patch::apply_patch(patch_type, &live, body, lists.as_ref()).map_err(|e| {
                let mut err = ApiError::new(e.status_code(), e.reason(), e.to_string());
                if e.status_code() == 422 {
                    err.details = Some(json!({"name": name, "group": t.group, "kind": t.kind}));
                }
                err
            })?;
        match old {
            None => {
                if patched.get("metadata").is_none_or(|m| !m.is_object()) {
                    patched["metadata"] = json!({});
                }
                patched["metadata"]["name"] = json!(name);
                self.create(t, ns, patched, opts)
            }
            Some(old) => {
                self.check_identity(t, ns, &mut patched)?;
                if meta_str(&patched, "name") != Some(name) {
                    return Err(ApiError::bad_request(
                        "the patch changes metadata.name, which cannot change",
                    ));
                }
                // A patch carrying metadata.resourceVersion is conditional on it.
                if let Some(rv) = meta_str(&patched, "resourceVersion")
                    && Some(rv) != meta_str(&old, "resourceVersion")
                {
                    return Err(ApiError::conflict(t, name, ApiError::MODIFIED));
                }
                self.commit_update(t, &old, patched, status, opts)
            }
        }
    }

    fn commit_update(
        &mut self,
        t: &Arc<ResourceType>,
        old: &Arc<Value>,
        mut object: Value,
        status: bool,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let name = meta_str(old, "name").unwrap_or_default().to_string();
        let ns = meta_str(old, "namespace").unwrap_or_default().to_string();
        // Status writes change only status; other writes never change status.
        if status {
            let mut merged = (**old).clone();
            match object.get("status") {
                Some(s) => merged["status"] = s.clone(),
                None => {
                    if let Some(m) = merged.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            object = merged;
        } else if t.status_subresource {
            match old.get("status") {
                Some(s) => object["status"] = s.clone(),
                None => {
                    if let Some(m) = object.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        // Server-owned metadata comes from the stored object.
        if let Some(m) = object["metadata"].as_object_mut() {
            strip_server_fields(m);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
            ] {
                match old["metadata"].get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.insert(
                "resourceVersion".into(),
                old["metadata"]["resourceVersion"].clone(),
            );
        }
        let (mut object, warnings) = self.admit_custom(t, &name, object, Some(old), opts)?;
        if t.generation == Generation::Spec && spec_part(&object) != spec_part(old) {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            object["metadata"]["generation"] = json!(g);
        }
        if t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions" && !status {
            let mut scratch = self.registry.clone();
            scratch
                .register_crd(&object)
                .map_err(|m| ApiError::invalid(t, &name, &[("spec".into(), m)]))?;
        }
        if object == **old {
            return Ok(Written {
                object,
                code: 200,
                warnings,
            });
        }
        if opts.dry_run {
            return Ok(Written {
                object,
                code: 200,
                warnings,
            });
        }
        let finished = object.pointer("/metadata/deletionTimestamp").is_some()
            && object
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        if finished {
            let stored = self.store.replace(&t.key(), object);
            let removed = self.store.remove(&t.key(), &ns, &name).unwrap_or(stored);
            self.after_remove(t, &ns, &removed);
            return Ok(Written {
                object: (*removed).clone(),
                code: 200,
                warnings,
            });
        }
        // Collection only needs to look again when an object's owners changed.
        let owners_changed =
            object.pointer("/metadata/ownerReferences") != old.pointer("/metadata/ownerReferences");
        let stored = self.store.replace(&t.key(), object);
        self.after_write(t, &ns, &stored, owners_changed);
        Ok(Written {
            object: (*stored).clone(),
            code: 200,
            warnings,
        })
    }

    /// `DELETE` an object. With finalizers, the object only gets its deletionTimestamp.
    pub fn delete(
        &mut self,
        t: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        options: &Value,
        dry_run: bool,
    ) -> Result<Written, ApiError> {
        let ns_str = ns.unwrap_or_default().to_string();
        let Some(old) = self.store.get(&t.key(), &ns_str, name) else {
            return Err(ApiError::not_found(t, name));
        };
        if let Some(uid) = options
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            && Some(uid) != meta_str(&old, "uid")
        {
            return Err(ApiError::conflict(
                t,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = options
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                t,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion").unwrap_or_default()
                ),
            ));
        }
        if dry_run {
            return Ok(Written {
                object: (*old).clone(),
                code: 200,
                warnings: Vec::new(),
            });
        }
        let orphan = options.get("propagationPolicy").and_then(Value::as_str) == Some("Orphan")
            || options.get("orphanDependents").and_then(Value::as_bool) == Some(true);
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let is_namespace = t.group.is_empty() && t.plural == "namespaces";
        if has_finalizers || is_namespace {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Written {
                    object: (*old).clone(),
                    code: 200,
                    warnings: Vec::new(),
                });
            }
            let mut marked = (*old).clone();
            marked["metadata"]["deletionTimestamp"] = json!(now());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if t.generation == Generation::Spec {
                let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                marked["metadata"]["generation"] = json!(g);
            }
            if is_namespace {
                marked["status"] = json!({"phase": "Terminating"});
            }
            let stored = self.store.replace(&t.key(), marked);
            if is_namespace {
                gc::collect(self);
            }
            let current = self.store.get(&t.key(), &ns_str, name).unwrap_or(stored);
            return Ok(Written {
                object: (*current).clone(),
                code: 200,
                warnings: Vec::new(),
            });
        }
        if orphan && let Some(uid) = meta_str(&old, "uid") {
            gc::orphan_dependents(self, uid);
        }
        let removed = self.store.remove(&t.key(), &ns_str, name).unwrap_or(old);
        self.after_remove(t, &ns_str, &removed);
        Ok(Written {
            object: (*removed).clone(),
            code: 200,
            warnings: Vec::new(),
        })
    }

    /// Side effects of a stored create or update.
    fn after_write(
        &mut self,
        t: &Arc<ResourceType>,
        ns: &str,
        object: &Arc<Value>,
        owners_changed: bool,
    ) {
        if t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions" {
            self.establish_crd(t, object);
        }
        if owners_changed {
            gc::collect(self);
        }
        if t.group.is_empty() && t.plural == "pods" || t.group == "policy" {
            policy::refresh_budgets(self, ns);
        }
    }

    /// Side effects of a removal.
    fn after_remove(&mut self, t: &Arc<ResourceType>, ns: &str, object: &Arc<Value>) {
        if t.group == "apiextensions.k8s.io"
            && t.plural == "customresourcedefinitions"
            && let Some(name) = meta_str(object, "name")
        {
            self.drop_crd(name);
        }
        gc::collect(self);
        if t.group.is_empty() && t.plural == "pods" {
            policy::refresh_budgets(self, ns);
        }
    }

    /// Registers a stored CRD's kinds and reports it Established, as the apiextensions
    /// controllers do right after creation.
    fn establish_crd(&mut self, t: &Arc<ResourceType>, crd: &Arc<Value>) {
        if self.registry.register_crd(crd).is_err() {
            return;
        }
        let mut with_status = (**crd).clone();
        let ts = now();
        let storage: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v["storage"].as_bool() == Some(true))
                    .map(|v| v["name"].clone())
                    .collect()
            })
            .unwrap_or_default();
        let status = json!({
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": ts},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": ts},
            ],
            "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(Value::Null),
            "storedVersions": storage,
        });
        let unchanged = crd.get("status").is_some_and(|s| {
            s["acceptedNames"] == status["acceptedNames"]
                && s["storedVersions"] == status["storedVersions"]
        });
        if !unchanged {
            with_status["status"] = status;
            self.store.replace(&t.key(), with_status);
        }
    }

    /// Removes a CRD's kinds and every object of them.
    fn drop_crd(&mut self, crd_name: &str) {
        let keys: Vec<_> = self
            .registry
            .all()
            .iter()
            .filter(|t| t.crd_name.as_deref() == Some(crd_name))
            .map(|t| t.key())
            .collect();
        self.registry.unregister_crd(crd_name);
        for key in keys {
            for object in self.store.list(&key, None) {
                let ns = meta_str(&object, "namespace")
                    .unwrap_or_default()
                    .to_string();
                let name = meta_str(&object, "name").unwrap_or_default().to_string();
                self.store.remove(&key, &ns, &name);
            }
        }
    }
}

/// What kube-apiserver does to `status` on create.
fn reset_status_on_create(t: &ResourceType, object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "pods") => {
            map.insert("status".into(), json!({"phase": "Pending"}));
        }
        ("", "namespaces") => {
            map.insert("status".into(), json!({"phase": "Active"}));
        }
        // Nodes register with their status, as the kubelet does.
        ("", "nodes") => {}
        _ if t.crd_name.is_some() && t.status_subresource => {
            map.remove("status");
        }
        _ => {}
    }
}

/// Object names: a DNS-1123 subdomain (most kinds accept that; some are stricter).
fn check_object_name(name: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() <= 253 && name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into())
    }
}
