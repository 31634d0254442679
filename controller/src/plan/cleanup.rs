//! A pool being deleted: every node it owns is let go as a leaving node is (its drain
//! cancelled, the Node uncordoned when the pool cordoned it and never when an admin did,
//! its BootcNode deleted, so that its agent drops the target and a locked staged
//! deployment stays locked), the managed label comes off the Nodes no other pool selects,
//! and only when nothing is left does the finalizer come off.

use bootc_crds::MANAGED_LABEL;

use super::Planner;
use super::actions::Action;
use super::membership::leave;
use super::world::NodeView;

/// The other pools that select `view`'s Node.
fn others<'a>(p: &Planner<'a>, view: &NodeView) -> Vec<&'a str> {
    p.snap
        .other_pools()
        .filter(|(_, s)| {
            view.node
                .as_ref()
                .is_some_and(|n| bootc_crds::selector::matches(s, n.labels()))
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Plans the clean-up of a pool being deleted; the finalizer comes off once there is
/// nothing left to do.
pub(super) fn plan(p: &mut Planner<'_>) {
    let pool = p.snap.pool.name.as_str();
    let mut remaining = false;
    for view in &p.snap.nodes {
        let owned = view
            .bootc
            .as_ref()
            .is_some_and(|b| b.owner.as_deref() == Some(pool));
        let others = others(p, view);
        if owned {
            remaining = true;
            leave(p, view, &others);
        } else if let Some(info) = &view.node
            && info.labels().contains_key(MANAGED_LABEL)
            && others.is_empty()
            && bootc_crds::selector::matches(&p.snap.pool.spec.node_selector, info.labels())
        {
            remaining = true;
            p.actions.push(Action::Unlabel {
                node: String::from(&*view.name),
            });
        }
    }
    if !remaining && p.snap.drains.is_empty() && p.snap.pool.finalized {
        p.actions.push(Action::RemoveFinalizer);
    }
}
