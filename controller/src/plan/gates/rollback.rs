//! A failed target (`onFailure: Rollback`) with nothing to roll back to: the pool ran no
//! other image before, so no new slot is granted until the spec changes. A rollback with
//! an image to go to is no gate: it goes under the same budget as any update.

use bootc_crds::conditions::up_to_date;
use bootc_crds::pool::{GatePhase, GateReason};

use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    let failed = facts.rolling_back.filter(|r| r.to.is_none())?;
    Some(
        Verdict::pool(
            GateReason::NothingToRollBackTo,
            GatePhase::Slots,
            format!("{} failed; rolling back to nothing", failed.failed),
        )
        .up_to_date(up_to_date::ROLLING_BACK),
    )
}
