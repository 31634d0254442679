//! What is kept per view between plans: what each Node's labels and BootcNode's owner
//! say, what each view is to the pool, and the booted reports gathered by digest.

use std::sync::Arc;

use bootc_crds::node::BootcNode;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::history::{BootedReport, Observed};

use super::super::membership::{Class, Classes};
use super::super::states::States;
use super::super::world::{NodeView, PoolSelectors, PoolView};
use super::{Kept, by_name};

/// What a plan read of the labels of each Node of the last plan's snapshot (in its
/// order, by name) and of its BootcNode's owner, kept with the objects it was read from:
/// labels and owner change only with their object, so what was read holds while the
/// snapshot holds those very objects and the pool (its name and selector) is the same.
#[derive(Debug, Default)]
pub(super) struct Labels {
    pub(super) pool: String,
    pub(super) selector: Option<LabelSelector>,
    pub(super) nodes: Vec<Option<LabelsKept>>,
    /// The answers, one per node (a default one where nothing is kept).
    pub(super) answers: Vec<LabelsRead>,
    /// How many nodes have an answer kept.
    pub(super) filled: usize,
    /// What each view was found to be to the pool ([`Class`]), and what it was found
    /// against besides the answers: whether the spec was invalid, and the pools'
    /// selectors.
    pub(super) classes: Classes,
    pub(super) classes_against: Option<(bool, PoolSelectors)>,
    /// The snapshot they were read in ([`Seen::serial`]).
    pub(super) at: u64,
    /// How many answers were used again, in all.
    pub(super) used: u64,
}

/// What [`Kept::membership`] gives membership for the views of a plan.
pub(in crate::plan) struct MembershipRead<'k> {
    /// What each view's labels and owner say.
    pub labels: &'k [LabelsRead],
    /// What each view was found to be, to be used where it did not change.
    pub classes: &'k mut Classes,
    /// The views that changed since those were found (ascending); `None`: every view
    /// is to be found again.
    pub changed: Option<&'k [usize]>,
}

/// One node's answer, with the objects it was read from.
#[derive(Debug)]
pub(super) struct LabelsKept {
    pub(super) node: Arc<Node>,
    pub(super) bootc: Option<Arc<BootcNode>>,
    pub(super) read: LabelsRead,
}

/// What a plan reads of a Node's labels, and of its BootcNode's owner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::plan) struct LabelsRead {
    /// The pool's selector matches them.
    pub selected: bool,
    /// An admin holds the node ([`super::world::NodeInfo::held`]).
    pub held: bool,
    /// Its BootcNode's owner is the pool.
    pub owned: bool,
}

/// What each node of the last plan's snapshot reported as booted, when it counted for
/// the history (in the snapshot's order), kept with the objects it was read from; and
/// all of those reports gathered by digest. A node whose objects are the same reports the
/// same; one whose objects changed has its old report taken back and its new one added.
#[derive(Debug, Default)]
pub(super) struct Booted {
    /// The target digest the reports were gathered against.
    pub(super) target: Option<String>,
    pub(super) nodes: Vec<Option<Objects>>,
    /// How many nodes' reports are kept.
    pub(super) filled: usize,
    pub(super) observed: Observed,
    /// The snapshot the reports were gathered in ([`Seen::serial`]).
    pub(super) at: u64,
    /// How many nodes' reports were taken as they were, in all.
    pub(super) used: u64,
}

impl Observed {
    /// The report of a node whose objects were `slot`'s and are `now`'s (when it
    /// counts) gathered: whether they are the same (and so is its report), or its old
    /// report taken back and its new one added.
    pub(super) fn gather(
        &mut self,
        slot: &mut Option<Objects>,
        now: Option<(&Arc<BootcNode>, Option<&Arc<Node>>)>,
        digest: Option<&str>,
    ) -> bool {
        let same = match (&*slot, now) {
            (None, None) => true,
            (Some((b, n)), Some((bootc, node))) => {
                Arc::ptr_eq(b, bootc) && n.as_ref().map(Arc::as_ptr) == node.map(Arc::as_ptr)
            }
            _ => false,
        };
        if same {
            return now.is_some();
        }
        if let Some(report) = slot.as_ref().and_then(|(b, n)| report(b, n.as_deref())) {
            self.remove(&report, digest);
        }
        if let Some(report) = now.and_then(|(b, n)| report(b, n.map(|n| &**n))) {
            self.add(&report, digest);
        }
        *slot = now.map(|(b, n)| (Arc::clone(b), n.map(Arc::clone)));
        false
    }
}

