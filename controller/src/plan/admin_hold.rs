//! Nodes an admin holds (label `node.bootc.dev/hold=true`, [`bootc_crds::HOLD_LABEL`]):
//! the spec a held node keeps, and the BootcNode's `status.held`. (Which members are held
//! is read with their other labels, in `membership`; that a held node gets no slot is
//! the hold gate's, in `gates/hold.rs`.)
//!
//! A held member is not moved to a new target (its `desiredImage` stays; a pull it already
//! has may finish) and is never a slot candidate. A node that holds a slot when the hold
//! arrives keeps going: it may be draining or rebooting, and stopping it halfway is worse.
//! Holding is neither unavailability nor a problem: it spends no budget, halts nothing and
//! never makes the pool `Degraded`.

use std::collections::BTreeSet;

use bootc_crds::node::BootcNodeSpec;

use super::Planner;
use super::actions::Action;
use super::world::{BootcView, NodeView};

/// Keeps the image the BootcNode asks for now: a held node is not moved to a new target.
pub(super) fn keep_image(spec: &mut BootcNodeSpec, bootc: &BootcView) {
    spec.desired_image = bootc.spec().desired_image.clone();
    spec.desired_image_state = bootc.spec().desired_image_state;
}

/// Each member's BootcNode `status.held`: written when the node is held, removed when
/// the hold is lifted; nothing is written while it already says so. `members` are those
/// not settled: a settled member's `status.held` already says what its labels say.
pub(super) fn report(p: &mut Planner<'_>, members: &[&NodeView], held: &BTreeSet<String>) {
    for view in members {
        let Some(bootc) = view.bootc.as_ref().filter(|b| !b.deleting()) else {
            continue;
        };
        let is_held = held.contains(&*view.name);
        let written = bootc.status().and_then(|s| s.held) == Some(true);
        if is_held != written {
            p.actions.push(Action::SetHeld {
                node: String::from(&*view.name),
                held: is_held,
            });
        }
    }
}
