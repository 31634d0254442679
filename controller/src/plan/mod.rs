//! The controller's decisions for one pool, as one pure call: [`plan`] takes everything
//! the reconcile shell observed (a [`Snapshot`]: the pool, its nodes, drains, what the
//! registry said, the pull Secret, the last progress, the time) and returns every action
//! and the pool's complete status. It reads no clock, does no I/O and runs once per
//! reconcile.
//!
//! Module map, in the order a plan runs:
//!
//! - [`world`]: the inputs;
//! - `cleanup`: a pool being deleted: every trace of it taken off, then its finalizer;
//! - [`target`]: the target, from the spec, the registry's answer and the last status
//!   (every fallback of resolution), and [`failure`], a target marked failed;
//! - [`limits`]: the spec's numbers and windows, each read to fail closed;
//! - `membership`: members, conflicts with other pools, nodes leaving;
//! - `admin_hold`: members an admin holds: not retargeted, `status.held`;
//! - `staging`: the member pass over `member`s: `maxStaging`, node states, slot
//!   candidates, and slot holders through `holder` (cordon, drain, return, release) with
//!   [`agent`] (what an agent and a kubelet report) and `boot_health`; it returns its
//!   tally. What it found for [`settled`] members is kept between plans, with what it
//!   adds up to: then only the members without a kept outcome are visited;
//! - [`gates`]: every gate's verdict on what the pass found, in order of precedence;
//! - `holder::approve` and [`slots`]: the approvals and the new slots the verdicts allow;
//! - `drains`: what holds up each member's drain, in its BootcNode's `status.drainBlocked`;
//! - [`health`]: the members unreported and the longest Staging and Rebooting, for the
//!   metrics;
//! - [`stall`]: stall detection;
//! - [`status`]: counts, `status.gates`, conditions, transition events, `deployHistory`;
//! - `secret`: a pull Secret the controller may not read, over the status's `Degraded`;
//! - [`actions`]: the outputs.
//!
//! The shell carries the actions out in order, stopping a node's actions at its first
//! failure. Every step is safe to repeat: a crash between two actions leaves a state that
//! the next plan continues from. The order of actions per node is what keeps the
//! invariants:
//!
//! - a slot is granted (annotation, with the prior cordon state, written with a
//!   `resourceVersion` precondition) before the Node is cordoned, and released only after
//!   it is uncordoned, so a cordoned-for-update node always holds a slot;
//! - the reboot is approved (`desiredImageState: Booted`) only after the drain finished;
//! - slots are never reused within one plan: a freed slot is granted on the next one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bootc_crds::pool::{BootcNodePoolStatus, GateReason};
use chrono::{DateTime, SecondsFormat, Utc};

pub mod actions;
mod admin_hold;
pub mod agent;
mod boot_health;
mod candidates;
mod cleanup;
mod drains;
pub mod failure;
pub mod gates;
pub mod health;
mod holder;
pub mod limits;
mod member;
mod membership;
pub use gates::ordering;
mod secret;
pub mod settled;
pub mod slots;
mod staging;
pub mod stall;
pub mod states;
pub mod status;
pub mod target;
pub mod world;

pub use actions::{ACTION_KINDS, Action, NodeState, Plan, PlannedEvent, events};
pub use agent::runs;
pub use settled::Settled;
pub use slots::{ZONE_LABEL, grant_order};
pub use stall::STALL_AFTER;
pub use target::{Target, TargetDecision, TargetProblem};
pub use world::{
    BootcView, DrainView, GateView, Lookup, NodeInfo, NodeView, PoolSummary, PoolView, Progress,
    PullSecretView, Snapshot, ViewChanges,
};

/// The finalizer the controller puts on every pool: deleting a pool waits until the
/// controller has taken it off the nodes (uncordoned what it cordoned, removed its labels
/// and BootcNodes), even when the controller was down when the pool was deleted.
pub const FINALIZER: &str = "node.bootc.dev/cleanup";

