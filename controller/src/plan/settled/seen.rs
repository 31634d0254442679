//! Which views changed since the plan before, as the shell tells or found by address
//! ([`Seen`]); the members
//! found in them ([`Members`]); and the states the last plan recorded, with their
//! fingerprint ([`Recorded`]).

use std::sync::Arc;

use bootc_crds::node::BootcNode;
use k8s_openapi::api::core::v1::Node;

use super::super::actions::NodeState;
use super::super::states::{Names, States, same_states};
use super::super::world::{NodeView, ViewChanges};
use super::Kept;

/// The states of the last plan that recorded them (their names shared with its
/// states), and their fingerprint; whether the names were those of the plan before it.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    pub(super) names: Names,
    pub(super) states: Vec<NodeState>,
    pub(super) fingerprint: Option<u64>,
    /// The snapshot they were recorded in ([`Seen::serial`]), and the one of the states
    /// they were compared with.
    pub(super) at: u64,
    pub(super) before: u64,
    /// The names are those recorded in `before`.
    pub(super) same_names: bool,
}

/// The members of the last plan, by their places in its views, and which of them
/// changed since the plan before (when the members were the same then).
#[derive(Debug, Default)]
pub(super) struct Members {
    /// Each member's place in the views.
    pub(super) positions: Arc<Vec<usize>>,
    /// The snapshot they were members of ([`Seen::serial`]).
    pub(super) at: u64,
    /// The snapshot of the plan before.
    pub(super) from: u64,
    /// The members (by their places among the members) whose views changed since
    /// `from`; `None` when members joined or left since, or that is not known.
    pub(super) changed: Option<Vec<usize>>,
}

/// The views of the last plan's snapshot, by the addresses of their names and objects
/// (held, so that no other object can take an address while it is compared), and which
/// of them changed since the snapshot before: those the shell told it read again, when
/// it counts them from that snapshot's views, else those that differ. The views held are
/// kept up to date either way, so that a plan the shell tells nothing still compares
/// with the last snapshot's. Each answer kept per view notes the
/// snapshot it was kept at ([`Seen::serial`]): when that is the one before, only the
/// views that changed are read again; when it is older, or views joined or left since,
/// every view is compared as before.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The snapshots seen so far.
    pub(super) serial: u64,
    pub(super) views: Vec<SeenView>,
    /// The views that differ from the snapshot before's; `None` when views joined or
    /// left (or there was none before).
    pub(super) changed: Option<Vec<usize>>,
    /// The shell's number of the views seen last ([`ViewChanges::to`]), when it told.
    pub(super) told: Option<u64>,
}

/// `places` are ascending, each below `len`.
fn ascending_below(places: &[usize], len: usize) -> bool {
    places.windows(2).all(|w| w[0] < w[1]) && places.last().is_none_or(|&last| last < len)
}

/// One view as seen: its name, its objects and whether its Node was Ready.
#[derive(Debug)]
pub(super) struct SeenView {
    pub(super) name: Arc<str>,
    pub(super) node: Option<Arc<Node>>,
    pub(super) ready: bool,
    pub(super) bootc: Option<Arc<BootcNode>>,
}

impl SeenView {
    pub(super) fn of(view: &NodeView) -> Self {
        SeenView {
            name: Arc::clone(&view.name),
            node: view.node.as_ref().map(|n| Arc::clone(&n.node)),
            ready: view.node.as_ref().is_some_and(|n| n.ready),
            bootc: view.bootc.as_ref().map(|b| Arc::clone(b.object())),
        }
    }

    /// `view` holds this very name and these very objects, and is as Ready.
    #[inline]
    pub(super) fn is(&self, view: &NodeView) -> bool {
        let node = match (&self.node, &view.node) {
            (Some(kept), Some(info)) => Arc::ptr_eq(kept, &info.node) && self.ready == info.ready,
            (None, None) => true,
            _ => false,
        };
        let bootc = match (&self.bootc, &view.bootc) {
            (Some(kept), Some(b)) => Arc::ptr_eq(kept, b.object()),
            (None, None) => true,
            _ => false,
        };
        node && bootc && Arc::ptr_eq(&self.name, &view.name)
    }
}

