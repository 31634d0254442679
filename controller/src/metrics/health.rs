//! The gauges the alerts read, from one plan: the pool's conditions
//! (`bootc_pool_condition`), members whose agent has not answered the current spec
//! (`bootc_pool_nodes_unreported`), and how long the longest-waiting member has been
//! staging or holding a reboot slot (`bootc_pool_oldest_in_state_seconds`), and members
//! whose booted system is not the image it claims (`bootc_pool_nodes_drifted`).
//!
//! Everything is computed from what the plan already looked at, in one pass over the
//! pool's nodes, with no API request.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::conditions::{IDLE, from_time};
use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{Metrics, PoolLabels, node_state_name};
use crate::plan::{NodeState, NodeView, Plan, Snapshot};

/// The states of `bootc_pool_oldest_in_state_seconds`: the two a node can get stuck in
/// without the plan calling it Degraded.
pub const TIMED_STATES: [NodeState; 2] = [NodeState::Staging, NodeState::Rebooting];

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
    /// From the plan's status and member states, and the snapshot it was made from.
    ///
    /// A Staging node counts from its `Idle` condition's `lastTransitionTime` (when the
    /// agent left Idle to pull) while that condition is False; a node whose agent has not
    /// left Idle yet is not counted here (it is unreported instead). A Rebooting node
    /// counts from its reboot slot annotation (when the slot was granted: cordon, drain,
    /// reboot and the way back); a slot granted by this very plan counts 0.
    pub fn of(snapshot: &Snapshot, plan: &Plan) -> PoolHealth {
        let mut health = PoolHealth {
            conditions: plan
                .status
                .conditions
                .iter()
                .map(|c| (c.type_.clone(), c.reason.clone(), c.status == "True"))
                .collect(),
            drifted: usize::try_from(plan.status.drifted_count).unwrap_or(0),
            ..PoolHealth::default()
        };
        let mut states = plan.states.in_order();
        for view in &snapshot.nodes {
            let Some(state) = states.get(&view.name) else {
                continue;
            };
            if unreported(view) {
                health.unreported += 1;
            }
            if let Some(i) = TIMED_STATES.iter().position(|s| *s == state)
                && let Some(since) = in_state_since(view, state, snapshot.now)
            {
                let seconds = (snapshot.now - since).num_seconds().max(0);
                health.oldest[i] = health.oldest[i].max(seconds);
            }
        }
        health
    }
}

/// The node has a BootcNode and its agent has not answered the current spec.
fn unreported(view: &NodeView) -> bool {
    view.bootc.as_ref().is_some_and(|b| {
        !b.deleting()
            && b.status().and_then(|s| s.observed_generation) < b.generation()
            && b.generation().is_some()
    })
}

/// Since when the node has been in `state` (Staging or Rebooting), when known.
fn in_state_since(view: &NodeView, state: NodeState, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let bootc = view.bootc.as_ref()?;
    match state {
        NodeState::Rebooting => Some(
            bootc
                .annotations()
                .get(REBOOT_SLOT_ANNOTATION)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map_or(now, |t| t.with_timezone(&Utc)),
        ),
        _ => bootc
            .status()
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == IDLE && c.status == "False")
            .and_then(|c| from_time(&c.last_transition_time)),
    }
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
    conditions: Mutex<BTreeMap<String, Vec<ConditionLabels>>>,
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
        let labels: Vec<ConditionLabels> = health
            .conditions
            .iter()
            .map(|(type_, reason, _)| ConditionLabels {
                pool: pool.to_owned(),
                r#type: type_.clone(),
                reason: reason.clone(),
            })
            .collect();
        // Under the lock, so that two concurrent calls cannot leave a stale reason.
        let mut seen = self
            .conditions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for old in seen.remove(pool).unwrap_or_default() {
            if !labels.contains(&old) {
                self.condition.remove(&old);
            }
        }
        for (l, (_, _, status)) in labels.iter().zip(&health.conditions) {
            self.condition.get_or_create(l).set(i64::from(*status));
        }
        seen.insert(pool.to_owned(), labels);
        drop(seen);
        let pool_labels = PoolLabels {
            pool: pool.to_owned(),
        };
        let unreported = i64::try_from(health.unreported).unwrap_or(i64::MAX);
        self.unreported.get_or_create(&pool_labels).set(unreported);
        let drifted = i64::try_from(health.drifted).unwrap_or(i64::MAX);
        self.drifted.get_or_create(&pool_labels).set(drifted);
        for (state, seconds) in TIMED_STATES.iter().zip(health.oldest) {
            self.oldest
                .get_or_create(&StateLabels {
                    pool: pool.to_owned(),
                    state: node_state_name(*state),
                })
                .set(seconds);
        }
    }

    /// Removes every series of `pool`.
    pub(super) fn forget(&self, pool: &str) {
        let mut seen = self
            .conditions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for old in seen.remove(pool).unwrap_or_default() {
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

impl Metrics {
    /// Sets `pool`'s condition, unreported-node, drifted-node and oldest-in-state gauges from one plan.
    /// A condition whose reason changed loses its series under the old reason.
    pub fn set_pool_health(&self, pool: &str, health: &PoolHealth) {
        self.inner.health.set(pool, health);
    }
}
