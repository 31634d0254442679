//! [`Invariants`]: the rollout's availability invariant, checked over every stored
//! change of a Node or a BootcNode.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::lock;

/// What the invariant checker knows of one Node.
#[derive(Debug, Clone, Copy, Default)]
struct NodeFacts {
    rv: u64,
    unschedulable: bool,
    /// The `Ready` condition: `None` when the Node has none yet.
    ready: Option<bool>,
}

/// What the invariant checker knows of one BootcNode.
#[derive(Debug, Clone, Copy, Default)]
struct SlotFacts {
    rv: u64,
    slot: bool,
}

/// One pool's nodes and budget, checked on their own ([`Invariants::follow_pools`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolBudget {
    /// The pool's name, told in a violation.
    pub name: String,
    /// Its nodes.
    pub nodes: BTreeSet<String>,
    /// Its `maxUnavailable`, resolved.
    pub budget: usize,
}

/// A pool being checked: its budget, how many of its nodes are unavailable now, and the
/// set told last while it was over budget.
#[derive(Debug, Default)]
struct PoolCheck {
    name: String,
    budget: usize,
    down: usize,
    last: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Tracker {
    /// The budget of the whole cluster, when no pools are given.
    budget: usize,
    /// Per pool, checked on its own; empty: the whole cluster against `budget`.
    pools: Vec<PoolCheck>,
    /// Which pool each node belongs to (an index into `pools`).
    pool_of: HashMap<String, usize>,
    /// The pool whose unavailable set the last change touched.
    touched: Option<usize>,
    admin_cordoned: BTreeSet<String>,
    nodes: BTreeMap<String, NodeFacts>,
    bootc_nodes: BTreeMap<String, SlotFacts>,
    /// The newest resourceVersion whose event was handled (or that the start covers).
    processed_rv: u64,
    events: u64,
    max_unavailable_seen: usize,
    max_slots_seen: usize,
    /// The unavailable nodes now, each with why: kept as each event changes one node, so
    /// that an event costs the same at 10,000 nodes as at 10.
    down: BTreeMap<String, Vec<&'static str>>,
    /// How many of `down` hold a reboot slot, kept with it.
    down_with_slot: usize,
    /// The unavailable nodes after the last event, when there were more than the budget
    /// (a violation is told once per set); empty otherwise.
    last: BTreeSet<String>,
    violations: Vec<String>,
    reboots: BTreeMap<String, u32>,
    /// The last [`HISTORY`] changes of each Node and BootcNode, told in a violation of
    /// the nodes unavailable without a slot.
    history: BTreeMap<String, VecDeque<String>>,
}

/// How many changes of one node a violation tells.
const HISTORY: usize = 12;

/// One change of a Node or a BootcNode, in a few words.
fn summary(plural: &str, object: &Value, deleted: bool, rv: u64) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("-")
    };
    let short = |s: &str| {
        let tail = s.rsplit(':').next().unwrap_or(s);
        tail.chars().take(8).collect::<String>()
    };
    if deleted {
        return format!("rv {rv} {plural} deleted");
    }
    if plural == "nodes" {
        let ready = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map_or("-", |c| c["status"].as_str().unwrap_or("-"));
        let cordoned = object.pointer("/spec/unschedulable") == Some(&Value::Bool(true));
        return format!(
            "rv {rv} Node ready={ready} cordoned={cordoned} boot={}",
            short(text("/status/nodeInfo/bootID"))
        );
    }
    let idle = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
        .map_or("-", |c| c["reason"].as_str().unwrap_or("-"));
    format!(
        "rv {rv} BootcNode desired={} {} slot={} booted={} idle={idle} lastReboot={}/{}",
        short(text("/spec/desiredImage")),
        text("/spec/desiredImageState"),
        slot_facts(object, rv).slot,
        short(text("/status/booted/image")),
        short(text("/status/lastReboot/digest")),
        short(text("/status/lastReboot/bootID")),
    )
}

fn object_name(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn node_facts(object: &Value, rv: u64) -> NodeFacts {
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    NodeFacts {
        rv,
        unschedulable: object
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ready,
    }
}

fn slot_facts(object: &Value, rv: u64) -> SlotFacts {
    SlotFacts {
        rv,
        slot: object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION)),
    }
}

const BOOTC_GROUP: &str = "node.bootc.dev";

