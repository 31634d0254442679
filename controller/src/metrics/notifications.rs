//! `bootc_pool_notifications_total`: the rollout events of a pool sent to its webhook
//! ([`crate::notify`]), by event and outcome.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Metrics;
use crate::notify::NotificationLabels;

/// The family, one of [`Metrics`]' own.
#[derive(Debug, Clone, Default)]
pub(super) struct NotifyMetrics(Family<NotificationLabels, Counter>);

impl NotifyMetrics {
    /// Registers the family with its help text.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "bootc_pool_notifications",
            "Rollout events of a pool sent to its webhook, by event and outcome (delivered, failed, dropped)",
            self.0.clone(),
        );
    }

    /// Removes every series of `pool`.
    pub(super) fn forget(&self, pool: &str) {
        for labels in NotificationLabels::all(pool) {
            self.0.remove(&labels);
        }
    }
}

impl Metrics {
    /// Counts one rollout event sent (or not) to a pool's webhook.
    pub fn record_notification(&self, labels: &NotificationLabels) {
        self.inner.f.notifications.0.get_or_create(labels).inc();
    }
}
