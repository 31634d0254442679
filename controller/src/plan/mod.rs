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
//!   (every fallback of resolution);
//! - [`limits`]: the spec's numbers and windows, each read to fail closed;
//! - `membership`: members, conflicts with other pools, nodes leaving;
//! - `member`: a member as the plan sees it, the BootcNode spec it should have;
//! - `admin_hold`: members an admin holds: not retargeted, never granted a slot;
//! - `staging`: members without a slot: `maxStaging`, node states, slot candidates;
//! - [`agent`]: what an agent and a kubelet report, read for decisions;
//! - `holder`: slot holders: cordon, drain, approval, return, release;
//! - [`slots`]: the budget, halts, pause and windows closing the gate, grant order;
//! - [`progress`]: stall detection;
//! - [`status`]: counts, conditions, transition events, `deployHistory`;
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

use chrono::{DateTime, SecondsFormat, Utc};

pub mod actions;
mod admin_hold;
pub mod agent;
mod cleanup;
pub mod failure;
mod gates;
mod health;
mod holder;
pub mod limits;
mod member;
mod membership;
pub mod ordering;
pub mod progress;
mod secret;
pub mod slots;
mod staging;
pub mod status;
pub mod target;
pub mod world;

pub use actions::{ACTION_KINDS, Action, NodeState, Plan, PlannedEvent, events};
pub use agent::runs;
pub use progress::STALL_AFTER;
pub use slots::{ZONE_LABEL, grant_order};
pub use target::{Target, TargetDecision, TargetProblem};
pub use world::{
    BootcView, DrainView, GateView, Lookup, NodeInfo, NodeView, PoolSummary, PoolView, Progress,
    PullSecretView, Snapshot,
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

/// Up to [`LISTED`] items joined, with how many more there are.
fn list(items: &[String]) -> String {
    let mut out = items
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > LISTED {
        out.push_str(&format!("; and {} more", items.len() - LISTED));
    }
    out
}

/// Per-plan bookkeeping.
struct Planner<'a> {
    snap: &'a Snapshot,
    /// Outside every maintenance window: when the next one opens.
    window_closed_until: Option<Option<DateTime<Utc>>>,
    /// Values of the spec the plan could not use, each closing a gate.
    spec_problems: Vec<String>,
    actions: Vec<Action>,
    states: BTreeMap<String, NodeState>,
    /// Slot holders that are unhealthy, with why.
    unhealthy: Vec<String>,
    /// Nodes whose agent or drain reports a problem, with the message.
    degraded: Vec<String>,
    /// Each degraded node's reason (the first found), for `status.degradedByReason`.
    degraded_reasons: BTreeMap<String, String>,
    /// Nodes selected by more than one pool, as messages, and their names.
    conflicts: Vec<String>,
    conflicted: BTreeSet<String>,
    /// Members an admin holds (see `admin_hold`).
    held: BTreeSet<String>,
    /// Drains held up, with the pod and what refuses it.
    blocked: Vec<String>,
    holders: usize,
    unavailable: usize,
    candidates: Vec<&'a NodeView>,
    requeue: Option<Duration>,
    /// Nodes pulling the target now (for `maxStaging`), and the limit.
    staging: usize,
    staging_limit: Option<usize>,
    /// Members this plan gives a new image, and the most it may (see
    /// [`staging::retarget_batch`]).
    retargets: usize,
    retarget_limit: usize,
    /// Where the new slots' actions begin in `actions`, once slots are handed out.
    grants_from: Option<usize>,
    /// Slots this plan frees (their holders are uncordoned and released before the new
    /// grants start, so the grants may use them).
    releases: usize,
    /// Members someone else cordoned, left alone (`disruption.respectCordon`).
    cordoned: BTreeSet<String>,
    /// Members that booted the target and report Degraded.
    on_target_degraded: Vec<String>,
    /// Why the alert gate is closed, when it is.
    gate_closed: Option<String>,
    /// The alert gate cannot be asked and fails closed: why.
    gate_unreachable: Option<String>,
    /// The pool's `status.alertGate`.
    alert_gate: Option<bootc_crds::pool::AlertGateStatus>,
    /// The pools this one waits for.
    order: ordering::Wait,
    /// The pool's `status.canary`, the slots the canary lets through (`None`: any) and
    /// what it waits for.
    canary: Option<bootc_crds::pool::CanaryStatus>,
    canary_room: Option<usize>,
    canary_note: Option<String>,
    /// The target is marked failed: the pool rolls back.
    rolling_back: Option<failure::RollingBack>,
}

