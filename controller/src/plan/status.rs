//! The pool's whole status, from one plan: counts, the target and its resolution times,
//! `deployHistory`, the `UpToDate`, `Progressing` and `Degraded` conditions, and the
//! events that announce their transitions.

use bootc_crds::conditions::{self, NewCondition, pool_degraded, up_to_date};
use bootc_crds::pool::{BootcNodePoolStatus, GateReason};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::actions::{NodeState, events};
use super::membership::Members;
use super::target::{TargetDecision, TargetProblem};
use super::world::Progress;
use super::{Findings, Planner, list, stall};
use crate::history::{self, TargetImage};

fn reason_of<'a>(status: Option<&'a BootcNodePoolStatus>, type_: &str) -> Option<&'a str> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.as_str())
}

/// How many members are in each state.
#[derive(Clone)]
struct StateCounts {
    nodes: usize,
    updated: usize,
    updating: usize,
    staged: usize,
    staging: usize,
    pending: usize,
    degraded: usize,
    /// Members a gate holds back on purpose (a hold, a cordon, …), when they
    /// are counted apart from their state.
    held: usize,
}

impl StateCounts {
    /// The members by state; with `held_apart`, the members a gate holds back on purpose
    /// are counted as held instead of by their state.
    fn of(p: &Planner<'_>, f: &Findings<'_>, held_apart: bool) -> Self {
        let mut c = StateCounts {
            nodes: f.membership.members.len(),
            updated: 0,
            updating: 0,
            staged: 0,
            staging: 0,
            pending: 0,
            degraded: 0,
            held: 0,
        };
        if !held_apart {
            // Counted as the states were recorded.
            for (count, state) in [
                (&mut c.updated, NodeState::UpToDate),
                (&mut c.updating, NodeState::Rebooting),
                (&mut c.staged, NodeState::Staged),
                (&mut c.staging, NodeState::Staging),
                (&mut c.pending, NodeState::Pending),
                (&mut c.degraded, NodeState::Degraded),
            ] {
                *count = p.states.count(state);
            }
            return c;
        }
        for (name, state) in p.states.iter() {
            if f.gates.holding_back(name).next().is_some() {
                c.held += 1;
                continue;
            }
            *match state {
                NodeState::UpToDate => &mut c.updated,
                NodeState::Rebooting => &mut c.updating,
                NodeState::Staged => &mut c.staged,
                NodeState::Staging => &mut c.staging,
                NodeState::Pending => &mut c.pending,
                NodeState::Degraded => &mut c.degraded,
            } += 1;
        }
        c
    }

