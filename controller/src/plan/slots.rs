//! Reboot slots: the budget (`maxUnavailable`, NotReady members counting against it), as
//! far as the gates' verdicts let slots through, the order in which staged nodes get a
//! slot, and the annotations that grant one.

use std::collections::BTreeMap;

use bootc_crds::{REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION};

use super::actions::{Action, NodeState};
use super::gates::Judgement;
use super::member::wanted_spec;
use super::target::Target;
use super::world::NodeView;
use super::{Planner, stamp};

/// The label that says which zone a node is in.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The order in which candidates get slots: by name within each zone, zones taken in
/// turn (the first node of every zone, then the second of every zone, …), so that
/// consecutive grants spread across zones; nodes without a zone form one more zone.
pub fn grant_order<'a>(candidates: &[&'a NodeView]) -> Vec<&'a NodeView> {
    let zone = |v: &'a NodeView| -> &'a str {
        v.node
            .as_ref()
            .and_then(|n| n.labels().get(ZONE_LABEL))
            .map_or("", String::as_str)
    };
    let mut by_zone: BTreeMap<&'a str, Vec<&'a NodeView>> = BTreeMap::new();
    for v in candidates {
        by_zone.entry(zone(v)).or_default().push(v);
    }
    let mut ranked: Vec<(usize, &'a str, &'a NodeView)> = Vec::with_capacity(candidates.len());
    for (zone, mut nodes) in by_zone {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        ranked.extend(
            nodes
                .into_iter()
                .enumerate()
                .map(|(rank, v)| (rank, zone, v)),
        );
    }
    ranked.sort_by(|a, b| (a.0, a.1, &a.2.name).cmp(&(b.0, b.1, &b.2.name)));
    ranked.into_iter().map(|(_, _, v)| v).collect()
}

/// Grants free slots of the budget to the candidates, in [`grant_order`], as far as the
/// gates let them through: none while one closes new slots for the pool, as many as it
/// admits (the canary), and none to a node a gate holds back. `taken` counts the slots
/// in use (holders and NotReady members).
pub(super) fn grant(
    p: &mut Planner<'_>,
    (candidates, taken): (&[&NodeView], usize),
    gates: &Judgement,
    pool_size: usize,
    target: &Target,
) {
    // Everything planned so far is done before the first grant starts (see
    // `Plan::grants_from`).
    p.grants_from = Some(p.actions.len());
    let budget = p.read(super::limits::budget(&p.snap.pool.spec.rollout, pool_size));
    let mut free = budget.saturating_sub(taken);
    if let Some(admitted) = gates.slots_admitted() {
        free = free.min(admitted);
    }
    let open: Vec<&NodeView> = candidates
        .iter()
        .filter(|v| !gates.holds_back(&v.name))
        .copied()
        .collect();
    for view in grant_order(&open).into_iter().take(free) {
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