fn parse_stamp(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// At most this many problems are listed in a condition message.
const LISTED: usize = 5;

/// Up to [`LISTED`] items joined, with how many more there are. Only the items listed
/// are written out: the rest are counted.
fn list<'i, T: std::fmt::Display + 'i>(items: impl IntoIterator<Item = &'i T>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut count = 0;
    for item in items {
        if count < LISTED {
            if count > 0 {
                out.push_str("; ");
            }
            let _ = write!(out, "{item}");
        }
        count += 1;
    }
    and_more(&mut out, count);
    out
}

/// Ends the list of the first [`LISTED`] of `count` items with how many more there are.
fn and_more(out: &mut String, count: usize) {
    if count > LISTED {
        use std::fmt::Write as _;
        let _ = write!(out, "; and {} more", count - LISTED);
    }
}

/// Items gathered one by one to be listed as [`list`] lists them: the first [`LISTED`]
/// kept, the rest only counted (a list of thousands of members costs no copies).
#[derive(Default)]
struct Listing<'i> {
    first: Vec<&'i str>,
    count: usize,
}

impl<'i> Listing<'i> {
    fn push(&mut self, item: &'i str) {
        if self.first.len() < LISTED {
            self.first.push(item);
        }
        self.count += 1;
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Up to [`LISTED`] items joined, with how many more there are.
    fn text(&self) -> String {
        let mut out = list(&self.first);
        and_more(&mut out, self.count);
        out
    }
}

/// What the plan is, as it is made: the actions, each member's state, the node problems
/// and spec problems it reports, and when to plan again.
struct Planner<'a> {
    snap: &'a Snapshot,
    /// Values of the spec the plan could not use, each read to fail closed.
    spec_problems: Vec<String>,
    actions: Vec<Action>,
    states: states::States,
    /// Nodes whose agent or drain reports a problem, with the message.
    degraded: Vec<String>,
    /// Each degraded node's reason (the first found), for `status.degradedByReason`.
    degraded_reasons: BTreeMap<String, String>,
    requeue: Option<Duration>,
    /// Where the new slots' actions begin in `actions`, once slots are handed out.
    grants_from: Option<usize>,
    /// Slots this plan frees (their holders are uncordoned and released before the new
    /// grants start, so the grants may use them).
    releases: usize,
    /// The pool's health beyond the status, once the states are final.
    health: health::Health,
    /// How the time bears on the member being planned (read for slot holders).
    timing: holder::Timing,
}

/// What the plan found on its way, for the status: who belongs, who is held, what the
/// member pass counted, the gates' verdicts, the drains held up, a rollback.
struct Findings<'a> {
    membership: membership::Membership<'a>,
    held: BTreeSet<String>,
    /// Members whose agent reports `Drifted=True`.
    drifted: usize,
    /// Slot holders that are unhealthy, with why.
    unhealthy: Vec<holder::Unhealthy<'a>>,
    gates: gates::Judgement,
    /// Drains held up, with the pod and what refuses it.
    blocked: Vec<String>,
    rolling_back: Option<failure::RollingBack>,
}

impl<'a> Planner<'a> {
    fn new(snap: &'a Snapshot) -> Self {
        Planner {
            snap,
            spec_problems: Vec::new(),
            actions: Vec::new(),
            states: states::States::default(),
            degraded: Vec::new(),
            degraded_reasons: BTreeMap::new(),
            requeue: None,
            grants_from: None,
            releases: 0,
            health: health::Health::default(),
            timing: holder::Timing::default(),
        }
    }

    /// The plan made.
    fn finish(
        self,
        status: BootcNodePoolStatus,
        target: Option<Target>,
        progress: Progress,
    ) -> Plan {
        Plan {
            grants_from: self.grants_from.unwrap_or(self.actions.len()),
            releases: self.releases,
            actions: self.actions,
            status,
            states: self.states,
            requeue_after: self.requeue,
            target,
            progress,
            health: self.health,
        }
    }

