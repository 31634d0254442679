//! The slot candidates a member pass found: staged, Ready members without a slot that no
//! other pool claims, in member order. Those planned in full are listed as the pass goes;
//! those kept from the plan before stay places in a bit set, merged with the others by
//! place only when the candidates are read. Most plans of a rollout read none of them
//! (every slot is taken: the budget gate stops at the first candidate it may name), and
//! a list of thousands of kept candidates was made for each.

use super::membership::Members;
use super::settled::PlaceSet;
use super::world::NodeView;

/// The candidates, in member order (see the module's text).
#[derive(Debug, Default)]
pub(super) struct Candidates<'a> {
    /// Those planned in full: their places among the members, ascending, and views.
    listed: Vec<(usize, &'a NodeView)>,
    /// Those kept: their places among `members`.
    kept: Option<(PlaceSet, Members<'a>)>,
    /// How many zones the candidates are in at most, when that is known.
    zones: Option<usize>,
}

impl<'a> Candidates<'a> {
    /// `view`, at place `at` among the members (after every place listed or kept so far).
    pub fn push(&mut self, at: usize, view: &'a NodeView) {
        self.listed.push((at, view));
    }

    /// The kept candidates at `places` among `members`, to be merged by place, and how
    /// many zones all the candidates are in at most (`zones`, when it is known).
    pub fn keep(&mut self, places: PlaceSet, members: Members<'a>, zones: Option<usize>) {
        self.kept = Some((places, members));
        self.zones = zones;
    }

    /// How many zones the candidates are in at most, when that is known.
    pub fn zones(&self) -> Option<usize> {
        self.zones
    }

    /// Those planned in full, in member order.
    pub fn listed(&self) -> impl Iterator<Item = &'a NodeView> + '_ {
        self.listed.iter().map(|(_, v)| *v)
    }

    /// The candidates, in member order.
    pub fn iter(&self) -> impl Iterator<Item = &'a NodeView> + Clone + '_ {
        self.placed().map(|(_, v)| v)
    }

    /// The candidates with their places among the members, in member order.
    pub fn placed(&self) -> impl Iterator<Item = (usize, &'a NodeView)> + Clone + '_ {
        let kept = self
            .kept
            .iter()
            .flat_map(|(places, members)| places.iter().map(move |at| (at, members.get(at))));
        Merged {
            listed: self.listed.iter().copied().peekable(),
            kept: kept.peekable(),
        }
    }
}

/// Two lists of `(place, view)`, each ascending by place, merged by place.
struct Merged<L: Iterator, K: Iterator> {
    listed: std::iter::Peekable<L>,
    kept: std::iter::Peekable<K>,
}

impl<L, K> Clone for Merged<L, K>
where
    L: Iterator + Clone,
    K: Iterator + Clone,
    L::Item: Clone,
    K::Item: Clone,
{
    fn clone(&self) -> Self {
        Merged {
            listed: self.listed.clone(),
            kept: self.kept.clone(),
        }
    }
}

impl<'a, L, K> Iterator for Merged<L, K>
where
    L: Iterator<Item = (usize, &'a NodeView)>,
    K: Iterator<Item = (usize, &'a NodeView)>,
{
    type Item = (usize, &'a NodeView);

    fn next(&mut self) -> Option<(usize, &'a NodeView)> {
        let from_listed = match (self.listed.peek(), self.kept.peek()) {
            (Some((l, _)), Some((k, _))) => l < k,
            (listed, _) => listed.is_some(),
        };
        if from_listed {
            self.listed.next()
        } else {
            self.kept.next()
        }
    }
}
