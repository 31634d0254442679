//! Each member's state as a plan records it: kept sorted by name in one vector.
//!
//! The member pass records the members in their order, which is name order, so nearly
//! every record is an append; a later change of state (a slot granted) finds its entry by
//! binary search. A map keyed by name paid a tree search and its node splits for every
//! member (about a sixth of a whole plan at 10,000 members).
//!
//! An append still compared each name with the one before it. When the member pass knows
//! the members' names are in strict name order (an [`Order`], kept between plans and
//! checked again only where names changed), it records them by address instead.

use std::hash::{Hash, Hasher};
use std::ops::Index;
use std::sync::Arc;

use super::actions::NodeState;

/// Names in strict name order, each once, as a list kept between plans: each
/// [`Order::update`] takes the names of the plan's members and compares only the names
/// next to those that changed (a name that is the same text at another address is a
/// change). No other way makes one, so an `Order` always holds names in strict order.
#[derive(Debug, Clone, Default)]
pub struct Order {
    names: Vec<Arc<str>>,
}

impl Order {
    /// Takes `names` as the order when they are in strict name order, and says whether
    /// they are; otherwise the order is left empty. Where a name is the one at the same
    /// place before (the same address), the pair it forms with an unchanged neighbour was
    /// in order then and is not compared again.
    pub fn update<'n>(&mut self, names: impl ExactSizeIterator<Item = &'n Arc<str>>) -> bool {
        if self.names.len() != names.len() {
            self.names.clear();
            self.names.extend(names.cloned());
            let sorted = self.names.windows(2).all(|w| w[0] < w[1]);
            if !sorted {
                self.names.clear();
            }
            return sorted;
        }
        let mut changed = Vec::new();
        for (i, (kept, name)) in self.names.iter_mut().zip(names).enumerate() {
            if !Arc::ptr_eq(kept, name) {
                *kept = Arc::clone(name);
                changed.push(i);
            }
        }
        let sorted = self.in_order_around(changed);
        if !sorted {
            self.names.clear();
        }
        sorted
    }

    /// Whether each name at the places `changed` comes after the one before it and
    /// before the one after it. A pair of names that did not change was in order
    /// before; each pair with a changed name in it is compared.
    fn in_order_around(&self, changed: Vec<usize>) -> bool {
        let names = &self.names;
        changed.into_iter().all(|i| {
            (i == 0 || names[i - 1] < names[i]) && names.get(i + 1).is_none_or(|n| names[i] < *n)
        })
    }

    /// [`Order::update`] when only the names at the places `changed` (ascending) may
    /// differ from the last update's: each is the name given, and all others stay.
    pub fn update_at<'n>(&mut self, changed: impl Iterator<Item = (usize, &'n Arc<str>)>) -> bool {
        let mut renamed = Vec::new();
        for (i, name) in changed {
            if !Arc::ptr_eq(&self.names[i], name) {
                self.names[i] = Arc::clone(name);
                renamed.push(i);
            }
        }
        let sorted = self.in_order_around(renamed);
        if !sorted {
            self.names.clear();
        }
        sorted
    }

    /// How many names it holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// It holds no name.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// The members' states, by name.
#[derive(Debug, Clone, Default)]
pub struct States {
    /// Sorted by name, each name once; the names shared with the members' views.
    by_name: Vec<(Arc<str>, NodeState)>,
    /// While the member pass records the members in their order: their names, of which
    /// `by_name` holds exactly the first ones ([`States::follow`]).
    order: Option<Arc<Order>>,
}

/// The same states are equal, whatever order is followed.
impl PartialEq for States {
    fn eq(&self, other: &Self) -> bool {
        self.by_name == other.by_name
    }
}

impl Eq for States {}

impl States {
    /// Records in `order`, while nothing is recorded yet: a record of the name that comes
    /// next in it is appended without comparing names. Any other record stops following.
    pub fn follow(&mut self, order: Arc<Order>) {
        self.order = self.by_name.is_empty().then_some(order);
    }

    /// Stops following an order.
    pub fn unfollow(&mut self) {
        self.order = None;
    }

    /// Records `state` for `name`, replacing the one recorded before.
    #[inline]
    pub fn insert(&mut self, name: impl Into<Arc<str>>, state: NodeState) {
        let name = name.into();
        if let Some(order) = &self.order {
            // What is recorded is the order's first names, in strict order: the next
            // one keeps it so.
            if order
                .names
                .get(self.by_name.len())
                .is_some_and(|next| Arc::ptr_eq(next, &name))
            {
                self.by_name.push((name, state));
                return;
            }
            self.order = None;
        }
        self.insert_compared(name, state);
    }

