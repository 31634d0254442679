//! The gauges the alerts read, from one plan: the pool's conditions
//! (`bootc_pool_condition`), members whose agent has not answered the current spec
//! (`bootc_pool_nodes_unreported`), and how long the longest-waiting member has been
//! staging or holding a reboot slot (`bootc_pool_oldest_in_state_seconds`), and members
//! whose booted system is not the image it claims (`bootc_pool_nodes_drifted`).
//!
//! Everything is what the plan found ([`crate::plan::health`] for the members), with no
//! API request and no pass over the pool's members of its own: a plan that visits only
//! the members that changed leaves these gauges as cheap.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{Metrics, PoolLabels, node_state_name};
use crate::plan::Plan;
pub use crate::plan::health::TIMED_STATES;

/// What one plan says about a pool's health, ready to be set on the gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolHealth {
    /// `(type, reason, status is True)` of each of the pool's conditions.
    pub conditions: Vec<(String, String, bool)>,
    /// Members with a BootcNode whose `status.observedGeneration` is behind its
    /// `metadata.generation` (or missing).
    pub unreported: usize,
    /// For each of [`TIMED_STATES`], the longest any member has been in it, in whole
    /// seconds (0 when no member is).
    pub oldest: [i64; TIMED_STATES.len()],
    /// Members whose agent reports `Drifted=True` (the plan's `status.driftedCount`).
    pub drifted: usize,
}

impl PoolHealth {
    /// From the plan's status and what it found of its members' health (see
    /// [`crate::plan::health::Health`] for how each member counts).
    pub fn of(plan: &Plan) -> PoolHealth {
        PoolHealth {
            conditions: plan
                .status
                .conditions
                .iter()
                .map(|c| (c.type_.clone(), c.reason.clone(), c.status == "True"))
                .collect(),
            unreported: plan.health.unreported,
            oldest: plan.health.oldest,
            drifted: drifted(plan),
        }
    }
}

/// The plan's members whose agent reports `Drifted=True`.
pub(super) fn drifted(plan: &Plan) -> usize {
    usize::try_from(plan.status.drifted_count).unwrap_or(0)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    pool: String,
    r#type: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    pool: String,
    state: &'static str,
}

/// The three families, and the condition series of each pool (their reasons change, so
/// the previous series must be found to be removed).
#[derive(Debug, Default)]
pub(super) struct Families {
    condition: Family<ConditionLabels, Gauge>,
    unreported: Family<PoolLabels, Gauge>,
    drifted: Family<PoolLabels, Gauge>,
    oldest: Family<StateLabels, Gauge>,
    conditions: Mutex<BTreeMap<String, Vec<(ConditionLabels, Gauge)>>>,
}

