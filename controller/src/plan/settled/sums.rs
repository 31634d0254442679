//! What the kept outcomes add up to ([`Sums`]): a member pass that may take them whole
//! visits only the members without one.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::actions::NodeState;
use super::super::health;
use super::super::states::Counts;
use super::Entry;

/// The kept entries' part of a member pass, summed over the members (by their places)
/// that have one, and the places that have none. Found whole after a pass that visited
/// every member; after one that visited only the open places, changed where an entry
/// was forgotten or kept.
#[derive(Debug, Default)]
pub(in super::super) struct Sums {
    /// Each member's kept state, at its place (at an open place: any, to be recorded).
    pub states: Vec<NodeState>,
    /// How many of `states` are each state.
    pub counts: Counts,
    /// The places without an entry.
    pub open: PlaceSet,
    /// Members pulling the target (`maxStaging`).
    pub staging: usize,
    /// Members whose agent reports `Drifted=True`.
    pub drifted: usize,
    /// Members whose agent has not answered their spec.
    pub unreported: usize,
    /// When each Staging member (with a known time) left Idle: how many at each time.
    pub staging_since: BTreeMap<DateTime<Utc>, usize>,
    /// Members whose Node is not Ready.
    pub unavailable: usize,
    /// Slot candidates (unless another pool claims them).
    pub candidates: PlaceSet,
    /// How many of `candidates` are in each zone (`""`: none), those with any. A pool's
    /// zones are few: a list, searched from its start.
    pub candidate_zones: Vec<(Box<str>, usize)>,
    /// Members on the target reporting Degraded.
    pub on_target_degraded: PlaceSet,
    /// Members degraded, with a reason and a message.
    pub degraded: PlaceSet,
    /// Members whose Node is NotReady (a settled member holds no slot: these are the
    /// ones that use a slot of the budget).
    pub not_ready: PlaceSet,
    /// Members whose Node is unschedulable (cordoned by someone else).
    pub cordoned: PlaceSet,
}

/// PlaceSet among a pool's members, as one bit each: a place is added, taken out and
/// found in a few instructions, and they are listed in ascending order.
#[derive(Debug, Default, Clone)]
pub(in super::super) struct PlaceSet {
    words: Vec<u64>,
}

impl PlaceSet {
    /// No place, among `len` places.
    fn none(len: usize) -> Self {
        PlaceSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    /// The places, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    w * 64 + bit
                })
            })
        })
    }
}

impl Sums {
    /// The sums of `entries`, one per member place.
    pub(super) fn of(entries: &[Option<Entry>]) -> Self {
        let places = || PlaceSet::none(entries.len());
        let mut pending = Counts::default();
        pending[NodeState::Pending.index()] = entries.len();
        let mut sums = Sums {
            states: vec![NodeState::Pending; entries.len()],
            counts: pending,
            open: places(),
            staging: 0,
            drifted: 0,
            unreported: 0,
            staging_since: BTreeMap::new(),
            unavailable: 0,
            candidates: places(),
            candidate_zones: Vec::new(),
            on_target_degraded: places(),
            degraded: places(),
            not_ready: places(),
            cordoned: places(),
        };
        for (i, entry) in entries.iter().enumerate() {
            match entry {
                Some(entry) => sums.add(i, entry),
                None => sums.open.insert(i),
            }
        }
        sums
    }

    /// `entry`, kept at place `i`, counted.
    pub fn add(&mut self, i: usize, entry: &Entry) {
        let o = &entry.outcome;
        self.counts[self.states[i].index()] -= 1;
        self.counts[o.state.index()] += 1;
        self.states[i] = o.state;
        self.open.remove(i);
        self.staging += usize::from(o.staging);
        self.drifted += usize::from(entry.drifted);
        self.unreported += usize::from(entry.unreported);
        if let Some(t) = entry.staging_since {
            *self.staging_since.entry(t).or_default() += 1;
        }
        self.unavailable += usize::from(!entry.ready);
        if o.candidate {
            self.candidates.insert(i);
            let zone = entry.zone();
            match self.candidate_zone(zone) {
                Some(at) => self.candidate_zones[at].1 += 1,
                None => self.candidate_zones.push((zone.into(), 1)),
            }
        }
        if o.on_target_degraded {
            self.on_target_degraded.insert(i);
        }
        if o.degraded.is_some() {
            self.degraded.insert(i);
        }
        if !entry.ready {
            self.not_ready.insert(i);
        }
        if entry.unschedulable {
            self.cordoned.insert(i);
        }
    }

    /// The kept entries' part of the pool's health.
    pub fn health(&self) -> health::Kept {
        health::Kept {
            unreported: self.unreported,
            staging_since: self.staging_since.keys().next().copied(),
        }
    }

    /// Where `zone` is among the candidates' zones, compared as the grant order compares
    /// them.
    fn candidate_zone(&self, zone: &str) -> Option<usize> {
        (self.candidate_zones.iter()).position(|(z, _)| super::super::slots::same_zone(z, zone))
    }

    /// `entry`, forgotten at place `i`, no longer counted.
    pub(super) fn take(&mut self, i: usize, entry: &Entry) {
        let o = &entry.outcome;
        self.open.insert(i);
        // Counted when it was kept: never below zero (saturating, should that not hold).
        self.staging = self.staging.saturating_sub(usize::from(o.staging));
        self.drifted = self.drifted.saturating_sub(usize::from(entry.drifted));
        self.unreported = self
            .unreported
            .saturating_sub(usize::from(entry.unreported));
        if let Some(t) = entry.staging_since
            && let Some(n) = self.staging_since.get_mut(&t)
        {
            *n -= 1;
            if *n == 0 {
                self.staging_since.remove(&t);
            }
        }
        self.unavailable = self.unavailable.saturating_sub(usize::from(!entry.ready));
        self.candidates.remove(i);
        if o.candidate {
            let zone = entry.zone();
            // Counted when it was kept: never below one here (should that not hold, the
            // zone stays counted, which only reads more candidates).
            if let Some(at) = self.candidate_zone(zone) {
                let n = &mut self.candidate_zones[at].1;
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.candidate_zones.swap_remove(at);
                }
            }
        }
        self.on_target_degraded.remove(i);
        self.degraded.remove(i);
        self.not_ready.remove(i);
        self.cordoned.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::PlaceSet;

    proptest! {
        /// Places added and taken out list as a set of the same places does.
        #[test]
        fn places_list_as_a_set_of_them(
            len in 0usize..300,
            steps in prop::collection::vec((any::<bool>(), 0usize..300), 0..100),
        ) {
            let mut places = PlaceSet::none(len);
            let mut set = BTreeSet::new();
            for (add, i) in steps.into_iter().filter(|(_, i)| *i < len) {
                if add {
                    places.insert(i);
                    set.insert(i);
                } else {
                    places.remove(i);
                    set.remove(&i);
                }
            }
            prop_assert_eq!(places.iter().collect::<Vec<_>>(), set.into_iter().collect::<Vec<_>>());
        }
    }
}
