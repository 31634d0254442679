//! Members whose part of the plan is settled, kept between plans. Between two plans of a
//! rollout most members stay as they were: staged and waiting for a slot, or done. Each
//! such member costs the member pass the same work every time (its report read, its
//! spec compared with the one it should have, its state found) for the same answer.
//!
//! A member is settled when the pass plans nothing for it and takes nothing from the
//! pool's shared places: it has its Node (labelled) and its BootcNode (not being
//! deleted, holding no slot, asking for the target, its spec what it should be, its
//! `status.held` as its labels say and no `status.drainBlocked` to clear). What
//! the pass then found for it (its [`Outcome`]) depends on its two objects, whether its
//! Node is Ready, and the pool's target, spec and pull Secret hash, and on nothing else
//! (not the time, not the other members); whether another pool claims it is asked
//! again at every plan. The outcome is kept with the objects it was found for,
//! shared with the caches rather than copied, and used again while the member's view
//! still holds those very objects (the caches replace an object when it changes, they
//! never change one in place) and the pool's target, spec and hash are the same.
//! Anything else is planned as before, and kept again if it is settled.
//!
//! Two more answers are kept the same way, for every node of the snapshot, settled or
//! not: what was read of its Node's labels (whether the pool's selector matches them,
//! whether an admin holds the node) and of its BootcNode's owner (whether it is the
//! pool), kept with both objects, the pool's name and its selector; and its
//! booted report, gathered with the others by digest for the deploy history
//! ([`Observed`]), kept with its BootcNode and Node, so that a node whose objects
//! changed has its old report taken back and its new one added.
//!
//! A settled member also leaves the passes after the member pass nothing to do: its
//! BootcNode's `status.held` and `status.drainBlocked` need no write (an outcome is kept
//! only then), and whether its agent reports `Drifted` is kept with the outcome. Those
//! passes read only the members planned in full.
//!
//! So the plan stays one function of its snapshot: with what is kept or without it, it
//! is the same plan; a test holds the two together over random changes.

use std::sync::{Arc, Mutex, PoisonError};

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePoolSpec;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::history::{BootedReport, Observed};

use super::actions::NodeState;
use super::membership::{Class, Classes};
use super::states::{Order, States};
use super::target::Target;
use super::world::{NodeView, PoolSelectors, PoolView};

/// What a settled member contributes to the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    /// Its state.
    pub state: NodeState,
    /// It counts among the members pulling the target (`maxStaging`).
    pub staging: bool,
    /// Staged and Ready: a slot candidate, unless another pool claims it.
    pub candidate: bool,
    /// It runs the target and reports Degraded.
    pub on_target_degraded: bool,
    /// Why it is degraded, and the message: its reason and message in the status.
    pub degraded: Option<Box<(String, String)>>,
}

/// The outcomes kept for a pool's settled members, shared by the snapshots of its plans
/// (the reconcile shell keeps one per pool). Empty by default: then every member is
/// planned in full, and those settled are kept.
#[derive(Debug, Clone, Default)]
pub struct Settled {
    kept: Arc<Mutex<Kept>>,
}

impl Settled {
    /// How many members' outcomes are kept.
    pub fn len(&self) -> usize {
        self.lock().entries.iter().flatten().count()
    }

    /// None is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many members' outcomes plans have used again, in all.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// How many Nodes' labels are kept as read.
    pub fn labels_len(&self) -> usize {
        self.lock().labels.nodes.iter().flatten().count()
    }

    /// How many members' booted reports are kept.
    pub fn booted_len(&self) -> usize {
        self.lock().booted.nodes.iter().flatten().count()
    }

    /// How many members' booted reports plans took as gathered before, in all.
    pub fn booted_used(&self) -> u64 {
        self.lock().booted.used
    }

