//! Each member's state as a plan records it: the names sorted in one vector, each one's
//! state at the same place in another.
//!
//! The member pass records the members in their order, which is name order, so nearly
//! every record is an append; a later change of state (a slot granted) finds its place by
//! binary search. A map keyed by name paid a tree search and its node splits for every
//! member (about a sixth of a whole plan at 10,000 members).
//!
//! An append still compared each name with the one before it. When the member pass knows
//! the members' names are in strict name order (an [`Order`], kept between plans and
//! checked again only where names changed), it records them by address instead, and the
//! states take the order's names as theirs: a record is then one state appended, and the
//! names are shared, not copied, between the order, the plan's states and what the next
//! plan compares them with.

use std::hash::{Hash, Hasher};
use std::ops::Index;
use std::sync::Arc;

use super::actions::NodeState;

/// Names shared between an [`Order`] and the [`States`] that follow it.
pub type Names = Arc<Vec<Arc<str>>>;

/// Names in strict name order, each once, as a list kept between plans: each
/// [`Order::update`] takes the names of the plan's members and compares only the names
/// next to those that changed (a name that is the same text at another address is a
/// change). No other way makes one, so an `Order` always holds names in strict order.
/// The list is copied only when a name changes while states still share it.
#[derive(Debug, Clone, Default)]
pub struct Order {
    names: Names,
}

impl Order {
    /// Takes `names` as the order when they are in strict name order, and says whether
    /// they are; otherwise the order is left empty. Where a name is the one at the same
    /// place before (the same address), the pair it forms with an unchanged neighbour was
    /// in order then and is not compared again.
    pub fn update<'n>(&mut self, names: impl ExactSizeIterator<Item = &'n Arc<str>>) -> bool {
        if self.names.len() != names.len() {
            let names: Vec<Arc<str>> = names.cloned().collect();
            let sorted = names.windows(2).all(|w| w[0] < w[1]);
            self.names = Arc::new(if sorted { names } else { Vec::new() });
            return sorted;
        }
        self.update_at(names.enumerate())
    }

    /// [`Order::update`] when only the names at the places `changed` (ascending) may
    /// differ from the last update's: each is the name given, and all others stay.
    pub fn update_at<'n>(&mut self, changed: impl Iterator<Item = (usize, &'n Arc<str>)>) -> bool {
        let renamed: Vec<(usize, &Arc<str>)> = changed
            .filter(|(i, name)| !Arc::ptr_eq(&self.names[*i], name))
            .collect();
        if !renamed.is_empty() {
            let names = Arc::make_mut(&mut self.names);
            for &(i, name) in &renamed {
                names[i] = Arc::clone(name);
            }
        }
        let sorted = self.in_order_around(renamed.iter().map(|(i, _)| *i));
        if !sorted {
            self.names = Names::default();
        }
        sorted
    }

    /// Whether each name at the places `changed` comes after the one before it and
    /// before the one after it. A pair of names that did not change was in order
    /// before; each pair with a changed name in it is compared.
    fn in_order_around(&self, mut changed: impl Iterator<Item = usize>) -> bool {
        let names = &self.names;
        changed.all(|i| {
            (i == 0 || names[i - 1] < names[i]) && names.get(i + 1).is_none_or(|n| names[i] < *n)
        })
    }

    /// The names, to follow ([`States::follow`]).
    pub fn names(&self) -> &Names {
        &self.names
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
    /// Sorted by name, each name once; shared with the members' views, and with an
    /// order while the states follow it (then it may hold names not recorded yet).
    names: Names,
    /// The state of each of the first names, at its place.
    states: Vec<NodeState>,
    /// While the member pass records the members in their order: `names` is the order's,
    /// of which exactly the first ones are recorded ([`States::follow`]).
    following: bool,
    /// The place of the name most likely recorded next ([`States::expect`]).
    expected: Option<usize>,
    /// How many members are in each state ([`NodeState::index`]).
    counts: Counts,
}

/// How many of some states are each state, by [`NodeState::index`].
pub type Counts = [usize; NodeState::COUNT];

/// How many of `states` are each state.
pub fn counts_of(states: &[NodeState]) -> Counts {
    let mut counts = Counts::default();
    for s in states {
        counts[s.index()] += 1;
    }
    counts
}

