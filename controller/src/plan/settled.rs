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
//! (not the time, except for slot holders, below; not the other members); whether
//! another pool claims it is asked
//! again at every plan. The outcome is kept with the objects it was found for,
//! shared with the caches rather than copied, and used again while the member's view
//! still holds those very objects (the caches replace an object when it changes, they
//! never change one in place) and the pool's target, spec and hash are the same.
//! Anything else is planned as before, and kept again if it is settled.
//!
//! A slot holder is settled the same way once its reboot is approved, while the plan
//! writes nothing for it (no cordon, drain, stamp or release) and the spec's reboot
//! timeout and soak read without a problem. Its part depends on the time too, but only
//! at moments fixed by its objects and the spec: its reboot timeout running out, the
//! grace for its agent's record of the reboot, the end of its soak or of the wait for
//! its units. Planning it notes the first of them ([`Timing`]), and when it asks to be
//! looked at again; its outcome is kept with both, forgotten once the time reaches the
//! first (or goes back before the last plan's), and its wake asked for again while it
//! is used. A holder whose part moves with
//! the time otherwise (a stamp or a wait counted from now) is not kept. Its outcome also
//! says why it is unhealthy, if it is, for the gates.
//!
//! Two more answers are kept the same way, for every node of the snapshot, settled or
//! not: what was read of its Node's labels (whether the pool's selector matches them,
//! whether an admin holds the node) and of its BootcNode's owner (whether it is the
//! pool), kept with both objects, the pool's name and its selector; and its
//! booted report, gathered with the others by digest for the deploy history
//! ([`Observed`]), kept with its BootcNode and Node, so that a node whose objects
//! changed has its old report taken back and its new one added.
//!
//! What the kept outcomes add up to is kept with them ([`Sums`]): a pass that may take
//! it whole visits only the members without an outcome, and merges what they add with
//! the kept ones by place.
//!
//! A settled member also leaves the passes after the member pass nothing to do: its
//! BootcNode's `status.held` and `status.drainBlocked` need no write (an outcome is kept
//! only then), and whether its agent reports `Drifted` is kept with the outcome. Those
//! passes read only the members planned in full.
//!
//! Each plan first finds which views changed since the plan before ([`Seen`]). The
//! reconcile shell, which keeps the views between reconciles and reads again only those
//! the watches changed, tells which it read again ([`super::ViewChanges`]); when it
//! counts them from the views of the plan before, only those are looked at. Otherwise
//! the plan compares each view's name, Node and BootcNode by address (it holds them, so
//! that no other object takes an address meanwhile), and whether the Node is Ready. What is
//! kept per view, or per member, notes the snapshot it was kept at; when that is the
//! one before, only the views that changed are looked at again. What each view was to
//! the pool (a member or not, leaving, in conflict) is kept the same way
//! ([`super::membership::Class`]), while the other pools' selectors and the spec's
//! validity are the same, and so are the last plan's states with their fingerprint.
//!
//! So the plan stays one function of its snapshot: with what is kept or without it, it
//! is the same plan; a test holds the two together over random changes.

use std::sync::{Arc, Mutex, PoisonError};

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePoolSpec;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;

use super::actions::NodeState;
use super::health;
use super::holder::{Timing, Why};
use super::membership::Members as MemberViews;
use super::states::{Names, Order};
use super::target::Target;
use super::world::NodeView;

mod seen;
mod sums;
mod views;

use seen::{Members, Recorded, Seen};
pub(super) use sums::{PlaceSet, Sums};
pub(super) use views::LabelsRead;
use views::{Booted, Labels};

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
    /// What it adds as a slot holder, when it holds one.
    pub slot: Option<Box<Slot>>,
}

/// What a settled slot holder adds to its outcome. A holder is settled only once its
/// reboot is approved, while nothing is written for it and the time bears on it only at
/// fixed moments ([`Timing`]): its outcome holds until the first of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slot {
    /// Why it is unhealthy, if it is.
    pub unhealthy: Option<Why<'static>>,
    /// Its outcome holds while the time is before this.
    pub until: Option<DateTime<Utc>>,
    /// When the plan looks at it again.
    pub wake: Option<DateTime<Utc>>,
}

