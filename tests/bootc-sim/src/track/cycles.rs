//! Where the time of each reboot slot goes: from the grant to the release, the instants
//! at which the objects first showed each step of a node's update.
//!
//! A slot's steps, in the order the controller and the node take them (the agent may
//! report the boot before the kubelet reports Ready):
//! granted (the slot annotation), cordoned, approved (`desiredImageState: Booted`), down
//! (the Node NotReady: the reboot), up (Ready again), booted (the BootcNode reports the
//! target booted), uncordoned, released (the annotation gone). Each step is reported as
//! its time since the grant; a step the objects never showed in a slot (a Node that never
//! went NotReady) leaves that slot out of that step's figures.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// The steps of a slot, in order.
pub const STEPS: [&str; 8] = [
    "granted",
    "cordoned",
    "approved",
    "down",
    "up",
    "booted",
    "uncordoned",
    "released",
];

const GRANTED: usize = 0;
const CORDONED: usize = 1;
const APPROVED: usize = 2;
const DOWN: usize = 3;
const UP: usize = 4;
const BOOTED: usize = 5;
const UNCORDONED: usize = 6;
const RELEASED: usize = 7;

/// What the objects of one node show now, as far as a slot's steps go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// The BootcNode holds the slot annotation.
    pub slot: bool,
    /// The Node is cordoned.
    pub cordoned: bool,
    /// The BootcNode asks for the target to be booted.
    pub approved: bool,
    /// The Node is Ready.
    pub ready: bool,
    /// The BootcNode reports the target booted.
    pub booted: bool,
}

/// The slots followed: those held now, with the steps seen so far, and those released.
#[derive(Debug, Clone, Default)]
pub struct SlotCycles {
    open: HashMap<String, [Option<Instant>; 8]>,
    closed: Vec<[Option<Instant>; 8]>,
}

/// One step, over every slot released that showed it: how long after the slot's grant.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub step: &'static str,
    /// Slots that showed the step.
    pub slots: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub max_ms: f64,
}

impl SlotCycles {
    /// Records what node `name`'s objects show at `at`: a slot opened at its grant, each
    /// step at its first sight, and the slot closed at its release.
    pub fn observe(&mut self, name: &str, seen: Seen, at: Instant) {
        let steps = match self.open.get_mut(name) {
            Some(steps) => steps,
            None if seen.slot => {
                let mut steps = [None; 8];
                steps[GRANTED] = Some(at);
                self.open.entry(name.to_owned()).or_insert(steps)
            }
            None => return,
        };
        let first = |steps: &mut [Option<Instant>; 8], step: usize, now: bool| {
            if now && steps[step].is_none() {
                steps[step] = Some(at);
            }
        };
        first(steps, CORDONED, seen.cordoned);
        first(steps, APPROVED, seen.approved);
        first(steps, DOWN, !seen.ready);
        let (down, cordoned) = (steps[DOWN].is_some(), steps[CORDONED].is_some());
        first(steps, UP, down && seen.ready);
        first(steps, BOOTED, seen.booted);
        first(steps, UNCORDONED, cordoned && !seen.cordoned);
        if !seen.slot {
            first(steps, RELEASED, true);
            if let Some(steps) = self.open.remove(name) {
                self.closed.push(steps);
            }
        }
    }