    /// How many times plans took what an earlier plan read of a Node's labels, in all.
    pub fn labels_used(&self) -> u64 {
        self.lock().labels.used
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the outcomes were found against.
#[derive(Debug, PartialEq)]
struct Against {
    target: Target,
    spec: BootcNodePoolSpec,
    hash: Option<String>,
}

/// The kept outcomes, by member name, and what they were found against; what was read
/// of the Nodes' labels; the booted reports.
#[derive(Debug, Default)]
pub(super) struct Kept {
    against: Option<Against>,
    /// One per member of the last plan, in its order (by name): `None` for a member that
    /// was not settled.
    entries: Vec<Option<Entry>>,
    /// How many members' outcomes were used again, in all.
    used: u64,
    /// What was read of each node's labels.
    labels: Labels,
    /// What the members report as booted.
    booted: Booted,
    /// The last plan's members' names, when they were in strict name order: what the
    /// member pass records their states in ([`States::follow`]).
    ///
    /// [`States::follow`]: super::states::States::follow
    order: Arc<Order>,
    /// The views of the last plan's snapshot, and which of them changed since the plan
    /// before: what the answers kept per view read again.
    seen: Seen,
    /// The last plan's members, and which of them changed since the plan before.
    members: Members,
    /// The snapshot the entries were kept at ([`Seen::serial`]).
    entries_at: u64,
    /// The snapshot the order was kept at.
    order_at: u64,
    /// The last plan's states and their fingerprint.
    recorded: Recorded,
}

/// The states of the last plan that recorded them (their names shared with its views),
/// and their fingerprint; whether the names were those of the plan before it.
#[derive(Debug, Default)]
struct Recorded {
    states: Vec<(Arc<str>, NodeState)>,
    fingerprint: Option<u64>,
    /// The snapshot they were recorded in ([`Seen::serial`]), and the one of the states
    /// they were compared with.
    at: u64,
    before: u64,
    /// The names are those recorded in `before`.
    same_names: bool,
}

/// The members of the last plan, by their places in its views, and which of them
/// changed since the plan before (when the members were the same then).
#[derive(Debug, Default)]
struct Members {
    /// Each member's place in the views.
    positions: Arc<Vec<usize>>,
    /// The snapshot they were members of ([`Seen::serial`]).
    at: u64,
    /// The snapshot of the plan before.
    from: u64,
    /// The members (by their places among the members) whose views changed since
    /// `from`; `None` when members joined or left since, or that is not known.
    changed: Option<Vec<usize>>,
}

/// The views of the last plan's snapshot, by the addresses of their names and objects
/// (held, so that no other object can take an address while it is compared), and which
/// of them changed since the snapshot before. Each answer kept per view notes the
/// snapshot it was kept at ([`Seen::serial`]): when that is the one before, only the
/// views that changed are read again; when it is older, or views joined or left since,
/// every view is compared as before.
#[derive(Debug, Default)]
struct Seen {
    /// The snapshots seen so far.
    serial: u64,
    views: Vec<SeenView>,
    /// The views that differ from the snapshot before's; `None` when views joined or
    /// left (or there was none before).
    changed: Option<Vec<usize>>,
}

/// One view as seen: its name, its objects and whether its Node was Ready.
#[derive(Debug)]
struct SeenView {
    name: Arc<str>,
    node: Option<Arc<Node>>,
    ready: bool,
    bootc: Option<Arc<BootcNode>>,
}

impl SeenView {
    fn of(view: &NodeView) -> Self {
        SeenView {
            name: Arc::clone(&view.name),
            node: view.node.as_ref().map(|n| Arc::clone(&n.node)),
            ready: view.node.as_ref().is_some_and(|n| n.ready),
            bootc: view.bootc.as_ref().map(|b| Arc::clone(b.object())),
        }
    }

    /// `view` holds this very name and these very objects, and is as Ready.
    #[inline]
    fn is(&self, view: &NodeView) -> bool {
        let node = match (&self.node, &view.node) {
            (Some(kept), Some(info)) => Arc::ptr_eq(kept, &info.node) && self.ready == info.ready,
            (None, None) => true,
            _ => false,
        };
        let bootc = match (&self.bootc, &view.bootc) {
            (Some(kept), Some(b)) => Arc::ptr_eq(kept, b.object()),
            (None, None) => true,
            _ => false,
        };
        node && bootc && Arc::ptr_eq(&self.name, &view.name)
    }
}

impl Members {
    /// The members (by their places among them) whose views changed since the
    /// snapshot numbered `at`: none when it is this plan's, those [`Kept::members`]
    /// found when it is the plan before's; `None` otherwise.
    fn since(&self, at: u64) -> Option<&[usize]> {
        if at == self.at {
            Some(&[])
        } else if at == self.from {
            self.changed.as_deref()
        } else {
            None
        }
    }
}

impl Seen {
    /// Takes `views` as the snapshot seen, noting which views changed.
    fn see(&mut self, views: &[NodeView]) {
        self.serial += 1;
        if self.views.len() != views.len() {
            self.views = views.iter().map(SeenView::of).collect();
            self.changed = None;
            return;
        }
        let mut changed = Vec::new();
        for (i, (seen, view)) in self.views.iter_mut().zip(views).enumerate() {
            if !seen.is(view) {
                *seen = SeenView::of(view);
                changed.push(i);
            }
        }
        self.changed = Some(changed);
    }

    /// The views that changed since the snapshot numbered `at`: none when it is this
    /// one, those [`Seen::see`] found when it is the one before; `None` otherwise.
    fn since(&self, at: u64) -> Option<&[usize]> {
        if at == self.serial {
            Some(&[])
        } else if at.checked_add(1) == Some(self.serial) {
            self.changed.as_deref()
        } else {
            None
        }
    }
}

/// What each node of the last plan's snapshot reported as booted, when it counted for
/// the history (in the snapshot's order), kept with the objects it was read from; and
/// all of those reports gathered by digest. A node whose objects are the same reports the
/// same; one whose objects changed has its old report taken back and its new one added.
#[derive(Debug, Default)]
struct Booted {
    /// The target digest the reports were gathered against.
    target: Option<String>,
    nodes: Vec<Option<Objects>>,
    /// How many nodes' reports are kept.
    filled: usize,
    observed: Observed,
    /// The snapshot the reports were gathered in ([`Seen::serial`]).
    at: u64,
    /// How many nodes' reports were taken as they were, in all.
    used: u64,
}

impl Observed {
    /// The report of a node whose objects were `slot`'s and are `now`'s (when it
    /// counts) gathered: whether they are the same (and so is its report), or its old
    /// report taken back and its new one added.
    fn gather(
        &mut self,
        slot: &mut Option<Objects>,
        now: Option<(&Arc<BootcNode>, Option<&Arc<Node>>)>,
        digest: Option<&str>,
    ) -> bool {
        let same = match (&*slot, now) {
            (None, None) => true,
            (Some((b, n)), Some((bootc, node))) => {
                Arc::ptr_eq(b, bootc) && n.as_ref().map(Arc::as_ptr) == node.map(Arc::as_ptr)
            }
            _ => false,
        };
        if same {
            return now.is_some();
        }
        if let Some(report) = slot.as_ref().and_then(|(b, n)| report(b, n.as_deref())) {
            self.remove(&report, digest);
        }
        if let Some(report) = now.and_then(|(b, n)| report(b, n.map(|n| &**n))) {
            self.add(&report, digest);
        }
        *slot = now.map(|(b, n)| (Arc::clone(b), n.map(Arc::clone)));
        false
    }
}

/// What a plan read of the labels of each Node of the last plan's snapshot (in its
/// order, by name) and of its BootcNode's owner, kept with the objects it was read from:
/// labels and owner change only with their object, so what was read holds while the
/// snapshot holds those very objects and the pool (its name and selector) is the same.
#[derive(Debug, Default)]
struct Labels {
    pool: String,
    selector: Option<LabelSelector>,
    nodes: Vec<Option<LabelsKept>>,
    /// The answers, one per node (a default one where nothing is kept).
    answers: Vec<LabelsRead>,
    /// How many nodes have an answer kept.
    filled: usize,
    /// What each view was found to be to the pool ([`Class`]), and what it was found
    /// against besides the answers: whether the spec was invalid, and the pools'
    /// selectors.
    classes: Classes,
    classes_against: Option<(bool, PoolSelectors)>,
    /// The snapshot they were read in ([`Seen::serial`]).
    at: u64,
    /// How many answers were used again, in all.
    used: u64,
}

/// What [`Kept::membership`] gives membership for the views of a plan.
pub(super) struct MembershipRead<'k> {
    /// What each view's labels and owner say.
    pub labels: &'k [LabelsRead],
    /// What each view was found to be, to be used where it did not change.
    pub classes: &'k mut Classes,
    /// The views that changed since those were found (ascending); `None`: every view
    /// is to be found again.
    pub changed: Option<&'k [usize]>,
}

/// One node's answer, with the objects it was read from.
#[derive(Debug)]
struct LabelsKept {
    node: Arc<Node>,
    bootc: Option<Arc<BootcNode>>,
    read: LabelsRead,
}

/// What a plan reads of a Node's labels, and of its BootcNode's owner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct LabelsRead {
    /// The pool's selector matches them.
    pub selected: bool,
    /// An admin holds the node ([`super::world::NodeInfo::held`]).
    pub held: bool,
    /// Its BootcNode's owner is the pool.
    pub owned: bool,
}