impl Outcome {
    /// A slot holder's outcome: its `state`, whether it is `pulling` the target, why it
    /// is unhealthy, and how the time bears on it.
    pub fn of_holder(
        state: NodeState,
        pulling: bool,
        unhealthy: Option<Why<'static>>,
        timing: Timing,
    ) -> Self {
        Outcome {
            state,
            staging: pulling,
            candidate: false,
            on_target_degraded: false,
            degraded: unhealthy.as_ref().and_then(Why::degraded).map(Box::new),
            slot: Some(Box::new(Slot {
                unhealthy,
                until: timing.until,
                wake: timing.wake,
            })),
        }
    }

    /// It holds a slot.
    pub fn holds(&self) -> bool {
        self.slot.is_some()
    }

    /// It no longer holds at `now`.
    fn expired(&self, now: DateTime<Utc>) -> bool {
        self.slot
            .as_ref()
            .and_then(|s| s.until)
            .is_some_and(|until| now >= until)
    }
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
    order: Order,
    /// The views of the last plan's snapshot, and which of them changed since the plan
    /// before: what the answers kept per view read again.
    seen: Seen,
    /// The last plan's members, and which of them changed since the plan before.
    members: Members,
    /// What the entries add up to, when that is known (see [`Sums`]).
    sums: Option<Sums>,
    /// The snapshot the entries were kept at ([`Seen::serial`]).
    entries_at: u64,
    /// The snapshot the order was kept at.
    order_at: u64,
    /// The last plan's states and their fingerprint.
    recorded: Recorded,
    /// What the spec says of the target, with the spec it was found for.
    spec_read: Option<super::target::SpecRead>,
    /// The time of the last plan the entries were kept for: a slot holder's outcome
    /// holds from then on, not before.
    latest: Option<DateTime<Utc>>,
}

/// One settled member: the objects its outcome was found for, and the outcome. Its name
/// is its BootcNode's (the member's, as the controller names them; where it is not, the
/// entry is only not found again).
#[derive(Debug)]
pub(super) struct Entry {
    node: Arc<Node>,
    bootc: Arc<BootcNode>,
    ready: bool,
    /// Its Node is unschedulable (it holds no slot: cordoned by someone else).
    unschedulable: bool,
    /// Its Node's zone label, as its view read it.
    zone: Option<Arc<str>>,
    outcome: Outcome,
    /// Its agent reports `Drifted=True`, for the status's count.
    drifted: bool,
    /// Its agent has not answered its spec, for the pool's health.
    unreported: bool,
    /// Since when it has been in its state, when that is one of the states whose time
    /// is measured (its place among them, and the time) and that is known, for the
    /// pool's health.
    since: Option<(usize, DateTime<Utc>)>,
}

impl Entry {
    fn name(&self) -> &str {
        self.bootc.metadata.name.as_deref().unwrap_or_default()
    }

    /// The zone of its Node (`""` without one), as the grant order reads it.
    fn zone(&self) -> &str {
        self.zone.as_deref().unwrap_or_default()
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

    /// Its part of the pool's health: whether its agent has not answered its spec, and
    /// since when it has been Staging or Rebooting (see [`super::health`]).
    pub fn health(&self) -> (bool, Option<(usize, DateTime<Utc>)>) {
        (self.unreported, self.since)
    }
}

impl Kept {
    /// What the spec said of the target when it was last read, if it was.
    pub(super) fn spec_read(&mut self) -> &mut Option<super::target::SpecRead> {
        &mut self.spec_read
    }

    /// How many kept outcomes the member pass used.
    pub fn replayed(&mut self, used: usize) {
        self.used += used as u64;
    }

