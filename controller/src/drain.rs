//! Draining a Node through the Eviction API, as `kubectl drain` does it, and the per-node
//! background drains the reconciler starts, polls and cancels.
//!
//! # What a drain does
//!
//! Each round lists the pods bound to the node (field selector `spec.nodeName=<node>`) and
//! sorts them:
//!
//! - **left alone**: mirror (static) pods (annotation `kubernetes.io/config.mirror`), pods
//!   whose controller is a DaemonSet, pods that already terminated (phase `Succeeded` or
//!   `Failed`: they run nothing a reboot could disrupt, and deleting them would throw away
//!   the status and logs someone may still want; the pod garbage collector removes them in
//!   time — `kubectl drain` deletes them, this drain does not), and pods that do not match
//!   `podSelector` when one is set;
//! - **refused**: pods without a controller unless `force`, pods with `emptyDir` volumes
//!   unless `deleteEmptyDirData`. While any pod is refused nothing is evicted (as with
//!   `kubectl drain`); the refusal, naming the pods and the setting that would allow them,
//!   becomes the drain's last error, and the drain keeps re-checking (with backoff) until
//!   its timeout, so an administrator's fix (removing the pod) is picked up; the pool's
//!   drain settings are those the drain started with;
//! - **evicted**: everything else (pods already being deleted are waited for, not refused).
//!
//! The first round without refusals fixes the set of pods to evict (pods scheduled onto
//! the cordoned node later are not chased, as with `kubectl drain`). Each is evicted
//! through `pods/eviction` (policy/v1); a refusal by a PodDisruptionBudget (429) or any
//! other failure is retried for that pod with exponential backoff ([`Backoff`], 1 s
//! doubling to 10 s by default); 404 means the pod is already gone. The drain then waits
//! until every evicted pod has left the node's pod list (or was replaced by a pod of the
//! same name with another uid), re-listing with the same backoff.
//!
//! A drain ends [`DrainOutcome::Drained`] when no pod of its set is left,
//! [`DrainOutcome::TimedOut`] when its timeout passes first (naming the pods still there
//! and the last error, e.g. the disruption budget's message), or [`DrainOutcome::Cancelled`]
//! as soon as its cancellation token fires (requests in flight are abandoned).
//!
//! The client should not retry 429 answers itself: kube's default client does (for
//! minutes), which would hide the budget's refusal and delay cancellation and timeouts.
//! Build it from a `kube::Config` with `default_retry = false`.
//!
//! # The parts
//!
//! - `pods`: which pods of the node are left alone, refused or evicted;
//! - `eviction`: the `pods/eviction` request and how its errors read;
//! - `task`: one drain, round by round, until drained, timed out or cancelled;
//! - `drainer`: the [`Drainer`], at most one background drain per node.

mod drainer;
mod eviction;
mod pods;
mod task;

use std::time::Duration;

use bootc_crds::BootcNodePoolSpec;
use bootc_crds::pool::DrainSpec;
pub use bootc_pool_common::backoff::Backoff;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use tokio::sync::watch;
pub use tokio_util::sync::CancellationToken;

pub use drainer::{DrainDone, DrainState, Drainer};
pub use pods::MIRROR_ANNOTATION;

/// The default retry pacing of a drain: per-pod eviction retries, re-checks of refused
/// pods and re-lists while waiting for evicted pods to go all start at 1 s and double up
/// to 10 s.
pub const DEFAULT_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));

/// Drain settings: a pool's `spec.disruption.drain` and `spec.rollout.drainTimeoutSeconds`.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainOptions {
    /// Grace period given to each evicted pod; `None` uses the pod's own.
    pub grace_period_seconds: Option<i64>,
    /// Evict pods with `emptyDir` volumes (their data is lost).
    pub delete_empty_dir_data: bool,
    /// Evict pods that no controller manages (nothing recreates them).
    pub force: bool,
    /// Only pods matching this selector are evicted; `None` means all.
    pub pod_selector: Option<LabelSelector>,
    /// How long the drain may take; `None` waits forever.
    pub timeout: Option<Duration>,
    /// Retry pacing ([`DEFAULT_BACKOFF`] for a pool). A delay is never shorter than
    /// `first`, even when `max` is.
    pub backoff: Backoff,
}

impl Default for DrainOptions {
    /// The pool defaults: pods' own grace periods, `deleteEmptyDirData`, no `force`, every
    /// pod, no timeout.
    fn default() -> Self {
        DrainOptions::from_spec(&DrainSpec::default(), None)
    }
}

impl DrainOptions {
    /// The options a pool asks for.
    pub fn from_pool(spec: &BootcNodePoolSpec) -> Self {
        DrainOptions::from_spec(&spec.disruption.drain, spec.rollout.drain_timeout_seconds)
    }

    /// The options of a `disruption.drain` and a `rollout.drainTimeoutSeconds`. A timeout
    /// of 0 (or a negative one, which the schema refuses) means no timeout, as for
    /// `kubectl drain` and bootc-operator.
    pub fn from_spec(drain: &DrainSpec, timeout_seconds: Option<i64>) -> Self {
        DrainOptions {
            grace_period_seconds: drain.grace_period_seconds,
            delete_empty_dir_data: drain.delete_empty_dir_data,
            force: drain.force,
            pod_selector: drain.pod_selector.clone(),
            timeout: timeout_seconds
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
            backoff: DEFAULT_BACKOFF,
        }
    }

    /// The wait after `failures` consecutive failures (or stalled rounds): the backoff's
    /// delay, never shorter than its first step.
    fn delay(&self, failures: u32) -> Duration {
        self.backoff.delay(failures).max(self.backoff.first)
    }
}

/// How a drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainOutcome {
    /// No pod that had to go is left on the node.
    Drained {
        /// Pods whose eviction the API server accepted.
        evicted: usize,
    },
    /// The timeout passed first.
    TimedOut {
        /// `namespace/name` of the pods still on the node that had to go (sorted).
        waiting_for: Vec<String>,
        /// The last error seen: a disruption budget's refusal, a refused pod, an API error.
        last_error: Option<String>,
    },
    /// The drain was cancelled.
    Cancelled,
}

/// A drain that cannot go on at all (API errors are retried, not returned).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// `podSelector` is not a valid label selector.
    #[error("invalid disruption.drain.podSelector: {0}")]
    InvalidPodSelector(String),
}

/// Drains `node`: evicts its pods (see the [module documentation](self)) and waits until
/// they are gone, the timeout passes or `cancel` fires.
pub async fn drain_node(
    client: Client,
    node: &str,
    options: &DrainOptions,
    cancel: &CancellationToken,
) -> Result<DrainOutcome, DrainError> {
    // The sender lives as long as the drain, so the options never "change".
    let (_options_tx, options_rx) = watch::channel(options.clone());
    let progress = task::DrainProgress::new(None);
    task::DrainTask::new(client, node, options_rx, cancel, &progress)
        .run()
        .await
}

#[cfg(test)]
mod tests;
