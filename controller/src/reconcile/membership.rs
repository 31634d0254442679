//! Each pool's candidate members, kept between reconciles. Finding them reads every Node
//! (does the pool's selector match its labels?) and every BootcNode (does the pool own
//! it?), which at 10,000 nodes costs more than the plan itself, and with many pools is
//! done by every pool's reconcile. Yet what decides it changes rarely: a rollout changes
//! Nodes' readiness and cordons and BootcNodes' status, not labels or owners.
//!
//! So the watch streams number every name they deliver in a bounded log
//! ([`Membership::changed_since`]), and the names that may have joined or left a pool (a
//! Node's labels changed, a BootcNode's owner changed, an object new or deleted) in a
//! second one ([`Membership::moved_since`]). [`super::views`] reads them to refresh only
//! the names that changed since a pool's last reconcile. What cannot be told by name, a
//! relist, counts an epoch up. A pool's candidates are found again only when the epoch,
//! a moved name or its selector says they may differ. The candidates are a superset that
//! [`super::observe::members`] checks against the objects, as before.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::fast::FixedState;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_common::node::owner_pool;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;

use super::cache::lock;
use super::views::is_member;
use crate::plan::NodeView;

/// What one pool's candidates were found from.
#[derive(Debug)]
struct Found {
    epoch: u64,
    /// The moved log's next number then.
    moved: u64,
    selector: LabelSelector,
    names: BTreeSet<String>,
}

/// The pools' candidates and what they depend on (see the module's text).
#[derive(Debug, Default)]
pub struct Membership {
    epoch: AtomicU64,
    /// By Node: a hash of its labels.
    labels: Mutex<HashMap<String, u64>>,
    /// By BootcNode: the pool that owns it.
    owners: Mutex<HashMap<String, Option<String>>>,
    /// By pool.
    found: Mutex<HashMap<String, Found>>,
    /// The names delivered, in order.
    changes: Mutex<ChangeLog>,
    /// The names that may have joined or left a pool, in order.
    moved: Mutex<ChangeLog>,
}

/// How many delivered names the log keeps: a pool whose last reconcile is further back
/// reads all its members again.
const CHANGES_KEPT: usize = 16_384;

/// The names the watches delivered, numbered in order; the oldest dropped past
/// [`CHANGES_KEPT`]. Each name's last number is kept beside the log, so that a pool with
/// fewer members than the log holds names since its last reconcile asks for its members
/// by name rather than reading the whole log (with many pools, the log holds mostly
/// other pools' nodes).
#[derive(Debug, Default)]
struct ChangeLog {
    /// The number the next name gets.
    next: u64,
    names: VecDeque<String>,
    /// Each name in the log, with the number it was last logged at.
    last: HashMap<String, u64, FixedState>,
}

impl ChangeLog {
    fn push(&mut self, name: String) {
        if self.names.len() == CHANGES_KEPT
            && let Some(oldest) = self.names.pop_front()
        {
            let number = self.next - CHANGES_KEPT as u64;
            if self.last.get(&oldest) == Some(&number) {
                self.last.remove(&oldest);
            }
        }
        match self.last.get_mut(&name) {
            Some(last) => *last = self.next,
            None => {
                self.last.insert(name.clone(), self.next);
            }
        }
        self.names.push_back(name);
        self.next += 1;
    }

    /// The names logged from number `seq` on that `wanted` keeps, in log order;
    /// `None` when the log no longer reaches back that far.
    fn since(&self, seq: u64, wanted: impl Fn(&str) -> bool) -> Option<Vec<String>> {
        let skip = self.skip(seq)?;
        Some(
            self.names
                .iter()
                .skip(skip)
                .filter(|n| wanted(n))
                .cloned()
                .collect(),
        )
    }

    /// Where number `seq` is in the log; `None` when the log no longer reaches back.
    fn skip(&self, seq: u64) -> Option<usize> {
        let first = self.next - self.names.len() as u64;
        usize::try_from(seq.checked_sub(first)?).ok()
    }

