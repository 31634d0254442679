//! Nodes an admin holds (label `node.bootc.dev/hold=true`, [`bootc_crds::HOLD_LABEL`]):
//! which members are held, the spec a held node keeps, the BootcNode's `status.held`, and
//! whether only held nodes are left to update.
//!
//! A held member is not moved to a new target (its `desiredImage` stays; a pull it already
//! has may finish) and is never a slot candidate. A node that holds a slot when the hold
//! arrives keeps going: it may be draining or rebooting, and stopping it halfway is worse.
//! Holding is neither unavailability nor a problem: it spends no budget, halts nothing and
//! never makes the pool `Degraded`.

use std::collections::BTreeSet;

use bootc_crds::node::BootcNodeSpec;

use super::Planner;
use super::actions::{Action, NodeState};
use super::world::{BootcView, NodeView};

/// The members whose Node carries the hold.
pub(super) fn held(members: &[&NodeView]) -> BTreeSet<String> {
    members
        .iter()
        .filter(|v| v.node.as_ref().is_some_and(|n| n.held()))
        .map(|v| v.name.clone())
        .collect()
}

/// Keeps the image the BootcNode asks for now: a held node is not moved to a new target.
pub(super) fn keep_image(spec: &mut BootcNodeSpec, bootc: &BootcView) {
    spec.desired_image = bootc.spec().desired_image.clone();
    spec.desired_image_state = bootc.spec().desired_image_state;
}

/// The member is held and waits for its hold to be lifted before it goes on: it holds no
/// slot, lacks the target and is not degraded.
pub(super) fn waits(p: &Planner<'_>, name: &str) -> bool {
    (p.held.contains(name) || p.cordoned.contains(name))
        && matches!(
            p.states.get(name),
            Some(NodeState::Pending | NodeState::Staging | NodeState::Staged)
        )
}

/// The held members that wait, when every member without the target is one of them.
pub(super) fn only_held_left(p: &Planner<'_>) -> Option<Vec<String>> {
    let left: Vec<String> = p
        .states
        .iter()
        .filter(|(_, s)| **s != NodeState::UpToDate)
        .map(|(name, _)| name.clone())
        .collect();
    (!left.is_empty() && left.iter().all(|n| waits(p, n))).then_some(left)
}

/// Each member's BootcNode `status.held`: written when the node is held, removed when
/// the hold is lifted; nothing is written while it already says so.
pub(super) fn report(p: &mut Planner<'_>, members: &[&NodeView]) {
    for view in members {
        let Some(bootc) = view.bootc.as_ref().filter(|b| !b.deleting()) else {
            continue;
        };
        let held = p.held.contains(&view.name);
        let written = bootc.status().and_then(|s| s.held) == Some(true);
        if held != written {
            p.actions.push(Action::SetHeld {
                node: view.name.clone(),
                held,
            });
        }
    }
}
