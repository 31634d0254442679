//! `POST`: creating an object, with the server-owned metadata kube-apiserver sets.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Inner, WriteOptions, Written, now, strip_server_fields};
use crate::error::ApiError;
use crate::registry::{Generation, ResourceType};

impl Inner {
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
        let name = new_metadata(t, metadata)?;
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
        super::secret::merge_string_data(t, &mut object)?;
        check_event_note(t, &name, &object)?;
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
}

/// Sets the server-owned metadata of a new object (its name, from `generateName` when it has none, `uid`,
/// `creationTimestamp`, `generation`) and returns its name; refuses a missing or invalid name and a
/// `resourceVersion`.
fn new_metadata(t: &ResourceType, metadata: &mut Map<String, Value>) -> Result<String, ApiError> {
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
    Ok(name)
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

/// The longest note an events.k8s.io Event may carry, in bytes, as kube-apiserver
/// validates it.
pub const EVENT_NOTE_MAX: usize = 1024;

/// Refuses an events.k8s.io Event whose note is longer than [`EVENT_NOTE_MAX`] bytes, as
/// kube-apiserver does (422, `note: Too long`).
fn check_event_note(t: &ResourceType, name: &str, object: &Value) -> Result<(), ApiError> {
    if (t.group.as_str(), t.plural.as_str()) != ("events.k8s.io", "events") {
        return Ok(());
    }
    let len = object["note"].as_str().map_or(0, str::len);
    if len > EVENT_NOTE_MAX {
        return Err(ApiError::invalid(
            t,
            name,
            &[(
                "note".to_owned(),
                format!("Too long: may not be more than {EVENT_NOTE_MAX} bytes"),
            )],
        ));
    }
    Ok(())
}