    /// Of `among`, those logged from number `seq` on, by name: what [`Self::since`]
    /// keeps of them, read without the log.
    fn among_since<'n>(
        &self,
        seq: u64,
        among: impl Iterator<Item = &'n str>,
    ) -> Option<Vec<String>> {
        self.skip(seq)?;
        Some(
            among
                .filter(|n| self.last.get(*n).is_some_and(|last| *last >= seq))
                .map(str::to_owned)
                .collect(),
        )
    }

    /// How many names were logged from number `seq` on (at most the log's length).
    fn len_since(&self, seq: u64) -> usize {
        self.names
            .len()
            .min(usize::try_from(self.next.saturating_sub(seq)).unwrap_or(usize::MAX))
    }
}

/// `names` sorted, each once.
fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort_unstable();
    names.dedup();
    names
}

/// Where the watches stood: the membership epoch and the two logs' next numbers, read
/// before the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The membership epoch.
    pub epoch: u64,
    /// The change log's next number.
    pub seq: u64,
    /// The moved log's next number.
    pub moved: u64,
}

impl Membership {
    fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Where the watches stand now. Read it before the caches: what is delivered after it
    /// is numbered past it.
    pub fn mark(&self) -> Mark {
        // The logs first: an event logged between these reads and the epoch's is read
        // again through the logs. Every event is applied to the cache before it is
        // logged, so what is logged before a number read here is in the caches read
        // after it.
        let seq = lock(&self.changes).next;
        let moved = lock(&self.moved).next;
        Mark {
            epoch: self.epoch.load(Ordering::SeqCst),
            seq,
            moved,
        }
    }

    /// The names of `members` (sorted by name) delivered from number `seq` on (each
    /// once, sorted); `None` when the log no longer reaches back that far. The log holds
    /// the names of every pool's nodes: a pool with fewer members than the log holds
    /// since `seq` asks for them by name, else it reads the log and keeps its own.
    pub fn changed_since(&self, seq: u64, members: &[NodeView]) -> Option<Vec<String>> {
        let names = {
            let log = lock(&self.changes);
            if members.len() < log.len_since(seq) {
                log.among_since(seq, members.iter().map(|v| &*v.name))
            } else {
                log.since(seq, |name| is_member(members, name))
            }
        };
        // Sorted once the watch streams have the log back.
        names.map(sorted)
    }

    /// The names that may have joined or left a pool from number `moved` on (each once,
    /// sorted): a Node's labels changed, a BootcNode's owner changed, an object new or
    /// deleted. `None` when the log no longer reaches back that far.
    pub fn moved_since(&self, moved: u64) -> Option<Vec<String>> {
        let names = lock(&self.moved).since(moved, |_| true);
        names.map(sorted)
    }

    fn changed(&self, name: String) {
        lock(&self.changes).push(name);
    }

    /// A name that may have joined or left a pool: logged by name when the watch
    /// delivered it, an epoch counted up when a relist did (its objects are not told by
    /// name).
    fn moved(&self, name: String, applied: bool) {
        if applied {
            lock(&self.moved).push(name);
        } else {
            self.bump();
        }
    }

    /// Follows one event of the Node watch, after the cache applied it.
    pub fn node_event(&self, event: &Event<Node>) {
        match event {
            Event::Apply(node) | Event::InitApply(node) => {
                let mut h = DefaultHasher::new();
                node.labels().hash(&mut h);
                let old = lock(&self.labels).insert(node.name_any(), h.finish());
                let applied = matches!(event, Event::Apply(_));
                if old != Some(h.finish()) {
                    self.moved(node.name_any(), applied);
                }
                if applied {
                    self.changed(node.name_any());
                }
            }
            Event::Delete(node) => {
                lock(&self.labels).remove(&node.name_any());
                self.moved(node.name_any(), true);
                self.changed(node.name_any());
            }
            Event::Init | Event::InitDone => self.bump(),
        }
    }

