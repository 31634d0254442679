//! The controller's Prometheus metrics, encoded as OpenMetrics text for `/metrics`
//! (served by [`crate::server`]).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `bootc_pool_reconcile_duration_seconds` | histogram | `pool` |
//! | `bootc_pool_reconciles_total` | counter | `pool`, `outcome` (`ok`, or the error reason) |
//! | `bootc_pool_reconcile_errors_total` | counter | `pool`, `reason` |
//! | `bootc_pool_actions_total` | counter | `pool`, `action`, `outcome` (`ok`, or the error reason) |
//! | `bootc_pool_action_duration_seconds` | histogram | `action` |
//! | `bootc_pool_nodes` | gauge | `pool`, `state` |
//! | `bootc_pool_target_info` | gauge (always 1) | `pool`, `image`, `digest`, `version` |
//! | `bootc_pool_tag_resolutions_total` | counter | `result` |
//! | `bootc_pool_drain_duration_seconds` | histogram | `pool`, `outcome` |
//! | `bootc_pool_reboots_approved_total` | counter | `pool` |
//! | `bootc_pool_leader` | gauge | — |
//! | `bootc_pool_condition` | gauge (1 True, 0 False) | `pool`, `type`, `reason` |
//! | `bootc_pool_nodes_unreported` | gauge | `pool` |
//! | `bootc_pool_nodes_drifted` | gauge | `pool` |
//! | `bootc_pool_oldest_in_state_seconds` | gauge | `pool`, `state` (`Staging`, `Rebooting`) |
//! | `bootc_pool_notifications_total` | counter | `pool`, `event`, `outcome` (`delivered`, `failed`, `dropped`) |
//!
//! [`Metrics`] is cheap to clone (one `Arc`); every clone records into the same registry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::plan::states::States;
use crate::plan::{NodeState, Plan};

mod health;
mod known;
mod results;
pub use health::PoolHealth;
pub use notifications::NotificationLabels;
pub use results::{DrainResult, TagResult};

/// The states of `bootc_pool_nodes`, in the order the plan knows them.
pub const NODE_STATES: [&str; 6] = [
    "Pending",
    "Staging",
    "Staged",
    "Rebooting",
    "UpToDate",
    "Degraded",
];

/// The outcomes of `bootc_pool_reconciles_total` and `bootc_pool_actions_total`: `ok` or
/// an error reason (`crate::reconcile::ReconcileError::reason`).
pub const OUTCOMES: [&str; 4] = ["ok", "api", "cache", "conflict"];

/// The actions of `bootc_pool_actions_total`.
pub use crate::plan::ACTION_KINDS;

/// Bucket bounds of `bootc_pool_reconcile_duration_seconds` (5 ms to about 20 s).
const RECONCILE_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
];

/// Bucket bounds of `bootc_pool_drain_duration_seconds` (1 s to 1 h).
const DRAIN_BUCKETS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
];