    /// Notes node `name` degraded for `reason`: `node NAME: REASON: MESSAGE` in the
    /// pool's `Degraded` message, and the reason in `status.degradedByReason`.
    fn degrade(&mut self, name: &str, reason: &str, message: &str) {
        let line = self.degraded_line(name, reason, message);
        self.degraded.push(line);
    }

    /// [`Planner::degrade`]'s line in the message, the reason noted (for a caller that
    /// puts the line in its place itself).
    fn degraded_line(&mut self, name: &str, reason: &str, message: &str) -> String {
        self.degraded_reasons
            .entry(name.to_owned())
            .or_insert_with(|| reason.to_owned());
        format!("node {name}: {reason}: {message}")
    }

    /// The value read, noting its problem when it had to fall back.
    fn read<T>(&mut self, (value, problem): limits::Read<T>) -> T {
        if let Some(problem) = problem
            && !self.spec_problems.contains(&problem)
        {
            self.spec_problems.push(problem);
        }
        value
    }

    /// Plans again after `d` from now: a wait that moves with the time, so that the
    /// member being planned is not kept settled.
    fn requeue_in(&mut self, d: Duration) {
        self.timing.floating = true;
        self.look_again_in(d);
    }

    fn look_again_in(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }

    /// Plans again at `t` (at once, if that has passed): a moment that stays put as
    /// the time goes, kept with the member being planned.
    fn requeue_at(&mut self, t: DateTime<Utc>) {
        self.look_again_in((t - self.snap.now).to_std().unwrap_or(Duration::ZERO));
        self.timing.wake = Some(self.timing.wake.map_or(t, |w| w.min(t)));
    }

    /// What the member being planned is found to be holds until `t` (before it, with
    /// the same objects); `None`: it holds only now.
    fn changes_at(&mut self, t: Option<DateTime<Utc>>) {
        match t {
            Some(t) => self.timing.until = Some(self.timing.until.map_or(t, |u| u.min(t))),
            None => self.timing.floating = true,
        }
    }

    /// An event about the pool's status, recorded once the status is written.
    fn event(&mut self, warning: bool, reason: &'static str, message: String) {
        self.actions.push(Action::Event(PlannedEvent {
            node: None,
            warning,
            reason,
            message,
        }));
    }

    /// An event about `node`, recorded once the node's writes before it succeeded.
    fn node_event(&mut self, node: &str, warning: bool, reason: &'static str, message: String) {
        self.actions.push(Action::Event(PlannedEvent {
            node: Some(node.to_owned()),
            warning,
            reason,
            message,
        }));
    }
}

/// Plans one pool: every action, and the complete status.
pub fn plan(snap: &Snapshot) -> Plan {
    plan_once(snap, true)
}

