//! Follows the emulator's stream of stored changes and keeps, for every node, its rollout
//! state as the objects show it, the number of unavailable nodes, and whether the rollout
//! is complete (with the instant it became so).
//!
//! A node's state, from its BootcNode and Node:
//! - `on target`: booted on the target digest, no reboot slot, schedulable and Ready;
//! - `rebooting`: holds the reboot slot, or is cordoned or NotReady (drain, reboot, the
//!   wait for Ready);
//! - `staged`: the target is staged (waiting for a slot);
//! - `staging`: told to move to the target, not staged yet;
//! - `pending`: anything else (no BootcNode yet, or told nothing yet).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub mod cycles;

/// The node states of the picture, bottom to top.
pub const STATES: [&str; 5] = ["on target", "rebooting", "staged", "staging", "pending"];

const ON_TARGET: usize = 0;
const REBOOTING: usize = 1;
const STAGED: usize = 2;
const STAGING: usize = 3;
const PENDING: usize = 4;

const GROUP: &str = "node.bootc.dev";

#[derive(Debug, Clone, Copy)]
struct TrackedNode {
    rv: u64,
    unschedulable: bool,
    ready: bool,
}

#[derive(Debug, Clone, Copy)]
struct BootcFacts {
    rv: u64,
    desired: bool,
    staged: bool,
    booted: bool,
    slot: bool,
    /// `desiredImageState: Booted`.
    approved: bool,
}

/// Counts at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes per state, in the order of [`STATES`].
    pub states: [usize; 5],
    /// Nodes cordoned, NotReady or holding a reboot slot.
    pub unavailable: usize,
}

/// One pool followed: its size, its status as last seen, and when (at which version of
/// the store) it was first seen complete and first granted a reboot slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolProgress {
    /// The pool's name.
    pub name: String,
    /// Its node count.
    pub expected: usize,
    rv: u64,
    done: bool,
    /// The resourceVersion of the status that first said the pool was done.
    pub done_rv: Option<u64>,
    /// The resourceVersion of the first BootcNode of the pool seen holding a slot.
    pub first_grant_rv: Option<u64>,
}

#[derive(Debug)]
struct TrackState {
    target_digest: String,
    pools: Vec<PoolProgress>,
    /// Each pool's index in `pools`, by name.
    pool_index: HashMap<String, usize>,
    /// Each node's pool (an index into `pools`).
    pool_of: HashMap<String, usize>,
    /// The nodes of every pool.
    expected: usize,
    nodes: HashMap<String, TrackedNode>,
    bootc: HashMap<String, BootcFacts>,
    /// Per node: its state and whether it is unavailable, as counted.
    counted: HashMap<String, (usize, bool)>,
    counts: Counts,
    done_at: Option<Instant>,
    lagged: u64,
    /// Reboot slots held now, and every change of that number.
    slots: SlotLog,
    /// Where each slot's time went.
    cycles: cycles::SlotCycles,
}