    /// Follows one event of the BootcNode watch, after the cache applied it.
    pub fn bootc_event(&self, event: &Event<BootcNode>) {
        match event {
            Event::Apply(b) | Event::InitApply(b) => {
                let owner = owner_pool(b);
                let old = lock(&self.owners).insert(b.name_any(), owner.clone());
                let applied = matches!(event, Event::Apply(_));
                if old != Some(owner) {
                    self.moved(b.name_any(), applied);
                }
                if applied {
                    self.changed(b.name_any());
                }
            }
            Event::Delete(b) => {
                lock(&self.owners).remove(&b.name_any());
                self.moved(b.name_any(), true);
                self.changed(b.name_any());
            }
            Event::Init | Event::InitDone => self.bump(),
        }
    }

    /// The names that may be members of `pool` ([`super::observe::candidates`]), found
    /// again only when a Node's labels, a BootcNode's owner or the pool's selector may
    /// have changed since they were last found (a name moved, a relist).
    pub fn candidates(
        &self,
        pool: &BootcNodePool,
        nodes: &Store<Node>,
        bootc: &Store<BootcNode>,
    ) -> BTreeSet<String> {
        // The moved log's number and the epoch are read before the caches: a change
        // applied after these reads moves one of them past what is kept, so what is
        // found now is never kept as newer than it is.
        let moved = lock(&self.moved).next;
        let epoch = self.epoch.load(Ordering::SeqCst);
        let name = pool.name_any();
        let selector = &pool.spec.node_selector;
        if let Some(found) = lock(&self.found).get(&name)
            && found.epoch == epoch
            && found.moved == moved
            && found.selector == *selector
        {
            return found.names.clone();
        }
        let names = super::observe::candidates(pool, nodes.state(), bootc.state());
        let kept = Found {
            epoch,
            moved,
            selector: selector.clone(),
            names: names.clone(),
        };
        lock(&self.found).insert(name, kept);
        names
    }

    /// Forgets a pool that is gone.
    pub fn forget(&self, pool: &str) {
        lock(&self.found).remove(pool);
    }
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use kube::runtime::reflector::{self, store::Writer};
    use serde_json::json;

    use super::*;

