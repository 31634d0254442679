//! Who belongs to the pool: the nodes its selector matches and the BootcNodes it owns,
//! conflicts with other pools, and the clean-up of a node that leaves.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use foldhash::fast::FixedState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use bootc_crds::node::DesiredImageState;

use bootc_crds::{MANAGED_LABEL, WAS_CORDONED_ANNOTATION};

use super::Planner;
use super::actions::Action;
use super::holder;
use super::settled::LabelsRead;
use super::world::{NodeView, Snapshot};

/// Who belongs to the pool, and the nodes it shares with other pools.
pub(super) struct Membership<'a> {
    /// The members, in snapshot order.
    pub members: Members<'a>,
    /// Nodes another pool selects or owns too, as messages, and their names.
    pub conflicts: Vec<String>,
    pub conflicted: BTreeSet<String>,
    /// The members an admin holds ([`super::admin_hold`]).
    pub held: BTreeSet<String>,
}

/// What a view is to the pool, as found from its objects, the pool's selector, the
/// other pools' selectors and whether the spec is valid: what a plan keeps of it for
/// the next, while all of those stay as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Class {
    /// No member, and nothing to do.
    #[default]
    Out,
    /// A member, held by an admin or not, in conflict with no other pool.
    Member { held: bool },
    /// A member this pool no longer selects: it leaves.
    Leaving,
    /// Another pool selects the node or owns it: a conflict, and a member when this pool
    /// owns it.
    Conflict { member: bool, held: bool },
}

/// What each view of the last plan was to the pool, and what that made: the members,
/// those an admin holds, and how many views were in conflict or leaving (found again
/// at every plan, for their messages and actions).
#[derive(Debug, Default)]
pub(super) struct Classes {
    /// One per view.
    pub of: Vec<Class>,
    /// The members, by their places in the views.
    members: Arc<Vec<usize>>,
    /// The members an admin holds, by their places in the views.
    held: Vec<usize>,
    /// How many views were leaving or in conflict.
    found: usize,
}

/// The pool's members, in snapshot order. Leavers get their clean-up actions; nodes
/// another pool also selects are reported as conflicts (and stay members only when this
/// pool already owns them). Under an invalid spec the owned nodes are kept as they are.
pub(super) fn members<'a>(p: &mut Planner<'a>, invalid: bool) -> Membership<'a> {
    let snap = p.snap;
    let selectors = OtherSelectors::of(snap);
    // What each Node's labels and BootcNode's owner say, read again only for nodes
    // whose objects changed since the plan before (`settled`); and what each view was
    // found to be then, while the other pools and the spec's validity are the same.
    let mut kept = snap.settled.lock();
    let read = kept.membership(&snap.pool, &snap.pool_selectors, invalid, &snap.nodes);
    let (classes, labels) = (read.classes, read.labels);
    let against = (&selectors, invalid);
    if let Some(changed) = read.changed
        && classes.found == 0
    {
        // Nothing to find again but the views that changed: when each is what it was,
        // the members are the last plan's.
        let mut same = true;
        for &at in changed {
            let class = class(&snap.nodes[at], labels[at], against);
            same &= class == classes.of[at];
            classes.of[at] = class;
        }
        if same {
            return classes.as_before(snap);
        }
    } else {
        let views = snap.nodes.iter().zip(labels);
        for (class, (view, &labels)) in classes.of.iter_mut().zip(views) {
            *class = self::class(view, labels, against);
        }
    }
    classes.made(p, &selectors)
}

/// The pool's members, read through their places in the snapshot's views: a plan makes
/// no list of its own of them (at 10,000 members, making one cost a plan in which one
/// member changed a third of its instructions).
#[derive(Debug, Clone)]
pub(super) struct Members<'a> {
    views: &'a [NodeView],
    /// Where each member is in `views`, ascending (shared with what is kept for the
    /// next plan).
    places: Arc<Vec<usize>>,
}

impl<'a> Members<'a> {
    /// The members at `places` (ascending) among `views`.
    pub fn new(views: &'a [NodeView], places: Arc<Vec<usize>>) -> Self {
        debug_assert!(places.windows(2).all(|w| w[0] < w[1]));
        Members { views, places }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// The member at place `i` among the members.
    #[inline]
    pub fn get(&self, i: usize) -> &'a NodeView {
        &self.views[self.places[i]]
    }

    /// The members, in snapshot order.
    pub fn iter(&self) -> MembersIter<'_, 'a> {
        MembersIter {
            views: self.views,
            places: self.places.iter(),
        }
    }

