//! What the kept outcomes add up to ([`Sums`]): a member pass that may take them whole
//! visits only the members without one.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::actions::NodeState;
use super::super::health::{self, TIMED_STATES};
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
    /// For each of the states whose time is measured, when each member in it entered it
    /// (a Staging member left Idle, a Rebooting one was granted its slot): how many at
    /// each time.
    pub since: [BTreeMap<DateTime<Utc>, usize>; TIMED_STATES.len()],
    /// Members whose Node is not Ready, holding no slot.
    pub unavailable: usize,
    /// Members holding a slot.
    pub holders: usize,
    /// Slot holders unhealthy.
    pub unhealthy: PlaceSet,
    /// Slot holders whose outcome holds until a moment, or that ask to be looked at
    /// again at one.
    pub timed: PlaceSet,
    /// The moments their outcomes hold until: how many at each.
    pub untils: BTreeMap<DateTime<Utc>, usize>,
    /// The moments they ask to be looked at again: how many at each.
    pub wakes: BTreeMap<DateTime<Utc>, usize>,
    /// Slot candidates (unless another pool claims them).
    pub candidates: PlaceSet,
    /// How many of `candidates` are in each zone (`""`: none), those with any. A pool's
    /// zones are few: a list, searched from its start.
    pub candidate_zones: Vec<(Box<str>, usize)>,
    /// Members on the target reporting Degraded.
    pub on_target_degraded: PlaceSet,
    /// Members degraded, with a reason and a message.
    pub degraded: PlaceSet,
    /// Members that use a slot of the budget: holding one, or their Node NotReady.
    pub slot_users: PlaceSet,
    /// Members whose Node is unschedulable, holding no slot (cordoned by someone else).
    pub cordoned: PlaceSet,
}

/// PlaceSet among a pool's members, as one bit each: a place is added, taken out and
/// found in a few instructions, and they are listed in ascending order.
#[derive(Debug, Default, Clone)]
pub(in super::super) struct PlaceSet {
    words: Vec<u64>,
    /// How many places it holds.
    len: usize,
}

impl PlaceSet {
    /// No place, among `len` places.
    fn none(len: usize) -> Self {
        PlaceSet {
            words: vec![0; len.div_ceil(64)],
            len: 0,
        }
    }

    fn insert(&mut self, i: usize) {
        let (word, bit) = (&mut self.words[i / 64], 1 << (i % 64));
        self.len += usize::from(*word & bit == 0);
        *word |= bit;
    }

    pub fn remove(&mut self, i: usize) {
        let (word, bit) = (&mut self.words[i / 64], 1 << (i % 64));
        self.len -= usize::from(*word & bit != 0);
        *word &= !bit;
    }

    /// The places, ascending.
    pub fn iter(&self) -> Places<'_> {
        Places {
            words: &self.words,
            at: 0,
            bits: self.words.first().copied().unwrap_or(0),
            left: self.len,
        }
    }
}

/// The places of a [`PlaceSet`], ascending.
#[derive(Clone)]
pub(in super::super) struct Places<'s> {
    words: &'s [u64],
    /// The word being read, and its bits not read yet.
    at: usize,
    bits: u64,
    /// How many places are left: none, and the words after are not read.
    left: usize,
}

impl Iterator for Places<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        while self.bits == 0 {
            self.at += 1;
            self.bits = *self.words.get(self.at)?;
        }
        let bit = self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some(self.at * 64 + bit)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
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
            since: Default::default(),
            unavailable: 0,
            holders: 0,
            unhealthy: places(),
            timed: places(),
            untils: BTreeMap::new(),
            wakes: BTreeMap::new(),
            candidates: places(),
            candidate_zones: Vec::new(),
            on_target_degraded: places(),
            degraded: places(),
            slot_users: places(),
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
        if let Some((at, t)) = entry.since {
            count_in(&mut self.since[at], t);
        }
        let holds = o.holds();
        self.unavailable += usize::from(!entry.ready && !holds);
        self.holders += usize::from(holds);
        if o.slot.as_ref().is_some_and(|s| s.unhealthy.is_some()) {
            self.unhealthy.insert(i);
        }
        if let Some(slot) = o.slot.as_deref() {
            if slot.until.is_some() || slot.wake.is_some() {
                self.timed.insert(i);
            }
            for (counts, t) in [(&mut self.untils, slot.until), (&mut self.wakes, slot.wake)] {
                if let Some(t) = t {
                    count_in(counts, t);
                }
            }
        }
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
        if !entry.ready || holds {
            self.slot_users.insert(i);
        }
        if entry.unschedulable && !holds {
            self.cordoned.insert(i);
        }
    }

    /// The kept entries' part of the pool's health.
    pub fn health(&self) -> health::Kept {
        health::Kept {
            unreported: self.unreported,
            since: std::array::from_fn(|at| self.since[at].keys().next().copied()),
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
        if let Some((at, t)) = entry.since {
            count_out(&mut self.since[at], t);
        }
        if let Some(slot) = o.slot.as_deref() {
            for (counts, t) in [(&mut self.untils, slot.until), (&mut self.wakes, slot.wake)] {
                if let Some(t) = t {
                    count_out(counts, t);
                }
            }
        }
        let holds = o.holds();
        let unavailable = usize::from(!entry.ready && !holds);
        self.unavailable = self.unavailable.saturating_sub(unavailable);
        self.holders = self.holders.saturating_sub(usize::from(holds));
        self.unhealthy.remove(i);
        self.timed.remove(i);
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
        self.slot_users.remove(i);
        self.cordoned.remove(i);
    }
}

/// `t` counted once more in `counts`.
fn count_in(counts: &mut BTreeMap<DateTime<Utc>, usize>, t: DateTime<Utc>) {
    *counts.entry(t).or_default() += 1;
}

/// `t` counted once less in `counts` (counted when it was kept: a time not there is
/// left alone, should that not hold).
fn count_out(counts: &mut BTreeMap<DateTime<Utc>, usize>, t: DateTime<Utc>) {
    if let Some(n) = counts.get_mut(&t) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&t);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::PlaceSet;

    proptest! {
        /// Places added and taken out list and count as a set of the same places does.
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
            let mut listed = places.iter();
            for (k, i) in set.iter().enumerate() {
                prop_assert_eq!(listed.size_hint(), (set.len() - k, Some(set.len() - k)));
                prop_assert_eq!(listed.next(), Some(*i));
            }
            prop_assert_eq!(listed.size_hint(), (0, Some(0)));
            prop_assert_eq!(listed.next(), None);
        }
    }
}