/// Whether `a` and `b` are the same states, place by place. Compared a block at a time
/// with no branch per state, which the compiler makes vector instructions of: the
/// derived comparison, which stops at each state, took six instructions a member.
pub fn same_states(a: &[NodeState], b: &[NodeState]) -> bool {
    const BLOCK: usize = 256;
    a.len() == b.len()
        && a.chunks(BLOCK).zip(b.chunks(BLOCK)).all(|(a, b)| {
            let differ = a
                .iter()
                .zip(b)
                .fold(0u8, |d, (x, y)| d | (*x as u8 ^ *y as u8));
            differ == 0
        })
}

/// The same states are equal, whatever order is followed.
impl PartialEq for States {
    fn eq(&self, other: &Self) -> bool {
        same_states(&self.states, &other.states) && self.recorded() == other.recorded()
    }
}

impl Eq for States {}

impl States {
    /// `states[i]` recorded for `names[i]`, the names in strict name order (the names
    /// without a state left out); `counts` are the states' ([`counts_of`]).
    pub fn of(names: Names, mut states: Vec<NodeState>, mut counts: Counts) -> Self {
        if states.len() > names.len() {
            states.truncate(names.len());
            counts = counts_of(&states);
        }
        let mut of = States {
            names,
            states,
            following: true,
            expected: None,
            counts,
        };
        of.unfollow();
        of
    }

    /// How many members are in `state`.
    pub fn count(&self, state: NodeState) -> usize {
        self.counts[state.index()]
    }

    /// Records in the order of `names` (in strict name order), while nothing is recorded
    /// yet: a record of the name that comes next in it is appended without comparing
    /// names. Any other record stops following.
    pub fn follow(&mut self, names: Names) {
        if self.states.is_empty() {
            self.names = names;
            self.following = true;
        }
    }

    /// Stops following an order.
    pub fn unfollow(&mut self) {
        if std::mem::take(&mut self.following) && self.names.len() != self.states.len() {
            // Names the pass did not record: the recorded ones alone are kept.
            self.names = Arc::new(self.recorded().to_vec());
        }
    }

    /// The names recorded.
    fn recorded(&self) -> &[Arc<str>] {
        &self.names[..self.states.len()]
    }

    /// Records `state` for `name`, replacing the one recorded before.
    #[inline]
    pub fn insert(&mut self, name: &Arc<str>, state: NodeState) {
        if self.following {
            // What is recorded is the order's first names, in strict order: the next
            // one keeps it so.
            if self
                .names
                .get(self.states.len())
                .is_some_and(|next| Arc::ptr_eq(next, name))
            {
                self.states.push(state);
                self.counts[state.index()] += 1;
                return;
            }
            self.unfollow();
        }
        self.insert_compared(name, state);
    }

    /// The next records are likely of the name recorded at `place` (the member pass over
    /// the open places, which records each over the state kept at its place): when that
    /// very name is recorded, its state is replaced there without a search. `None`:
    /// nothing is expected.
    pub fn expect(&mut self, place: Option<usize>) {
        self.expected = place;
    }

    /// [`States::insert`] without an order to follow: `name` compared with the last name
    /// recorded, and searched for when it does not come after it.
    fn insert_compared(&mut self, name: &Arc<str>, state: NodeState) {
        if let Some(i) = self.expected
            && self.recorded().get(i).is_some_and(|n| Arc::ptr_eq(n, name))
        {
            self.replace(i, state);
            return;
        }
        let at = match self.recorded().last() {
            Some(last) if **last < **name => self.states.len(),
            None => 0,
            Some(_) => match self.find(name) {
                Ok(i) => {
                    self.replace(i, state);
                    return;
                }
                Err(i) => i,
            },
        };
        Arc::make_mut(&mut self.names).insert(at, Arc::clone(name));
        self.states.insert(at, state);
        self.counts[state.index()] += 1;
    }

    /// Records `state` over the one at place `i`.
    fn replace(&mut self, i: usize, state: NodeState) {
        self.counts[self.states[i].index()] -= 1;
        self.counts[state.index()] += 1;
        self.states[i] = state;
    }

    /// Room for `more` records without growing.
    pub fn reserve(&mut self, more: usize) {
        self.states.reserve(more);
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.recorded().binary_search_by(|n| (**n).cmp(name))
    }

    /// The state recorded for `name`.
    pub fn get(&self, name: &str) -> Option<&NodeState> {
        self.find(name).ok().map(|i| &self.states[i])
    }

