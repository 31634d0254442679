//! `spec.rollout.paused`: no new slot while it is set; nodes already under way finish.

use bootc_crds::conditions::up_to_date;
use bootc_crds::pool::{GatePhase, GateReason};

use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    facts.snap.pool.spec.rollout.paused.then(|| {
        Verdict::pool(GateReason::Paused, GatePhase::Slots, "paused".to_owned())
            .deliberate()
            .up_to_date(up_to_date::PAUSED)
    })
}