    /// Each step after the grant: its time since the grant, over the slots released so
    /// far.
    pub fn phases(&self) -> Vec<Phase> {
        (1..STEPS.len())
            .map(|step| {
                let mut ms: Vec<f64> = self
                    .closed
                    .iter()
                    .filter_map(|steps| {
                        let (granted, at) = (steps[GRANTED]?, steps[step]?);
                        Some(millis(at.saturating_duration_since(granted)))
                    })
                    .collect();
                ms.sort_by(f64::total_cmp);
                let n = ms.len();
                Phase {
                    step: STEPS[step],
                    slots: n,
                    mean_ms: if n == 0 {
                        0.0
                    } else {
                        ms.iter().sum::<f64>() / n as f64
                    },
                    p50_ms: ms.get(n / 2).copied().unwrap_or(0.0),
                    max_ms: ms.last().copied().unwrap_or(0.0),
                }
            })
            .collect()
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The phases as JSON, milliseconds to a tenth.
pub fn to_json(phases: &[Phase]) -> Value {
    let round = |x: f64| crate::bench::round(x, 1);
    Value::Array(
        phases
            .iter()
            .map(|p| {
                json!({
                    "step": p.step,
                    "slots": p.slots,
                    "mean_ms": round(p.mean_ms),
                    "p50_ms": round(p.p50_ms),
                    "max_ms": round(p.max_ms),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn seen(slot: bool, cordoned: bool, approved: bool, ready: bool, booted: bool) -> Seen {
        Seen {
            slot,
            cordoned,
            approved,
            ready,
            booted,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 0.01
    }

    #[test]
    fn a_slot_is_split_at_the_first_sight_of_each_step() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut c = SlotCycles::default();
        // Nothing before the grant counts, and a node without a slot opens nothing.
        c.observe("a", seen(false, true, false, false, false), at(0));
        c.observe("a", seen(true, false, false, true, false), at(10));
        c.observe("a", seen(true, true, false, true, false), at(15));
        // Seen again: the first sight stays.
        c.observe("a", seen(true, true, false, true, false), at(18));
        c.observe("a", seen(true, true, true, true, false), at(30));
        c.observe("a", seen(true, true, true, false, false), at(40));
        // Booted reported before Ready.
        c.observe("a", seen(true, true, true, false, true), at(120));
        c.observe("a", seen(true, true, true, true, true), at(140));
        c.observe("a", seen(true, false, true, true, true), at(170));
        assert!(c.phases().iter().all(|p| p.slots == 0), "still held");
        c.observe("a", seen(false, false, false, true, true), at(175));
        let got: Vec<_> = c.phases().iter().map(|p| (p.step, p.mean_ms)).collect();
        let want = [
            ("cordoned", 5.0),
            ("approved", 20.0),
            ("down", 30.0),
            ("up", 130.0),
            ("booted", 110.0),
            ("uncordoned", 160.0),
            ("released", 165.0),
        ];
        assert_eq!(got.len(), want.len());
        for ((step, ms), (want_step, want_ms)) in got.into_iter().zip(want) {
            assert_eq!(step, want_step);
            assert!(close(ms, want_ms), "{step}: {ms} ms, want {want_ms}");
        }
    }

    #[test]
    fn a_step_never_seen_leaves_the_slot_out_of_it_and_slots_are_averaged() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut c = SlotCycles::default();
        // Two slots: one that never went NotReady nor was approved, one that did.
        c.observe("a", seen(true, false, false, true, false), at(0));
        c.observe("a", seen(true, true, false, true, false), at(10));
        c.observe("a", seen(false, false, false, true, true), at(50));
        c.observe("b", seen(true, false, false, true, false), at(0));
        c.observe("b", seen(true, true, false, true, false), at(30));
        c.observe("b", seen(true, true, true, false, false), at(40));
        c.observe("b", seen(true, true, true, true, false), at(90));
        // Booted and uncordoned first seen in the release's own sight.
        c.observe("b", seen(false, false, true, true, true), at(100));
        let phases = c.phases();
        let cordoned = &phases[0];
        assert_eq!((cordoned.step, cordoned.slots), ("cordoned", 2));
        assert!(close(cordoned.mean_ms, 20.0));
        assert!(close(cordoned.p50_ms, 30.0) && close(cordoned.max_ms, 30.0));
        for (i, step) in [(1, "approved"), (2, "down"), (3, "up")] {
            assert_eq!((phases[i].step, phases[i].slots), (step, 1));
        }
        assert!(close(phases[3].mean_ms, 90.0));
        for (i, step) in [(4, "booted"), (5, "uncordoned"), (6, "released")] {
            assert_eq!((phases[i].step, phases[i].slots), (step, 2));
            assert!(close(phases[i].mean_ms, 75.0), "{step}");
        }
    }
}
