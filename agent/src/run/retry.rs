//! One retried operation's failures in a row (reading the host, writing the pull secret,
//! writing the status), and how long the next attempt waits: the agent's one backoff
//! policy, [`machine::BACKOFF`](crate::machine::BACKOFF).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::machine::BACKOFF;

/// One retried operation's failures in a row.
#[derive(Debug, Clone, Default)]
pub(super) struct Retry {
    attempts: u32,
    at: Option<DateTime<Utc>>,
    message: Option<String>,
}

impl Retry {
    /// Counts a failure at `now`, with what went wrong.
    pub(super) fn fail(&mut self, message: String, now: DateTime<Utc>) {
        self.attempts = self.attempts.saturating_add(1);
        self.at = Some(now);
        self.message = Some(message);
    }

    /// The operation succeeded: no more waiting.
    pub(super) fn clear(&mut self) {
        *self = Retry::default();
    }

    /// Whether the last attempt failed.
    pub(super) fn is_failing(&self) -> bool {
        self.at.is_some()
    }

    /// What went wrong the last time, while failing.
    pub(super) fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Time left before the next attempt, or `None` when it may run now.
    pub(super) fn wait(&self, now: DateTime<Utc>) -> Option<Duration> {
        let at = self.at?;
        let backoff = BACKOFF.delay(self.attempts);
        let elapsed = (now - at).to_std().unwrap_or(Duration::ZERO);
        backoff.checked_sub(elapsed).filter(|d| !d.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_in_a_row_doubles_the_wait() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut retry = Retry::default();
        assert!(!retry.is_failing());
        assert_eq!(retry.wait(t0), None);
        retry.fail("refused".to_owned(), t0);
        assert_eq!(retry.wait(t0), Some(Duration::from_secs(10)));
        retry.fail("refused again".to_owned(), t0);
        assert_eq!(retry.wait(t0), Some(Duration::from_secs(20)));
        assert_eq!(
            retry.wait(t0 + chrono::TimeDelta::seconds(15)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(retry.wait(t0 + chrono::TimeDelta::seconds(20)), None);
        assert_eq!(retry.message(), Some("refused again"));
        retry.clear();
        assert!(!retry.is_failing());
        assert_eq!(retry.message(), None);
    }
}