impl Tracker {
    /// Applies one object's state at `rv` (ignored when older than what is known);
    /// returns whether it was a Node or a BootcNode.
    fn apply(&mut self, group: &str, plural: &str, object: &Value, deleted: bool, rv: u64) -> bool {
        let Some(name) = object_name(object) else {
            return false;
        };
        if matches!((group, plural), ("", "nodes") | (BOOTC_GROUP, "bootcnodes")) {
            let history = self.history.entry(name.clone()).or_default();
            history.push_back(summary(plural, object, deleted, rv));
            if history.len() > HISTORY {
                history.pop_front();
            }
        }
        match (group, plural) {
            ("", "nodes") => {
                let known = self.nodes.get(&name).copied();
                if known.is_some_and(|k| k.rv >= rv) {
                    return true;
                }
                if deleted {
                    self.nodes.remove(&name);
                    self.refresh(name);
                    return true;
                }
                let facts = node_facts(object, rv);
                if known.is_some_and(|k| k.ready == Some(true)) && facts.ready == Some(false) {
                    *self.reboots.entry(name.clone()).or_default() += 1;
                }
                self.reboots.entry(name.clone()).or_default();
                self.nodes.insert(name.clone(), facts);
                self.refresh(name);
                true
            }
            (BOOTC_GROUP, "bootcnodes") => {
                if self.bootc_nodes.get(&name).is_some_and(|k| k.rv >= rv) {
                    return true;
                }
                if deleted {
                    self.bootc_nodes.remove(&name);
                } else {
                    self.bootc_nodes
                        .insert(name.clone(), slot_facts(object, rv));
                }
                self.refresh(name);
                true
            }
            _ => false,
        }
    }

    /// Why node `name` is unavailable now; empty when it is available.
    fn reasons(&self, name: &str) -> Vec<&'static str> {
        let mut why = Vec::new();
        if let Some(facts) = self.nodes.get(name) {
            if facts.unschedulable && !self.admin_cordoned.contains(name) {
                why.push("cordoned");
            }
            if facts.ready == Some(false) {
                why.push("NotReady");
            }
        }
        if self.bootc_nodes.get(name).is_some_and(|f| f.slot) {
            why.push("reboot-slot");
        }
        why
    }

    /// `down` brought up to date for node `name`, after its facts changed (and its
    /// pool's count, when pools are checked on their own).
    fn refresh(&mut self, name: String) {
        let why = self.reasons(&name);
        let pool = self.pool_of.get(&name).copied();
        let is = !why.is_empty();
        let slot = |why: &[&str]| usize::from(why.contains(&"reboot-slot"));
        self.down_with_slot += slot(&why);
        let before = if is {
            self.down.insert(name, why)
        } else {
            self.down.remove(&name)
        };
        let was = before.is_some();
        self.down_with_slot -= before.as_deref().map_or(0, slot);
        if let Some(i) = pool {
            let check = &mut self.pools[i];
            match (was, is) {
                (false, true) => check.down += 1,
                (true, false) => check.down -= 1,
                _ => {}
            }
            self.touched = Some(i);
        }
    }

    fn evaluate(&mut self, rv: u64) {
        let count = self.down.len();
        self.max_unavailable_seen = self.max_unavailable_seen.max(count);
        self.max_slots_seen = self.max_slots_seen.max(self.down_with_slot);
        if self.pools.is_empty() {
            // The names only when over the budget: at every event they would be a copy
            // of every unavailable node's name.
            let over = (count > self.budget).then(|| self.down.keys().cloned().collect());
            if let Some(told) = self.tell(rv, over, None) {
                self.violations.push(told);
            }
            return;
        }
        let Some(i) = self.touched.take() else {
            return;
        };
        let check = &self.pools[i];
        let over = (check.down > check.budget).then(|| {
            self.down
                .keys()
                .filter(|n| self.pool_of.get(*n) == Some(&i))
                .cloned()
                .collect::<BTreeSet<String>>()
        });
        if let Some(told) = self.tell(rv, over, Some(i)) {
            self.violations.push(told);
        }
    }

    /// The violation to tell at `rv` for the whole cluster (`pool` `None`) or one pool,
    /// given the names over budget now (`None`: within it), and that set remembered: a
    /// set is told once.
    fn tell(
        &mut self,
        rv: u64,
        over: Option<BTreeSet<String>>,
        pool: Option<usize>,
    ) -> Option<String> {
        let last = match pool {
            Some(i) => &mut self.pools[i].last,
            None => &mut self.last,
        };
        let Some(names) = over else {
            last.clear();
            return None;
        };
        if names == *last {
            return None;
        }
        last.clone_from(&names);
        let which: Vec<String> = names
            .iter()
            .map(|n| format!("{n} ({})", self.down[n].join(", ")))
            .collect();
        // How the nodes unavailable without a slot got there.
        let told: Vec<String> = names
            .iter()
            .filter(|n| !self.down[*n].contains(&"reboot-slot"))
            .map(|n| {
                let changes = self
                    .history
                    .get(n)
                    .map(|h| h.iter().cloned().collect::<Vec<_>>().join("\n    "));
                format!("\n  {n}:\n    {}", changes.unwrap_or_default())
            })
            .collect();
        let (whose, budget) = match pool {
            Some(i) => (
                format!("pool {}: ", self.pools[i].name),
                self.pools[i].budget,
            ),
            None => (String::new(), self.budget),
        };
        Some(format!(
            "rv {rv}: {whose}{} nodes unavailable, budget {budget}: {}{}",
            names.len(),
            which.join("; "),
            told.concat()
        ))
    }

    fn report(&self) -> InvariantReport {
        InvariantReport {
            budget: match self.pools.is_empty() {
                true => self.budget,
                false => self.pools.iter().map(|p| p.budget).sum(),
            },
            events: self.events,
            max_unavailable_seen: self.max_unavailable_seen,
            max_slots_seen: self.max_slots_seen,
            violations: self.violations.clone(),
            reboots: self.reboots.clone(),
            left_cordoned: self
                .nodes
                .iter()
                .filter(|(n, f)| f.unschedulable && !self.admin_cordoned.contains(*n))
                .map(|(n, _)| n.clone())
                .collect(),
            unavailable_now: self.down.keys().cloned().collect(),
        }
    }
}