/// One settled member: the objects its outcome was found for, and the outcome. Its name
/// is its BootcNode's (the member's, as the controller names them; where it is not, the
/// entry is only not found again).
#[derive(Debug)]
pub(super) struct Entry {
    node: Arc<Node>,
    bootc: Arc<BootcNode>,
    ready: bool,
    outcome: Outcome,
    /// Its agent reports `Drifted=True`, for the status's count.
    drifted: bool,
}

impl Entry {
    fn name(&self) -> &str {
        self.bootc.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether `view` holds the very objects this was found for.
    fn of(&self, view: &NodeView) -> bool {
        let (Some(info), Some(bootc)) = (&view.node, &view.bootc) else {
            return false;
        };
        Arc::ptr_eq(&self.bootc, bootc.object())
            && Arc::ptr_eq(&self.node, &info.node)
            && self.ready == info.ready
    }

    /// The outcome kept.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// Whether its agent reports `Drifted=True`.
    pub fn drifted(&self) -> bool {
        self.drifted
    }
}

impl Kept {
    /// Takes `views` as the snapshot this plan reads, noting which views changed since
    /// the plan before's.
    pub fn see(&mut self, views: &[NodeView]) {
        self.seen.see(views);
    }

    /// Takes the members this plan found, by their `positions` in its views: the
    /// entries and the order look again only at those that changed, when the members
    /// are the last plan's.
    pub fn members(&mut self, positions: &Arc<Vec<usize>>) {
        let m = &mut self.members;
        let since = self.seen.since(m.at);
        m.from = m.at;
        m.at = self.seen.serial;
        m.changed = match since {
            Some(changed) if Arc::ptr_eq(&m.positions, positions) || m.positions == *positions => {
                Some(
                    changed
                        .iter()
                        .filter_map(|v| positions.binary_search(v).ok())
                        .collect(),
                )
            }
            _ => {
                m.positions = Arc::clone(positions);
                None
            }
        };
    }