    /// `3/10 updated; 2 staged, 1 rebooting, …`, or `0/0 updated` alone.
    fn breakdown(&self) -> String {
        let mut parts = Vec::new();
        for (n, what) in [
            (self.staged, "staged"),
            (self.updating, "rebooting"),
            (self.staging, "staging"),
            (self.pending, "pending"),
            (self.degraded, "degraded"),
            (self.held, "held"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let updated = format!("{}/{} updated", self.updated, self.nodes);
        if parts.is_empty() {
            updated
        } else {
            format!("{updated}; {}", parts.join(", "))
        }
    }
}

/// The pool's status after this plan.
pub(super) fn status(
    p: &mut Planner<'_>,
    f: &Findings<'_>,
    decision: &TargetDecision,
    progress: Progress,
) -> BootcNodePoolStatus {
    let snap = p.snap;
    let members = &f.membership.members;
    let previous = snap.pool.status.as_ref();
    let counts = StateCounts::of(p, f, false);
    let as_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = snap.pool.generation;
    status.node_count = as_i32(counts.nodes);
    status.updated_count = as_i32(counts.updated);
    status.updating_count = as_i32(counts.updating);
    status.staged_count = as_i32(counts.staged);
    status.staging_count = as_i32(counts.staging);
    // Most plans have no member staging: no member to read.
    status.staging_percent = if counts.staging == 0 {
        None
    } else {
        staging_percent(p, members, decision)
    };
    status.degraded_count = as_i32(counts.degraded);
    status.drifted_count = as_i32(f.drifted);
    // The states are read again only when some member is degraded.
    status.degraded_by_reason = if counts.degraded == 0 {
        Vec::new()
    } else {
        bootc_crds::pool::degraded_by_reason(
            p.states
                .iter()
                .filter(|(_, state)| **state == NodeState::Degraded)
                .filter_map(|(name, _)| p.degraded_reasons.get(name).map(String::as_str)),
        )
    };
    status.held_count = as_i32(f.held.len());
    status.cordoned_count = as_i32(
        f.gates
            .find(GateReason::CordonedByOthers)
            .map_or(0, |v| v.nodes.len()),
    );
    if decision.target.is_ok() || snap.pool.spec.rollout.canary.is_none() {
        status.canary = f.gates.canary.clone();
    }
    status.alert_gate = f.gates.alert_gate.clone();
    status.gates = f.gates.to_status();
    target_fields(&mut status, decision);
    status.deploy_history = deploy_history(&status, p, decision);
    super::failure::clear_stale(&mut status.deploy_history, snap.pool.generation);

    let all_updated = decision.target.is_ok() && counts.updated == counts.nodes;
    let degraded = degraded(p, f, decision);
    // Counted again with the members held back on purpose apart, when a gate holds any.
    let apart = if f.gates.holds_nodes_back() {
        StateCounts::of(p, f, true)
    } else {
        counts.clone()
    };
    let up = up_to_date(f, &apart, all_updated);
    transition_events(p, &degraded, decision, all_updated, counts.nodes);
    let invalid = matches!(decision.target, Err(TargetProblem::InvalidSpec(_)));
    let (ok, reason, message) = stall::condition(p, f, progress, all_updated, invalid);
    let verdicts = [
        up,
        NewCondition {
            type_: conditions::PROGRESSING,
            status: ok,
            reason,
            message,
        },
        degraded,
    ];
    status.conditions = conditions_after(previous, verdicts, snap.pool.generation, snap.now);
    status
}

/// The share of the target's bytes fetched by the members staging it, from the progress
/// their agents report for that digest; `None` when none reports any.
fn staging_percent(
    p: &Planner<'_>,
    members: &Members<'_>,
    decision: &TargetDecision,
) -> Option<i32> {
    let target = decision.target.as_ref().ok()?.digest.as_str();
    let (mut done, mut total) = (0i128, 0i128);
    let mut states = p.states.in_order();
    for m in members {
        if states.get(&m.name) != Some(NodeState::Staging) {
            continue;
        }
        let progress = m.bootc.as_ref().and_then(|b| b.status()?.progress.as_ref());
        if let Some(pr) = progress.filter(|pr| pr.image_digest == target && pr.bytes_total > 0) {
            done += i128::from(pr.bytes_done.clamp(0, pr.bytes_total));
            total += i128::from(pr.bytes_total);
        }
    }
    (total > 0).then(|| i32::try_from(done * 100 / total).unwrap_or(100))
}

/// The target, its version and when its tag was resolved (cleared for a pinned ref;
/// kept as they were when a tag has no answer yet).
fn target_fields(status: &mut BootcNodePoolStatus, d: &TargetDecision) {
    if let Ok(target) = &d.target {
        status.target_image = Some(target.image.clone());
        status.target_digest = Some(target.digest.to_string());
        status.target_short_digest = Some(target.digest.short().to_owned());
        status.target_version = d.version.clone();
    }
    if let Some((last, next)) = d.resolve_times {
        status.last_resolved_time = bootc_crds::conditions::to_time(last);
        status.next_resolve_time = bootc_crds::conditions::to_time(next);
    } else if d.pinned {
        status.last_resolved_time = None;
        status.next_resolve_time = None;
    }
}

/// `deployHistory` merged with what the members report as booted now, bounded by the
/// plan's `now` (kept as it was when `now` cannot be written as a time).
fn deploy_history(
    status: &BootcNodePoolStatus,
    p: &Planner<'_>,
    d: &TargetDecision,
) -> Vec<bootc_crds::pool::DeployHistoryEntry> {
    let snap = p.snap;
    let Some(now) = bootc_crds::conditions::to_time(snap.now) else {
        return status.deploy_history.clone();
    };
    let target = d.target.as_ref().ok();
    let digest = target.map(|t| t.digest.to_string());
    let before = snap.pool.status.as_ref();
    let pool = history::Pool {
        target: target.map(|t| TargetImage {
            digest: digest.as_deref().unwrap_or_default(),
            image: t.image.as_str(),
            version: d.version.as_deref(),
        }),
        targeted_before: before.and_then(|s| s.target_digest.as_deref()),
        now: &now,
        limit: usize::try_from(snap.pool.spec.history.limit.clamp(1, 20)).unwrap_or(5),
    };
    // The members' reports (and a leaver's finishing its reboot: whoever has a state),
    // gathered as the plans before gathered them, those of changed nodes read again.
    let mut kept = snap.settled.lock();
    let observed = kept.booted(digest.as_deref(), &snap.nodes, &p.states);
    history::merge_observed(&status.deploy_history, observed, &pool)
}

/// The `Degraded` condition, the pool's problems by severity: an invalid spec, node
/// conflicts, an ordering cycle, a failed target, a halt, an alert gate nobody can ask, a
/// resolution problem, degraded nodes. (Gates that are closed on purpose are no problem.)
fn degraded(p: &Planner<'_>, f: &Findings<'_>, d: &TargetDecision) -> NewCondition<'static> {
    let gate = |reason| f.gates.find(reason).map(|v| v.message.clone());
    let (reason, message) = match &d.target {
        Err(TargetProblem::InvalidSpec(problems)) => (
            pool_degraded::INVALID_SPEC,
            format!("invalid spec, nothing is rolled out: {}", list(problems)),
        ),
        _ if !p.spec_problems.is_empty() => (
            pool_degraded::INVALID_SPEC,
            format!("invalid spec: {}", list(&p.spec_problems)),
        ),
        _ if !f.membership.conflicts.is_empty() => (
            pool_degraded::NODE_CONFLICT,
            format!(
                "{}; those nodes are not updated until one pool lets go",
                list(&f.membership.conflicts)
            ),
        ),
        _ if gate(GateReason::OrderingCycle).is_some() => (
            pool_degraded::ORDERING_CYCLE,
            gate(GateReason::OrderingCycle).unwrap_or_default(),
        ),
        _ if f.rolling_back.is_some() => {
            let Some(r) = &f.rolling_back else {
                unreachable!()
            };
            let after = match &r.to {
                Some(to) => format!("rolled back to {to}"),
                None => "the pool ran no other image before, so nothing is rolled back and no reboots are approved".to_owned(),
            };
            (
                pool_degraded::TARGET_FAILED,
                format!(
                    "{} failed: {}; {after}; it is not tried again until the spec changes",
                    r.failed, r.reason
                ),
            )
        }
        _ if gate(GateReason::RolloutHalted).is_some() => (
            pool_degraded::ROLLOUT_HALTED,
            gate(GateReason::RolloutHalted).unwrap_or_default(),
        ),
        _ if f.gates.find(GateReason::AlertGateUnreachable).is_some() => {
            let said = f.gates.alert_gate.as_ref().and_then(|g| g.message.clone());
            (
                pool_degraded::ALERT_GATE_UNREACHABLE,
                format!(
                    "{}; no reboots are approved while the alert gate cannot be asked (failClosed)",
                    said.unwrap_or_default()
                ),
            )
        }
        Err(TargetProblem::Resolution(message)) => {
            (pool_degraded::TAG_RESOLUTION_ERROR, message.clone())
        }
        Ok(_) => match &d.problem {
            Some(message) => (pool_degraded::TAG_RESOLUTION_ERROR, message.clone()),
            None if !p.degraded.is_empty() => (pool_degraded::NODE_DEGRADED, list(&p.degraded)),
            None => (pool_degraded::HEALTHY, String::new()),
        },
    };
    NewCondition {
        type_: conditions::DEGRADED,
        status: reason != pool_degraded::HEALTHY,
        reason,
        message,
    }
}

/// The `UpToDate` condition: all updated; else the first gate holding back the pool;
/// else rolling back, or in progress.
fn up_to_date(f: &Findings<'_>, counts: &StateCounts, all_updated: bool) -> NewCondition<'static> {
    let mut breakdown = counts.breakdown();
    if !f.blocked.is_empty() {
        breakdown = format!("{breakdown}; {}", list(&f.blocked));
    }
    let (reason, message) = if all_updated {
        (
            up_to_date::ALL_UPDATED,
            format!("{}/{} nodes run the target", counts.updated, counts.nodes),
        )
    } else if let Some((reason, why)) = f.gates.up_to_date() {
        (reason, format!("{why}: {breakdown}"))
    } else if let Some(r) = &f.rolling_back {
        let to = r.to.as_deref().unwrap_or("nothing");
        (
            up_to_date::ROLLING_BACK,
            format!("{} failed; rolling back to {to}: {breakdown}", r.failed),
        )
    } else {
        (up_to_date::ROLLOUT_IN_PROGRESS, breakdown)
    };
    NewCondition {
        type_: conditions::UP_TO_DATE,
        status: all_updated,
        reason,
        message,
    }
}

/// Events on transitions: a new target, a finished rollout, a halt, a conflict.
fn transition_events(
    p: &mut Planner<'_>,
    degraded: &NewCondition<'static>,
    d: &TargetDecision,
    all_updated: bool,
    nodes: usize,
) {
    let previous = p.snap.pool.status.as_ref();
    let old_digest = previous.and_then(|s| s.target_digest.clone());
    if let Ok(target) = &d.target
        && old_digest.as_deref() != Some(target.digest.as_str())
    {
        let image = &target.image;
        p.event(
            false,
            events::TARGET_RESOLVED,
            format!("target is now {image}"),
        );
        if !all_updated {
            let message = format!("rolling out {image} to {nodes} nodes");
            p.event(false, events::ROLLOUT_STARTED, message);
        }
    }
    let old_up = reason_of(previous, conditions::UP_TO_DATE);
    if all_updated && old_up != Some(up_to_date::ALL_UPDATED) && old_up.is_some() {
        let image = d
            .target
            .as_ref()
            .map(|t| t.image.clone())
            .unwrap_or_default();
        p.event(
            false,
            events::ROLLOUT_COMPLETE,
            format!("all {nodes} nodes run {image}"),
        );
    }
    let old_degraded = reason_of(previous, conditions::DEGRADED);
    if degraded.reason != old_degraded.unwrap_or(pool_degraded::HEALTHY) {
        if degraded.reason == pool_degraded::ROLLOUT_HALTED {
            p.event(true, events::ROLLOUT_HALTED, degraded.message.clone());
        }
        if degraded.reason == pool_degraded::TARGET_FAILED {
            p.event(true, events::TARGET_FAILED, degraded.message.clone());
        }
        if degraded.reason == pool_degraded::NODE_CONFLICT {
            p.event(true, events::NODE_CONFLICT, degraded.message.clone());
        }
    }
}

/// The three conditions the plan owns, then any other condition as it was.
fn conditions_after(
    previous: Option<&BootcNodePoolStatus>,
    verdicts: [NewCondition<'static>; 3],
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let old = previous.map_or(&[][..], |p| p.conditions.as_slice());
    let owned = [
        conditions::UP_TO_DATE,
        conditions::PROGRESSING,
        conditions::DEGRADED,
    ];
    verdicts
        .into_iter()
        .filter_map(|v| conditions::next(old, v, generation, now))
        .chain(
            old.iter()
                .filter(|c| !owned.contains(&c.type_.as_str()))
                .cloned(),
        )
        .collect()
}