impl Kept {
    /// What the labels of each of `views`' Nodes say (sorted by name; nothing without a
    /// Node), in their order: whether `pool`'s selector matches them, whether they hold
    /// the node; and whether its BootcNode is `pool`'s. What the plan before read of the
    /// same objects for the same pool and selector is used again; the others are read
    /// and kept. When the plan before read the snapshot before, only the views that
    /// changed since are looked at.
    ///
    /// With them, what each view was found to be to the pool in the plan before, to be
    /// used for the views that did not change, and found again and kept in place for
    /// the others; all are found again unless the plan before read the snapshot before
    /// with the same pools' `selectors` (this pool's included) and the spec as
    /// `invalid`.
    pub fn membership(
        &mut self,
        pool: &PoolView,
        selectors: &PoolSelectors,
        invalid: bool,
        views: &[NodeView],
    ) -> MembershipRead<'_> {
        let at = self.labels.at;
        let same_pool = self.labels(&pool.name, &pool.spec.node_selector, views);
        let since = self.seen.since(at);
        let kept = &mut self.labels;
        let same = same_pool
            && kept.classes_against.as_ref().is_some_and(|(was, kept)| {
                *was == invalid && (Arc::ptr_eq(kept, selectors) || **kept == **selectors)
            });
        if !same {
            kept.classes_against = Some((invalid, Arc::clone(selectors)));
        }
        let changed = since.filter(|_| same && kept.classes.of.len() == views.len());
        if changed.is_none() {
            kept.classes.of.clear();
            kept.classes.of.resize(views.len(), Class::Out);
        }
        MembershipRead {
            labels: &kept.answers,
            classes: &mut kept.classes,
            changed,
        }
    }

    /// The labels' answers of [`Kept::membership`] kept for `views`; whether those kept
    /// were for the same `pool` and `selector`.
    fn labels(&mut self, pool: &str, selector: &LabelSelector, views: &[NodeView]) -> bool {
        let kept = &mut self.labels;
        let same_pool = kept.selector.as_ref() == Some(selector) && kept.pool == pool;
        if !same_pool {
            kept.pool = pool.to_owned();
            kept.selector = Some(selector.clone());
            kept.nodes.clear();
            kept.answers.clear();
        }
        let since = self.seen.since(kept.at);
        kept.at = self.seen.serial;
        let read = |slot: &mut Option<LabelsKept>, view: &NodeView| {
            labels_read(slot, view, (pool, selector))
        };
        match since {
            Some(changed) if kept.nodes.len() == views.len() => {
                // Every other view holds the objects its answer was read from: those
                // with an answer kept use it again.
                let mut used = kept.filled;
                for &i in changed {
                    let slot = &mut kept.nodes[i];
                    let before = slot.is_some();
                    let (answer, again) = read(slot, &views[i]);
                    kept.answers[i] = answer;
                    used = used - usize::from(before) + usize::from(again);
                    kept.filled = kept.filled - usize::from(before) + usize::from(slot.is_some());
                }
                kept.used += used as u64;
            }
            _ => {
                if kept.nodes.len() != views.len() {
                    let old = std::mem::take(&mut kept.nodes);
                    let names = views.iter().map(|v| &*v.name);
                    kept.nodes = by_name(old, names, |k| {
                        k.node.metadata.name.as_deref().unwrap_or_default()
                    });
                }
                let mut used = 0;
                kept.answers.clear();
                for (slot, view) in kept.nodes.iter_mut().zip(views) {
                    let (answer, again) = read(slot, view);
                    kept.answers.push(answer);
                    used += u64::from(again);
                }
                kept.filled = kept.nodes.iter().flatten().count();
                kept.used += used;
            }
        }
        same_pool
    }

    /// The booted reports of the `views` that have a state in `states`, gathered by
    /// digest against the target's `digest`: only the nodes whose objects changed since
    /// the plan before are read again. All of them are read again when the views are
    /// not as many as before, or the target changed. When the plan before read the
    /// snapshot before and recorded states for the very same names, only the views
    /// that changed since are looked at.
    pub fn booted(
        &mut self,
        digest: Option<&str>,
        views: &[NodeView],
        states: &States,
    ) -> &Observed {
        let kept = &mut self.booted;
        let since = self.seen.since(kept.at);
        let since_at = since.map(|_| kept.at);
        kept.at = self.seen.serial;
        let again = kept.target.as_deref() != digest || kept.nodes.len() != views.len();
        if again {
            kept.target = digest.map(str::to_owned);
            kept.observed = Observed::default();
            kept.nodes.clear();
            kept.nodes.resize_with(views.len(), || None);
        }
        // Whose state is recorded decides whose report counts: the same names as
        // when they were gathered, and views of the same names, count as before.
        let r = &self.recorded;
        let same_names = r.same_names && r.at == self.seen.serial && Some(r.before) == since_at;
        let mut states = states.in_order();
        let mut gather = |slot: &mut Option<Objects>, view: &NodeView| {
            let now = if states.get(&view.name).is_some() {
                objects(view)
            } else {
                None
            };
            kept.observed.gather(slot, now, digest)
        };
        match since {
            Some(changed) if same_names && !again => {
                let mut used = kept.filled;
                for &i in changed {
                    let slot = &mut kept.nodes[i];
                    let before = slot.is_some();
                    let again = gather(slot, &views[i]);
                    used = used - usize::from(before) + usize::from(again);
                    kept.filled = kept.filled - usize::from(before) + usize::from(slot.is_some());
                }
                kept.used += used as u64;
            }
            _ => {
                let mut used = 0;
                for (slot, view) in kept.nodes.iter_mut().zip(views) {
                    used += u64::from(gather(slot, view));
                }
                kept.filled = kept.nodes.iter().flatten().count();
                kept.used += used;
            }
        }
        &kept.observed
    }
}

