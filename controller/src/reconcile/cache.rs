//! The reconciler's view of the cluster: the caches, trimmed to what plans read, and the
//! overlay of its own writes.
//!
//! Writes go through an overlay: what a write returned is used instead of the cache
//! until the cache has caught up (by `resourceVersion`), so that a plan never sees the
//! world from before its own last write (a stale cache could otherwise grant a slot
//! twice).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bootc_crds::node::BootcNode;
use k8s_openapi::api::core::v1::Node;
use kube::{Resource, ResourceExt};

/// Locks a mutex, taking over a poisoned one (the data stays consistent: every critical
/// section is a single insert or lookup).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the last write of an object returned, until the cache catches up.
#[derive(Debug, Clone)]
enum LastWrite<K> {
    Object(Arc<K>),
    Deleted,
}

#[derive(Debug)]
pub(super) struct Overlay<K> {
    entries: HashMap<String, (u64, LastWrite<K>)>,
}

impl<K> Default for Overlay<K> {
    fn default() -> Self {
        Overlay {
            entries: HashMap::new(),
        }
    }
}

pub(super) fn rv_of<K: Resource>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl<K: Resource + Clone> Overlay<K> {
    pub(super) fn wrote(&mut self, name: &str, object: K) {
        let rv = rv_of(&object);
        self.entries
            .insert(name.to_owned(), (rv, LastWrite::Object(Arc::new(object))));
    }

    /// The names of the objects written or deleted and not yet seen in the cache.
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    pub(super) fn deleted(&mut self, name: &str, rv: u64) {
        self.entries
            .insert(name.to_owned(), (rv, LastWrite::Deleted));
    }

    /// The newer of the cached object and the written one.
    pub(super) fn pick(&mut self, name: &str, cached: Option<Arc<K>>) -> Option<Arc<K>> {
        let Some((rv, written)) = self.entries.get(name) else {
            return cached;
        };
        let cached_rv = cached.as_deref().map(rv_of);
        match (written, cached_rv) {
            (LastWrite::Object(_), Some(c)) if c >= *rv => {
                self.entries.remove(name);
                cached
            }
            (LastWrite::Deleted, Some(c)) if c > *rv => {
                self.entries.remove(name);
                cached
            }
            (LastWrite::Deleted, None) => {
                self.entries.remove(name);
                None
            }
            (LastWrite::Object(o), _) => Some(Arc::clone(o)),
            (LastWrite::Deleted, _) => None,
        }
    }
}

/// Keeps only what plans read of a Node.
pub(super) fn strip_node(node: &mut Node) {
    node.managed_fields_mut().clear();
    node.annotations_mut().clear();
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.addresses = None;
        status.capacity = None;
        status.allocatable = None;
        status.daemon_endpoints = None;
        status.config = None;
        status.features = None;
        status.runtime_handlers = None;
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| c.type_ == "Ready");
        }
    }
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = None;
        spec.pod_cidrs = None;
        spec.provider_id = None;
        spec.config_source = None;
    }
}

pub(super) fn ready_condition(node: &Node) -> Option<&k8s_openapi::api::core::v1::NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
}

pub(super) fn node_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

pub(super) fn node_boot_id(node: &Node) -> Option<&str> {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.as_str())
}

pub(super) fn node_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// What of a Node can change a plan: labels, Ready, unschedulable, and the boot ID (a
/// new one is the kubelet's first report after a full reboot). Heartbeats are left out:
/// they change on every status post.
pub(super) fn node_fingerprint(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.labels().hash(&mut h);
    node_ready(node).hash(&mut h);
    node_unschedulable(node).hash(&mut h);
    node_boot_id(node).hash(&mut h);
    h.finish()
}

/// The pool named in a BootcNode's controller owner reference.
pub fn owner_pool(bootc: &BootcNode) -> Option<String> {
    bootc
        .owner_references()
        .iter()
        .find(|o| o.kind == "BootcNodePool" && o.controller == Some(true))
        .map(|o| o.name.clone())
}
