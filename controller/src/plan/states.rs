//! Each member's state as a plan records it: kept sorted by name in one vector.
//!
//! The member pass records the members in their order, which is name order, so nearly
//! every record is an append; a later change of state (a slot granted) finds its entry by
//! binary search. A map keyed by name paid a tree search and its node splits for every
//! member (about a sixth of a whole plan at 10,000 members).

use std::hash::{Hash, Hasher};
use std::ops::Index;
use std::sync::Arc;

use super::actions::NodeState;

/// The members' states, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct States {
    /// Sorted by name, each name once; the names shared with the members' views.
    by_name: Vec<(Arc<str>, NodeState)>,
}

impl States {
    /// Records `state` for `name`, replacing the one recorded before.
    pub fn insert(&mut self, name: impl Into<Arc<str>>, state: NodeState) {
        let name = name.into();
        match self.by_name.last() {
            Some((last, _)) if *last < name => self.by_name.push((name, state)),
            None => self.by_name.push((name, state)),
            Some(_) => match self.find(&name) {
                Ok(i) => self.by_name[i].1 = state,
                Err(i) => self.by_name.insert(i, (name, state)),
            },
        }
    }

    /// Room for `more` records without growing.
    pub fn reserve(&mut self, more: usize) {
        self.by_name.reserve(more);
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.by_name.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// The state recorded for `name`.
    pub fn get(&self, name: &str) -> Option<&NodeState> {
        self.find(name).ok().map(|i| &self.by_name[i].1)
    }

    /// How many members have a state.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// No member has a state.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Each name and its state, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeState)> {
        self.by_name.iter().map(|(n, s)| (&**n, s))
    }

    /// The states, in name order.
    pub fn values(&self) -> impl Iterator<Item = &NodeState> {
        self.by_name.iter().map(|(_, s)| s)
    }

    /// A reader for names asked mostly in name order (the members, as the shell gives
    /// them): each read tries the entry after the one read last before it searches.
    pub fn in_order(&self) -> InOrder<'_> {
        InOrder {
            states: self,
            next: 0,
        }
    }
}

/// Reads [`States`] in name order: see [`States::in_order`].
#[derive(Debug)]
pub struct InOrder<'s> {
    states: &'s States,
    next: usize,
}

impl InOrder<'_> {
    /// The state recorded for `name`.
    #[inline]
    pub fn get(&mut self, name: &str) -> Option<NodeState> {
        // The name is most often the member's own, shared with its state: the same
        // text, found without reading it.
        if let Some((n, state)) = self.states.by_name.get(self.next)
            && (std::ptr::eq::<str>(&**n, name) || **n == *name)
        {
            self.next += 1;
            return Some(*state);
        }
        match self.states.find(name) {
            Ok(i) => {
                self.next = i + 1;
                Some(self.states.by_name[i].1)
            }
            Err(i) => {
                self.next = i;
                None
            }
        }
    }
}

/// The same hash as the map of the same entries: the fingerprint of a rollout's progress
/// does not depend on how the states are kept.
impl Hash for States {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.by_name.len());
        for (name, s) in &self.by_name {
            (&**name, s).hash(state);
        }
    }
}

impl<N: Into<Arc<str>>> FromIterator<(N, NodeState)> for States {
    fn from_iter<I: IntoIterator<Item = (N, NodeState)>>(records: I) -> Self {
        let mut states = States::default();
        for (name, state) in records {
            states.insert(name, state);
        }
        states
    }
}

/// `states["name"]`: the state recorded for a name, which must have one (as a map's
/// index).
impl Index<&str> for States {
    type Output = NodeState;

    fn index(&self, name: &str) -> &NodeState {
        self.get(name)
            .unwrap_or_else(|| panic!("no state recorded for {name}"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::hash::{DefaultHasher, Hash, Hasher};

    use proptest::prelude::*;

    use super::{NodeState, States};

    const KINDS: [NodeState; 6] = [
        NodeState::UpToDate,
        NodeState::Rebooting,
        NodeState::Staged,
        NodeState::Staging,
        NodeState::Pending,
        NodeState::Degraded,
    ];

    fn hash_of(value: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        value.hash(&mut h);
        h.finish()
    }

    proptest! {
        /// Any sequence of records, in or out of order and repeated, reads as the map of
        /// the same records: the same entries, lookups, order and hash.
        #[test]
        fn states_read_as_the_map_of_the_same_records(
            records in proptest::collection::vec((0u16..300, 0usize..6), 0..200),
            probes in proptest::collection::vec(0u16..300, 0..20),
        ) {
            let mut states = States::default();
            let mut map = BTreeMap::new();
            for (n, k) in &records {
                let name = format!("node-{n}");
                states.insert(name.clone(), KINDS[*k]);
                map.insert(name, KINDS[*k]);
            }
            let mut in_order = states.in_order();
            for n in probes {
                let name = format!("node-{n}");
                prop_assert_eq!(states.get(&name), map.get(&name));
                prop_assert_eq!(in_order.get(&name), map.get(&name).copied());
            }
            // Every name in order, then again: each read as the map reads it.
            let mut in_order = states.in_order();
            for n in (0u16..300).chain(0u16..300) {
                let name = format!("node-{n}");
                prop_assert_eq!(in_order.get(&name), map.get(&name).copied());
            }
            prop_assert_eq!(states.len(), map.len());
            prop_assert_eq!(hash_of(&states), hash_of(&map));
            let listed: Vec<_> = states.iter().map(|(n, s)| (n.to_owned(), *s)).collect();
            let expected: Vec<_> = map.iter().map(|(n, s)| (n.clone(), *s)).collect();
            prop_assert_eq!(listed, expected);
            for (name, state) in &map {
                prop_assert_eq!(&states[name.as_str()], state);
            }
        }
    }
}