/// What `view`'s Node's labels and BootcNode's owner say for `pool` (whose selector
/// [`Labels`] keeps), with whether the answer kept in `slot` was used again: it is
/// when `slot` holds `view`'s very objects; otherwise they are read, and kept there.
fn labels_read(
    slot: &mut Option<LabelsKept>,
    view: &NodeView,
    (pool, selector): (&str, &LabelSelector),
) -> (LabelsRead, bool) {
    let owned = || view.bootc.as_ref().and_then(|b| b.owner.as_deref()) == Some(pool);
    let Some(info) = &view.node else {
        *slot = None;
        let read = LabelsRead {
            owned: owned(),
            ..LabelsRead::default()
        };
        return (read, false);
    };
    let bootc = view.bootc.as_ref().map(|b| b.object());
    if let Some(k) = slot
        && Arc::ptr_eq(&k.node, &info.node)
        && k.bootc.as_ref().map(Arc::as_ptr) == bootc.map(Arc::as_ptr)
    {
        return (k.read, true);
    }
    let read = LabelsRead {
        selected: bootc_crds::selector::matches(selector, info.labels()),
        held: info.held(),
        owned: owned(),
    };
    *slot = Some(LabelsKept {
        node: Arc::clone(&info.node),
        bootc: bootc.map(Arc::clone),
        read,
    });
    (read, false)
}

/// A node's BootcNode and its Node, when it has one.
type Objects = (Arc<BootcNode>, Option<Arc<Node>>);

/// A view's objects, when its BootcNode reports a booted image.
fn objects(view: &NodeView) -> Option<(&Arc<BootcNode>, Option<&Arc<Node>>)> {
    let bootc = view.bootc.as_ref()?;
    bootc.status()?.booted.as_ref()?;
    Some((bootc.object(), view.node.as_ref().map(|n| &n.node)))
}

/// What `bootc` reports as booted, its node registered when `node` was created.
fn report<'a>(bootc: &'a BootcNode, node: Option<&Node>) -> Option<BootedReport<'a>> {
    let booted = bootc.status.as_ref()?.booted.as_ref()?;
    let registered = node.and_then(|n| n.metadata.creation_timestamp.clone());
    Some(BootedReport::from_booted("", booted, registered))
}
