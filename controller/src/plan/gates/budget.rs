//! The reboot budget (`spec.rollout.maxUnavailable`): every slot in use (slot holders,
//! and members without a slot that are NotReady) while staged nodes wait for one that no
//! other gate holds back. Not deliberate: a budget that stays full is a stall.

use bootc_crds::pool::{GatePhase, GateReason};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::Listing;
use super::super::world::BootcView;
use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, j: &mut Judgement) -> Option<Verdict> {
    if !facts.candidates.iter().any(|c| !j.holds_back(&c.name)) {
        return None;
    }
    let rollout = &facts.snap.pool.spec.rollout;
    let budget = j.read(super::super::limits::budget(rollout, facts.members.len()));
    if facts.taken < budget {
        return None;
    }
    let max = match &rollout.max_unavailable {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    // The members the pass found using a slot, nothing copied: a full budget is most
    // plans of a rollout.
    let (mut holding, mut not_ready) = (Listing::default(), Listing::default());
    for v in facts.slot_users {
        if v.bootc.as_ref().is_some_and(BootcView::holds_slot) {
            holding.push(&v.name);
        } else {
            not_ready.push(&v.name);
        }
    }
    let mut message = format!(
        "reboot budget full: {}/{budget} slots in use (maxUnavailable {max})",
        facts.taken
    );
    if !holding.is_empty() {
        message.push_str(&format!(": held by {}", holding.text()));
    }
    if !not_ready.is_empty() {
        message.push_str(&format!("; NotReady nodes count too: {}", not_ready.text()));
    }
    Some(Verdict::pool(
        GateReason::BudgetFull,
        GatePhase::Slots,
        message,
    ))
}