/// The name of a plan state as `bootc_pool_nodes` labels it.
pub fn node_state_name(state: NodeState) -> &'static str {
    match state {
        NodeState::Pending => "Pending",
        NodeState::Staging => "Staging",
        NodeState::Staged => "Staged",
        NodeState::Rebooting => "Rebooting",
        NodeState::UpToDate => "UpToDate",
        NodeState::Degraded => "Degraded",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    pool: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    pool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    pool: String,
    action: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionKindLabels {
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    pool: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    pool: String,
    image: String,
    digest: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DrainLabels {
    pool: String,
    outcome: &'static str,
}

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

/// Per-pool label sets that cannot be enumerated from the families themselves, so that
/// [`Metrics::forget_pool`] can remove them.
#[derive(Debug, Default)]
struct PoolSeries {
    target: Option<TargetLabels>,
    error_reasons: BTreeSet<String>,
    notifications: BTreeSet<NotificationLabels>,
    /// Handles on the gauges every plan sets, made at the pool's first plan.
    plan_gauges: Option<PlanGauges>,
}

/// The gauges every plan of a pool sets, as handles on their series (a handle shares
/// its series' value): set without building and hashing their labels at every plan.
/// They go with the pool's series ([`Metrics::forget_pool`], which holds the lock on
/// the pools while it removes them, so that no plan keeps a handle on a removed series).
#[derive(Debug)]
struct PlanGauges {
    /// `bootc_pool_nodes`, one per state in the order of [`NodeState::ALL`].
    nodes: [Gauge; NodeState::COUNT],
    health: health::Gauges,
}

/// Every metric family, each a handle on what the registry encodes.
#[derive(Debug, Clone)]
struct Families {
    reconcile_duration: HistogramFamily<PoolLabels>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconciles: Family<OutcomeLabels, Counter>,
    actions: Family<ActionLabels, Counter>,
    action_duration: HistogramFamily<ActionKindLabels>,
    nodes: Family<NodeLabels, Gauge>,
    target_info: Family<TargetLabels, Gauge>,
    tag_resolutions: Family<ResultLabels, Counter>,
    drain_duration: HistogramFamily<DrainLabels>,
    reboots_approved: Family<PoolLabels, Counter>,
    leader: Gauge,
    notifications: notifications::NotifyMetrics,
}

impl Families {
    fn new() -> Self {
        Families {
            reconcile_duration: Family::new_with_constructor(reconcile_histogram),
            reconcile_errors: Family::default(),
            reconciles: Family::default(),
            actions: Family::default(),
            action_duration: Family::new_with_constructor(reconcile_histogram),
            nodes: Family::default(),
            target_info: Family::default(),
            tag_resolutions: Family::default(),
            drain_duration: Family::new_with_constructor(drain_histogram),
            reboots_approved: Family::default(),
            leader: Gauge::default(),
            notifications: Default::default(),
        }
    }

    /// Registers every family under its name, with its help text.
    fn register(&self, r: &mut Registry) {
        let seconds = Unit::Seconds;
        let f = self.clone();
        r.register_with_unit(
            "bootc_pool_reconcile_duration",
            "Time taken by one reconcile of a pool",
            seconds.clone(),
            f.reconcile_duration,
        );
        r.register(
            "bootc_pool_reconcile_errors",
            "Reconciles of a pool that failed, by reason",
            f.reconcile_errors,
        );
        r.register(
            "bootc_pool_reconciles",
            "Reconciles of a pool, by outcome (ok, or the error reason)",
            f.reconciles,
        );
        r.register(
            "bootc_pool_actions",
            "Actions carried out for a pool, by kind and outcome (ok, or the error reason)",
            f.actions,
        );
        r.register_with_unit(
            "bootc_pool_action_duration",
            "Time taken by one action, failed ones included",
            seconds.clone(),
            f.action_duration,
        );
        r.register(
            "bootc_pool_nodes",
            "Member nodes of a pool by rollout state",
            f.nodes,
        );
        r.register(
            "bootc_pool_target_info",
            "The image a pool currently targets (always 1)",
            f.target_info,
        );
        r.register(
            "bootc_pool_tag_resolutions",
            "Registry requests resolving an image tag to a digest, by result",
            f.tag_resolutions,
        );
        r.register_with_unit(
            "bootc_pool_drain_duration",
            "Time from the start of a node drain to its end, by outcome",
            seconds,
            f.drain_duration,
        );
        r.register(
            "bootc_pool_reboots_approved",
            "Nodes of a pool approved to reboot into the target",
            f.reboots_approved,
        );
        r.register(
            "bootc_pool_leader",
            "1 while this replica holds the leader lease, else 0",
            f.leader,
        );
        self.notifications.register(r);
    }
}

#[derive(Debug)]
struct Registered {
    registry: Registry,
    f: Families,
    health: health::Families,
    pools: Mutex<BTreeMap<String, PoolSeries>>,
}

/// The controller's metrics and their registry. Clones share everything.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Registered>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

fn drain_histogram() -> Histogram {
    Histogram::new(DRAIN_BUCKETS)
}

impl Metrics {
    /// A registry with every family registered and no series yet (except
    /// `bootc_pool_leader`, 0).
    pub fn new() -> Self {
        let f = Families::new();
        let mut registry = Registry::default();
        f.register(&mut registry);
        let health = health::Families::default();
        health.register(&mut registry);
        Self {
            inner: Arc::new(Registered {
                registry,
                f,
                health,
                pools: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    fn with_pool<R>(&self, pool: &str, f: impl FnOnce(&mut PoolSeries) -> R) -> R {
        let mut pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(series) = pools.get_mut(pool) {
            return f(series);
        }
        f(pools.entry(pool.to_owned()).or_default())
    }

    /// Counts one reconcile of `pool` with its outcome (`ok`, or the error reason).
    pub fn record_reconcile(&self, pool: &str, outcome: &'static str) {
        self.inner
            .f
            .reconciles
            .get_or_create(&OutcomeLabels {
                pool: pool.to_owned(),
                outcome,
            })
            .inc();
    }

    /// Counts and times one action carried out for `pool`, with its outcome.
    pub fn observe_action(
        &self,
        pool: &str,
        action: &'static str,
        outcome: &'static str,
        duration: Duration,
    ) {
        self.inner
            .f
            .actions
            .get_or_create(&ActionLabels {
                pool: pool.to_owned(),
                action,
                outcome,
            })
            .inc();
        self.inner
            .f
            .action_duration
            .get_or_create(&ActionKindLabels { action })
            .observe(duration.as_secs_f64());
    }

    /// Records how long one reconcile of `pool` took.
    pub fn observe_reconcile(&self, pool: &str, duration: Duration) {
        self.inner
            .f
            .reconcile_duration
            .get_or_create(&PoolLabels {
                pool: pool.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Counts a failed reconcile of `pool`. `reason` should come from a small fixed set
    /// (an error kind, not a message), as every distinct value is a new series.
    pub fn record_reconcile_error(&self, pool: &str, reason: &str) {
        self.with_pool(pool, |series| {
            series.error_reasons.insert(reason.to_owned());
        });
        self.inner
            .f
            .reconcile_errors
            .get_or_create(&ErrorLabels {
                pool: pool.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Sets the number of `pool`'s nodes in each state. Keys are names from
    /// [`NODE_STATES`]; states not given are set to 0 (so a state that emptied does
    /// not keep its old count); other keys are ignored.
    pub fn set_nodes<K: AsRef<str>>(&self, pool: &str, counts: &BTreeMap<K, usize>) {
        let mut values = [0_i64; NODE_STATES.len()];
        for (state, count) in counts {
            match NODE_STATES.iter().position(|s| *s == state.as_ref()) {
                Some(i) => values[i] = i64::try_from(*count).unwrap_or(i64::MAX),
                None => tracing::debug!(state = state.as_ref(), "unknown node state ignored"),
            }
        }
        for (state, value) in NODE_STATES.iter().zip(values) {
            self.inner
                .f
                .nodes
                .get_or_create(&NodeLabels {
                    pool: pool.to_owned(),
                    state,
                })
                .set(value);
        }
    }

    /// [`Metrics::set_nodes`] from the plan's count of members in each state.
    pub fn set_node_states(&self, pool: &str, states: &States) {
        let counts: BTreeMap<&str, usize> = NodeState::ALL
            .into_iter()
            .map(|state| (node_state_name(state), states.count(state)))
            .collect();
        self.set_nodes(pool, &counts);
    }

    /// What `plan` says of `pool`: its members' states, its health and its target. Set
    /// after every plan, as the status is written.
    pub fn set_plan(&self, pool: &str, plan: &Plan) {
        let version = plan.status.target_version.as_deref();
        let target_kept = self.with_pool(pool, |series| {
            let gauges = series.plan_gauges.get_or_insert_with(|| PlanGauges {
                nodes: NodeState::ALL.map(|state| {
                    let labels = NodeLabels {
                        pool: pool.to_owned(),
                        state: node_state_name(state),
                    };
                    self.inner.f.nodes.get_or_create(&labels).clone()
                }),
                health: self.inner.health.gauges(pool),
            });
            for (gauge, state) in gauges.nodes.iter().zip(NodeState::ALL) {
                gauge.set(i64::try_from(plan.states.count(state)).unwrap_or(i64::MAX));
            }
            // As `PoolHealth::of` reads them, without copying the conditions.
            let (found, drifted) = (&plan.health, health::drifted(plan));
            (gauges.health).set_counts(found.unreported, drifted, found.oldest);
            // The target's series stands when it names this target (its pinned image
            // carries the digest) and version.
            match (&plan.target, &series.target) {
                (Some(t), Some(l)) => {
                    l.image == t.image && l.version == version.unwrap_or_default()
                }
                _ => false,
            }
        });
        let conditions = plan.status.conditions.iter();
        let conditions = conditions.map(|c| (&*c.type_, &*c.reason, c.status == "True"));
        self.inner.health.set_conditions(pool, conditions);
        match &plan.target {
            Some(_) if target_kept => {}
            Some(t) => self.set_target(pool, &t.image, t.digest.as_str(), version),
            None => self.clear_target(pool),
        }
    }

    /// Sets `pool`'s target: one series with value 1; the pool's previous target series
    /// (if different) is removed. `version` is the image's version label, if known (an
    /// empty label otherwise).
    pub fn set_target(&self, pool: &str, image: &str, digest: &str, version: Option<&str>) {
        let labels = TargetLabels {
            pool: pool.to_owned(),
            image: image.to_owned(),
            digest: digest.to_owned(),
            version: version.unwrap_or_default().to_owned(),
        };
        // Under the pool lock, so that two concurrent calls cannot leave two series.
        self.with_pool(pool, |series| {
            if let Some(previous) = series.target.replace(labels.clone())
                && previous != labels
            {
                self.inner.f.target_info.remove(&previous);
            }
            self.inner.f.target_info.get_or_create(&labels).set(1);
        });
    }

    /// Removes `pool`'s target series (the pool has no known target).
    pub fn clear_target(&self, pool: &str) {
        self.with_pool(pool, |series| {
            if let Some(previous) = series.target.take() {
                self.inner.f.target_info.remove(&previous);
            }
        });
    }

    /// Counts one tag resolution (one registry request, not one per pool).
    pub fn record_tag_resolution(&self, result: TagResult) {
        self.inner
            .f
            .tag_resolutions
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Records a finished drain of one of `pool`'s nodes.
    pub fn observe_drain(&self, pool: &str, outcome: DrainResult, duration: Duration) {
        self.inner
            .f
            .drain_duration
            .get_or_create(&DrainLabels {
                pool: pool.to_owned(),
                outcome: outcome.as_str(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Counts one reboot approval for a node of `pool`.
    pub fn record_reboot_approved(&self, pool: &str) {
        self.inner
            .f
            .reboots_approved
            .get_or_create(&PoolLabels {
                pool: pool.to_owned(),
            })
            .inc();
    }

    /// Sets `bootc_pool_leader`: 1 while this replica is the leader.
    pub fn set_leader(&self, leader: bool) {
        self.inner.f.leader.set(i64::from(leader));
    }

    /// Removes every series labelled with `pool` (the pool was deleted).
    pub fn forget_pool(&self, pool: &str) {
        // Held until every series is removed: a plan setting its gauges meanwhile would
        // keep handles on removed series.
        let mut pools = self
            .inner
            .pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let series = pools.remove(pool).unwrap_or_default();
        if let Some(target) = series.target {
            self.inner.f.target_info.remove(&target);
        }
        for reason in series.error_reasons {
            self.inner.f.reconcile_errors.remove(&ErrorLabels {
                pool: pool.to_owned(),
                reason,
            });
        }
        for state in NODE_STATES {
            self.inner.f.nodes.remove(&NodeLabels {
                pool: pool.to_owned(),
                state,
            });
        }
        for outcome in [
            DrainResult::Drained,
            DrainResult::TimedOut,
            DrainResult::Cancelled,
        ] {
            self.inner.f.drain_duration.remove(&DrainLabels {
                pool: pool.to_owned(),
                outcome: outcome.as_str(),
            });
        }
        for outcome in OUTCOMES {
            self.inner.f.reconciles.remove(&OutcomeLabels {
                pool: pool.to_owned(),
                outcome,
            });
            for action in ACTION_KINDS {
                self.inner.f.actions.remove(&ActionLabels {
                    pool: pool.to_owned(),
                    action,
                    outcome,
                });
            }
        }
        let labels = PoolLabels {
            pool: pool.to_owned(),
        };
        self.inner.f.reconcile_duration.remove(&labels);
        self.inner.f.reboots_approved.remove(&labels);
        self.inner.health.forget(pool);
        self.inner.f.notifications.forget(&series.notifications);
        drop(pools);
    }

    /// The registry in the OpenMetrics text format (ends with `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry) {
            // Writing to a String cannot fail; a label encoder could, in theory.
            tracing::error!(error = %e, "cannot encode metrics");
        }
        out
    }
}

mod notifications;
#[cfg(test)]
mod tests;
