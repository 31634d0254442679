//! The reconciler's view of the cluster: the caches (of objects decoded as
//! [`lean`](super::lean) keeps them), and the overlay of its own writes.
//!
//! Writes go through an overlay: what a write returned is used instead of the cache
//! until the watch has delivered it, so that a plan never sees the world from before its
//! own last write (a stale cache could otherwise grant a slot twice).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bootc_pool_common::node::node_ready;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

/// Locks a mutex, taking over a poisoned one (the data stays consistent: every critical
/// section is a single insert or lookup).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many `resourceVersion`s the watch delivered are remembered per object: enough for a
/// write whose response arrives after the watch already delivered it and a change or two
/// after it.
const SEEN_PER_OBJECT: usize = 4;

/// What the last write of an object returned, until the cache has it.
#[derive(Debug, Clone)]
enum LastWrite<K> {
    /// Written (created, updated, patched); the object the API server returned.
    Object { object: Arc<K>, epoch: u64 },
    /// Deleted: the object with this uid is gone.
    Deleted { uid: Option<String>, epoch: u64 },
}

impl<K> LastWrite<K> {
    fn epoch(&self) -> u64 {
        match self {
            LastWrite::Object { epoch, .. } | LastWrite::Deleted { epoch, .. } => *epoch,
        }
    }
}

/// The reconciler's own writes, used instead of the cache until the watch delivers them.
///
/// A `resourceVersion` is opaque: two of them can be compared for equality only. So a
/// written object is used until the watch delivers that very version (the watch delivers
/// every version of an object in order, so what comes after is newer), or until a relist
/// that began after the write. A deletion is used until the watch delivers the deletion
/// or an object with another uid. The versions the watch delivered last are remembered
/// per object, so that a write whose response arrives after its watch event is not kept.
#[derive(Debug)]
pub(super) struct Overlay<K> {
    entries: HashMap<String, LastWrite<K>>,
    seen: HashMap<String, VecDeque<String>>,
    /// Relists begun (each one's `Init`).
    epoch: u64,
}

impl<K> Default for Overlay<K> {
    fn default() -> Self {
        Overlay {
            entries: HashMap::new(),
            seen: HashMap::new(),
            epoch: 0,
        }
    }
}

impl<K: Resource + Clone> Overlay<K> {
    pub(super) fn wrote(&mut self, name: &str, object: K) {
        let rv = object.meta().resource_version.as_deref();
        let delivered = self
            .seen
            .get(name)
            .is_some_and(|seen| seen.iter().any(|s| Some(s.as_str()) == rv));
        if delivered {
            self.entries.remove(name);
            return;
        }
        let epoch = self.epoch;
        let object = Arc::new(object);
        self.entries
            .insert(name.to_owned(), LastWrite::Object { object, epoch });
    }

    /// The names of the objects written and not yet seen in the cache.
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        self.entries
            .iter()
            .filter(|(_, w)| matches!(w, LastWrite::Object { .. }))
            .map(|(name, _)| name)
    }

    /// The names of the objects read from a write (written or deleted, not yet seen),
    /// all of them or those `among` some names. Of the two the shorter is walked: with
    /// many pools, the writes in flight are mostly other pools'.
    pub(super) fn all_names(&self, among: Option<super::views::Among<'_>>) -> Vec<String> {
        match among {
            None => self.entries.keys().cloned().collect(),
            Some(among) if among.len() < self.entries.len() => {
                let mut names: Vec<String> = among
                    .names()
                    .filter(|name| self.entries.contains_key(*name))
                    .map(str::to_owned)
                    .collect();
                names.sort_unstable();
                names.dedup();
                names
            }
            Some(among) => self
                .entries
                .keys()
                .filter(|name| among.contains(name))
                .cloned()
                .collect(),
        }
    }

    /// `name` was deleted; `uid` is the object's that was (when known).
    pub(super) fn deleted(&mut self, name: &str, uid: Option<String>) {
        let epoch = self.epoch;
        self.entries
            .insert(name.to_owned(), LastWrite::Deleted { uid, epoch });
    }

    /// The written object while the cache does not have it yet, else the cached one.
    pub(super) fn pick(&self, name: &str, cached: Option<Arc<K>>) -> Option<Arc<K>> {
        match self.entries.get(name) {
            None => cached,
            Some(LastWrite::Object { object, .. }) => Some(Arc::clone(object)),
            Some(LastWrite::Deleted { uid, .. }) => {
                // A new object of the same name is newer than the deletion.
                cached.filter(|c| uid.is_some() && c.meta().uid != *uid)
            }
        }
    }

    /// Forgets all of `name`: it is gone, and its watch may not say so (its last write
    /// may have come back after its deletion was delivered).
    pub(super) fn forget(&mut self, name: &str) {
        self.entries.remove(name);
        self.seen.remove(name);
    }

    /// Takes note of what the watch delivered (after the cache took it).
    pub(super) fn observe(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.epoch += 1,
            watcher::Event::InitDone => {
                // The relist's objects are in the cache: writes before it began are too.
                let epoch = self.epoch;
                self.entries.retain(|_, w| w.epoch() >= epoch);
            }
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                self.delivered(object);
            }
            watcher::Event::Delete(object) => {
                let name = object.meta().name.clone().unwrap_or_default();
                self.seen.remove(&name);
                let gone = match self.entries.get(&name) {
                    Some(LastWrite::Deleted { .. }) => true,
                    Some(LastWrite::Object { object: o, .. }) => o.meta().uid == object.meta().uid,
                    None => false,
                };
                if gone {
                    self.entries.remove(&name);
                }
            }
        }
    }

    fn delivered(&mut self, object: &K) {
        let meta = object.meta();
        let name = meta.name.clone().unwrap_or_default();
        let rv = meta.resource_version.clone().unwrap_or_default();
        let caught_up = match self.entries.get(&name) {
            Some(LastWrite::Object { object: o, .. }) => {
                o.meta().resource_version.as_deref() == Some(rv.as_str())
            }
            Some(LastWrite::Deleted { uid, .. }) => uid.is_some() && meta.uid != *uid,
            None => false,
        };
        if caught_up {
            self.entries.remove(&name);
        }
        let seen = self.seen.entry(name).or_default();
        if seen.len() == SEEN_PER_OBJECT {
            seen.pop_front();
        }
        seen.push_back(rv);
    }
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

#[cfg(test)]
mod tests;