fn name_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl TrackState {
    fn recount(&mut self, name: &str) {
        let node = self.nodes.get(name).copied();
        let bootc = self.bootc.get(name).copied();
        let now = node.map(|n| {
            let b = bootc.unwrap_or(BootcFacts {
                rv: 0,
                desired: false,
                staged: false,
                booted: false,
                slot: false,
                approved: false,
            });
            let unavailable = n.unschedulable || !n.ready || b.slot;
            let state = if unavailable {
                REBOOTING
            } else if b.booted {
                ON_TARGET
            } else if b.staged {
                STAGED
            } else if b.desired {
                STAGING
            } else {
                PENDING
            };
            (state, unavailable)
        });
        if let Some((state, unavailable)) = self.counted.remove(name) {
            self.counts.states[state] -= 1;
            self.counts.unavailable -= usize::from(unavailable);
        }
        if let Some((state, unavailable)) = now {
            self.counts.states[state] += 1;
            self.counts.unavailable += usize::from(unavailable);
            self.counted.insert(name.to_owned(), (state, unavailable));
        }
    }

    fn apply(&mut self, group: &str, plural: &str, object: &Value, deleted: bool, rv: u64) {
        let Some(name) = name_of(object) else {
            return;
        };
        let applied = match (group, plural) {
            ("", "nodes") => self.apply_node(name, object, deleted, rv),
            (GROUP, "bootcnodes") => self.apply_bootc_node(name, object, deleted, rv),
            (GROUP, "bootcnodepools") => self.apply_pool(&name, object, deleted, rv),
            _ => false,
        };
        if applied && self.done_at.is_none() && self.complete() {
            self.done_at = Some(Instant::now());
        }
    }

    /// Every node on target, none unavailable, and every pool's status saying so.
    fn complete(&self) -> bool {
        self.pools.iter().all(|p| p.done)
            && self.counts.states[ON_TARGET] == self.expected
            && self.counts.unavailable == 0
    }

    /// A Node's readiness and cordon; false when `rv` is not newer than what is known.
    fn apply_node(&mut self, name: String, object: &Value, deleted: bool, rv: u64) -> bool {
        if self.nodes.get(&name).is_some_and(|k| k.rv >= rv) {
            return false;
        }
        if deleted {
            self.nodes.remove(&name);
        } else {
            let ready = object
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            let unschedulable = object
                .pointer("/spec/unschedulable")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            self.nodes.insert(
                name.clone(),
                TrackedNode {
                    rv,
                    unschedulable,
                    ready,
                },
            );
        }
        self.recount(&name);
        self.observe_cycle(&name);
        true
    }

    /// A BootcNode's progress towards the target and its slot; false when `rv` is not
    /// newer than what is known.
    fn apply_bootc_node(&mut self, name: String, object: &Value, deleted: bool, rv: u64) -> bool {
        if self.bootc.get(&name).is_some_and(|k| k.rv >= rv) {
            return false;
        }
        let facts = (!deleted).then(|| self.facts(object, rv));
        let before = match facts {
            Some(facts) => self.bootc.insert(name.clone(), facts),
            None => self.bootc.remove(&name),
        };
        let (had, has) = (
            before.is_some_and(|b| b.slot),
            facts.is_some_and(|f| f.slot),
        );
        self.slots.change(had, has, Instant::now());
        if !had
            && has
            && let Some(&i) = self.pool_of.get(&name)
        {
            self.pools[i].first_grant_rv.get_or_insert(rv);
        }
        self.recount(&name);
        self.observe_cycle(&name);
        true
    }

    /// Node `name`'s slot steps as its objects show them now.
    fn observe_cycle(&mut self, name: &str) {
        let (Some(node), Some(bootc)) = (self.nodes.get(name), self.bootc.get(name)) else {
            return;
        };
        let seen = cycles::Seen {
            slot: bootc.slot,
            cordoned: node.unschedulable,
            approved: bootc.approved,
            ready: node.ready,
            booted: bootc.booted,
        };
        self.cycles.observe(name, seen, Instant::now());
    }

    /// What a BootcNode at `rv` shows of its progress towards the target and its slot.
    fn facts(&self, object: &Value, rv: u64) -> BootcFacts {
        let target = self.target_digest.as_str();
        let digest = |path: &str| {
            object
                .pointer(path)
                .and_then(Value::as_str)
                .is_some_and(|d| d == target)
        };
        BootcFacts {
            rv,
            desired: object
                .pointer("/spec/desiredImage")
                .and_then(Value::as_str)
                .is_some_and(|i| i.ends_with(target)),
            staged: digest("/status/staged/imageDigest"),
            booted: digest("/status/booted/imageDigest"),
            slot: object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION)),
            approved: object
                .pointer("/spec/desiredImageState")
                .and_then(Value::as_str)
                .is_some_and(|s| s == "Booted"),
        }
    }

    /// Whether a pool's status says its rollout is complete; false for a pool not
    /// followed or an `rv` not newer than what is known.
    fn apply_pool(&mut self, name: &str, object: &Value, deleted: bool, rv: u64) -> bool {
        let Some(&i) = self.pool_index.get(name) else {
            return false;
        };
        let pool = &mut self.pools[i];
        if pool.rv >= rv {
            return false;
        }
        pool.rv = rv;
        let status = object.get("status");
        let count = |field: &str| {
            status
                .and_then(|s| s.get(field))
                .and_then(Value::as_u64)
                .unwrap_or(0) as usize
        };
        let all_updated = status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "UpToDate"))
            .is_some_and(|c| c["reason"] == "AllUpdated");
        pool.done = !deleted
            && all_updated
            && count("updatedCount") == pool.expected
            && count("nodeCount") == pool.expected;
        if pool.done {
            pool.done_rv.get_or_insert(rv);
        }
        true
    }

    fn resync(&mut self, handle: &kube_emulator::Handle) {
        for (group, plural) in [
            ("", "nodes"),
            (GROUP, "bootcnodes"),
            (GROUP, "bootcnodepools"),
        ] {
            for object in handle.list(group, plural) {
                let rv = kube_emulator::object_rv_order(&object);
                self.apply(group, plural, &object, false, rv);
            }
        }
    }
}

