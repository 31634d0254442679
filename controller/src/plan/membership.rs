//! Who belongs to the pool: the nodes its selector matches and the BootcNodes it owns,
//! conflicts with other pools, and the clean-up of a node that leaves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use foldhash::fast::FixedState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use bootc_crds::node::DesiredImageState;

use bootc_crds::{MANAGED_LABEL, REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION};

use super::Planner;
use super::actions::Action;
use super::holder;
use super::world::{NodeView, Snapshot};

/// Who belongs to the pool, and the nodes it shares with other pools.
pub(super) struct Membership<'a> {
    /// The members, in snapshot order.
    pub members: Vec<&'a NodeView>,
    /// Where each member is in the snapshot's views.
    pub positions: Vec<usize>,
    /// Nodes another pool selects or owns too, as messages, and their names.
    pub conflicts: Vec<String>,
    pub conflicted: BTreeSet<String>,
    /// The members an admin holds ([`super::admin_hold`]).
    pub held: BTreeSet<String>,
}

/// The pool's members, in snapshot order. Leavers get their clean-up actions; nodes
/// another pool also selects are reported as conflicts (and stay members only when this
/// pool already owns them). Under an invalid spec the owned nodes are kept as they are.
pub(super) fn members<'a>(p: &mut Planner<'a>, invalid: bool) -> Membership<'a> {
    let snap = p.snap;
    let pool = &snap.pool;
    let selectors = OtherSelectors::of(snap);
    let mut out = Membership {
        members: Vec::with_capacity(snap.nodes.len()),
        positions: Vec::with_capacity(snap.nodes.len()),
        conflicts: Vec::new(),
        conflicted: BTreeSet::new(),
        held: BTreeSet::new(),
    };
    // What each Node's labels and BootcNode's owner say, read again only for nodes
    // whose objects changed since the plan before (`settled`).
    let mut kept = snap.settled.lock();
    let labels = kept.labels(&pool.name, &pool.spec.node_selector, &snap.nodes);
    for (at, (view, &read)) in snap.nodes.iter().zip(labels).enumerate() {
        let owner = view.bootc.as_ref().and_then(|b| b.owner.as_deref());
        let owned = read.owned;
        if invalid {
            // Nothing is rolled out under an invalid spec; owned nodes are kept as they are.
            if owned {
                out.join(at, view, read.held);
            }
            continue;
        }
        let matches = read.selected;
        let others = selectors.selecting(view.node.as_ref().map(|n| n.labels()));
        if owned && !matches {
            leave(p, view, &others);
            continue;
        }
        if !matches {
            continue;
        }
        let foreign_owner = owner.filter(|_| !owned);
        if let Some(conflict) = conflict(&pool.name, view, foreign_owner, &others) {
            out.conflicts.push(conflict);
            out.conflicted.insert(String::from(&*view.name));
            if !owned {
                continue;
            }
        }
        out.join(at, view, read.held);
    }
    out
}

impl<'a> Membership<'a> {
    /// `view` is a member, held by an admin when `held`.
    fn join(&mut self, at: usize, view: &'a NodeView, held: bool) {
        if held {
            self.held.insert(String::from(&*view.name));
        }
        self.members.push(view);
        self.positions.push(at);
    }
}

/// The other pools' selectors, each filed under one `matchLabels` pair it requires, so
/// that a node is matched only against the selectors its labels may satisfy: with many
/// pools, matching every member against every other pool's selector was most of a plan.
/// The pairs are hashed with foldhash's fixed-seed hasher: every member's labels are
/// looked up, and SipHash cost a plan of a small pool more than its selector matches.
pub(super) struct OtherSelectors<'s> {
    /// Every other pool's name and selector, in the snapshot's order.
    all: Vec<(&'s str, &'s LabelSelector)>,
    /// By a pair each requires: indices into `all`.
    by_pair: HashMap<(&'s str, &'s str), Vec<usize>, FixedState>,
    /// Selectors that require no pair (expressions only, or empty): indices into `all`.
    unfiled: Vec<usize>,
}

