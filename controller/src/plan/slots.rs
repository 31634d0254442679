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
/// consecutive grants spread across zones; nodes without a zone form one more zone. Only
/// the first `limit` of that order are returned.
pub fn grant_order<'a>(candidates: &[&'a NodeView], limit: usize) -> Vec<&'a NodeView> {
    if limit == 0 {
        return Vec::new();
    }
    let zone = |v: &'a NodeView| -> &'a str {
        v.node
            .as_ref()
            .and_then(|n| n.zone.as_deref())
            .unwrap_or_default()
    };
    let mut by_zone: BTreeMap<&'a str, Vec<&'a NodeView>> = BTreeMap::new();
    for v in candidates {
        by_zone.entry(zone(v)).or_default().push(v);
    }
    // Each zone by name (the candidates come in name order, which the stable sort finds
    // in one pass), then the zones in turn. No two nodes share a zone and a rank, so
    // taking the zones round by round is the order of (rank, zone) without sorting every
    // candidate by it.
    let mut zones: Vec<std::vec::IntoIter<&'a NodeView>> = by_zone
        .into_values()
        .map(|mut nodes| {
            nodes.sort_by(|a, b| a.name.cmp(&b.name));
            nodes.into_iter()
        })
        .collect();
    let mut order = Vec::with_capacity(limit.min(candidates.len()));
    while !zones.is_empty() && order.len() < limit {
        zones.retain_mut(|nodes| {
            if order.len() == limit {
                return true;
            }
            match nodes.next() {
                Some(v) => {
                    order.push(v);
                    true
                }
                None => false,
            }
        });
    }
    order
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
    if free == 0 {
        // Every slot taken (most plans of a rollout): no candidate to order.
        return;
    }
    let open: Vec<&NodeView> = candidates
        .iter()
        .filter(|v| !gates.holds_back(&v.name))
        .copied()
        .collect();
    let order = grant_order(&open, free);
    // At most three actions per grant: room for them at once, not by doubling a vector
    // of large actions again and again (each time a copy of all of them).
    p.actions.reserve(3 * order.len());
    for view in order {
        grant_one(p, view, target);
    }
}

/// Grants one slot: the annotation (with the prior cordon state) in the node's one
/// write, then cordon and drain.
fn grant_one(p: &mut Planner<'_>, view: &NodeView, target: &Target) {
    let (Some(info), Some(bootc)) = (&view.node, &view.bootc) else {
        return;
    };
    // One write per node: a spec update planned for it is folded into the grant. It was
    // planned before the grants (each node is granted once): only those are searched.
    let mut annotations = BTreeMap::new();
    let before_grants = p.grants_from.unwrap_or(p.actions.len());
    if let Some(i) = p.actions[..before_grants]
        .iter()
        .position(|a| matches!(a, Action::Update { node, .. } if **node == *view.name))
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
        node: String::from(&*view.name),
        resource_version: bootc.resource_version(),
        spec,
        annotations,
    });
    if !info.unschedulable {
        p.actions.push(Action::Cordon {
            node: String::from(&*view.name),
        });
    }
    p.actions.push(Action::StartDrain {
        node: String::from(&*view.name),
    });
    p.states.insert(&view.name, NodeState::Rebooting);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::{ZONE_LABEL, grant_order};
    use crate::plan::world::{NodeInfo, NodeView};

    proptest! {
        /// The grant order is the nodes by their rank within their zone (by name), then
        /// by zone, for any candidates in any order, zoned or not, cut at any limit.
        #[test]
        fn the_grant_order_is_rank_in_zone_then_zone(
            nodes in proptest::collection::btree_map(0u16..500, proptest::option::of(0u8..4), 0..60),
            shuffle in any::<u64>(),
            limit in 0usize..80,
        ) {
            let views: Vec<NodeView> = nodes
                .iter()
                .map(|(n, zone)| {
                    let labels: BTreeMap<String, String> = zone
                        .iter()
                        .map(|z| (ZONE_LABEL.to_owned(), format!("zone-{z}")))
                        .collect();
                    NodeView {
                        name: format!("node-{n}").into(),
                        node: Some(NodeInfo::with_labels(labels)),
                        bootc: None,
                    }
                })
                .collect();
            let mut refs: Vec<&NodeView> = views.iter().collect();
            // Any order in: rotated and, by the seed's low bit, reversed.
            let turn = usize::try_from(shuffle).unwrap_or(0) % refs.len().max(1);
            refs.rotate_left(turn);
            if shuffle & 1 == 1 {
                refs.reverse();
            }
            let zone_of = |name: &str| {
                let n: u16 = name["node-".len()..].parse().unwrap();
                nodes[&n].map_or(String::new(), |z| format!("zone-{z}"))
            };
            let mut expected: Vec<(usize, String, String)> = views
                .iter()
                .map(|v| {
                    let zone = zone_of(&v.name);
                    let rank = views
                        .iter()
                        .filter(|o| zone_of(&o.name) == zone && o.name < v.name)
                        .count();
                    (rank, zone, String::from(&*v.name))
                })
                .collect();
            expected.sort();
            let got: Vec<&str> = grant_order(&refs, limit).iter().map(|v| &*v.name).collect();
            let expected: Vec<&str> =
                expected.iter().take(limit).map(|(_, _, n)| n.as_str()).collect();
            prop_assert_eq!(got, expected);
        }
    }
}
