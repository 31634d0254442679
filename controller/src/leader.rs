//! Leader election on a `coordination.k8s.io/v1` Lease, so that of the controller's
//! replicas only one acts at a time.
//!
//! The protocol is client-go's:
//!
//! - **Acquire** when the Lease is free (no `holderIdentity`), ours, or expired: its
//!   `renewTime + leaseDurationSeconds` is in the past *and* this replica has seen the
//!   same record, unchanged, for at least `leaseDurationSeconds` on its own monotonic
//!   clock. The second check keeps a replica whose wall clock runs ahead from taking over
//!   a live lease. A missing Lease is created. Every write is an update carrying the
//!   read `resourceVersion` (or a create), so of two replicas racing for the same record
//!   exactly one wins; the other gets 409 and stays a follower. `leaseTransitions` grows
//!   by one whenever the holder changes.
//! - **Renew** every `retry_period` while leader. A renewal that does not succeed
//!   within `renew_deadline` of the last successful one (measured from when that
//!   request was sent, each request cut off at the deadline) ends leadership at once;
//!   so does finding another holder. Since `renew_deadline < lease_duration`, the old
//!   leader has stepped down before anyone else may take over.
//! - **Release** on shutdown: leadership ends first (the watch turns `false`), then
//!   `holderIdentity` is cleared so the other replica takes over at its next retry
//!   instead of waiting for the lease to expire.
//!
//! After stepping down the elector goes on as a candidate. Code guarded by leadership
//! should watch the receiver returned by [`LeaderElector::run`] and stop acting as
//! soon as it reads `false`; if the elector's task ends for any reason (shutdown,
//! panic, abort) the value becomes `false` too.
//!
//! The rooms:
//!
//! - `config`: where the Lease is and how it is held ([`LeaseConfig`]);
//! - `record`: the Lease record, whether another's hold expired, the spec we write;
//! - `requests`: acquire, renew and release, each one request on the Lease;
//! - `election`: the follower's and the leader's loops around them;
//! - `fence`: the write fence that admits writes only while leadership is certain.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

mod config;
mod election;
mod fence;
mod record;
mod requests;

pub use config::{LeaseConfig, LeaseConfigError};
use election::Election;
use fence::Signal;
pub use fence::{Authority, Fence, Fenced};
pub use record::{from_micro_time, to_micro_time};
use requests::LeaseRequests;

/// Runs leader election for one replica; see the [module documentation](self).
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    metrics: Option<Metrics>,
}

impl LeaderElector {
    /// An elector for `config`'s Lease (not started; see [`LeaderElector::run`]).
    pub fn new(client: Client, config: LeaseConfig) -> Result<Self, LeaseConfigError> {
        config.validate()?;
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            metrics: None,
        })
    }

    /// Also keeps `bootc_pool_leader` in `metrics` up to date.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Starts the election on the current Tokio runtime. The receiver reads `true` while
    /// this replica is the leader. The task ends after `shutdown` completes: leadership
    /// ends first, then the lease is released (bounded by the renew deadline). Complete
    /// `shutdown` once the work guarded by leadership has stopped, so the next leader
    /// does not overlap with it.
    pub fn run<F>(self, shutdown: F) -> (watch::Receiver<bool>, JoinHandle<()>)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (rx, _, task) = self.run_fenced(shutdown);
        (rx, task)
    }

    /// [`LeaderElector::run`], with the [`Fence`] that admits writes only while this
    /// replica's leadership is certain.
    pub fn run_fenced<F>(self, shutdown: F) -> (watch::Receiver<bool>, Fence, JoinHandle<()>)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (signal, rx, fence) = Signal::new(self.metrics.clone());
        let task = tokio::spawn(async move {
            let mut election = Election {
                lease: LeaseRequests::new(self.api, self.config.clone()),
                config: self.config,
                signal,
            };
            election.run(shutdown).await;
        });
        (rx, fence, task)
    }
}
