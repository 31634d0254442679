//! Nodes an admin holds (label `node.bootc.dev/hold=true`): a held member that waits
//! for its update gets no slot until the hold is lifted. (What else a hold does, keeping
//! the node's image, is in `admin_hold`.) A node already holding a slot finishes.

use std::collections::BTreeSet;

use bootc_crds::pool::GateReason;

use super::{Facts, Judgement, Verdict, named};

pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    let nodes: BTreeSet<String> = facts
        .held
        .iter()
        .filter(|n| facts.waits_for_update(n))
        .cloned()
        .collect();
    let message = format!(
        "held: {}; remove their {} label to update them",
        named(&nodes),
        bootc_crds::HOLD_LABEL
    );
    Verdict::nodes(GateReason::Held, nodes, message)
}
