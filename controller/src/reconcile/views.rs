//! Each pool's members as its last plan saw them, kept between reconciles and refreshed
//! where the watches delivered a change. Building a member's view reads its Node and its
//! BootcNode through the caches and the overlay; at 10,000 members that costs about as
//! much as the plan. Yet between two reconciles of a rollout a few members change, so a
//! reconcile reads again only:
//!
//! - the pool's members among the names the watches delivered since the pool's last
//!   reconcile ([`Membership::changed_since`]);
//! - every name that may have joined or left a pool since then: its Node's labels or its
//!   BootcNode's owner changed, or one of them is new or gone
//!   ([`Membership::moved_since`]); each is read, and it joins, stays or leaves as its
//!   objects now say;
//! - the names the controller's own writes cover now or covered then (the overlay), whose
//!   view may come from a write rather than from the caches.
//!
//! Everything is read again when the watches relisted (the membership epoch) or the
//! pool's selector changed, when either log no longer reaches back to the last reconcile,
//! and when nothing was kept (a first reconcile, or one after a failed one). What the views hold is what
//! [`observe::members`] would build from scratch; a test holds the two together over
//! random changes.
//!
//! Each take numbers the views it hands out. A refresh that added or took out no member
//! also tells which places it read again, counted from the views kept
//! ([`ViewChanges`]): the plan then looks at those alone, instead of comparing every
//! view with the last plan's. The same test holds every other place to the very view
//! kept.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_common::node::owner_pool;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

use super::cache::lock;
use super::membership::{Mark, Membership};
use super::observe::{self, bootc_view, node_info};
use crate::plan::world::BlockingPods;
use crate::plan::{NodeView, ViewChanges};

/// What a pool's members are read from: the caches, through the controller's own writes.
pub trait Source {
    /// The Node cache.
    fn nodes(&self) -> &Store<Node>;
    /// The BootcNode cache.
    fn bootcs(&self) -> &Store<BootcNode>;
    /// Node `name`, as a plan sees it.
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    /// BootcNode `name`, as a plan sees it.
    fn bootc(&self, name: &str) -> Option<Arc<BootcNode>>;
    /// BootcNodes written and not yet in the cache (candidates the cache cannot name).
    fn created(&self) -> Vec<String>;
    /// Every name whose Node or BootcNode is read from a write rather than the cache,
    /// or those of them `among` some names.
    fn written(&self, among: Option<Among<'_>>) -> Vec<String>;
}

/// A pool's members with what they were read at; handed back by [`Views::keep`].
#[derive(Debug)]
pub struct Taken {
    /// The members, sorted by name, as [`observe::members`] builds them.
    pub nodes: Vec<NodeView>,
    /// What they were read at.
    pub stamp: Stamp,
    /// The number of these views, and the members read again since the views kept when
    /// those were refreshed and no member joined or left: for the plan, which then looks
    /// at those alone.
    pub changes: Option<ViewChanges>,
    /// The pods that block a reboot were listed into the views (see
    /// [`Views::keep`]).
    pub pods_listed: bool,
}

/// What a pool's views were read at.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// The number of these views: each take numbers the views it hands out anew.
    serial: u64,
    mark: Mark,
    selector: LabelSelector,
    /// The names read through the overlay then.
    written: BTreeSet<String>,
}

impl Stamp {
    /// The number of the views taken with it ([`ViewChanges::to`] when it told the
    /// changes).
    pub fn serial(&self) -> u64 {
        self.serial
    }
}

/// The pools' kept views (see the module's text).
#[derive(Debug, Default)]
pub struct Views {
    kept: Mutex<HashMap<String, (Vec<NodeView>, Stamp)>>,
    /// Reconciles that read every member, and those that read the changed ones only.
    counts: Mutex<(u64, u64)>,
    /// The views handed out so far (each take's are numbered anew).
    serials: AtomicU64,
    /// What each pool's plans found for its settled members (see [`crate::plan::settled`]).
    settled: Mutex<HashMap<String, crate::plan::Settled>>,
}

impl Views {
    /// The members of `pool`: what was kept, refreshed where it changed, or read whole.
    ///
    /// The watches and the controller's writes concern every pool's nodes. A refresh reads
    /// again only this pool's members among them, and every name that moved: a node that
    /// is no member now cannot have become one without a label, an owner or a new object,
    /// which the moved log names (and a pool writes only its members).
    pub fn take(&self, pool: &BootcNodePool, membership: &Membership, src: &impl Source) -> Taken {
        let mark = membership.mark();
        let selector = pool.spec.node_selector.clone();
        let serial = self.serials.fetch_add(1, Ordering::Relaxed) + 1;
        let kept = lock(&self.kept).remove(&pool.name_any());
        let mut written = None;
        let mut changes = None;
        let refreshed = kept.and_then(|(nodes, then)| {
            if then.mark.epoch != mark.epoch || then.selector != selector {
                return None;
            }
            let mut changed = membership.changed_since(then.mark.seq, &nodes)?;
            let moved = membership.moved_since(then.mark.moved)?;
            // Only a member or a name that moved can be a member after the refresh: the
            // other pools' writes are not copied.
            let names = src.written(Some(Among {
                nodes: &nodes,
                moved: &moved,
            }));
            changed.extend(moved);
            let now: BTreeSet<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|name| is_member(&nodes, name))
                .collect();
            let (refreshed, read) = refresh(pool, nodes, (changed, &then.written, &now), src);
            written = Some(names);
            changes = read.map(|changed| (then.serial, changed));
            Some(refreshed)
        });
        let fresh = refreshed.is_none();
        let nodes = refreshed.unwrap_or_else(|| {
            written = Some(src.written(None));
            let mut names = membership.candidates(pool, src.nodes(), src.bootcs());
            names.extend(src.created());
            observe::members(pool, names, |n| src.node(n), |n| src.bootc(n))
        });
        let mut counts = lock(&self.counts);
        if fresh {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
        // What the next refresh reads again: the members read through a write now.
        let written = written
            .unwrap_or_default()
            .into_iter()
            .filter(|name| is_member(&nodes, name))
            .collect();
        let stamp = Stamp {
            serial,
            mark,
            selector,
            written,
        };
        let (from, changed) = changes.unzip();
        Taken {
            nodes,
            stamp,
            changes: Some(ViewChanges {
                to: serial,
                from,
                changed: changed.unwrap_or_default(),
            }),
            pods_listed: false,
        }
    }