    /// How many members have a state.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// No member has a state.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Each name and its state, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeState)> {
        self.names.iter().map(|n| &**n).zip(&self.states)
    }

    /// The names (shared: the same list, at the same address, while no name changes)
    /// and their states, in order, once recorded (not while following an order).
    pub fn columns(&self) -> (&Names, &[NodeState]) {
        (&self.names, &self.states)
    }

    /// The states, in name order.
    pub fn values(&self) -> impl Iterator<Item = &NodeState> {
        self.states.iter()
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
        let states = self.states;
        if let Some(n) = states.recorded().get(self.next)
            && (std::ptr::eq::<str>(&**n, name) || **n == *name)
        {
            self.next += 1;
            return Some(states.states[self.next - 1]);
        }
        match states.find(name) {
            Ok(i) => {
                self.next = i + 1;
                Some(states.states[i])
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
        state.write_usize(self.len());
        for (name, s) in self.iter() {
            (name, s).hash(state);
        }
    }
}

impl<N: Into<Arc<str>>> FromIterator<(N, NodeState)> for States {
    fn from_iter<I: IntoIterator<Item = (N, NodeState)>>(records: I) -> Self {
        let mut states = States::default();
        for (name, state) in records {
            states.insert(&name.into(), state);
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

    use super::{NodeState, Order, States, same_states};

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
            records in proptest::collection::vec((0u16..300, 0usize..6, 0usize..4), 0..200),
            probes in proptest::collection::vec(0u16..300, 0..20),
        ) {
            // One name each (records of a name recorded before may be found by address).
            let names: Vec<Arc<str>> = (0..300).map(|n| Arc::from(format!("node-{n}"))).collect();
            let mut states = States::default();
            let mut map = BTreeMap::new();
            for (n, k, hint) in &records {
                let name = format!("node-{n}");
                // The place the name has (or would have): expected there, next to it, or
                // nowhere.
                let place = map.keys().take_while(|m: &&String| **m < name).count();
                states.expect(match hint {
                    0 => None,
                    1 => Some(place),
                    2 => Some(place + 1),
                    _ => place.checked_sub(1),
                });
                states.insert(&names[usize::from(*n)], KINDS[*k]);
                map.insert(name, KINDS[*k]);
            }
            for kind in KINDS {
                prop_assert_eq!(states.count(kind), map.values().filter(|s| **s == kind).count());
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

    proptest! {
        /// Two lists of states compare as the derived comparison of each place says:
        /// equal lists, lists with one place changed (anywhere in a block or across
        /// blocks), and lists of other lengths.
        #[test]
        fn states_compare_place_by_place(
            a in proptest::collection::vec(0usize..6, 0..700),
            change in proptest::option::of((any::<prop::sample::Index>(), 0usize..6)),
            cut in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            let a: Vec<NodeState> = a.into_iter().map(|k| KINDS[k]).collect();
            let mut b = a.clone();
            if let Some((at, k)) = change.filter(|_| !b.is_empty()) {
                let at = at.index(b.len());
                b[at] = KINDS[k];
            }
            if let Some(cut) = cut.filter(|_| !b.is_empty()) {
                b.truncate(cut.index(b.len()));
            }
            prop_assert_eq!(same_states(&a, &b), a == b);
            prop_assert_eq!(same_states(&b, &a), a == b);
        }
    }

    /// Whether `names` are in strict order (each once).
    fn strict(names: &[Arc<str>]) -> bool {
        names.windows(2).all(|w| w[0] < w[1])
    }

    proptest! {
        /// An order is taken only from names in strict order, on its first update and
        /// after names changed (the same text at a new address, or another text); states
        /// that follow it record what states that follow none record, other names,
        /// repeated records and names of the order not recorded among them.
        #[test]
        fn an_order_holds_only_names_in_strict_order_and_following_it_changes_nothing(
            first in proptest::collection::vec(0u16..60, 0..40),
            sort_first in any::<bool>(),
            changes in proptest::collection::vec((0usize..40, 0u16..60, any::<bool>()), 0..5),
            others in proptest::collection::vec((0usize..41, 0u16..70, 0usize..6), 0..4),
            skipped in proptest::collection::vec(0usize..41, 0..3),
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
            prop_assert!(told.names.iter().zip(whole.names.iter()).all(|(a, b)| Arc::ptr_eq(a, b)));

            let mut following = States::default();
            following.follow(Arc::clone(order.names()));
            let mut plain = States::default();
            for (i, name) in second.iter().enumerate() {
                for (at, n, k) in &others {
                    if *at == i {
                        let other: Arc<str> = Arc::from(format!("node-{n:03}"));
                        following.insert(&other, KINDS[*k]);
                        plain.insert(&other, KINDS[*k]);
                    }
                }
                // A member of the order may get no state.
                if skipped.contains(&i) {
                    continue;
                }
                following.insert(name, KINDS[i % 6]);
                plain.insert(name, KINDS[i % 6]);
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
