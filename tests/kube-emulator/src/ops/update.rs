//! `PUT` and `PATCH`: replacing or patching an object (or its status), kube-apiserver's rules for what a write may
//! change.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Inner, PatchBody, WriteOptions, Written, meta_str, spec_part, strip_server_fields};
use crate::error::ApiError;
use crate::patch::PatchType;
use crate::registry::{Generation, ResourceType};

impl Inner {
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
    pub fn patch(
        &mut self,
        t: &Arc<ResourceType>,
        ns: Option<&str>,
        name: &str,
        status: bool,
        patch: PatchBody<'_>,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let PatchBody { patch_type, body } = patch;
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
        let mut patched = crate::patch::apply_patch(patch_type, &live, body, lists.as_ref())
            .map_err(|e| {
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
        object: Value,
        status: bool,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let name = meta_str(old, "name").unwrap_or_default().to_string();
        let ns = meta_str(old, "namespace").unwrap_or_default().to_string();
        // Status writes change only status; other writes never change status.
        let mut object = with_status_of(t, old, object, status);
        keep_server_metadata(old, &mut object);
        super::secret::merge_string_data(t, &mut object)?;
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
        if object == **old || opts.dry_run {
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
}

/// `object` with the status a write may set: only the status for a status write, the stored status for other
/// writes of a kind with a status subresource.
fn with_status_of(t: &ResourceType, old: &Value, mut object: Value, status: bool) -> Value {
    if status {
        let mut merged = old.clone();
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
    object
}

/// Copies the server-owned metadata (uid, timestamps, generation, namespace, resourceVersion) from the stored
/// object, and drops `managedFields` and `selfLink`.
fn keep_server_metadata(old: &Value, object: &mut Value) {
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
}
