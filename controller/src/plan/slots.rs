//! Reboot slots: the budget (`maxUnavailable`, NotReady members counting against it), as
//! far as the gates' verdicts let slots through, the order in which staged nodes get a
//! slot, and the annotations that grant one.

use std::collections::BTreeMap;

use bootc_crds::{REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION};

use super::actions::{Action, NodeState};
use super::candidates::Candidates;
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
pub fn grant_order<'a, I>(candidates: I, limit: usize) -> Vec<&'a NodeView>
where
    I: IntoIterator<Item = &'a NodeView>,
    I::IntoIter: Clone,
{
    let placed = candidates.into_iter().map(|v| (usize::MAX, v));
    let order = order_of(placed, limit, (false, None));
    order.into_iter().map(|(_, v)| v).collect()
}

/// A candidate and its place among the members (`usize::MAX` where it is not known).
type Placed<'a> = (usize, &'a NodeView);

/// [`grant_order`], told whether the candidates are known to be `in_name_order`, and
/// how many zones they are in at most, when that is known (`zones`).
fn order_of<'a>(
    candidates: impl Iterator<Item = Placed<'a>> + Clone,
    limit: usize,
    (in_name_order, zones): (bool, Option<usize>),
) -> Vec<Placed<'a>> {
    if limit == 0 {
        return Vec::new();
    }
    // The candidates come in name order (the members'): then a zone's nodes past its
    // first `limit` are never in the order (each node of its zone before it comes
    // first), and are not kept. Unless the member pass knows they are in order, each
    // name is compared with the one before it; should one not come after it, the zones
    // are gathered again from every candidate and sorted.
    // Then, too, once as many zones as there may be are found, each with its first
    // `limit` nodes, the rest of the candidates cannot change the order: none is read.
    let known = in_name_order.then(|| {
        let full = zones.map(|zones| (zones, limit));
        zones_while(candidates.clone(), limit, full, |_| true).unwrap_or_default()
    });
    let zones = match known.or_else(|| zones_in_name_order(candidates.clone(), limit)) {
        Some(zones) => zones,
        None => {
            let mut zones = zones_of(candidates, usize::MAX);
            for (_, nodes) in &mut zones {
                nodes.sort_by(|(_, a), (_, b)| a.name.cmp(&b.name));
            }
            zones
        }
    };
    in_turn(zones, limit)
}

/// The zone a candidate is in (`""` without one).
pub(super) fn zone(v: &NodeView) -> &str {
    v.node
        .as_ref()
        .and_then(|n| n.zone.as_deref())
        .unwrap_or_default()
}

/// Each zone's candidates in the order they come, at most `cap` each; the zones by name.
/// The zones are few: each candidate's is looked for among those found so far, the last
/// one found first, and a tree is built only for many.
fn zones_of<'a>(
    candidates: impl Iterator<Item = Placed<'a>>,
    cap: usize,
) -> Vec<(&'a str, Vec<Placed<'a>>)> {
    zones_while(candidates, cap, None, |_| true).unwrap_or_default()
}

/// [`zones_of`] with each zone's first `limit` kept, when the candidates come in strict
/// name order; `None` when they do not.
fn zones_in_name_order<'a>(
    candidates: impl Iterator<Item = Placed<'a>>,
    limit: usize,
) -> Option<Vec<(&'a str, Vec<Placed<'a>>)>> {
    let mut last: Option<&'a str> = None;
    zones_while(candidates, limit, None, |v: &'a NodeView| {
        let after = last.is_none_or(|l| l < &*v.name);
        last = Some(&v.name);
        after
    })
}

/// The zones of the candidates, at most `cap` each, as long as `go_on` says so of each
/// candidate (`None` once it does not). With `full` (`(zones, n)`: there are at most
/// `zones` zones), the candidates are read no further once that many zones have `n`
/// nodes each.
fn zones_while<'a>(
    candidates: impl Iterator<Item = Placed<'a>>,
    cap: usize,
    full: Option<(usize, usize)>,
    mut go_on: impl FnMut(&'a NodeView) -> bool,
) -> Option<Vec<(&'a str, Vec<Placed<'a>>)>> {
    const FEW: usize = 16;
    let mut zones: Vec<(&'a str, Vec<Placed<'a>>)> = Vec::new();
    let mut many: BTreeMap<&'a str, usize> = BTreeMap::new();
    let mut last = 0;
    // How many zones have `n` nodes, with `full`.
    let mut filled = 0;
    for (place, v) in candidates {
        if !go_on(v) {
            return None;
        }
        let z = zone(v);
        let found = if zones.get(last).is_some_and(|(n, _)| same_zone(n, z)) {
            Some(last)
        } else if zones.len() <= FEW {
            zones.iter().position(|(n, _)| same_zone(n, z))
        } else {
            many.get(z).copied()
        };
        let at = found.unwrap_or_else(|| {
            zones.push((z, Vec::new()));
            if zones.len() > FEW && many.is_empty() {
                many.extend(zones.iter().enumerate().map(|(i, (n, _))| (*n, i)));
            } else if zones.len() > FEW {
                many.insert(z, zones.len() - 1);
            }
            zones.len() - 1
        });
        last = at;
        let nodes = &mut zones[at].1;
        if nodes.len() < cap {
            nodes.push((place, v));
            if let Some((most, n)) = full
                && nodes.len() == n
            {
                filled += 1;
                if filled == most {
                    break;
                }
            }
        }
    }
    zones.sort_by(|a, b| a.0.cmp(b.0));
    Some(zones)
}