    /// The entries kept for `members` (sorted by name), one per member in their order,
    /// `None` where nothing is kept for its objects, to be used and filled in place for
    /// the next plan; with what they add up to, when that is known and they are the
    /// entries of the last plan's members (to be kept up to date by the pass, else
    /// found again by [`Kept::sum`]). Every entry is forgotten when the target, the spec
    /// or the hash changed since they were kept, and those of names no longer members,
    /// and those that held only until a moment `now` has reached.
    pub fn for_members(
        &mut self,
        members: &MemberViews<'_>,
        (target, spec, hash): (&Target, &BootcNodePoolSpec, Option<&str>),
        now: DateTime<Utc>,
    ) -> (&mut [Option<Entry>], Option<&mut Sums>) {
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
        // The clock went back (a step of the system's): the holders' outcomes were found
        // for times after it, and are found again.
        let back = self.latest.is_some_and(|latest| now < latest);
        self.latest = Some(now);
        match since {
            // The members of the plan before, kept against the same: only the entries
            // of members whose views changed may be of other objects.
            Some(changed) if same && !back && self.entries.len() == members.len() => {
                for &i in changed {
                    if let Some(e) = self.entries[i].take_if(|e| !e.of(members.get(i)))
                        && let Some(sums) = self.sums.as_mut()
                    {
                        sums.take(i, &e);
                    }
                }
                self.expire(now);
            }
            _ => {
                self.sums = None;
                if self.entries.len() != members.len() {
                    // Members joined or left (or nothing is kept): the entries are found
                    // by name.
                    let old = std::mem::take(&mut self.entries);
                    self.entries = by_name(old, members.iter().map(|v| &*v.name), Entry::name);
                }
                // An entry whose member's objects changed is forgotten, and one that held
                // only until now (a holder's, any time the clock went back).
                for (entry, view) in self.entries.iter_mut().zip(members) {
                    if entry.as_ref().is_some_and(|e| {
                        !e.of(view) || e.outcome.expired(now) || (back && e.outcome.holds())
                    }) {
                        *entry = None;
                    }
                }
            }
        }
        (&mut self.entries, self.sums.as_mut())
    }

    /// The entries that held only until a moment `now` has reached, forgotten: only
    /// the timed ones are looked at, when their sums are known, and only once the first
    /// such moment has come.
    fn expire(&mut self, now: DateTime<Utc>) {
        let expired = |e: &mut Entry| e.outcome.expired(now);
        match self.sums.as_mut() {
            Some(sums) if sums.untils.first_key_value().is_none_or(|(t, _)| now < *t) => {}
            Some(sums) => {
                let timed: Vec<usize> = sums.timed.iter().collect();
                for i in timed {
                    if let Some(e) = self.entries[i].take_if(expired) {
                        sums.take(i, &e);
                    }
                }
            }
            None => {
                for entry in &mut self.entries {
                    entry.take_if(expired);
                }
            }
        }
    }

    /// What the entries add up to, found again (after a pass that visited every member).
    pub fn sum(&mut self) {
        self.sums = Some(Sums::of(&self.entries));
    }

    /// The order of `members`' names, when they are in strict name order (compared only
    /// next to the names that changed since the last plan; see [`Order::update`]).
    pub fn order(&mut self, members: &MemberViews<'_>) -> Option<Names> {
        let since = self.members.since(self.order_at);
        self.order_at = self.members.at;
        let order = &mut self.order;
        let sorted = match since {
            // The members of the plan before, whose names were in order then.
            Some(changed) if order.len() == members.len() => {
                order.update_at(changed.iter().map(|&i| (i, &members.get(i).name)))
            }
            _ => order.update(members.iter().map(|v| &v.name)),
        };
        sorted.then(|| Arc::clone(self.order.names()))
    }
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
/// `None` unless it has its Node and its BootcNode, and, Rebooting, its slot's grant
/// time (else its time is counted from now).
pub(super) fn entry(view: &NodeView, outcome: Outcome, drifted: bool) -> Option<Entry> {
    let (info, bootc) = (view.node.as_ref()?, view.bootc.as_ref()?);
    let since = match outcome.state {
        NodeState::Staging => health::staging_since(view),
        NodeState::Rebooting => Some(health::granted_at(view)?),
        _ => None,
    };
    let since = health::timed(outcome.state).zip(since);
    Some(Entry {
        node: Arc::clone(&info.node),
        bootc: Arc::clone(bootc.object()),
        ready: info.ready,
        unschedulable: info.unschedulable,
        zone: info.zone.clone(),
        outcome,
        drifted,
        unreported: health::unreported(view),
        since,
    })
}

/// Whether the BootcNode's reports leave nothing to write for a member an admin holds
/// (`held`) or not, when it holds no slot: its `status.held` says so already, and it
/// has no `status.drainBlocked` to clear (see `drains::report` and
/// `admin_hold::report`, which read only the members not settled).
pub(super) fn reports_nothing(view: &NodeView, held: bool) -> bool {
    let status = view.bootc.as_ref().and_then(|b| b.status());
    let written = status.and_then(|s| s.held) == Some(true);
    written == held && status.is_none_or(|s| s.drain_blocked.is_none())
}
