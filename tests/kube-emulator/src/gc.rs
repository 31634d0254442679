//! Garbage collection: dependents whose owners are all gone are deleted (background propagation), and terminating namespaces are emptied.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::ops::{Inner, now};
use crate::policy;
use crate::registry::ResourceKey;

/// Deletes, until nothing more qualifies: objects whose every owner is gone, objects in
/// terminating namespaces, and terminating namespaces that became empty. Objects with
/// finalizers get a deletionTimestamp and stay until their finalizers are removed.
pub fn collect(inner: &mut Inner) {
    let mut pod_namespaces = BTreeSet::new();
    loop {
        let terminating = terminating_namespaces(inner);
        let mut victims = victims(inner, &terminating);
        // A terminating namespace with nothing left in it goes.
        for ns in &terminating {
            let empty = inner
                .store
                .keys()
                .iter()
                .all(|k| inner.store.list(k, Some(ns)).is_empty());
            if empty {
                victims.push((namespace_key(), String::new(), ns.clone()));
            }
        }
        if victims.is_empty() {
            break;
        }
        for (key, ns, name) in victims {
            let Some(object) = inner.store.get(&key, &ns, &name) else {
                continue;
            };
            let finalizers = object
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if finalizers && object.pointer("/metadata/deletionTimestamp").is_none() {
                let mut marked = (*object).clone();
                marked["metadata"]["deletionTimestamp"] = json!(now());
                marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                inner.store.replace(&key, marked);
            } else if !finalizers || key == namespace_key() {
                inner.store.remove(&key, &ns, &name);
                if key.group.is_empty() && key.plural == "pods" {
                    pod_namespaces.insert(ns);
                }
            }
        }
    }
    for ns in pod_namespaces {
        policy::refresh_budgets(inner, &ns);
    }
}

/// After a write that changed the owners of one object (`key`, `ns`, `name`): collection
/// already ran to its end after every earlier change, so only this object can have come
/// to qualify; the full collection runs only when it does. (A full sweep after every
/// such write makes creating N owned objects cost N² lookups: seconds per thousand
/// objects at ten thousand.)
pub fn collect_written(inner: &mut Inner, key: &ResourceKey, ns: &str, name: &str) {
    let Some(object) = inner.store.get(key, ns, name) else {
        return;
    };
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let in_terminating_namespace = !ns.is_empty()
        && inner
            .store
            .get(&namespace_key(), "", ns)
            .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_some());
    if in_terminating_namespace || orphaned(inner, &object) {
        collect(inner);
    }
}

/// The names of the namespaces with a deletionTimestamp.
fn terminating_namespaces(inner: &Inner) -> BTreeSet<String> {
    namespaces(inner)
        .filter(|ns| ns.pointer("/metadata/deletionTimestamp").is_some())
        .filter_map(|ns| {
            ns.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Whether `object` has owners and every one of them is gone.
fn orphaned(inner: &Inner, object: &Value) -> bool {
    let owners = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array);
    owners.is_some_and(|refs| {
        !refs.is_empty()
            && refs.iter().all(|r| {
                r["uid"]
                    .as_str()
                    .is_none_or(|uid| inner.store.locate_uid(uid).is_none())
            })
    })
}

/// The objects not yet being deleted whose every owner is gone, or that live in a
/// terminating namespace: (resource, namespace, name).
fn victims(inner: &Inner, terminating: &BTreeSet<String>) -> Vec<(ResourceKey, String, String)> {
    let mut victims = Vec::new();
    for key in inner.store.keys() {
        for object in inner.store.list(&key, None) {
            if object.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if orphaned(inner, &object) || (!ns.is_empty() && terminating.contains(ns)) {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                victims.push((key.clone(), ns.to_string(), name.to_string()));
            }
        }
    }
    victims
}

fn namespace_key() -> ResourceKey {
    ResourceKey::new("", "namespaces")
}

fn namespaces(inner: &Inner) -> impl Iterator<Item = std::sync::Arc<Value>> {
    inner.store.list(&namespace_key(), None).into_iter()
}

/// Removes owner references to `uid` (delete with `propagationPolicy: Orphan`).
pub fn orphan_dependents(inner: &mut Inner, uid: &str) {
    for key in inner.store.keys() {
        for object in inner.store.list(&key, None) {
            let Some(refs) = object
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
            else {
                continue;
            };
            if refs.iter().any(|r| r["uid"].as_str() == Some(uid)) {
                let kept: Vec<Value> = refs
                    .iter()
                    .filter(|r| r["uid"].as_str() != Some(uid))
                    .cloned()
                    .collect();
                let mut changed = (*object).clone();
                if kept.is_empty() {
                    if let Some(m) = changed["metadata"].as_object_mut() {
                        m.remove("ownerReferences");
                    }
                } else {
                    changed["metadata"]["ownerReferences"] = json!(kept);
                }
                inner.store.replace(&key, changed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::{Api, DeleteParams, PostParams};
    use serde_json::json;

    use crate::Emulator;

    fn owned_by(name: &str, owner_uid: Option<&str>) -> ConfigMap {
        let mut cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        cm.metadata.owner_references = owner_uid.map(|uid| {
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: uid.into(),
                ..Default::default()
            }]
        });
        cm
    }

    /// Collection after a write looks at the written object: one whose owners are all
    /// gone is deleted in the writing request, one with a live owner stays until the
    /// owner goes.
    #[tokio::test]
    async fn a_written_object_is_collected_when_its_owners_are_gone() {
        let emulator = Emulator::start().await.unwrap();
        let client = emulator.local_client("gc-test").unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let owner = api
            .create(&PostParams::default(), &owned_by("owner", None))
            .await
            .unwrap();
        let uid = owner.metadata.uid.unwrap();
        api.create(&PostParams::default(), &owned_by("kept", Some(&uid)))
            .await
            .unwrap();
        api.create(
            &PostParams::default(),
            &owned_by("orphan", Some("no-such-uid")),
        )
        .await
        .unwrap();
        let gone = |r: Result<ConfigMap, kube::Error>| matches!(r, Err(kube::Error::Api(e)) if e.code == 404);
        assert!(
            gone(api.get("orphan").await),
            "an orphan at birth is collected"
        );
        assert!(api.get("kept").await.is_ok());
        api.delete("owner", &DeleteParams::default()).await.unwrap();
        assert!(gone(api.get("kept").await), "collected with its owner");
    }
}