    fn node(name: &str, role: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"role": role}},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    fn bootc(name: &str, owner: &str) -> BootcNode {
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
                "name": owner, "uid": "u", "controller": true,
            }]},
            "spec": {"desiredImage": "registry.test/os@sha256:1"},
        }))
        .unwrap()
    }

    /// A pool named `workers` selecting `role: ROLE`.
    pub(in crate::reconcile) fn pool(role: &str) -> BootcNodePool {
        serde_json::from_value(json!({
            "metadata": {"name": "workers"},
            "spec": {"nodeSelector": {"matchLabels": {"role": role}}, "image": {"ref": "x"}},
        }))
        .unwrap()
    }

    /// Asking a log for some names by their last number gives what reading the log and
    /// keeping those names gives, from any number on, also once the log dropped its
    /// oldest names (and when it no longer reaches back).
    #[test]
    fn a_log_asked_by_name_gives_what_reading_it_gives() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        // A short log, or one that dropped its oldest names.
        let len = prop_oneof![0usize..300, CHANGES_KEPT..(CHANGES_KEPT + 3000)];
        let case = (
            len,
            any::<u64>(),
            proptest::collection::btree_set(0u64..45, 0..45),
            any::<u64>(),
        );
        let mut runner = TestRunner::new(Config {
            cases: 32,
            ..Config::default()
        });
        let cut = std::cell::Cell::new(0);
        runner
            .run(&case, |(len, seed, members, at)| {
                let mut log = ChangeLog::default();
                let mut x = seed | 1;
                for _ in 0..len {
                    // A small generator: names repeat, some often, in any order.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    log.push(format!("n{:02}", x % 40));
                }
                let members: Vec<String> = members.iter().map(|n| format!("n{n:02}")).collect();
                let wanted = |n: &str| members.binary_search_by(|m| m.as_str().cmp(n)).is_ok();
                let first = log.next - log.names.len() as u64;
                // Before the first number kept, at it, anywhere, at the end and past it.
                for seq in [
                    first.saturating_sub(1),
                    first,
                    first + at % (log.next - first + 1),
                    log.next,
                    log.next + 1,
                ] {
                    let read = log.since(seq, wanted).map(sorted);
                    let asked = log
                        .among_since(seq, members.iter().map(String::as_str))
                        .map(sorted);
                    prop_assert_eq!(&asked, &read, "from {}", seq);
                    if read.is_none() {
                        cut.set(cut.get() + 1);
                    }
                    let logged = log.names.len();
                    let after = usize::try_from(log.next.saturating_sub(seq)).unwrap_or(usize::MAX);
                    prop_assert_eq!(log.len_since(seq), logged.min(after));
                }
                // The map holds the names in the log, each with its last number.
                let distinct: BTreeSet<&String> = log.names.iter().collect();
                prop_assert_eq!(log.last.len(), distinct.len());
                for (name, number) in &log.last {
                    let at = usize::try_from(number - first).unwrap();
                    prop_assert_eq!(&log.names[at], name);
                    prop_assert!(!log.names.iter().skip(at + 1).any(|n| n == name));
                }
                Ok(())
            })
            .unwrap();
        assert!(cut.get() > 0, "some number was before the log's first");
    }

    /// Applies `event` to the cache, then tells `m` (as the watch streams do).
    fn apply<K>(
        writer: &mut Writer<K>,
        m: &Membership,
        event: Event<K>,
        tell: fn(&Membership, &Event<K>),
    ) where
        K: kube::Resource + Clone + 'static,
        K::DynamicType: Default + Eq + Hash + Clone,
    {
        writer.apply_watcher_event(&event);
        tell(m, &event);
    }

    /// Found again after a label, owner, deletion or selector change; kept over a change
    /// that moves no membership (shown by a cache changed behind its back, which only a
    /// kept answer would miss).
    #[test]
    fn candidates_are_found_again_only_when_membership_may_have_moved() {
        let (nodes, mut nw) = reflector::store::<Node>();
        let (bootcs, mut bw) = reflector::store::<BootcNode>();
        let m = Membership::default();
        let names = |p: &BootcNodePool| -> Vec<String> {
            m.candidates(p, &nodes, &bootcs).into_iter().collect()
        };
        for (n, role) in [("a", "worker"), ("b", "worker"), ("c", "infra")] {
            apply(
                &mut nw,
                &m,
                Event::Apply(node(n, role, "True")),
                Membership::node_event,
            );
        }
        let workers = pool("worker");
        assert_eq!(names(&workers), ["a", "b"]);

        // A status change moves nothing: kept. A label change behind the membership's
        // back is then not seen, which proves the answer was kept.
        apply(
            &mut nw,
            &m,
            Event::Apply(node("a", "worker", "False")),
            Membership::node_event,
        );
        nw.apply_watcher_event(&Event::Apply(node("c", "worker", "True")));
        assert_eq!(names(&workers), ["a", "b"]);
        // Told, it is found again.
        m.node_event(&Event::Apply(node("c", "worker", "True")));
        assert_eq!(names(&workers), ["a", "b", "c"]);

        // A BootcNode the pool owns; then owned by another pool.
        apply(
            &mut bw,
            &m,
            Event::Apply(bootc("d", "workers")),
            Membership::bootc_event,
        );
        assert_eq!(names(&workers), ["a", "b", "c", "d"]);
        apply(
            &mut bw,
            &m,
            Event::Apply(bootc("d", "others")),
            Membership::bootc_event,
        );
        assert_eq!(names(&workers), ["a", "b", "c"]);

        // A deletion, a relist, a selector change.
        apply(
            &mut nw,
            &m,
            Event::Delete(node("b", "worker", "True")),
            Membership::node_event,
        );
        assert_eq!(names(&workers), ["a", "c"]);
        apply(&mut nw, &m, Event::Init, Membership::node_event);
        apply(
            &mut nw,
            &m,
            Event::InitApply(node("a", "worker", "True")),
            Membership::node_event,
        );
        apply(&mut nw, &m, Event::InitDone, Membership::node_event);
        assert_eq!(names(&workers), ["a"]);
        assert!(names(&pool("infra")).is_empty());
    }
}
