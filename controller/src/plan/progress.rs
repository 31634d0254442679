//! Stall detection: the rollout advanced when any member's state changed since the last
//! plan; no advance for [`STALL_AFTER`] while work remains is a stall (`Progressing`
//! `False`, reason `Stalled`). Work left only on held nodes is no stall
//! (`True/HeldNodesLeft`).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use bootc_crds::conditions::progressing;
use chrono::{DateTime, Utc};

use super::Planner;
use super::actions::NodeState;
use super::world::Progress;

/// No node advancing for this long while work remains is a stall.
pub const STALL_AFTER: Duration = Duration::from_secs(600);

/// The progress after this plan: unchanged when every member is in the state it was,
/// else advanced now.
pub fn advance(
    previous: Option<Progress>,
    states: &BTreeMap<String, NodeState>,
    now: DateTime<Utc>,
) -> Progress {
    let mut h = DefaultHasher::new();
    states.hash(&mut h);
    let fingerprint = h.finish();
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
/// nothing to measure a stall from yet.
pub(super) fn condition(
    p: &mut Planner<'_>,
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
    if let Some(held) = super::admin_hold::only_held_left(p) {
        // Done but for the held nodes: nothing is stuck, and nothing to wait for but
        // the admin lifting the holds.
        return (true, progressing::HELD_NODES_LEFT, held_message(p, held));
    }
    let soaking = p
        .canary
        .as_ref()
        .is_some_and(|c| c.phase == bootc_crds::pool::CanaryPhase::Soaking);
    if soaking {
        // Waiting on purpose, for at most soakSeconds: no stall.
        return (
            true,
            progressing::ADVANCING,
            "the canary nodes are soaking".to_owned(),
        );
    }
    if let Some(stalled_for) = stalled_for.filter(|d| *d >= STALL_AFTER)
        && !p.snap.pool.spec.rollout.paused
    {
        let why = if !p.unhealthy.is_empty() {
            super::list(&p.unhealthy)
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

/// Who is left, held or cordoned by someone else, and how to let them go on.
fn held_message(p: &Planner<'_>, left: Vec<String>) -> String {
    let (cordoned, held): (Vec<String>, Vec<String>) = left
        .into_iter()
        .partition(|n| p.cordoned.contains(n) && !p.held.contains(n));
    let mut parts = Vec::new();
    if !held.is_empty() {
        parts.push(format!(
            "held: {}; remove their {} label to update them",
            super::list(&held),
            bootc_crds::HOLD_LABEL
        ));
    }
    if !cordoned.is_empty() {
        parts.push(format!(
            "cordoned by someone else: {}; uncordon them (or set disruption.respectCordon to false) to update them",
            super::list(&cordoned)
        ));
    }
    format!(
        "every node that is not held or cordoned runs the target; {}",
        parts.join("; ")
    )
}