impl<'a> Planner<'a> {
    fn new(snap: &'a Snapshot) -> Self {
        let (window_closed_until, problem) = limits::window(&snap.pool.spec.rollout, snap.now);
        Planner {
            snap,
            window_closed_until,
            spec_problems: problem.into_iter().collect(),
            actions: Vec::new(),
            states: BTreeMap::new(),
            unhealthy: Vec::new(),
            degraded: Vec::new(),
            degraded_reasons: BTreeMap::new(),
            conflicts: Vec::new(),
            conflicted: BTreeSet::new(),
            held: BTreeSet::new(),
            blocked: Vec::new(),
            holders: 0,
            unavailable: 0,
            candidates: Vec::new(),
            requeue: None,
            staging: 0,
            staging_limit: None,
            retargets: 0,
            retarget_limit: staging::RETARGET_BATCH_MAX,
            grants_from: None,
            releases: 0,
            cordoned: BTreeSet::new(),
            on_target_degraded: Vec::new(),
            gate_closed: None,
            gate_unreachable: None,
            alert_gate: None,
            order: ordering::Wait::Clear,
            canary: None,
            canary_room: None,
            canary_note: None,
            rolling_back: None,
        }
    }

    /// Notes node `name` degraded for `reason`: `node NAME: REASON: MESSAGE` in the
    /// pool's `Degraded` message, and the reason in `status.degradedByReason`.
    fn degrade(&mut self, name: &str, reason: &str, message: &str) {
        self.degraded
            .push(format!("node {name}: {reason}: {message}"));
        self.degraded_reasons
            .entry(name.to_owned())
            .or_insert_with(|| reason.to_owned());
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

    fn requeue_in(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
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
fn plan_once(snap: &Snapshot, may_fail: bool) -> Plan {
    let mut decision = target::decide(snap);
    let mut p = Planner::new(snap);
    p.rolling_back = failure::apply(snap, &mut decision);
    if snap.pool.deleting {
        cleanup::plan(&mut p);
        return Plan {
            grants_from: p.actions.len(),
            releases: 0,
            actions: p.actions,
            status: snap.pool.status.clone().unwrap_or_default(),
            states: p.states,
            requeue_after: p.requeue,
            target: None,
            progress: progress::advance(snap.progress, &BTreeMap::new(), snap.now),
        };
    }
    if !snap.pool.finalized {
        p.actions.push(Action::AddFinalizer);
    }
    if let Some(wait) = decision.requeue_after {
        p.requeue_in(wait);
    }
    let invalid = matches!(decision.target, Err(TargetProblem::InvalidSpec(_)));
    let members = membership::members(&mut p, invalid);
    p.held = admin_hold::held(&members);
    gates::alert(&mut p);
    match &decision.target {
        Ok(target) => {
            staging::count_staging(&mut p, &members, target);
            for view in &members {
                staging::member(&mut p, view, target);
            }
            gates::order(&mut p);
            gates::canary(&mut p, members.len(), target);
            let halted = slots::halted(&mut p).1;
            if may_fail && failure::fails(snap, halted, p.rolling_back.is_some()) {
                let marked = failure::marked(snap, target, list(&p.unhealthy));
                return plan_once(&marked, false);
            }
            slots::grant(&mut p, members.len(), target);
        }
        Err(_) => {
            for view in &members {
                p.states.insert(view.name.clone(), NodeState::Pending);
            }
        }
    }
    holder::report_drains(&mut p, &members);
    admin_hold::report(&mut p, &members);
    let progress = progress::advance(snap.progress, &p.states, snap.now);
    let mut status = status::status(&mut p, &members, &decision, progress);
    secret::not_allowed(snap, &mut status);
    Plan {
        grants_from: p.grants_from.unwrap_or(p.actions.len()),
        releases: p.releases,
        actions: p.actions,
        status,
        states: p.states,
        requeue_after: p.requeue,
        target: decision.target.ok(),
        progress,
    }
}

#[cfg(test)]
mod tests;
