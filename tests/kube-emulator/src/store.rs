//! Stored objects, the one global resourceVersion counter, and the event history that watches resume from.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::registry::ResourceKey;

/// Mixes the counter into the text clients see (a bijection, undone by [`rv_order`]).
const RV_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// A resourceVersion as clients see it. A real API server's are opaque strings that
/// clients may only compare for equality; these are made so that a client that parses or
/// orders them goes wrong here rather than in production: `r` and 16 hex digits that do
/// not grow with the counter. `0` stays `0` (the "any version" of list and watch requests).
pub fn rv_text(rv: u64) -> String {
    if rv == 0 {
        return "0".to_owned();
    }
    format!("r{:016x}", (rv ^ RV_MIX).rotate_left(17))
}

/// The store's counter behind a resourceVersion [`rv_text`] made, for tools that check the
/// order of events (never for the components under test). `None` when it is not one.
pub fn rv_order(text: &str) -> Option<u64> {
    if text == "0" {
        return Some(0);
    }
    let hex = text.strip_prefix('r').filter(|h| h.len() == 16)?;
    let mixed = u64::from_str_radix(hex, 16).ok()?;
    Some(mixed.rotate_right(17) ^ RV_MIX)
}

/// [`rv_order`] of an object's `metadata.resourceVersion`; 0 when it has none the store made.
pub fn object_rv_order(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(rv_order)
        .unwrap_or(0)
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed from the store.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// Which resource.
    pub key: ResourceKey,
    /// The object's namespace (`""` when cluster-scoped).
    pub namespace: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletions: as it was, with the deletion's version).
    pub object: Arc<Value>,
    /// The object before the change (modifications), so selector watches can tell an
    /// object that stopped matching.
    pub previous: Option<Arc<Value>>,
}

/// Object identity within a resource: `(namespace, name)`.
pub type ObjectKey = (String, String);

/// Where one watch's events go: only events of its resource, namespace and (when its
/// field selector names one object) name are sent, so a change wakes only the watches
/// that may care about it.
#[derive(Debug)]
struct Sink {
    namespace: Option<String>,
    tx: mpsc::Sender<Arc<Event>>,
}

/// The watches of one resource: those that name one object, by that name (so that a
/// change is matched against the watches of its object only, not against every agent's
/// watch of its own node), and the others.
#[derive(Debug, Default)]
struct Sinks {
    any: Vec<Sink>,
    named: HashMap<String, Vec<Sink>>,
}

impl Sink {
    /// Sends `event` if this watch wants it; false when the watch is gone or has fallen
    /// behind (its queue is full), so that it is dropped: its stream ends and the client
    /// resumes from its last version, as after any cut.
    fn offer(&self, event: &Arc<Event>) -> Offered {
        let wanted = self
            .namespace
            .as_ref()
            .is_none_or(|ns| *ns == event.namespace);
        if !wanted {
            return if self.tx.is_closed() {
                Offered::Gone
            } else {
                Offered::Kept
            };
        }
        match self.tx.try_send(event.clone()) {
            Ok(()) => Offered::Kept,
            Err(mpsc::error::TrySendError::Full(_)) => Offered::Behind,
            Err(mpsc::error::TrySendError::Closed(_)) => Offered::Gone,
        }
    }
}

/// What became of a watch an event was offered to.
enum Offered {
    /// It is still open.
    Kept,
    /// Its client went away.
    Gone,
    /// Its queue was full: it fell behind and is cut.
    Behind,
}

impl Offered {
    /// Whether the watch stays, counting it into `behind` when it fell behind.
    fn stays(self, behind: &mut u64) -> bool {
        match self {
            Offered::Kept => true,
            Offered::Gone => false,
            Offered::Behind => {
                *behind += 1;
                false
            }
        }
    }
}

/// The emulator's storage.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    objects: HashMap<ResourceKey, BTreeMap<ObjectKey, Arc<Value>>>,
    uids: HashMap<String, (ResourceKey, ObjectKey)>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Watches asking for a version at or below this get 410 Gone.
    compacted: u64,
    tx: broadcast::Sender<Arc<Event>>,
    sinks: HashMap<ResourceKey, Sinks>,
    /// Watches cut for falling behind, by resource (plural).
    cut_behind: BTreeMap<String, u64>,
    fanout: usize,
}

/// A watch or continue token asked for history that is no longer kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone {
    /// The oldest version still available.
    pub oldest: u64,
}

impl Store {
    /// An empty store keeping `history_limit` events for watches to resume from, and a
    /// fan-out buffer of `fanout` events per watcher.
    pub fn new(history_limit: usize, fanout: usize) -> Self {
        let (tx, _) = broadcast::channel(fanout.max(16));
        Store {
            rv: 1,
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            tx,
            sinks: HashMap::new(),
            cut_behind: BTreeMap::new(),
            fanout: fanout.max(16),
        }
    }

