//! The one retry policy of the workspace: a delay that doubles with every consecutive
//! failure, from `first` up to `max`. Each caller keeps its own failure count (per pool,
//! per request, per host command) and asks the policy how long to wait.

use std::time::Duration;

/// Doubling backoff: `first`, `2·first`, `4·first`, … capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub first: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Backoff {
    /// A policy from `first` to `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff { first, max }
    }

    /// The delay after `failures` consecutive failures (`0` and `1` both give `first`).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_the_first_delay_to_the_ceiling() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let delays: Vec<u64> = (0..12).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn a_first_delay_above_the_ceiling_is_capped() {
        let b = Backoff::new(Duration::from_secs(10), Duration::from_secs(5));
        assert_eq!(b.delay(1), Duration::from_secs(5));
    }
}