/// The `kept` series are those of `conditions`: the same types and reasons, in order.
fn same_series<'c>(
    kept: &[(ConditionLabels, Gauge)],
    mut conditions: impl Iterator<Item = (&'c str, &'c str, bool)>,
) -> bool {
    let same = kept.iter().all(|(l, _)| {
        conditions
            .next()
            .is_some_and(|(t, r, _)| l.r#type == t && l.reason == r)
    });
    same && conditions.next().is_none()
}

impl Families {
    /// Registers the families under their names, with their help texts.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "bootc_pool_condition",
            "One series per condition of a pool, labelled with its current reason: 1 while True, 0 while False",
            self.condition.clone(),
        );
        r.register(
            "bootc_pool_nodes_unreported",
            "Member nodes whose agent has not reported on the current spec (status.observedGeneration behind metadata.generation)",
            self.unreported.clone(),
        );
        r.register(
            "bootc_pool_nodes_drifted",
            "Member nodes whose agent reports Drifted=True: the booted system is not the image it claims (an overlay on /usr, local layering)",
            self.drifted.clone(),
        );
        r.register_with_unit(
            "bootc_pool_oldest_in_state",
            "Longest time any member node of a pool has been in a state (Staging: since its agent left Idle; Rebooting: since its reboot slot was granted)",
            Unit::Seconds,
            self.oldest.clone(),
        );
    }

    fn set(&self, pool: &str, health: &PoolHealth) {
        let conditions = health.conditions.iter();
        self.set_conditions(
            pool,
            conditions.map(|(t, r, s)| (t.as_str(), r.as_str(), *s)),
        );
        self.gauges(pool).set(health);
    }

    /// Sets `pool`'s condition series: `(type, reason, status is True)` of each. A
    /// condition whose reason changed loses its series under the old reason. While the
    /// types and reasons are those of the last call, only the values are set, through
    /// the handles kept then.
    pub(super) fn set_conditions<'c>(
        &self,
        pool: &str,
        conditions: impl Iterator<Item = (&'c str, &'c str, bool)> + Clone,
    ) {
        // Under the lock, so that two concurrent calls cannot leave a stale reason.
        let mut seen = self
            .conditions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = seen.get(pool)
            && same_series(kept, conditions.clone())
        {
            for ((_, gauge), (_, _, status)) in kept.iter().zip(conditions) {
                gauge.set(i64::from(status));
            }
            return;
        }
        let labels: Vec<ConditionLabels> = conditions
            .clone()
            .map(|(type_, reason, _)| ConditionLabels {
                pool: pool.to_owned(),
                r#type: type_.to_owned(),
                reason: reason.to_owned(),
            })
            .collect();
        for (old, _) in seen.remove(pool).unwrap_or_default() {
            if !labels.contains(&old) {
                self.condition.remove(&old);
            }
        }
        let series = labels
            .into_iter()
            .zip(conditions)
            .map(|(l, (_, _, status))| {
                let gauge = self.condition.get_or_create(&l).clone();
                gauge.set(i64::from(status));
                (l, gauge)
            })
            .collect();
        seen.insert(pool.to_owned(), series);
    }

    /// Handles on `pool`'s unreported, drifted and oldest-in-state series.
    pub(super) fn gauges(&self, pool: &str) -> Gauges {
        let pool_labels = PoolLabels {
            pool: pool.to_owned(),
        };
        Gauges {
            unreported: self.unreported.get_or_create(&pool_labels).clone(),
            drifted: self.drifted.get_or_create(&pool_labels).clone(),
            oldest: TIMED_STATES.map(|state| {
                let labels = StateLabels {
                    pool: pool.to_owned(),
                    state: node_state_name(state),
                };
                self.oldest.get_or_create(&labels).clone()
            }),
        }
    }

    /// Removes every series of `pool`.
    pub(super) fn forget(&self, pool: &str) {
        let mut seen = self
            .conditions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (old, _) in seen.remove(pool).unwrap_or_default() {
            self.condition.remove(&old);
        }
        drop(seen);
        let pool_labels = PoolLabels {
            pool: pool.to_owned(),
        };
        self.unreported.remove(&pool_labels);
        self.drifted.remove(&pool_labels);
        for state in TIMED_STATES {
            self.oldest.remove(&StateLabels {
                pool: pool.to_owned(),
                state: node_state_name(state),
            });
        }
    }
}

/// Handles on one pool's unreported, drifted and oldest-in-state series (a handle
/// shares its series' value).
#[derive(Debug)]
pub(super) struct Gauges {
    unreported: Gauge,
    drifted: Gauge,
    /// One per [`TIMED_STATES`].
    oldest: [Gauge; TIMED_STATES.len()],
}

impl Gauges {
    /// Sets them from `health` (its conditions aside).
    pub(super) fn set(&self, health: &PoolHealth) {
        self.set_counts(health.unreported, health.drifted, health.oldest);
    }

    /// Sets the unreported and drifted members and the oldest times in state.
    pub(super) fn set_counts(
        &self,
        unreported: usize,
        drifted: usize,
        oldest: [i64; TIMED_STATES.len()],
    ) {
        self.unreported
            .set(i64::try_from(unreported).unwrap_or(i64::MAX));
        self.drifted.set(i64::try_from(drifted).unwrap_or(i64::MAX));
        for (gauge, seconds) in self.oldest.iter().zip(oldest) {
            gauge.set(seconds);
        }
    }
}

impl Metrics {
    /// Sets `pool`'s condition, unreported-node, drifted-node and oldest-in-state gauges from one plan.
    /// A condition whose reason changed loses its series under the old reason.
    pub fn set_pool_health(&self, pool: &str, health: &PoolHealth) {
        self.inner.health.set(pool, health);
    }
}