    /// The newest resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(key)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of a resource, in `(namespace, name)` order; `ns: None` for all namespaces.
    pub fn list(&self, key: &ResourceKey, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(objects) = self.objects.get(key) else {
            return Vec::new();
        };
        match ns {
            None => objects.values().cloned().collect(),
            Some(ns) => objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    /// [`Store::list`], or when `name` is given (a field selector naming one object) and
    /// the object's namespace is known (`ns` given, or the resource is cluster-scoped,
    /// `namespaced` false), just that object if it is stored: a lookup instead of a walk
    /// over every object of the resource.
    pub fn list_named(
        &self,
        key: &ResourceKey,
        ns: Option<&str>,
        name: Option<&str>,
        namespaced: bool,
    ) -> Vec<Arc<Value>> {
        match (name, ns) {
            (Some(name), Some(ns)) => self.get(key, ns, name).into_iter().collect(),
            (Some(name), None) if !namespaced => self.get(key, "", name).into_iter().collect(),
            _ => self.list(key, ns),
        }
    }

    /// Every resource that has objects.
    pub fn keys(&self) -> Vec<ResourceKey> {
        self.objects.keys().cloned().collect()
    }

    /// Where the object with this uid is, if it exists.
    pub fn locate_uid(&self, uid: &str) -> Option<&(ResourceKey, ObjectKey)> {
        self.uids.get(uid)
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, event: Event) {
        let event = Arc::new(event);
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        if let Some(sinks) = self.sinks.get_mut(&event.key) {
            let mut behind = 0;
            sinks
                .any
                .retain(|sink| sink.offer(&event).stays(&mut behind));
            let name = event.object["metadata"]["name"]
                .as_str()
                .unwrap_or_default();
            if let Some(named) = sinks.named.get_mut(name) {
                named.retain(|sink| sink.offer(&event).stays(&mut behind));
                if named.is_empty() {
                    sinks.named.remove(name);
                }
            }
            if behind > 0 {
                *self.cut_behind.entry(event.key.plural.clone()).or_default() += behind;
            }
        }
        // No receivers is fine: nobody follows the whole stream.
        let _ = self.tx.send(event);
    }

    /// A queue of the future events of one resource (optionally one namespace, one name).
    pub fn watch(
        &mut self,
        key: &ResourceKey,
        namespace: Option<String>,
        name: Option<String>,
    ) -> mpsc::Receiver<Arc<Event>> {
        let (tx, rx) = mpsc::channel(self.fanout);
        let sinks = self.sinks.entry(key.clone()).or_default();
        let list = match name {
            Some(name) => sinks.named.entry(name).or_default(),
            None => &mut sinks.any,
        };
        list.retain(|s| !s.tx.is_closed());
        list.push(Sink { namespace, tx });
        rx
    }

    /// Stores a new object (its metadata already complete but for `resourceVersion`).
    pub fn insert(&mut self, key: &ResourceKey, mut object: Value) -> Arc<Value> {
        let rv = self.next_rv();
        object["metadata"]["resourceVersion"] = json!(rv_text(rv));
        let (ns, name, uid) = identity(&object);
        let object = Arc::new(object);
        self.objects
            .entry(key.clone())
            .or_default()
            .insert((ns.clone(), name.clone()), object.clone());
        self.uids.insert(uid, (key.clone(), (ns.clone(), name)));
        self.record(Event {
            rv,
            key: key.clone(),
            namespace: ns,
            kind: EventType::Added,
            object: object.clone(),
            previous: None,
        });
        object
    }

    /// Replaces an existing object.
    pub fn replace(&mut self, key: &ResourceKey, mut object: Value) -> Arc<Value> {
        let rv = self.next_rv();
        object["metadata"]["resourceVersion"] = json!(rv_text(rv));
        let (ns, name, _) = identity(&object);
        let object = Arc::new(object);
        let previous = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert((ns.clone(), name), object.clone());
        self.record(Event {
            rv,
            key: key.clone(),
            namespace: ns,
            kind: EventType::Modified,
            object: object.clone(),
            previous,
        });
        object
    }

    /// Removes an object; returns it as the DELETED event carries it.
    pub fn remove(&mut self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let removed = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        let rv = self.next_rv();
        let mut object = (*removed).clone();
        object["metadata"]["resourceVersion"] = json!(rv_text(rv));
        let (_, _, uid) = identity(&object);
        self.uids.remove(&uid);
        let object = Arc::new(object);
        self.record(Event {
            rv,
            key: key.clone(),
            namespace: ns.to_string(),
            kind: EventType::Deleted,
            object: object.clone(),
            previous: Some(removed),
        });
        Some(object)
    }

    /// Buffers `events` events for the receivers of [`Store::subscribe`] from now on
    /// How many watches were cut for falling behind, by resource (plural).
    pub fn cut_behind(&self) -> &BTreeMap<String, u64> {
        &self.cut_behind
    }

    /// (receivers taken before keep the old buffer, and are told it closed).
    pub fn set_observer_buffer(&mut self, events: usize) {
        self.tx = broadcast::channel(events.max(16)).0;
    }

    /// A receiver of every future event of every resource (for tests that check
    /// invariants over the whole stream).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// The kept events after `rv`, or `Gone` when some of them were dropped.
    pub fn since(&self, rv: u64) -> Result<Vec<Arc<Event>>, Gone> {
        if rv < self.compacted {
            return Err(Gone {
                oldest: self.compacted,
            });
        }
        // The history is in version order.
        let first = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.range(first..).cloned().collect())
    }

    /// Forgets all history and moves the version on by one, so every watch or continue
    /// token from any existing version gets 410, while a fresh list's version is valid.
    pub fn compact(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.compacted = self.rv;
    }

    /// Versions a watch may resume from: `(oldest, newest)`.
    pub fn window(&self) -> (u64, u64) {
        (self.compacted, self.rv)
    }
}

/// `(namespace, name, uid)` of an object.
fn identity(object: &Value) -> (String, String, String) {
    let field = |f: &str| {
        object["metadata"][f]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    (field("namespace"), field("name"), field("uid"))
}

#[cfg(test)]
mod tests;
