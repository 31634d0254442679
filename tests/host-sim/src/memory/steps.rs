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

use super::MemoryHost;

/// The step trace and the halt.
#[derive(Debug, Default)]
pub(super) struct Steps {
    /// Every point passed, in order.
    trace: Vec<String>,
    /// The point to halt at, and at which time it is reached (1: the first).
    halt_at: Option<(String, usize)>,
    /// The point the host halted at, while it is frozen.
    halted: Option<String>,
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

    /// Every step point passed so far, in order.
    pub fn steps(&self) -> Vec<String> {
        self.lock().steps.trace.clone()
    }

    /// Passes one step point of `call`; never returns when the host halts here or is
    /// frozen.
    pub(super) async fn step(&self, call: &str, after: bool) {
        let frozen = {
            let mut inner = self.lock();
            let steps = &mut inner.steps;
            if steps.halted.is_none() {
                let moment = if after { "after" } else { "before" };
                let point = format!("{moment} {call}");
                if let Some((halt, nth)) = &steps.halt_at
                    && *halt == point
                    && steps.trace.iter().filter(|p| **p == point).count() + 1 == *nth
                {
                    steps.halted = Some(format!("{point} ({nth})"));
                }
                steps.trace.push(point);
            }
            steps.halted.is_some()
        };
        if frozen {
            std::future::pending::<()>().await;
        }
    }
}