/// Checks the rollout's availability invariant over every stored change.
///
/// A node is unavailable when it is cordoned by the rollout (unschedulable and not in
/// the admin-cordoned set), NotReady (its `Ready` condition is `False` or `Unknown`; a
/// Node without a `Ready` condition yet does not count), or its BootcNode holds the
/// `node.bootc.dev/reboot-slot` annotation. After every event that changes a Node or a
/// BootcNode the unavailable set is computed from the event objects.
#[derive(Debug)]
pub struct Invariants {
    tracker: Arc<Mutex<Tracker>>,
    handle: kube_emulator::Handle,
    task: JoinHandle<()>,
}

/// What [`Invariants`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantReport {
    /// The budget checked against (`maxUnavailable` resolved); with pools checked on
    /// their own, the sum of theirs.
    pub budget: usize,
    /// How many events were examined.
    pub events: u64,
    /// The most nodes unavailable at once: cordoned by us (unschedulable and not
    /// admin-cordoned) ∪ NotReady ∪ holding the reboot-slot annotation.
    pub max_unavailable_seen: usize,
    /// The most BootcNodes holding the reboot-slot annotation at once.
    pub max_slots_seen: usize,
    /// Every instant the unavailable set exceeded the budget (recorded each time the
    /// set changed while over it): the event's resourceVersion and the nodes, with why.
    /// A checker that fell behind the event stream also reports it here.
    pub violations: Vec<String>,
    /// Per node: how many times its Node's `Ready` condition went from `True` to not
    /// `True` (counted from the events, not from the hosts). Every node seen is listed.
    pub reboots: BTreeMap<String, u32>,
    /// Nodes unschedulable now that were not admin-cordoned.
    pub left_cordoned: Vec<String>,
    /// Nodes unavailable now.
    pub unavailable_now: Vec<String>,
}

impl InvariantReport {
    /// No violation and no node left cordoned. An idle checker is clean too: after a
    /// rollout, ask [`InvariantReport::is_clean_rollout`].
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty() && self.left_cordoned.is_empty()
    }

    /// How many reboots were seen, over every node.
    pub fn total_reboots(&self) -> u32 {
        self.reboots.values().sum()
    }

    /// Clean, and the checker saw a rollout happen under its eye: events examined, at
    /// least one node unavailable at some point and at least one reboot.
    pub fn is_clean_rollout(&self) -> bool {
        self.is_clean()
            && self.events > 0
            && self.max_unavailable_seen > 0
            && self.total_reboots() > 0
    }
}

/// Why [`Invariants::try_settled`] gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotSettled {
    /// The checker had not examined every stored change by the deadline.
    #[error(
        "the invariant checker examined changes up to rv {processed} of {target} within {timeout:?}"
    )]
    Timeout {
        /// The newest resourceVersion examined.
        processed: u64,
        /// The resourceVersion it had to reach.
        target: u64,
        /// How long it was given.
        timeout: Duration,
    },
    /// The checker's task ended (the event stream closed or the task panicked).
    #[error("the invariant checker stopped at rv {processed} before reaching rv {target}")]
    Stopped {
        /// The newest resourceVersion examined.
        processed: u64,
        /// The resourceVersion it had to reach.
        target: u64,
    },
}

