//! Stall detection: the rollout advanced when any member's state changed since the last
//! plan; no advance for [`STALL_AFTER`] while work remains is a stall (`Progressing`
//! `False`, reason `Stalled`). A wait the gates call deliberate is no stall, nor is work
//! left only on nodes held back on purpose (`True/HeldNodesLeft`).

use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use bootc_crds::conditions::progressing;
use chrono::{DateTime, Utc};

use super::actions::NodeState;
use super::world::Progress;
use super::{Findings, Planner};

/// No node advancing for this long while work remains is a stall.
pub const STALL_AFTER: Duration = Duration::from_secs(600);

/// The fingerprint of the members' states.
pub fn fingerprint(states: &(impl Hash + ?Sized)) -> u64 {
    // A fixed seed: the same states give the same fingerprint in every plan. It is only
    // compared with the last one, so a fast hash does: SipHash took a tenth of a plan.
    foldhash::fast::FixedState::with_seed(0).hash_one(states)
}

/// The progress after this plan, whose members' states have `fingerprint`: unchanged
/// when every member is in the state it was, else advanced now.
pub fn advance(previous: Option<Progress>, fingerprint: u64, now: DateTime<Utc>) -> Progress {
    match previous {
        Some(p) if p.fingerprint == fingerprint => p,
        _ => Progress {
            fingerprint,
            since: now,
        },
    }
}

/// The `Progressing` condition: `(status, reason, message)`. Without a previous record
/// (`p.snap.progress` is `None`: the first plan the shell makes of this pool) there is
/// nothing to measure a stall from yet. A wait the gates call deliberate (a pause, a
/// window, firing alerts, a soak, the pools waited for, held nodes) is never a stall.
pub(super) fn condition(
    p: &mut Planner<'_>,
    f: &Findings<'_>,
    progress: Progress,
    all_updated: bool,
    invalid: bool,
) -> (bool, &'static str, String) {
    if invalid {
        // Said at once, not after a stall: nothing moves until the spec is fixed.
        return (
            false,
            progressing::INVALID_SPEC,
            "the spec is invalid (see the Degraded condition); nothing is rolled out".to_owned(),
        );
    }
    let stalled_for = p.snap.progress.map(|_| {
        (p.snap.now - progress.since)
            .to_std()
            .unwrap_or(Duration::ZERO)
    });
    if all_updated {
        return (
            true,
            progressing::COMPLETE,
            "every node runs the target".to_owned(),
        );
    }
    if let Some(message) = only_held_back_left(p, f) {
        // Done but for the nodes held back on purpose: nothing is stuck, and nothing to
        // wait for but what holds them (an admin lifting a hold, say).
        return (true, progressing::HELD_NODES_LEFT, message);
    }
    if let Some(waiting) = f.gates.pool_waits_on_purpose() {
        // Waiting on purpose: no stall.
        return (
            true,
            progressing::ADVANCING,
            format!("waiting on purpose: {}", waiting.message),
        );
    }
    if let Some(stalled_for) = stalled_for.filter(|d| *d >= STALL_AFTER) {
        let why = if !f.unhealthy.is_empty() {
            super::list(&f.unhealthy)
        } else if !p.degraded.is_empty() {
            super::list(&p.degraded)
        } else {
            "check the nodes' agents and the pool's conditions".to_owned()
        };
        return (
            false,
            progressing::STALLED,
            format!(
                "no node has advanced for {} minutes: {why}",
                stalled_for.as_secs() / 60
            ),
        );
    }
    if let Some(stalled_for) = stalled_for {
        p.requeue_in(STALL_AFTER.saturating_sub(stalled_for) + Duration::from_millis(10));
    }
    (
        true,
        progressing::ADVANCING,
        "nodes are advancing".to_owned(),
    )
}

/// When every member without the target is held back on purpose by a gate of its own
/// (a hold, a cordon by someone else, …): what holds them back.
fn only_held_back_left(p: &Planner<'_>, f: &Findings<'_>) -> Option<String> {
    let mut left = p
        .states
        .iter()
        .filter(|(_, s)| **s != NodeState::UpToDate)
        .map(|(name, _)| name)
        .peekable();
    left.peek()?;
    let mut reasons = Vec::new();
    for name in left {
        let mut holding = f.gates.holding_back(name).peekable();
        holding.peek()?;
        for v in holding {
            if !reasons.contains(&v.reason) {
                reasons.push(v.reason);
            }
        }
    }
    let said: Vec<&str> = f
        .gates
        .verdicts
        .iter()
        .filter(|v| reasons.contains(&v.reason))
        .map(|v| v.message.as_str())
        .collect();
    Some(format!(
        "every node that is not held back on purpose runs the target; {}",
        said.join("; ")
    ))
}
