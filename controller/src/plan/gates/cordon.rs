//! Nodes someone else cordoned (`spec.disruption.respectCordon`, the default): such a
//! member gets no slot while it is unschedulable (it may still stage), and the controller
//! never uncordons it.

use std::collections::BTreeSet;

use bootc_crds::pool::GateReason;

use super::super::actions::NodeState;
use super::{Facts, Judgement, Verdict, named};

pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    // A member on the target is never held back by a cordon: when every member is,
    // none is looked at.
    let done = facts.states.count(NodeState::UpToDate) == facts.members.len();
    if !facts.snap.pool.spec.disruption.respect_cordon || done {
        return None;
    }
    // The members the pass found cordoned, without a slot, by someone else.
    let nodes: BTreeSet<String> = facts
        .cordoned
        .iter()
        .filter(|v| facts.states.get(&v.name) != Some(&NodeState::UpToDate))
        .map(|v| String::from(&*v.name))
        .collect();
    let message = format!(
        "cordoned by someone else: {}; uncordon them (or set disruption.respectCordon to false) to update them",
        named(&nodes)
    );
    Verdict::nodes(GateReason::CordonedByOthers, nodes, message)
}