    /// [`States::insert`] without an order to follow: `name` compared with the last name
    /// recorded, and searched for when it does not come after it.
    fn insert_compared(&mut self, name: Arc<str>, state: NodeState) {
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

    /// The names and their states, in order.
    pub fn entries(&self) -> impl Iterator<Item = &(Arc<str>, NodeState)> {
        self.by_name.iter()
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
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::{NodeState, Order, States};

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

    /// Whether `names` are in strict order (each once).
    fn strict(names: &[Arc<str>]) -> bool {
        names.windows(2).all(|w| w[0] < w[1])
    }

    proptest! {
        /// An order is taken only from names in strict order, on its first update and
        /// after names changed (the same text at a new address, or another text); states
        /// that follow it record what states that follow none record, other names and
        /// repeated records among them.
        #[test]
        fn an_order_holds_only_names_in_strict_order_and_following_it_changes_nothing(
            first in proptest::collection::vec(0u16..60, 0..40),
            sort_first in any::<bool>(),
            changes in proptest::collection::vec((0usize..40, 0u16..60, any::<bool>()), 0..5),
            others in proptest::collection::vec((0usize..41, 0u16..70, 0usize..6), 0..4),
        ) {
            let mut first = first;
            if sort_first {
                first.sort_unstable();
                first.dedup();
            }
            // Zero-padded, so that text order is number order.
            let named = |n: u16| -> Arc<str> { Arc::from(format!("node-{n:03}")) };
            let first: Vec<Arc<str>> = first.into_iter().map(named).collect();
            let mut second = first.clone();
            for (at, n, same_text) in &changes {
                if second.is_empty() {
                    break;
                }
                let at = at % second.len();
                second[at] = if *same_text { Arc::from(&*second[at]) } else { named(*n) };
            }
            let mut order = Order::default();
            prop_assert_eq!(order.update(first.iter()), strict(&first));
            let taken = order.update(second.iter());
            prop_assert_eq!(taken, strict(&second));
            if taken {
                prop_assert_eq!(order.len(), second.len());
                prop_assert!(order.names.iter().zip(&second).all(|(a, b)| Arc::ptr_eq(a, b)));
            } else {
                prop_assert!(order.is_empty());
            }

            // Names in strict order changed at known places: told the places, an order
            // finds what it finds comparing every name.
            let mut base = first.clone();
            base.sort_unstable();
            base.dedup();
            let mut changed = base.clone();
            let mut places = Vec::new();
            for (at, n, same_text) in changes.iter().filter(|_| !base.is_empty()) {
                let at = at % changed.len();
                changed[at] = if *same_text { Arc::from(&*changed[at]) } else { named(*n) };
                places.push(at);
            }
            places.sort_unstable();
            places.dedup();
            let (mut told, mut whole) = (Order::default(), Order::default());
            prop_assert!(told.update(base.iter()) && whole.update(base.iter()));
            let found = whole.update(changed.iter());
            prop_assert_eq!(told.update_at(places.iter().map(|&i| (i, &changed[i]))), found);
            prop_assert_eq!(told.len(), whole.len());
            prop_assert!(told.names.iter().zip(&whole.names).all(|(a, b)| Arc::ptr_eq(a, b)));

            let order = Arc::new(order);
            let mut following = States::default();
            following.follow(Arc::clone(&order));
            let mut plain = States::default();
            for (i, name) in second.iter().enumerate() {
                for (at, n, k) in &others {
                    if *at == i {
                        following.insert(format!("node-{n:03}"), KINDS[*k]);
                        plain.insert(format!("node-{n:03}"), KINDS[*k]);
                    }
                }
                following.insert(Arc::clone(name), KINDS[i % 6]);
                plain.insert(Arc::clone(name), KINDS[i % 6]);
            }
            following.unfollow();
            prop_assert_eq!(&following, &plain);
            let listed: Vec<_> = following.iter().map(|(n, s)| (n.to_owned(), *s)).collect();
            let expected: Vec<_> = plain.iter().map(|(n, s)| (n.to_owned(), *s)).collect();
            prop_assert_eq!(listed, expected);
            prop_assert!(following.iter().zip(following.iter().skip(1)).all(|(a, b)| a.0 < b.0));
        }
    }
}
