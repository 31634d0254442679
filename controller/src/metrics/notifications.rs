//! `bootc_pool_notifications_total`: the rollout events of a pool sent to its webhook
//! (by the notifier), by event and outcome.

use std::collections::BTreeSet;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Metrics;

/// The labels of one `bootc_pool_notifications_total` series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NotificationLabels {
    /// The pool.
    pub pool: String,
    /// The event's name.
    pub event: &'static str,
    /// The outcome's name.
    pub outcome: &'static str,
}

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

    /// Removes the series counted for a pool (see [`Metrics::forget_pool`]).
    pub(super) fn forget(&self, series: &BTreeSet<NotificationLabels>) {
        for labels in series {
            self.0.remove(labels);
        }
    }
}

impl Metrics {
    /// Counts one rollout event sent (or not) to a pool's webhook.
    pub fn record_notification(&self, labels: &NotificationLabels) {
        self.with_pool(&labels.pool, |series| {
            series.notifications.insert(labels.clone());
        });
        self.inner.f.notifications.0.get_or_create(labels).inc();
    }
}
