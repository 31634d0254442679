//! A pull Secret the controller may not read (a namespace the admin did not allow):
//! `Degraded/PullSecretNotAllowed`, in its place in the reasons' precedence, over what the
//! status would say otherwise (a tag resolved without credentials, nodes failing to pull).

use bootc_crds::conditions::{self, NewCondition, pool_degraded};
use bootc_crds::pool::BootcNodePoolStatus;

use super::world::Snapshot;

/// Where `reason` stands in the precedence (`Healthy` and unknown reasons last).
fn rank(reason: &str) -> usize {
    pool_degraded::PRECEDENCE
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(pool_degraded::PRECEDENCE.len())
}

/// Sets `Degraded/PullSecretNotAllowed` in `status` when the pool's pull Secret may not be
/// read and no reason of higher precedence holds.
pub(super) fn not_allowed(snap: &Snapshot, status: &mut BootcNodePoolStatus) {
    let Some(message) = &snap.pull_secret.not_allowed else {
        return;
    };
    let reason = pool_degraded::PULL_SECRET_NOT_ALLOWED;
    let at = status
        .conditions
        .iter()
        .position(|c| c.type_ == conditions::DEGRADED);
    if at.is_some_and(|i| rank(&status.conditions[i].reason) <= rank(reason)) {
        return;
    }
    // The condition before this plan, so that the transition time moves only on a flip.
    let previous = snap
        .pool
        .status
        .as_ref()
        .map_or(&[][..], |s| s.conditions.as_slice());
    let new = NewCondition {
        type_: conditions::DEGRADED,
        status: true,
        reason,
        message: message.clone(),
    };
    let Some(condition) = conditions::next(previous, new, snap.pool.generation, snap.now) else {
        return;
    };
    match at {
        Some(i) => status.conditions[i] = condition,
        None => status.conditions.push(condition),
    }
}
