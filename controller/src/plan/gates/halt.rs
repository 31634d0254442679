//! `spec.rollout.haltAfterUnhealthy`: once that many slot holders are unhealthy, no new
//! slot is granted until an admin acts (or, with `onFailure: Rollback`, the target is
//! marked failed). The `Degraded` condition says it; `UpToDate` keeps its own reason.

use bootc_crds::pool::{GatePhase, GateReason};

use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, j: &mut Judgement) -> Option<Verdict> {
    let halt_at = j.read(super::super::limits::halt_threshold(
        &facts.snap.pool.spec.rollout,
    ));
    let unhealthy = facts.unhealthy;
    (halt_at > 0 && unhealthy.len() >= halt_at).then(|| {
        Verdict::pool(
            GateReason::RolloutHalted,
            GatePhase::Slots,
            format!(
                "{} slot holders are unhealthy (haltAfterUnhealthy {halt_at}): {}; no new reboots are approved",
                unhealthy.len(),
                super::super::list(unhealthy)
            ),
        )
    })
}