impl Members {
    /// The members (by their places among them) whose views changed since the
    /// snapshot numbered `at`: none when it is this plan's, those [`Kept::members`]
    /// found when it is the plan before's; `None` otherwise.
    pub(super) fn since(&self, at: u64) -> Option<&[usize]> {
        if at == self.at {
            Some(&[])
        } else if at == self.from {
            self.changed.as_deref()
        } else {
            None
        }
    }
}

impl Seen {
    /// Takes `views` as the snapshot seen, noting which views changed: those the shell
    /// `told` were read again, when it counts them from the views seen last (see
    /// [`ViewChanges`]), else those found by comparing each view.
    pub(super) fn see(&mut self, views: &[NodeView], told: Option<&ViewChanges>) {
        self.serial += 1;
        let last = std::mem::replace(&mut self.told, told.map(|t| t.to));
        if let Some(told) = told
            && told.from.is_some_and(|from| last == Some(from))
            && self.views.len() == views.len()
            && ascending_below(&told.changed, views.len())
        {
            for &i in &told.changed {
                self.views[i] = SeenView::of(&views[i]);
            }
            self.changed = Some(told.changed.clone());
            return;
        }
        if self.views.len() != views.len() {
            self.views = views.iter().map(SeenView::of).collect();
            self.changed = None;
            return;
        }
        let mut changed = Vec::new();
        for (i, (seen, view)) in self.views.iter_mut().zip(views).enumerate() {
            if !seen.is(view) {
                *seen = SeenView::of(view);
                changed.push(i);
            }
        }
        self.changed = Some(changed);
    }

    /// The views that changed since the snapshot numbered `at`: none when it is this
    /// one, those [`Seen::see`] found when it is the one before; `None` otherwise.
    pub(super) fn since(&self, at: u64) -> Option<&[usize]> {
        if at == self.serial {
            Some(&[])
        } else if at.checked_add(1) == Some(self.serial) {
            self.changed.as_deref()
        } else {
            None
        }
    }
}

impl Kept {
    /// Takes `views` as the snapshot this plan reads, noting which views changed since
    /// the plan before's (those the shell `told`, when it counts from that snapshot's).
    pub fn see(&mut self, views: &[NodeView], told: Option<&ViewChanges>) {
        self.seen.see(views, told);
    }

    /// Takes the members this plan found, by their `positions` in its views: the
    /// entries and the order look again only at those that changed, when the members
    /// are the last plan's.
    pub fn members(&mut self, positions: &Arc<Vec<usize>>) {
        let m = &mut self.members;
        let since = self.seen.since(m.at);
        m.from = m.at;
        m.at = self.seen.serial;
        m.changed = match since {
            Some(changed) if Arc::ptr_eq(&m.positions, positions) || m.positions == *positions => {
                Some(
                    changed
                        .iter()
                        .filter_map(|v| positions.binary_search(v).ok())
                        .collect(),
                )
            }
            _ => {
                m.positions = Arc::clone(positions);
                None
            }
        };
    }

    /// The fingerprint of `states` ([`super::super::stall::fingerprint`]): the last plan's
    /// when they are its states (the same names: the very list, or the same texts; and
    /// the same states), else found and kept with them.
    pub fn fingerprint(&mut self, states: &States) -> u64 {
        let r = &mut self.recorded;
        let (list, values) = states.columns();
        let names = &list[..values.len()];
        // The list held here is never changed in place (a change copies a list that is
        // shared), so the very list holds the same names.
        let very = Arc::ptr_eq(&r.names, list) && r.names.len() == names.len();
        let same_names = very || r.names.as_slice() == names;
        let same = same_names && same_states(&r.states, values);
        if !very {
            // Held, to be compared by address next time.
            r.names = if list.len() == names.len() {
                Arc::clone(list)
            } else {
                Arc::new(names.to_vec())
            };
        }
        if !same {
            r.states.clear();
            r.states.extend_from_slice(values);
        }
        (r.before, r.at, r.same_names) = (r.at, self.seen.serial, same_names);
        let fingerprint = match r.fingerprint {
            Some(kept) if same_names && same => kept,
            _ => super::super::stall::fingerprint(states),
        };
        r.fingerprint = Some(fingerprint);
        fingerprint
    }
}