/// The reboot slots over time: how many are held, after each grant or release.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlotLog {
    held: usize,
    /// (when, slots held from then on, whether a slot was granted then).
    changes: Vec<(Instant, usize, bool)>,
}

impl SlotLog {
    /// Records a BootcNode's slot going from `had` to `has` at `at`.
    fn change(&mut self, had: bool, has: bool, at: Instant) {
        match (had, has) {
            (false, true) => self.held += 1,
            (true, false) => self.held = self.held.saturating_sub(1),
            (false, false) | (true, true) => return,
        }
        self.changes.push((at, self.held, has));
    }

    /// When the first slot was granted.
    pub fn first_grant(&self) -> Option<Instant> {
        self.changes.iter().find(|c| c.2).map(|c| c.0)
    }

    /// When each slot was granted, in order.
    pub fn grants(&self) -> Vec<Instant> {
        self.changes.iter().filter(|c| c.2).map(|c| c.0).collect()
    }

    /// The time-weighted mean of the slots held from the first grant to the last one,
    /// over `budget`; with every grant at one instant, the slots held just after it.
    pub fn utilisation(&self, budget: usize) -> Option<f64> {
        let first = self.changes.iter().position(|c| c.2)?;
        let last = self.changes.iter().rposition(|c| c.2)?;
        let (start, end) = (self.changes[first].0, self.changes[last].0);
        let span = (end - start).as_secs_f64();
        let budget = budget.max(1) as f64;
        if span <= 0.0 {
            return Some(self.changes[last].1 as f64 / budget);
        }
        let busy: f64 = self.changes[first..=last]
            .windows(2)
            .map(|w| (w[1].0 - w[0].0).as_secs_f64() * w[0].1 as f64)
            .sum();
        Some(busy / span / budget)
    }
}

/// The follower (its task ends when dropped).
#[derive(Debug)]
pub struct RolloutTracker {
    inner: Arc<Mutex<TrackState>>,
    task: JoinHandle<()>,
}