    /// How many kept outcomes the member pass used.
    pub fn replayed(&mut self, used: usize) {
        self.used += used as u64;
    }

    /// The entries kept for `members` (sorted by name), one per member in their order,
    /// `None` where nothing is kept for its objects, to be used and filled in place for
    /// the next plan. Every entry is forgotten when the target, the spec or the hash
    /// changed since they were kept, and those of names no longer members.
    pub fn for_members(
        &mut self,
        members: &[&NodeView],
        (target, spec, hash): (&Target, &BootcNodePoolSpec, Option<&str>),
    ) -> &mut [Option<Entry>] {
        let same = self
            .against
            .as_ref()
            .is_some_and(|a| a.target == *target && a.spec == *spec && a.hash.as_deref() == hash);
        if !same {
            self.against = Some(Against {
                target: target.clone(),
                spec: spec.clone(),
                hash: hash.map(str::to_owned),
            });
            self.entries.clear();
        }
        let since = self.members.since(self.entries_at);
        self.entries_at = self.members.at;
        match since {
            // The members of the plan before, kept against the same: only the entries
            // of members whose views changed may be of other objects.
            Some(changed) if same && self.entries.len() == members.len() => {
                for &i in changed {
                    if self.entries[i].as_ref().is_some_and(|e| !e.of(members[i])) {
                        self.entries[i] = None;
                    }
                }
            }
            _ => {
                if self.entries.len() != members.len() {
                    // Members joined or left (or nothing is kept): the entries are found
                    // by name.
                    let old = std::mem::take(&mut self.entries);
                    self.entries = by_name(old, members.iter().map(|v| &*v.name), Entry::name);
                }
                // An entry whose member's objects changed is forgotten.
                for (entry, view) in self.entries.iter_mut().zip(members) {
                    if entry.as_ref().is_some_and(|e| !e.of(view)) {
                        *entry = None;
                    }
                }
            }
        }
        &mut self.entries
    }