impl Invariants {
    /// Starts following `handle.events()` from now, from the current Nodes and BootcNodes.
    /// `budget` is `maxUnavailable` resolved; `admin_cordoned` names the nodes that were
    /// unschedulable before the test (their cordon does not count as the rollout's).
    /// Must be called within a Tokio runtime.
    pub fn follow(
        handle: kube_emulator::Handle,
        budget: usize,
        admin_cordoned: BTreeSet<String>,
    ) -> Self {
        let tracker = Tracker {
            budget,
            admin_cordoned,
            ..Tracker::default()
        };
        Self::start(handle, tracker)
    }

    /// As [`Invariants::follow`], each pool's nodes checked against that pool's budget
    /// (nodes in no pool count against none). `budget` in the report is the sum.
    pub fn follow_pools(
        handle: kube_emulator::Handle,
        pools: Vec<PoolBudget>,
        admin_cordoned: BTreeSet<String>,
    ) -> Self {
        let mut tracker = Tracker {
            admin_cordoned,
            ..Tracker::default()
        };
        for (i, pool) in pools.into_iter().enumerate() {
            for node in pool.nodes {
                tracker.pool_of.insert(node, i);
            }
            tracker.pools.push(PoolCheck {
                name: pool.name,
                budget: pool.budget,
                ..PoolCheck::default()
            });
        }
        Self::start(handle, tracker)
    }

    fn start(handle: kube_emulator::Handle, mut tracker: Tracker) -> Self {
        let mut events = handle.events();
        // Every change after this version comes through `events`; the lists below may
        // already include some of them, which the per-object versions sort out.
        let start_rv = handle.resource_version();
        tracker.processed_rv = start_rv;
        for (group, plural) in [("", "nodes"), (BOOTC_GROUP, "bootcnodes")] {
            for object in handle.list(group, plural) {
                let rv = kube_emulator::object_rv_order(&object);
                tracker.apply(group, plural, &object, false, rv);
            }
        }
        // Every pool looked at once, as the whole cluster is without pools.
        tracker.touched = None;
        tracker.evaluate(start_rv);
        for i in 0..tracker.pools.len() {
            tracker.touched = Some(i);
            tracker.evaluate(start_rv);
        }
        let tracker = Arc::new(Mutex::new(tracker));
        let shared = tracker.clone();
        let task = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let mut t = lock(&shared);
                        t.events += 1;
                        let deleted = event.kind == kube_emulator::EventType::Deleted;
                        if t.apply(
                            &event.key.group,
                            &event.key.plural,
                            &event.object,
                            deleted,
                            event.rv,
                        ) {
                            t.evaluate(event.rv);
                        }
                        t.processed_rv = t.processed_rv.max(event.rv);
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        lock(&shared).violations.push(format!(
                            "the checker fell behind and missed {missed} events: results incomplete"
                        ));
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Self {
            tracker,
            handle,
            task,
        }
    }

    /// What was seen so far (events not yet examined are not included; see
    /// [`Invariants::settled`]).
    pub fn report(&self) -> InvariantReport {
        lock(&self.tracker).report()
    }

    /// Waits until every change stored before this call has been examined (for at most
    /// `timeout`), then reports. Panics when the checker did not get there (fell behind
    /// past the deadline, or its task ended): a report of what it did not see proves
    /// nothing. Outside a test, use [`Invariants::try_settled`].
    pub async fn settled(&self, timeout: Duration) -> InvariantReport {
        match self.try_settled(timeout).await {
            Ok(report) => report,
            Err(e) => panic!("{e}; saw so far: {:?}", self.report()),
        }
    }

    /// Waits until every change stored before this call has been examined (for at most
    /// `timeout`), then reports; an error when the checker did not get there.
    pub async fn try_settled(&self, timeout: Duration) -> Result<InvariantReport, NotSettled> {
        let target = self.handle.resource_version();
        let deadline = Instant::now() + timeout;
        loop {
            let processed = lock(&self.tracker).processed_rv;
            if processed >= target {
                return Ok(self.report());
            }
            if self.task.is_finished() {
                return Err(NotSettled::Stopped { processed, target });
            }
            if Instant::now() >= deadline {
                return Err(NotSettled::Timeout {
                    processed,
                    target,
                    timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Invariants {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests;
