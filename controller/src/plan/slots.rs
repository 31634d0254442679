//! Reboot slots: the budget (`maxUnavailable`, NotReady members counting against it),
//! what closes the gate (a halt, a pause, a closed maintenance window), the order in
//! which staged nodes get a slot, and the annotations that grant and release one.

use std::collections::BTreeMap;
use std::time::Duration;

use bootc_crds::{REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION};

use super::actions::{Action, NodeState};
use super::member::wanted_spec;
use super::target::Target;
use super::world::NodeView;
use super::{Planner, stamp};

/// The label that says which zone a node is in.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// `haltAfterUnhealthy` (0: never) and whether the unhealthy holders reached it.
pub(super) fn halted(p: &mut Planner<'_>) -> (usize, bool) {
    let halt_at = p.read(super::limits::halt_threshold(&p.snap.pool.spec.rollout));
    (halt_at, halt_at > 0 && p.unhealthy.len() >= halt_at)
}

/// The order in which candidates get slots: by name within each zone, zones taken in
/// turn (the first node of every zone, then the second of every zone, …), so that
/// consecutive grants spread across zones; nodes without a zone form one more zone.
pub fn grant_order<'a>(candidates: &[&'a NodeView]) -> Vec<&'a NodeView> {
    let zone = |v: &NodeView| {
        v.node
            .as_ref()
            .and_then(|n| n.labels().get(ZONE_LABEL).cloned())
            .unwrap_or_default()
    };
    let mut by_zone: BTreeMap<String, Vec<&'a NodeView>> = BTreeMap::new();
    for v in candidates {
        by_zone.entry(zone(v)).or_default().push(v);
    }
    let mut ranked: Vec<(usize, String, &'a NodeView)> = Vec::new();
    for (zone, mut nodes) in by_zone {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for (rank, v) in nodes.into_iter().enumerate() {
            ranked.push((rank, zone.clone(), v));
        }
    }
    ranked.sort_by(|a, b| (a.0, &a.1, &a.2.name).cmp(&(b.0, &b.1, &b.2.name)));
    ranked.into_iter().map(|(_, _, v)| v).collect()
}

/// Grants free slots to staged, healthy nodes, in [`grant_order`], unless the rollout
/// is halted, paused or outside its maintenance windows.
pub(super) fn grant(p: &mut Planner<'_>, pool_size: usize, target: &Target) {
    // Everything planned so far is done before the first grant starts (see
    // `Plan::grants_from`).
    p.grants_from = Some(p.actions.len());
    let rollout = &p.snap.pool.spec.rollout;
    let budget = p.read(super::limits::budget(rollout, pool_size));
    if halted(p).1 || rollout.paused {
        return;
    }
    if let Some(next) = p.window_closed_until {
        if let Some(next) = next {
            let wait = (next - p.snap.now).to_std().unwrap_or(Duration::ZERO);
            p.requeue_in(wait + Duration::from_millis(10));
        }
        return;
    }
    if super::gates::closed(p) || p.rolling_back.as_ref().is_some_and(|r| r.to.is_none()) {
        return;
    }
    let mut free = budget.saturating_sub(p.holders + p.unavailable);
    if let Some(room) = p.canary_room {
        free = free.min(room);
    }
    let candidates = grant_order(&p.candidates);
    for view in candidates.into_iter().take(free) {
        grant_one(p, view, target);
    }
}

/// Grants one slot: the annotation (with the prior cordon state) in the node's one
/// write, then cordon and drain.
fn grant_one(p: &mut Planner<'_>, view: &NodeView, target: &Target) {
    let (Some(info), Some(bootc)) = (&view.node, &view.bootc) else {
        return;
    };
    // One write per node: a spec update planned for it is folded into the grant.
    let mut annotations = BTreeMap::new();
    if let Some(i) = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::Update { node, .. } if *node == view.name))
        && let Action::Update {
            annotations: planned,
            ..
        } = p.actions.remove(i)
    {
        annotations = planned;
        // The node's earlier update moved into its grant: the grants begin one sooner.
        if let Some(from) = p.grants_from.as_mut()
            && i < *from
        {
            *from -= 1;
        }
    }
    annotations.insert(REBOOT_SLOT_ANNOTATION.to_owned(), Some(stamp(p.snap.now)));
    if info.unschedulable {
        annotations.insert(WAS_CORDONED_ANNOTATION.to_owned(), Some(String::new()));
    }
    let spec = wanted_spec(
        &p.snap.pool.spec,
        p.snap.pull_secret.hash.as_deref(),
        target,
        Some(bootc.spec()),
    );
    p.actions.push(Action::Update {
        node: view.name.clone(),
        resource_version: bootc.resource_version(),
        spec,
        annotations,
    });
    if !info.unschedulable {
        p.actions.push(Action::Cordon {
            node: view.name.clone(),
        });
    }
    p.actions.push(Action::StartDrain {
        node: view.name.clone(),
    });
    p.states.insert(view.name.clone(), NodeState::Rebooting);
}