/// One plan; with `may_fail`, a halt that fails the target (`onFailure: Rollback`) marks
/// it and plans again with the mark, once.
///
/// The order: the target; who belongs; the member pass (each member's actions and state;
/// drained holders wait for the gates); the gates' verdicts; a halt failing the target;
/// the approvals and grants the gates allow; the BootcNodes' reports; the status.
fn plan_once(snap: &Snapshot, may_fail: bool) -> Plan {
    let mut decision = target::decide(snap);
    let mut p = Planner::new(snap);
    let rolling_back = failure::apply(snap, &mut decision);
    if snap.pool.deleting {
        cleanup::plan(&mut p);
        let none = stall::fingerprint(&states::States::default());
        let progress = stall::advance(snap.progress, none, snap.now);
        let status = snap.pool.status.clone().unwrap_or_default();
        return p.finish(status, None, progress);
    }
    if !snap.pool.finalized {
        p.actions.push(Action::AddFinalizer);
    }
    if let Some(wait) = decision.requeue_after {
        p.requeue_in(wait);
    }
    // Which views changed since the plan before: what is kept per view is read again
    // only for those.
    snap.settled.lock().see(&snap.nodes, snap.changes.as_ref());
    let invalid = matches!(decision.target, Err(TargetProblem::InvalidSpec(_)));
    let mut membership = membership::members(&mut p, invalid);
    let held = std::mem::take(&mut membership.held);
    let target = decision.target.as_ref().ok();
    let mut tally = p.pass(&membership, target, &held);
    let members = &membership.members;
    let judgement = gates::judge(&gates::Facts {
        snap,
        target,
        members,
        states: &p.states,
        held: &held,
        holders: tally.holders,
        taken: tally.holders + tally.unavailable,
        candidates: &tally.candidates,
        slot_users: &tally.slot_users,
        cordoned: &tally.cordoned,
        unhealthy: &tally.unhealthy,
        on_target_degraded: &tally.on_target_degraded,
        rolling_back: rolling_back.as_ref(),
    });
    p.heed(&judgement);
    let halted = judgement.find(GateReason::RolloutHalted).is_some();
    if let Some(target) = target
        && may_fail
        && failure::fails(snap, halted, rolling_back.is_some())
    {
        let marked = failure::marked(snap, target, list(&tally.unhealthy));
        return plan_once(&marked, false);
    }
    let (unsettled, drifted) = (std::mem::take(&mut tally.unsettled), tally.drifted);
    let kept = std::mem::take(&mut tally.health);
    let unhealthy = p.act(tally, &judgement, members.len(), target);
    // The states are final: the health read from the members planned in full.
    p.health = health::of(&kept, &unsettled, &p.states, snap.now);
    let blocked = drains::report(&mut p, members, &unsettled);
    admin_hold::report(&mut p, &unsettled, &held);
    let findings = Findings {
        membership,
        held,
        drifted,
        unhealthy,
        gates: judgement,
        blocked,
        rolling_back,
    };
    // The states' fingerprint, taken again when they are the plan before's.
    let fingerprint = snap.settled.lock().fingerprint(&p.states);
    let progress = stall::advance(snap.progress, fingerprint, snap.now);
    let mut status = status::status(&mut p, &findings, &decision, progress);
    secret::not_allowed(snap, &mut status);
    let target = decision.target.ok();
    p.finish(status, target, progress)
}

impl<'a> Planner<'a> {
    /// The member pass, with a target; without one, every member is pending.
    fn pass(
        &mut self,
        membership: &membership::Membership<'a>,
        target: Option<&Target>,
        held: &BTreeSet<String>,
    ) -> member::Tally<'a> {
        let members = &membership.members;
        self.states.reserve(members.len());
        let Some(target) = target else {
            let mut tally = member::Tally::default();
            for view in members {
                self.states.insert(&view.name, NodeState::Pending);
                tally.planned_in_full(view);
            }
            return tally;
        };
        staging::pass(self, members, target, held, &membership.conflicted)
    }

    /// The gates' spec problems and when they look again go into the plan.
    fn heed(&mut self, judgement: &gates::Judgement) {
        for problem in &judgement.spec_problems {
            if !self.spec_problems.contains(problem) {
                self.spec_problems.push(problem.clone());
            }
        }
        if let Some(wait) = judgement.look_again {
            self.requeue_in(wait);
        }
    }

    /// What the gates allow: the drained holders' approvals, then the new slots (with a
    /// target). Returns the unhealthy holders, for the status.
    fn act<'t>(
        &mut self,
        tally: member::Tally<'t>,
        gates: &gates::Judgement,
        pool_size: usize,
        target: Option<&Target>,
    ) -> Vec<holder::Unhealthy<'t>> {
        holder::approve(self, tally.drained, gates);
        if let Some(target) = target {
            let taken = tally.holders + tally.unavailable;
            let candidates = (&tally.candidates, tally.in_name_order);
            slots::grant(self, (candidates, taken), gates, pool_size, target);
        }
        tally.unhealthy
    }
}

#[cfg(test)]
mod tests;
