//! The series of a pool counted after its reconcile: an Event sent in the background
//! may be answered after the pool is gone and its series removed, and must not bring
//! them back.

use std::sync::PoisonError;
use std::time::Duration;

use super::Metrics;

impl Metrics {
    /// Makes `pool` known, so that [`Metrics::observe_known_action`] counts for it until
    /// [`Metrics::forget_pool`] removes its series.
    pub fn keep_pool(&self, pool: &str) {
        self.with_pool(pool, |_| ());
    }

    /// [`Metrics::observe_action`] for an action that ends after the reconcile that
    /// asked for it: counted only while `pool` is known (see [`Metrics::keep_pool`]).
    pub fn observe_known_action(
        &self,
        pool: &str,
        action: &'static str,
        outcome: &'static str,
        duration: Duration,
    ) {
        // Held while counting: a pool forgotten meanwhile keeps no series.
        let pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pools.contains_key(pool) {
            self.observe_action(pool, action, outcome, duration);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_counted_late_is_counted_only_while_its_pool_is_known() {
        let m = Metrics::new();
        let took = Duration::from_millis(2);
        // Not known yet: nothing.
        m.observe_known_action("a", "event", "ok", took);
        assert!(!m.encode().contains("pool=\"a\""));
        m.keep_pool("a");
        m.observe_known_action("a", "event", "ok", took);
        m.observe_known_action("a", "event", "api", took);
        let text = m.encode();
        assert!(
            text.contains("bootc_pool_actions_total{pool=\"a\",action=\"event\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "bootc_pool_actions_total{pool=\"a\",action=\"event\",outcome=\"api\"} 1"
            ),
            "{text}"
        );
        // Forgotten: a late answer brings no series back.
        m.forget_pool("a");
        m.observe_known_action("a", "event", "ok", took);
        assert!(!m.encode().contains("pool=\"a\""), "{}", m.encode());
    }
}
