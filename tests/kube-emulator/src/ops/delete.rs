//! `DELETE`: removing an object, or marking it as being deleted while finalizers (or a namespace's contents)
//! remain; preconditions and orphaning of dependents.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Inner, Written, meta_str, now};
use crate::error::ApiError;
use crate::gc;
use crate::registry::{Generation, ResourceType};

impl Inner {
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
        check_preconditions(t, &old, name, options)?;
        if dry_run {
            return Ok(Written::ok((*old).clone()));
        }
        let orphan = options.get("propagationPolicy").and_then(Value::as_str) == Some("Orphan")
            || options.get("orphanDependents").and_then(Value::as_bool) == Some(true);
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let is_namespace = t.group.is_empty() && t.plural == "namespaces";
        if has_finalizers || is_namespace {
            return Ok(self.mark_deleting(t, &old, &ns_str, name, is_namespace));
        }
        if orphan && let Some(uid) = meta_str(&old, "uid") {
            gc::orphan_dependents(self, uid);
        }
        let removed = self.store.remove(&t.key(), &ns_str, name).unwrap_or(old);
        self.after_remove(t, &ns_str, &removed);
        Ok(Written::ok((*removed).clone()))
    }

    /// Marks an object with finalizers (or a namespace) as being deleted: its deletionTimestamp, and for a namespace
    /// the Terminating phase and the collection of what it holds. Marking it again changes nothing.
    fn mark_deleting(
        &mut self,
        t: &Arc<ResourceType>,
        old: &Arc<Value>,
        ns: &str,
        name: &str,
        is_namespace: bool,
    ) -> Written {
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Written::ok((**old).clone());
        }
        let mut marked = (**old).clone();
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
        let current = self.store.get(&t.key(), ns, name).unwrap_or(stored);
        Written::ok((*current).clone())
    }
}

/// `preconditions.uid` and `preconditions.resourceVersion` of the delete options must match the stored object.
fn check_preconditions(
    t: &ResourceType,
    old: &Value,
    name: &str,
    options: &Value,
) -> Result<(), ApiError> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let stored = meta_str(old, field);
        if let Some(wanted) = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
            && Some(wanted) != stored
        {
            return Err(ApiError::conflict(
                t,
                name,
                &format!(
                    "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {}",
                    stored.unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}
