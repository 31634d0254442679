//! The member pass over the open places alone (the members without a kept entry): what
//! the kept entries add up to ([`Sums`]) is taken whole, and what they list is merged
//! in by place, so that the pass gives what a pass over every member gives.

use super::super::Planner;
use super::super::holder::Unhealthy;
use super::super::membership::Members;
use super::super::settled::{Entry, Sums};
use super::super::states::{Names, States};
use super::super::target::Target;
use super::{Pass, planned, pulls};

/// Whether a pass may take `sums` whole: the `names` followed are the `members'`, and
/// every open member has its Node (the pass records a state for each member with its
/// Node, over the one kept at its place; one without is given none).
pub(super) fn takes(names: &Names, sums: &Sums, members: &Members<'_>) -> bool {
    names.len() == members.len()
        && sums.states.len() == members.len()
        && sums.open.iter().all(|i| members.get(i).node.is_some())
}

/// Where an open member's part of each list the pass makes begins.
struct Mark {
    place: usize,
    degraded: usize,
    on_target: usize,
    slot_users: usize,
    cordoned: usize,
    unhealthy: usize,
}

/// The pass: the open members planned in full, in their order, the kept entries' part
/// taken from `sums`; `sums` then counts the entries kept now. Returns how many
/// entries were used.
pub(super) fn pass<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    (members, taken, sums): (&Members<'a>, &mut [Option<Entry>], &mut Sums),
    names: Names,
    target: &Target,
) -> usize {
    let open: Vec<usize> = sums.open.iter().collect();
    let pulling: Vec<bool> = open
        .iter()
        .map(|&i| pulls(members.get(i), target))
        .collect();
    pass.places.staging = sums.staging + pulling.iter().filter(|p| **p).count();
    pass.tally.drifted += sums.drifted;
    pass.tally.health = sums.health();
    pass.tally.unavailable += sums.unavailable;
    pass.tally.holders += sums.holders;
    // The kept holders ask to be looked at again as they did: at the first of their
    // moments.
    if let Some((&wake, _)) = sums.wakes.first_key_value() {
        p.requeue_at(wake);
    }
    p.states = States::of(names, sums.states.clone(), sums.counts);
    let degraded_from = p.degraded.len();
    let mut marks = Vec::with_capacity(open.len());
    for (&i, pulling) in open.iter().zip(pulling) {
        marks.push(Mark {
            place: i,
            degraded: p.degraded.len() - degraded_from,
            on_target: pass.tally.on_target_degraded.len(),
            slot_users: pass.tally.slot_users.len(),
            cordoned: pass.tally.cordoned.len(),
            unhealthy: pass.tally.unhealthy.len(),
        });
        // Its state is recorded over the one kept at its place.
        p.states.expect(Some(i));
        pass.at = i;
        taken[i] = planned(p, pass, (members.get(i), pulling), target);
    }
    p.states.expect(None);
    merge(p, pass, (members, &*taken, &*sums), &marks, degraded_from);
    for &i in &open {
        if let Some(entry) = &taken[i] {
            sums.add(i, entry);
        }
    }
    members.len() - open.len()
}

/// The kept entries' candidates, members on the target reporting Degraded, and
/// degraded members, merged by place with what the open members added.
fn merge<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    (members, taken, sums): (&Members<'a>, &[Option<Entry>], &Sums),
    marks: &[Mark],
    degraded_from: usize,
) {
    // The kept candidates stay places, merged when they are read; those another pool
    // claims now are taken out.
    let mut kept = sums.candidates.clone();
    if !pass.conflicted.is_empty() {
        let claimed: Vec<usize> = (kept.iter())
            .filter(|&i| pass.conflicted.contains(&*members.get(i).name))
            .collect();
        for i in claimed {
            kept.remove(i);
        }
    }
    // The zones they are in: those of the kept ones, and of those planned in full.
    let mut zones: Vec<&str> = sums.candidate_zones.iter().map(|(z, _)| &**z).collect();
    for v in pass.tally.candidates.listed() {
        let zone = super::super::slots::zone(v);
        if !zones.contains(&zone) {
            zones.push(zone);
        }
    }
    let zones = zones.len();
    pass.tally
        .candidates
        .keep(kept, members.clone(), Some(zones));
    let fresh = std::mem::take(&mut pass.tally.slot_users);
    let kept = sums.slot_users.iter().map(|i| (i, members.get(i)));
    pass.tally.slot_users = merged(fresh, marks, |m| m.slot_users, kept);
    let fresh = std::mem::take(&mut pass.tally.cordoned);
    let kept = sums.cordoned.iter().map(|i| (i, members.get(i)));
    pass.tally.cordoned = merged(fresh, marks, |m| m.cordoned, kept);
    let fresh = std::mem::take(&mut pass.tally.on_target_degraded);
    let kept = sums
        .on_target_degraded
        .iter()
        .map(|i| (i, String::from(&*members.get(i).name)));
    pass.tally.on_target_degraded = merged(fresh, marks, |m| m.on_target, kept);
    let fresh = p.degraded.split_off(degraded_from);
    let mut kept = Vec::new();
    for i in sums.degraded.iter() {
        let why = taken[i]
            .as_ref()
            .and_then(|e| e.outcome().degraded.as_deref());
        if let Some((reason, message)) = why {
            kept.push((i, p.degraded_line(&members.get(i).name, reason, message)));
        }
    }
    let lines = merged(fresh, marks, |m| m.degraded, kept.into_iter());
    p.degraded.extend(lines);
    let fresh = std::mem::take(&mut pass.tally.unhealthy);
    let kept = sums.unhealthy.iter().filter_map(|i| {
        let slot = taken[i].as_ref()?.outcome().slot.as_deref()?;
        let why = slot.unhealthy.as_ref()?;
        Some((i, Unhealthy::kept(&members.get(i).name, why)))
    });
    pass.tally.unhealthy = merged(fresh, marks, |m| m.unhealthy, kept);
}

/// What the open places added (`fresh`, in their order; `start` tells where each one's
/// part begins) and the `kept` items (by place, ascending), merged by place.
fn merged<T>(
    fresh: Vec<T>,
    marks: &[Mark],
    start: fn(&Mark) -> usize,
    kept: impl Iterator<Item = (usize, T)>,
) -> Vec<T> {
    let total = fresh.len();
    let (least, most) = kept.size_hint();
    let mut out = Vec::with_capacity(total + most.unwrap_or(least));
    let mut kept = kept.peekable();
    let mut fresh = fresh.into_iter();
    for (k, mark) in marks.iter().enumerate() {
        while let Some((_, item)) = kept.next_if(|(i, _)| *i < mark.place) {
            out.push(item);
        }
        let end = marks.get(k + 1).map_or(total, start);
        out.extend(fresh.by_ref().take(end - start(mark)));
    }
    out.extend(kept.map(|(_, item)| item));
    out.extend(fresh);
    out
}
