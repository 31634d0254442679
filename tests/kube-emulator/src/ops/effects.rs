//! What a stored write sets off: CRDs registered (and reported Established) or dropped with their objects, garbage
//! collection, and the status of disruption budgets.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Inner, meta_str, now};
use crate::registry::ResourceType;
use crate::{gc, policy};

impl Inner {
    /// Side effects of a stored create or update.
    pub(super) fn after_write(
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
            let name = meta_str(object, "name").unwrap_or_default();
            gc::collect_written(self, &t.key(), ns, name);
        }
        if t.group.is_empty() && t.plural == "pods" || t.group == "policy" {
            policy::refresh_budgets(self, ns);
        }
        self.mirror_event(t, ns, object);
    }

    /// Side effects of a removal.
    pub(super) fn after_remove(&mut self, t: &Arc<ResourceType>, ns: &str, object: &Arc<Value>) {
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
        self.mirror_event_removal(t, ns, object);
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