fn lock(inner: &Mutex<TrackState>) -> MutexGuard<'_, TrackState> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RolloutTracker {
    /// Starts following `handle`'s changes for the nodes of `pools` (each a pool's name
    /// and its nodes) moving to `target_digest`.
    pub fn follow(
        handle: kube_emulator::Handle,
        pools: &[(&str, &[String])],
        target_digest: &str,
    ) -> Self {
        let mut events = handle.events();
        let mut inner = TrackState {
            target_digest: target_digest.to_owned(),
            pools: pools
                .iter()
                .map(|(name, nodes)| PoolProgress {
                    name: (*name).to_owned(),
                    expected: nodes.len(),
                    ..PoolProgress::default()
                })
                .collect(),
            pool_index: pools
                .iter()
                .enumerate()
                .map(|(i, (name, _))| ((*name).to_owned(), i))
                .collect(),
            pool_of: pools
                .iter()
                .enumerate()
                .flat_map(|(i, (_, nodes))| nodes.iter().map(move |n| (n.clone(), i)))
                .collect(),
            expected: pools.iter().map(|(_, nodes)| nodes.len()).sum(),
            nodes: HashMap::new(),
            bootc: HashMap::new(),
            counted: HashMap::new(),
            counts: Counts::default(),
            done_at: None,
            lagged: 0,
            slots: SlotLog::default(),
            cycles: cycles::SlotCycles::default(),
        };
        inner.resync(&handle);
        let inner = Arc::new(Mutex::new(inner));
        let shared = inner.clone();
        let task = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let deleted = event.kind == kube_emulator::EventType::Deleted;
                        lock(&shared).apply(
                            &event.key.group,
                            &event.key.plural,
                            &event.object,
                            deleted,
                            event.rv,
                        );
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        let mut inner = lock(&shared);
                        inner.lagged += missed;
                        // The lists are at least as new as anything missed.
                        inner.resync(&handle);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        RolloutTracker { inner, task }
    }

    /// The counts now.
    pub fn counts(&self) -> Counts {
        lock(&self.inner).counts
    }

    /// When the rollout was first seen complete: every node on target, none
    /// unavailable, and the pool's status saying so (`UpToDate=AllUpdated`,
    /// `updatedCount` = `nodeCount` = the node count).
    pub fn done_at(&self) -> Option<Instant> {
        lock(&self.inner).done_at
    }

    /// Forgets a completion seen so far, after a disturbance that reopens the rollout
    /// (the pool deleted and created again): from now on it is complete once seen so
    /// again, which may be at once.
    pub fn rearm(&self) {
        let mut inner = lock(&self.inner);
        inner.done_at = None;
        if inner.complete() {
            inner.done_at = Some(Instant::now());
        }
    }

    /// Every change of the number of reboot slots held so far.
    pub fn slot_log(&self) -> SlotLog {
        lock(&self.inner).slots.clone()
    }

    /// Where the time of the slots released so far went, phase by phase.
    pub fn slot_phases(&self) -> Vec<cycles::Phase> {
        lock(&self.inner).cycles.phases()
    }

    /// Each pool's progress so far.
    pub fn pools(&self) -> Vec<PoolProgress> {
        lock(&self.inner).pools.clone()
    }

    /// Events missed because the follower fell behind (made up for by listing).
    pub fn lagged(&self) -> u64 {
        lock(&self.inner).lagged
    }
}

impl Drop for RolloutTracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use super::*;

    #[test]
    fn slot_utilisation_is_time_weighted_between_the_first_and_last_grant() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut log = SlotLog::default();
        assert_eq!(log.utilisation(2), None);
        // One slot 0–100 ms, two 100–200 ms, one 200–300 ms; the last grant at 300 ms.
        log.change(false, true, at(0));
        log.change(false, true, at(100));
        log.change(true, true, at(150));
        log.change(true, false, at(200));
        log.change(false, true, at(300));
        log.change(true, false, at(400));
        assert_eq!(log.first_grant(), Some(at(0)));
        let u = log.utilisation(2).unwrap();
        assert!(
            (u - (100.0 + 200.0 + 100.0) / 300.0 / 2.0).abs() < 1e-9,
            "{u}"
        );
        // Every grant at one instant: the slots held just after it.
        let mut once = SlotLog::default();
        once.change(false, true, at(0));
        assert_eq!(once.utilisation(4), Some(0.25));
    }
}