/// Whether `a` and `b` name the same zone. Most zones compared are not the candidate's,
/// and zone names of a cluster differ at their ends (`zone-a`, `zone-b`): the last bytes
/// are compared before the whole names.
pub(super) fn same_zone(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// The zones' nodes (each zone's in order, the zones by name) taken in turn, the first
/// `limit`. No two nodes share a zone and a rank, so taking the zones round by round is
/// the order of (rank, zone) without sorting every candidate by it.
fn in_turn<'a>(zones: Vec<(&'a str, Vec<Placed<'a>>)>, limit: usize) -> Vec<Placed<'a>> {
    let total: usize = zones.iter().map(|(_, nodes)| nodes.len()).sum();
    let mut zones: Vec<std::vec::IntoIter<Placed<'a>>> = zones
        .into_iter()
        .map(|(_, nodes)| nodes.into_iter())
        .collect();
    let mut order = Vec::with_capacity(limit.min(total));
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
    ((candidates, in_name_order), taken): ((&Candidates<'_>, bool), usize),
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
    let open = candidates
        .placed()
        .filter(|(_, v)| !gates.holds_back(&v.name));
    let order = order_of(open, free, (in_name_order, candidates.zones()));
    // At most three actions per grant: room for them at once, not by doubling a vector
    // of large actions again and again (each time a copy of all of them).
    p.actions.reserve(3 * order.len());
    // Every grant of the plan is stamped with its time: written once.
    let at = stamp(p.snap.now);
    for (place, view) in order {
        // Its state is recorded at its place among the members, without a search.
        p.states.expect(Some(place));
        grant_one(p, view, target, &at);
    }
    p.states.expect(None);
}

/// Grants one slot: the annotation (with the prior cordon state) in the node's one
/// write, then cordon and drain.
fn grant_one(p: &mut Planner<'_>, view: &NodeView, target: &Target, at: &str) {
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
    annotations.insert(REBOOT_SLOT_ANNOTATION.to_owned(), Some(at.to_owned()));
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

    use super::{ZONE_LABEL, grant_order, order_of};
    use crate::plan::world::{NodeInfo, NodeView};

    proptest! {
        /// The grant order is the nodes by their rank within their zone (by name), then
        /// by zone, for any candidates in any order (in name order, or not from some
        /// place on), zoned or not, in few zones or many, cut at any limit.
        #[test]
        fn the_grant_order_is_rank_in_zone_then_zone(
            few in any::<bool>(),
            nodes in proptest::collection::btree_map(0u16..500, proptest::option::of(0u8..30), 0..60),
            shuffle in any::<u64>(),
            limit in 0usize..80,
            extra in 0usize..3,
        ) {
            // Few zones, or up to 31.
            let nodes: BTreeMap<u16, Option<u8>> = nodes
                .into_iter()
                .map(|(n, zone)| (n, zone.map(|z| if few { z % 4 } else { z })))
                .collect();
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
            let got: Vec<&str> = grant_order(refs.iter().copied(), limit).iter().map(|v| &*v.name).collect();
            let expected: Vec<&str> =
                expected.iter().take(limit).map(|(_, _, n)| n.as_str()).collect();
            prop_assert_eq!(&got, &expected);
            // Told they are in name order, as the member pass tells it of its members.
            let mut sorted = refs.clone();
            sorted.sort_by(|a, b| a.name.cmp(&b.name));
            let placed = || sorted.clone().into_iter().enumerate();
            let told = order_of(placed(), limit, (true, None));
            let told: Vec<&str> = told.iter().map(|(_, v)| &*v.name).collect();
            prop_assert_eq!(&told, &expected);
            // Told also how many zones there are at most: exactly, or more than there are.
            let zones = nodes.values().collect::<std::collections::BTreeSet<_>>().len();
            for most in [zones, zones + 1 + extra] {
                let told = order_of(placed(), limit, (true, Some(most)));
                // Each with its place.
                prop_assert!(told.iter().all(|(at, v)| sorted[*at].name == v.name));
                let told: Vec<&str> = told.iter().map(|(_, v)| &*v.name).collect();
                prop_assert_eq!(&told, &expected, "told of at most {} zones", most);
            }
        }
    }
}