    /// The order of `members`' names, when they are in strict name order (compared only
    /// next to the names that changed since the last plan; see [`Order::update`]).
    pub fn order(&mut self, members: &[&NodeView]) -> Option<Arc<Order>> {
        let since = self.members.since(self.order_at);
        self.order_at = self.members.at;
        let order = Arc::make_mut(&mut self.order);
        let sorted = match since {
            // The members of the plan before, whose names were in order then.
            Some(changed) if order.len() == members.len() => {
                order.update_at(changed.iter().map(|&i| (i, &members[i].name)))
            }
            _ => order.update(members.iter().map(|v| &v.name)),
        };
        sorted.then(|| Arc::clone(&self.order))
    }

    /// What the labels of each of `views`' Nodes say (sorted by name; nothing without a
    /// Node), in their order: whether `pool`'s selector matches them, whether they hold
    /// the node; and whether its BootcNode is `pool`'s. What the plan before read of the
    /// same objects for the same pool and selector is used again; the others are read
    /// and kept. When the plan before read the snapshot before, only the views that
    /// changed since are looked at.
    ///
    /// With them, what each view was found to be to the pool in the plan before, to be
    /// used for the views that did not change, and found again and kept in place for
    /// the others; all are found again unless the plan before read the snapshot before
    /// with the same pools' `selectors` (this pool's included) and the spec as
    /// `invalid`.
    pub fn membership(
        &mut self,
        pool: &PoolView,
        selectors: &PoolSelectors,
        invalid: bool,
        views: &[NodeView],
    ) -> MembershipRead<'_> {
        let at = self.labels.at;
        let same_pool = self.labels(&pool.name, &pool.spec.node_selector, views);
        let since = self.seen.since(at);
        let kept = &mut self.labels;
        let same = same_pool
            && kept.classes_against.as_ref().is_some_and(|(was, kept)| {
                *was == invalid && (Arc::ptr_eq(kept, selectors) || **kept == **selectors)
            });
        if !same {
            kept.classes_against = Some((invalid, Arc::clone(selectors)));
        }
        let changed = since.filter(|_| same && kept.classes.of.len() == views.len());
        if changed.is_none() {
            kept.classes.of.clear();
            kept.classes.of.resize(views.len(), Class::Out);
        }
        MembershipRead {
            labels: &kept.answers,
            classes: &mut kept.classes,
            changed,
        }
    }

    /// The labels' answers of [`Kept::membership`] kept for `views`; whether those kept
    /// were for the same `pool` and `selector`.
    fn labels(&mut self, pool: &str, selector: &LabelSelector, views: &[NodeView]) -> bool {
        let kept = &mut self.labels;
        let same_pool = kept.selector.as_ref() == Some(selector) && kept.pool == pool;
        if !same_pool {
            kept.pool = pool.to_owned();
            kept.selector = Some(selector.clone());
            kept.nodes.clear();
            kept.answers.clear();
        }
        let since = self.seen.since(kept.at);
        kept.at = self.seen.serial;
        let read = |slot: &mut Option<LabelsKept>, view: &NodeView| {
            labels_read(slot, view, (pool, selector))
        };
        match since {
            Some(changed) if kept.nodes.len() == views.len() => {
                // Every other view holds the objects its answer was read from: those
                // with an answer kept use it again.
                let mut used = kept.filled;
                for &i in changed {
                    let slot = &mut kept.nodes[i];
                    let before = slot.is_some();
                    let (answer, again) = read(slot, &views[i]);
                    kept.answers[i] = answer;
                    used = used - usize::from(before) + usize::from(again);
                    kept.filled = kept.filled - usize::from(before) + usize::from(slot.is_some());
                }
                kept.used += used as u64;
            }
            _ => {
                if kept.nodes.len() != views.len() {
                    let old = std::mem::take(&mut kept.nodes);
                    let names = views.iter().map(|v| &*v.name);
                    kept.nodes = by_name(old, names, |k| {
                        k.node.metadata.name.as_deref().unwrap_or_default()
                    });
                }
                let mut used = 0;
                kept.answers.clear();
                for (slot, view) in kept.nodes.iter_mut().zip(views) {
                    let (answer, again) = read(slot, view);
                    kept.answers.push(answer);
                    used += u64::from(again);
                }
                kept.filled = kept.nodes.iter().flatten().count();
                kept.used += used;
            }
        }
        same_pool
    }