    /// Where each member is in the snapshot's views.
    pub fn places(&self) -> &Arc<Vec<usize>> {
        &self.places
    }
}

/// The members' views, in snapshot order ([`Members::iter`]).
#[derive(Debug, Clone)]
pub(super) struct MembersIter<'m, 'a> {
    views: &'a [NodeView],
    places: std::slice::Iter<'m, usize>,
}

impl<'a> Iterator for MembersIter<'_, 'a> {
    type Item = &'a NodeView;

    #[inline]
    fn next(&mut self) -> Option<&'a NodeView> {
        self.places.next().map(|&at| &self.views[at])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.places.size_hint()
    }
}

impl ExactSizeIterator for MembersIter<'_, '_> {}

impl<'m, 'a> IntoIterator for &'m Members<'a> {
    type Item = &'a NodeView;
    type IntoIter = MembersIter<'m, 'a>;

    fn into_iter(self) -> MembersIter<'m, 'a> {
        self.iter()
    }
}

impl Classes {
    /// The members of the last plan, taken again from `snap`'s views.
    fn as_before<'a>(&self, snap: &'a Snapshot) -> Membership<'a> {
        Membership {
            members: Members::new(&snap.nodes, Arc::clone(&self.members)),
            conflicts: Vec::new(),
            conflicted: BTreeSet::new(),
            held: (self.held.iter())
                .map(|&at| String::from(&*snap.nodes[at].name))
                .collect(),
        }
    }

    /// The members made from every view's class, kept for the next plan: leavers get
    /// their actions, conflicts are reported.
    fn made<'a>(&mut self, p: &mut Planner<'a>, selectors: &OtherSelectors<'_>) -> Membership<'a> {
        let snap = p.snap;
        let mut out = Membership {
            members: Members::new(&snap.nodes, Arc::default()),
            conflicts: Vec::new(),
            conflicted: BTreeSet::new(),
            held: BTreeSet::new(),
        };
        let mut positions = Vec::with_capacity(snap.nodes.len());
        self.found = 0;
        for (at, (&class, view)) in self.of.iter().zip(&snap.nodes).enumerate() {
            let (member, held) = match class {
                Class::Out => continue,
                Class::Member { held } => (true, held),
                Class::Leaving => {
                    self.found += 1;
                    leave(p, view, &others(selectors, view));
                    continue;
                }
                Class::Conflict { member, held } => {
                    self.found += 1;
                    let owner = view.bootc.as_ref().and_then(|b| b.owner.as_deref());
                    let foreign_owner = owner.filter(|_| !member);
                    let others = others(selectors, view);
                    out.conflicts
                        .extend(conflict(&snap.pool.name, view, foreign_owner, &others));
                    out.conflicted.insert(String::from(&*view.name));
                    (member, held)
                }
            };
            if member {
                if held {
                    out.held.insert(String::from(&*view.name));
                }
                positions.push(at);
            }
        }
        self.members = Arc::new(positions);
        out.members = Members::new(&snap.nodes, Arc::clone(&self.members));
        self.held.clear();
        let held = |at: &usize| {
            matches!(
                self.of[*at],
                Class::Member { held: true } | Class::Conflict { held: true, .. }
            )
        };
        self.held.extend(self.members.iter().copied().filter(held));
        out
    }
}

/// The other pools whose selectors match `view`'s Node's labels.
fn others<'s>(selectors: &OtherSelectors<'s>, view: &NodeView) -> Vec<&'s str> {
    selectors.selecting(view.node.as_ref().map(|n| n.labels()))
}

/// What `view` is to the pool, from what its labels and owner say (`read`), given the
/// other pools' selectors and whether the spec is `invalid`.
fn class(
    view: &NodeView,
    read: LabelsRead,
    (selectors, invalid): (&OtherSelectors<'_>, bool),
) -> Class {
    let owned = read.owned;
    let held = read.held;
    if invalid {
        // Nothing is rolled out under an invalid spec; owned nodes are kept as they are.
        return if owned {
            Class::Member { held }
        } else {
            Class::Out
        };
    }
    let matches = read.selected;
    if owned && !matches {
        return Class::Leaving;
    }
    if !matches {
        return Class::Out;
    }
    let owner = view.bootc.as_ref().and_then(|b| b.owner.as_deref());
    let foreign_owner = owner.filter(|_| !owned);
    if foreign_owner.is_some() || !(selectors.all.is_empty() || others(selectors, view).is_empty())
    {
        return Class::Conflict {
            member: owned,
            held,
        };
    }
    Class::Member { held }
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
        let held = bootc.holds_slot();
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