impl<'s> OtherSelectors<'s> {
    pub(super) fn of(snap: &'s Snapshot) -> Self {
        let all: Vec<(&str, &LabelSelector)> = snap
            .other_pools()
            .map(|(name, selector)| (name.as_str(), selector))
            .collect();
        let mut by_pair: HashMap<(&str, &str), Vec<usize>, FixedState> = HashMap::default();
        let mut unfiled = Vec::new();
        for (i, (_, selector)) in all.iter().enumerate() {
            match selector.match_labels.iter().flatten().next() {
                Some((k, v)) => by_pair.entry((k.as_str(), v.as_str())).or_default().push(i),
                None => unfiled.push(i),
            }
        }
        OtherSelectors {
            all,
            by_pair,
            unfiled,
        }
    }

    /// The other pools whose selector matches `labels` (none without a Node), in the
    /// snapshot's order.
    pub(super) fn selecting(&self, labels: Option<&BTreeMap<String, String>>) -> Vec<&'s str> {
        let Some(labels) = labels else {
            return Vec::new();
        };
        if self.all.is_empty() {
            return Vec::new();
        }
        let mut maybe = self.unfiled.clone();
        for (k, v) in labels {
            if let Some(filed) = self.by_pair.get(&(k.as_str(), v.as_str())) {
                maybe.extend(filed);
            }
        }
        maybe.sort_unstable();
        maybe.dedup();
        maybe
            .into_iter()
            .map(|i| self.all[i])
            .filter(|(_, selector)| bootc_crds::selector::matches(selector, labels))
            .map(|(name, _)| name)
            .collect()
    }
}

/// The conflict, when another pool selects the node or owns it (`foreign_owner`).
fn conflict(
    pool: &str,
    view: &NodeView,
    foreign_owner: Option<&str>,
    others: &[&str],
) -> Option<String> {
    if foreign_owner.is_none() && others.is_empty() {
        return None;
    }
    let mut pools: BTreeSet<&str> = others.iter().copied().collect();
    pools.extend(foreign_owner);
    pools.insert(pool);
    Some(format!(
        "node {} is selected by pools {}",
        view.name,
        pools.into_iter().collect::<Vec<_>>().join(" and ")
    ))
}

/// A node this pool owns but no longer selects (or whose Node is gone).
pub(super) fn leave(p: &mut Planner<'_>, view: &NodeView, other_pools: &[&str]) {
    let node = String::from(&*view.name);
    if let (Some(info), Some(bootc)) = (&view.node, &view.bootc)
        && !bootc.deleting()
        && bootc.spec().desired_image_state == DesiredImageState::Booted
    {
        if holder::finishing_reboot(p, bootc, info) {
            // Kept, slot and cordon included, until its reboot is over.
            return;
        }
        // The approval is revoked first, on condition of the version read: an agent that
        // recorded its reboot meanwhile makes this fail, and the next plan waits for that
        // reboot; once this is written, the agent cannot record one.
        let mut spec = bootc.spec().clone();
        spec.desired_image_state = DesiredImageState::Staged;
        p.actions.push(Action::Update {
            node: node.clone(),
            resource_version: bootc.resource_version(),
            spec,
            annotations: BTreeMap::new(),
        });
    }
    if p.snap.drains.contains_key(&node) {
        p.actions.push(Action::CancelDrain { node: node.clone() });
    }
    if let (Some(info), Some(bootc)) = (&view.node, &view.bootc) {
        let held = bootc.annotations().contains_key(REBOOT_SLOT_ANNOTATION);
        let was = bootc.annotations().contains_key(WAS_CORDONED_ANNOTATION);
        if held && !was && info.unschedulable {
            p.actions.push(Action::Uncordon { node: node.clone() });
        }
    }
    if view.bootc.as_ref().is_some_and(|b| !b.deleting()) {
        p.actions.push(Action::Delete { node: node.clone() });
    }
    if let Some(info) = &view.node
        && info.labels().contains_key(MANAGED_LABEL)
        && other_pools.is_empty()
    {
        p.actions.push(Action::Unlabel { node });
    }
}

#[cfg(test)]
mod tests;