    /// Keeps what a reconcile of `pool` read, for the next one: the members as they
    /// were read (the pods that block a reboot, listed again by every reconcile that
    /// needs them, taken out).
    pub fn keep(&self, pool: &str, mut taken: Taken) {
        if taken.pods_listed {
            for view in &mut taken.nodes {
                if let Some(info) = view.node.as_mut() {
                    info.blocking_pods = BlockingPods::None;
                }
            }
        }
        lock(&self.kept).insert(pool.to_owned(), (taken.nodes, taken.stamp));
    }

    /// Forgets a pool that is gone.
    pub fn forget(&self, pool: &str) {
        lock(&self.kept).remove(pool);
        lock(&self.settled).remove(pool);
    }

    /// What `pool`'s plans found for its settled members, for its next plan.
    pub fn settled(&self, pool: &str) -> crate::plan::Settled {
        lock(&self.settled)
            .entry(pool.to_owned())
            .or_default()
            .clone()
    }

    /// Reconciles that read every member, and those that read only what changed.
    pub fn counts(&self) -> (u64, u64) {
        *lock(&self.counts)
    }
}

/// `nodes` with the members named in `changed`, `then` or `now` read again: replaced,
/// added or taken out as they now are; with the places of those replaced (ascending),
/// when none was added or taken out.
fn refresh(
    pool: &BootcNodePool,
    mut nodes: Vec<NodeView>,
    (changed, then, now): (Vec<String>, &BTreeSet<String>, &BTreeSet<&str>),
    src: &impl Source,
) -> (Vec<NodeView>, Option<Vec<usize>>) {
    let pool_name = pool.name_any();
    let mut names: Vec<&str> = changed.iter().map(String::as_str).collect();
    names.extend(then.iter().map(String::as_str).chain(now.iter().copied()));
    names.sort_unstable();
    names.dedup();
    let mut replaced = Some(Vec::new());
    for name in names {
        let view = member(pool, &pool_name, name, src);
        match (nodes.binary_search_by(|v| (*v.name).cmp(name)), view) {
            (Ok(i), Some(mut view)) => {
                // The name kept: what a plan keeps by name finds it at the same address.
                view.name = Arc::clone(&nodes[i].name);
                nodes[i] = view;
                if let Some(replaced) = replaced.as_mut() {
                    replaced.push(i);
                }
            }
            (Ok(i), None) => {
                nodes.remove(i);
                replaced = None;
            }
            (Err(i), Some(view)) => {
                nodes.insert(i, view);
                replaced = None;
            }
            (Err(_), None) => {}
        }
    }
    (nodes, replaced)
}

/// The names a refresh may find members among: the members kept and the names that
/// moved, two lists each sorted by name (a name may be in both).
#[derive(Debug, Clone, Copy)]
pub struct Among<'a> {
    /// The members kept.
    pub nodes: &'a [NodeView],
    /// The names that moved.
    pub moved: &'a [String],
}

impl Among<'_> {
    /// How many names both lists hold (a name in both counted twice).
    pub fn len(&self) -> usize {
        self.nodes.len() + self.moved.len()
    }

    /// Neither list holds a name.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `name` is in either list.
    pub fn contains(&self, name: &str) -> bool {
        is_member(self.nodes, name)
            || self
                .moved
                .binary_search_by(|m| m.as_str().cmp(name))
                .is_ok()
    }

    /// Every name of both lists (a name in both given twice).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .map(|v| &*v.name)
            .chain(self.moved.iter().map(String::as_str))
    }
}

/// Whether `name` is among `nodes` (sorted by name).
pub(super) fn is_member(nodes: &[NodeView], name: &str) -> bool {
    nodes.binary_search_by(|v| (*v.name).cmp(name)).is_ok()
}

/// The view of `name` when it is a member of `pool` (named `pool_name`), as
/// [`observe::members`] decides it.
fn member(
    pool: &BootcNodePool,
    pool_name: &str,
    name: &str,
    src: &impl Source,
) -> Option<NodeView> {
    let node = src.node(name);
    let bootc = src.bootc(name);
    let owned = bootc
        .as_deref()
        .is_some_and(|b| owner_pool(b).as_deref() == Some(pool_name));
    let matching = node
        .as_deref()
        .is_some_and(|n| bootc_crds::selector::matches(&pool.spec.node_selector, n.labels()));
    (owned || matching).then(|| NodeView {
        name: name.into(),
        node: node.map(node_info),
        bootc: bootc.map(bootc_view),
    })
}

#[cfg(test)]
mod tests;
