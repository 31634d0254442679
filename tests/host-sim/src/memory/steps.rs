//! The host calls an agent makes, as a trace of step points, and a halt at one of them
//! that stands in for killing the agent there.
//!
//! Every call is two points: `before <call>` (nothing done yet) and `after <call>` (done,
//! and the agent not told yet). A halt at a point (`before unlock`, and which time it is
//! reached: the first, the second…) freezes the host there: that call, and every call
//! after it, never returns, as if the agent had been SIGKILLed right there. A test then aborts the agent's task, [`MemoryHost::resume`]s
//! the host and starts a new agent on it. API writes happen between two host calls, so
//! the point after one call and the point before the next one stop the agent on either
//! side of them.

use std::collections::{HashMap, VecDeque};

use bootc_standin::State;

use super::MemoryHost;

/// A change made by hand to the host's deployments (an admin's `bootc switch`) when a
/// step point is reached the `nth` time.
pub(super) struct ByHand {
    point: String,
    nth: usize,
    change: Box<dyn FnOnce(&mut State) + Send>,
}

impl std::fmt::Debug for ByHand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByHand")
            .field("point", &self.point)
            .field("nth", &self.nth)
            .finish_non_exhaustive()
    }
}

/// How many of the latest points [`MemoryHost::steps`] keeps: far more than a test's
/// host passes, while a host that runs for hours (a bench's soak) keeps a bounded trace.
pub const TRACE_KEPT: usize = 4096;

/// A step point: `after` (or before) the call named.
type Point = (bool, &'static str);

/// The step trace and the halt.
#[derive(Debug, Default)]
pub(super) struct Steps {
    /// The latest [`TRACE_KEPT`] points passed, in order.
    trace: VecDeque<Point>,
    /// How many times each point was passed, from the host's creation.
    passed: HashMap<Point, usize>,
    /// The point to halt at, and at which time it is reached (1: the first).
    halt_at: Option<(String, usize)>,
    /// The point the host halted at, while it is frozen.
    halted: Option<String>,
    /// A change to make by hand at a point.
    by_hand: Option<ByHand>,
}

impl MemoryHost {
    /// Halts the `nth` time (1: the first) the host reaches `point` (`before unlock`,
    /// `after reboot`, …; counted from the host's creation).
    pub fn halt_at(&self, point: &str, nth: usize) {
        self.lock().steps.halt_at = Some((point.to_owned(), nth));
    }

    /// The point the host halted at (`before unlock`, `after reboot`, …), while frozen.
    pub fn halted(&self) -> Option<String> {
        self.lock().steps.halted.clone()
    }

    /// Unfreezes the host for new calls; the calls that were frozen never return (their
    /// agent is gone). The halt is used up.
    pub fn resume(&self) {
        let mut inner = self.lock();
        inner.steps.halted = None;
        inner.steps.halt_at = None;
    }

    /// Changes the host's deployments by hand now (as an admin's `bootc` on the host
    /// would), and signals the change.
    pub fn by_hand(&self, change: impl FnOnce(&mut State)) {
        let mut inner = self.lock();
        change(&mut inner.state);
        Self::signal(&inner);
    }

    /// Changes the host's deployments by hand the `nth` time (1: the first) the host
    /// reaches `point` (`after identity`, …), before the call goes on: what a call
    /// after it reads shows the change, what the agent read before does not.
    pub fn by_hand_at(
        &self,
        point: &str,
        nth: usize,
        change: impl FnOnce(&mut State) + Send + 'static,
    ) {
        self.lock().steps.by_hand = Some(ByHand {
            point: point.to_owned(),
            nth,
            change: Box::new(change),
        });
    }

    /// The step points passed so far, in order (the latest [`TRACE_KEPT`]).
    pub fn steps(&self) -> Vec<String> {
        let inner = self.lock();
        inner.steps.trace.iter().map(|p| text(*p)).collect()
    }

    /// Passes one step point of `call`; never returns when the host halts here or is
    /// frozen.
    pub(super) async fn step(&self, call: &'static str, after: bool) {
        let frozen = {
            let mut inner = self.lock();
            let steps = &mut inner.steps;
            let mut change = None;
            if steps.halted.is_none() {
                let point = (after, call);
                let reached = steps.passed.entry(point).or_default();
                *reached += 1;
                let reached = *reached;
                if let Some((halt, nth)) = &steps.halt_at
                    && is(halt, point)
                    && reached == *nth
                {
                    steps.halted = Some(format!("{} ({nth})", text(point)));
                }
                if steps
                    .by_hand
                    .as_ref()
                    .is_some_and(|h| is(&h.point, point) && h.nth == reached)
                {
                    change = steps.by_hand.take();
                }
                if steps.trace.len() == TRACE_KEPT {
                    steps.trace.pop_front();
                }
                steps.trace.push_back(point);
            }
            let frozen = steps.halted.is_some();
            if let Some(by_hand) = change {
                (by_hand.change)(&mut inner.state);
                Self::signal(&inner);
            }
            frozen
        };
        if frozen {
            std::future::pending::<()>().await;
        }
    }
}

/// A point as the trace and the halts name it: `before unlock`, `after reboot`, ….
fn text((after, call): Point) -> String {
    format!("{} {call}", moment(after))
}

fn moment(after: bool) -> &'static str {
    if after { "after" } else { "before" }
}

/// Whether `name` (`before unlock`) names `point`.
fn is(name: &str, (after, call): Point) -> bool {
    name.strip_prefix(moment(after))
        .and_then(|rest| rest.strip_prefix(' '))
        == Some(call)
}
