//! What holds up each member's drain, kept in its BootcNode's `status.drainBlocked`, and
//! listed for the pool's `UpToDate` message.

use std::collections::BTreeMap;

use bootc_crds::bounds::{DRAIN_MESSAGE_MAX_LEN, truncate};
use bootc_crds::conditions::to_time;
use bootc_crds::node::DrainBlocked;

use super::Planner;
use super::actions::{Action, NodeState, events};
use super::membership::Members;
use super::world::{DrainView, NodeView};

/// The drain reports, and the lines for the pool's `UpToDate` message (returned): each
/// written (with a `DrainBlocked` event, recorded only once the write succeeded) when it
/// changes, cleared when the drain moves again, ends or is gone.
///
/// A settled member has no `status.drainBlocked` written: while no drain is held up,
/// only the `unsettled` members are read.
pub(super) fn report(
    p: &mut Planner<'_>,
    members: &Members<'_>,
    unsettled: &[&NodeView],
) -> Vec<String> {
    let mut listed = Vec::new();
    // The drains held up, usually none: looked up for each member instead of every drain.
    let held_up: BTreeMap<&str, &String> = p
        .snap
        .drains
        .iter()
        .filter_map(|(node, drain)| match drain {
            DrainView::Running { blocked: Some(why) } => Some((node.as_str(), why)),
            _ => None,
        })
        .collect();
    if held_up.is_empty() {
        drains_of(p, unsettled.iter().copied(), &held_up, &mut listed);
    } else {
        drains_of(p, members.iter(), &held_up, &mut listed);
    }
    listed
}

/// [`report`] for `members`, listing theirs held up in `listed`.
fn drains_of<'v>(
    p: &mut Planner<'_>,
    members: impl Iterator<Item = &'v NodeView>,
    held_up: &BTreeMap<&str, &String>,
    listed: &mut Vec<String>,
) {
    for view in members {
        let Some(bootc) = &view.bootc else { continue };
        let why = match held_up.get(&*view.name) {
            Some(why) if p.states.get(&view.name) == Some(&NodeState::Rebooting) => {
                Some(truncate((*why).clone(), DRAIN_MESSAGE_MAX_LEN))
            }
            _ => None,
        };
        let written = bootc.status().and_then(|s| s.drain_blocked.as_ref());
        if let Some(why) = &why {
            listed.push(format!("node {}: drain blocked: {why}", view.name));
        }
        if written.map(|w| &w.message) == why.as_ref() {
            continue;
        }
        let name = String::from(&*view.name);
        let blocked = why.clone().map(|message| DrainBlocked {
            message,
            since: to_time(p.snap.now),
        });
        p.actions.push(Action::SetDrainBlocked {
            node: name.clone(),
            blocked,
        });
        if let Some(why) = why {
            let message = format!("node {name}: drain blocked: {why}");
            p.node_event(&name, true, events::DRAIN_BLOCKED, message);
        }
    }
}