    /// The fingerprint of `states` ([`super::stall::fingerprint`]): the last plan's
    /// when they are its states (its names compared by address first), else found and
    /// kept with them.
    pub fn fingerprint(&mut self, states: &States) -> u64 {
        let r = &mut self.recorded;
        let mut same_names = r.states.len() == states.len();
        let mut same = same_names;
        for ((kept, was), (name, state)) in r.states.iter_mut().zip(states.entries()) {
            if !Arc::ptr_eq(kept, name) {
                // A name of a view read again: the same text at another address.
                same_names = **kept == **name;
                if !same_names {
                    break;
                }
                *kept = Arc::clone(name);
            }
            if was != state {
                *was = *state;
                same = false;
            }
        }
        if !same_names {
            r.states.clear();
            r.states.extend(states.entries().cloned());
        }
        (r.before, r.at, r.same_names) = (r.at, self.seen.serial, same_names);
        let fingerprint = match r.fingerprint {
            Some(kept) if same_names && same => kept,
            _ => super::stall::fingerprint(states),
        };
        r.fingerprint = Some(fingerprint);
        fingerprint
    }

    /// The booted reports of the `views` that have a state in `states`, gathered by
    /// digest against the target's `digest`: only the nodes whose objects changed since
    /// the plan before are read again. All of them are read again when the views are
    /// not as many as before, or the target changed. When the plan before read the
    /// snapshot before and recorded states for the very same names, only the views
    /// that changed since are looked at.
    pub fn booted(
        &mut self,
        digest: Option<&str>,
        views: &[NodeView],
        states: &States,
    ) -> &Observed {
        let kept = &mut self.booted;
        let since = self.seen.since(kept.at);
        let since_at = since.map(|_| kept.at);
        kept.at = self.seen.serial;
        let again = kept.target.as_deref() != digest || kept.nodes.len() != views.len();
        if again {
            kept.target = digest.map(str::to_owned);
            kept.observed = Observed::default();
            kept.nodes.clear();
            kept.nodes.resize_with(views.len(), || None);
        }
        // Whose state is recorded decides whose report counts: the same names as
        // when they were gathered, and views of the same names, count as before.
        let r = &self.recorded;
        let same_names = r.same_names && r.at == self.seen.serial && Some(r.before) == since_at;
        let mut states = states.in_order();
        let mut gather = |slot: &mut Option<Objects>, view: &NodeView| {
            let now = if states.get(&view.name).is_some() {
                objects(view)
            } else {
                None
            };
            kept.observed.gather(slot, now, digest)
        };
        match since {
            Some(changed) if same_names && !again => {
                let mut used = kept.filled;
                for &i in changed {
                    let slot = &mut kept.nodes[i];
                    let before = slot.is_some();
                    let again = gather(slot, &views[i]);
                    used = used - usize::from(before) + usize::from(again);
                    kept.filled = kept.filled - usize::from(before) + usize::from(slot.is_some());
                }
                kept.used += used as u64;
            }
            _ => {
                let mut used = 0;
                for (slot, view) in kept.nodes.iter_mut().zip(views) {
                    used += u64::from(gather(slot, view));
                }
                kept.filled = kept.nodes.iter().flatten().count();
                kept.used += used;
            }
        }
        &kept.observed
    }
}

/// What `view`'s Node's labels and BootcNode's owner say for `pool` (whose selector
/// [`Labels`] keeps), with whether the answer kept in `slot` was used again: it is
/// when `slot` holds `view`'s very objects; otherwise they are read, and kept there.
fn labels_read(
    slot: &mut Option<LabelsKept>,
    view: &NodeView,
    (pool, selector): (&str, &LabelSelector),
) -> (LabelsRead, bool) {
    let owned = || view.bootc.as_ref().and_then(|b| b.owner.as_deref()) == Some(pool);
    let Some(info) = &view.node else {
        *slot = None;
        let read = LabelsRead {
            owned: owned(),
            ..LabelsRead::default()
        };
        return (read, false);
    };
    let bootc = view.bootc.as_ref().map(|b| b.object());
    if let Some(k) = slot
        && Arc::ptr_eq(&k.node, &info.node)
        && k.bootc.as_ref().map(Arc::as_ptr) == bootc.map(Arc::as_ptr)
    {
        return (k.read, true);
    }
    let read = LabelsRead {
        selected: bootc_crds::selector::matches(selector, info.labels()),
        held: info.held(),
        owned: owned(),
    };
    *slot = Some(LabelsKept {
        node: Arc::clone(&info.node),
        bootc: bootc.map(Arc::clone),
        read,
    });
    (read, false)
}

/// A node's BootcNode and its Node, when it has one.
type Objects = (Arc<BootcNode>, Option<Arc<Node>>);

/// A view's objects, when its BootcNode reports a booted image.
fn objects(view: &NodeView) -> Option<(&Arc<BootcNode>, Option<&Arc<Node>>)> {
    let bootc = view.bootc.as_ref()?;
    bootc.status()?.booted.as_ref()?;
    Some((bootc.object(), view.node.as_ref().map(|n| &n.node)))
}

/// What `bootc` reports as booted, its node registered when `node` was created.
fn report<'a>(bootc: &'a BootcNode, node: Option<&Node>) -> Option<BootedReport<'a>> {
    let booted = bootc.status.as_ref()?.booted.as_ref()?;
    let registered = node.and_then(|n| n.metadata.creation_timestamp.clone());
    Some(BootedReport::from_booted("", booted, registered))
}

/// What of `old` (in name order, named by `name_of`) belongs to each of `names` (in
/// order), one per name, found by name.
fn by_name<'n, T>(
    old: Vec<Option<T>>,
    names: impl ExactSizeIterator<Item = &'n str>,
    name_of: impl Fn(&T) -> &str,
) -> Vec<Option<T>> {
    if old.is_empty() {
        return std::iter::repeat_with(|| None).take(names.len()).collect();
    }
    let mut old = old.into_iter().flatten().peekable();
    names
        .map(|name| {
            while old.next_if(|e| name_of(e) < name).is_some() {}
            old.next_if(|e| name_of(e) == name)
        })
        .collect()
}

/// The entry for `view`, settled with `outcome` (and `drifted`, as its agent reports).
/// `None` unless it has its Node and its BootcNode.
pub(super) fn entry(view: &NodeView, outcome: Outcome, drifted: bool) -> Option<Entry> {
    let (info, bootc) = (view.node.as_ref()?, view.bootc.as_ref()?);
    Some(Entry {
        node: Arc::clone(&info.node),
        bootc: Arc::clone(bootc.object()),
        ready: info.ready,
        outcome,
        drifted,
    })
}

/// Whether the BootcNode's reports leave nothing to write for a member an admin holds
/// (`held`) or not, when it holds no slot: its `status.held` says so already, and it
/// has no `status.drainBlocked` to clear (see `holder::report_drains` and
/// `admin_hold::report`, which read only the members not settled).
pub(super) fn reports_nothing(view: &NodeView, held: bool) -> bool {
    let status = view.bootc.as_ref().and_then(|b| b.status());
    let written = status.and_then(|s| s.held) == Some(true);
    written == held && status.is_none_or(|s| s.drain_blocked.is_none())
}
