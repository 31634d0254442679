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

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tracing::{debug, info, warn};

use crate::metrics::Metrics;

mod fence;

use fence::Signal;
pub use fence::{Authority, Fence, Fenced};

/// Where the lease is and how it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Name of the Lease.
    pub name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity (unique among replicas; the pod name in a cluster).
    pub identity: String,
    /// How long a lease is valid after its last renewal (written as
    /// `leaseDurationSeconds`, rounded up to whole seconds). Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down. Must be shorter
    /// than `lease_duration`. Default 10 s.
    pub renew_deadline: Duration,
    /// How often the leader renews and a follower tries to acquire. Must be shorter
    /// than `renew_deadline`. Default 2 s.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A configuration with the default durations (15 s, 10 s, 2 s).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks names and that `lease_duration > renew_deadline > retry_period > 0`.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        if self.name.is_empty() || self.namespace.is_empty() {
            return Err(LeaseConfigError::EmptyName);
        }
        if self.identity.is_empty() {
            return Err(LeaseConfigError::EmptyIdentity);
        }
        if self.retry_period.is_zero()
            || self.renew_deadline <= self.retry_period
            || self.lease_duration <= self.renew_deadline
        {
            return Err(LeaseConfigError::Durations {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// `leaseDurationSeconds`: the lease duration rounded up to whole seconds, at least 1.
    fn lease_duration_seconds(&self) -> i32 {
        let secs =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    }
}

/// An invalid [`LeaseConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    /// The Lease's name or namespace is empty.
    #[error("the lease name and namespace must not be empty")]
    EmptyName,
    /// The identity is empty.
    #[error("the leader election identity must not be empty")]
    EmptyIdentity,
    /// The durations are not ordered.
    #[error(
        "leader election needs lease duration > renew deadline > retry period > 0, got {lease_duration:?}, {renew_deadline:?}, {retry_period:?}"
    )]
    Durations {
        /// See [`LeaseConfig::lease_duration`].
        lease_duration: Duration,
        /// See [`LeaseConfig::renew_deadline`].
        renew_deadline: Duration,
        /// See [`LeaseConfig::retry_period`].
        retry_period: Duration,
    },
}

/// Converts chrono time to a Kubernetes `MicroTime` (microsecond precision).
pub fn to_micro_time(t: DateTime<Utc>) -> Option<MicroTime> {
    serde_json::from_value(serde_json::Value::String(
        t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    ))
    .ok()
}

/// Converts a Kubernetes `MicroTime` to chrono.
pub fn from_micro_time(t: &MicroTime) -> Option<DateTime<Utc>> {
    match serde_json::to_value(t).ok()? {
        serde_json::Value::String(s) => DateTime::parse_from_rfc3339(&s)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        _ => None,
    }
}

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
                api: self.api,
                config: self.config,
                signal,
                observed: None,
            };
            election.run(shutdown).await;
        });
        (rx, fence, task)
    }
}

/// The lease record as last seen, and since when (local monotonic clock) it has been
/// unchanged.
#[derive(Debug)]
struct LeaseObservation {
    resource_version: Option<String>,
    holder: Option<String>,
    renew_time: Option<DateTime<Utc>>,
    since: Instant,
}

/// What a candidate's attempt found.
#[derive(Debug)]
enum Attempt {
    /// We hold the lease now (the Lease as written).
    Acquired(Box<Lease>),
    /// Someone else holds it, or won the race.
    Held,
}

/// What a renewal found.
#[derive(Debug)]
enum Renewal {
    /// Renewed (the Lease as written).
    Renewed(Box<Lease>),
    /// Someone else holds it, or it is gone.
    Lost(String),
}

#[derive(Debug)]
struct Election {
    api: Api<Lease>,
    config: LeaseConfig,
    signal: Signal,
    observed: Option<LeaseObservation>,
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

impl Election {
    async fn run<F: Future<Output = ()>>(&mut self, shutdown: F) {
        let shutdown = std::pin::pin!(shutdown);
        let mut shutdown = shutdown;
        loop {
            // Follower: try now, then every retry period.
            let (lease, acquired_at) = loop {
                // Sent no earlier than this: a conservative start for the renew deadline.
                let started = Instant::now();
                let attempt = tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    a = timeout(self.config.renew_deadline, self.try_acquire()) => a,
                };
                match attempt {
                    Ok(Ok(Attempt::Acquired(lease))) => break (*lease, started),
                    Ok(Ok(Attempt::Held)) => {}
                    Ok(Err(e)) => {
                        warn!(error = %e, lease = %self.config.name, "cannot read or acquire the leader lease")
                    }
                    Err(_) => {
                        warn!(lease = %self.config.name, "acquiring the leader lease timed out")
                    }
                }
                tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    () = sleep(self.config.retry_period) => {}
                }
            };
            // Leader.
            let mut lease = lease;
            let mut last_renew = acquired_at;
            info!(identity = %self.config.identity, lease = %self.config.name, "became the leader");
            self.signal.renewed(self.authority(acquired_at));
            self.signal.set(true);
            let lost = loop {
                let deadline = last_renew + self.config.renew_deadline;
                tokio::select! {
                    biased;
                    () = &mut shutdown => {
                        self.signal.set(false);
                        info!(identity = %self.config.identity, "shutting down: releasing the leader lease");
                        self.release(lease).await;
                        return;
                    }
                    () = sleep_until(deadline) => break "renewals failed past the renew deadline".to_owned(),
                    () = sleep(self.config.retry_period) => {}
                }
                let sent = Instant::now();
                let renewal = tokio::select! {
                    biased;
                    () = &mut shutdown => {
                        self.signal.set(false);
                        info!(identity = %self.config.identity, "shutting down: releasing the leader lease");
                        self.release(lease).await;
                        return;
                    }
                    r = timeout_at(deadline, self.renew(&lease)) => r,
                };
                match renewal {
                    Ok(Ok(Renewal::Renewed(new))) => {
                        lease = *new;
                        last_renew = sent;
                        self.signal.renewed(self.authority(sent));
                    }
                    Ok(Ok(Renewal::Lost(why))) => break why,
                    Ok(Err(e)) => {
                        warn!(error = %e, lease = %self.config.name, "cannot renew the leader lease");
                    }
                    Err(_) => break "renewal timed out at the renew deadline".to_owned(),
                }
            };
            self.signal.set(false);
            warn!(identity = %self.config.identity, reason = %lost, "lost the leader lease; stepping down");
        }
    }

    /// The write authority a Lease write sent at `sent` gives.
    fn authority(&self, sent: Instant) -> Authority {
        Authority::from_renewal(sent, self.config.renew_deadline, self.config.lease_duration)
    }

    /// Remembers `lease` as seen now; the observation time stays while the record is
    /// unchanged.
    fn observe(&mut self, lease: &Lease) -> Instant {
        let resource_version = lease.metadata.resource_version.clone();
        let holder = holder_of(lease).map(str::to_owned);
        let renew_time = lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .and_then(from_micro_time);
        match &self.observed {
            Some(o)
                if o.resource_version == resource_version
                    && o.holder == holder
                    && o.renew_time == renew_time =>
            {
                o.since
            }
            _ => {
                let since = Instant::now();
                self.observed = Some(LeaseObservation {
                    resource_version,
                    holder,
                    renew_time,
                    since,
                });
                since
            }
        }
    }

    /// Whether a lease held by someone else has expired, by its own times and by how
    /// long we have seen it unchanged.
    fn expired(&self, spec: &LeaseSpec, observed_since: Instant) -> bool {
        let duration = spec
            .lease_duration_seconds
            .filter(|d| *d > 0)
            .unwrap_or_else(|| self.config.lease_duration_seconds());
        let duration_std = Duration::from_secs(u64::try_from(duration).unwrap_or(0));
        let by_lease = match spec.renew_time.as_ref().and_then(from_micro_time) {
            Some(renew) => renew + chrono::Duration::seconds(i64::from(duration)) < Utc::now(),
            None => true,
        };
        by_lease && observed_since + duration_std <= Instant::now()
    }

    fn spec_for_us(&self, now: DateTime<Utc>, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let previous_holder = previous
            .and_then(|s| s.holder_identity.as_deref())
            .filter(|h| !h.is_empty());
        let ours = previous_holder == Some(self.config.identity.as_str());
        let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration_seconds()),
            acquire_time: if ours {
                previous.and_then(|s| s.acquire_time.clone())
            } else {
                to_micro_time(now)
            },
            renew_time: to_micro_time(now),
            lease_transitions: Some(if ours || previous.is_none() {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..previous.cloned().unwrap_or_default()
        }
    }

    async fn try_acquire(&mut self) -> Result<Attempt, kube::Error> {
        let current = match self.api.get(&self.config.name).await {
            Ok(lease) => lease,
            Err(e) if is_not_found(&e) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec_for_us(Utc::now(), None)),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(lease) => Ok(Attempt::Acquired(Box::new(lease))),
                    Err(e) if is_conflict(&e) => {
                        debug!("another replica created the leader lease first");
                        Ok(Attempt::Held)
                    }
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let since = self.observe(&current);
        let spec = current.spec.clone().unwrap_or_default();
        match holder_of(&current) {
            None => {}
            Some(holder) if holder == self.config.identity => {}
            Some(holder) => {
                if !self.expired(&spec, since) {
                    return Ok(Attempt::Held);
                }
                info!(previous = %holder, "the leader lease expired; taking over");
            }
        }
        let mut next = current;
        next.spec = Some(self.spec_for_us(Utc::now(), Some(&spec)));
        // `next` keeps the read resourceVersion: the update is refused (409) if anyone
        // wrote the lease since we read it.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(lease) => Ok(Attempt::Acquired(Box::new(lease))),
            Err(e) if is_conflict(&e) => {
                debug!("another replica updated the leader lease first");
                Ok(Attempt::Held)
            }
            Err(e) => Err(e),
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, kube::Error> {
        let mut lease = lease.clone();
        // One retry after a conflict: someone may have touched the lease (a label, an
        // annotation) without taking it.
        for _ in 0..2 {
            let mut next = lease.clone();
            next.spec = Some(self.spec_for_us(Utc::now(), lease.spec.as_ref()));
            match self
                .api
                .replace(&self.config.name, &PostParams::default(), &next)
                .await
            {
                Ok(written) => return Ok(Renewal::Renewed(Box::new(written))),
                Err(e) if is_conflict(&e) => {}
                Err(e) if is_not_found(&e) => {
                    return Ok(Renewal::Lost("the lease was deleted".to_owned()));
                }
                Err(e) => return Err(e),
            }
            lease = match self.api.get(&self.config.name).await {
                Ok(current) => current,
                Err(e) if is_not_found(&e) => {
                    return Ok(Renewal::Lost("the lease was deleted".to_owned()));
                }
                Err(e) => return Err(e),
            };
            match holder_of(&lease) {
                Some(holder) if holder == self.config.identity => {}
                Some(holder) => return Ok(Renewal::Lost(format!("{holder} holds the lease"))),
                None => return Ok(Renewal::Lost("the lease was released".to_owned())),
            }
        }
        Ok(Renewal::Lost(
            "the lease keeps changing under the leader".to_owned(),
        ))
    }

    /// Clears `holderIdentity` if we still hold the lease; best effort, bounded by the
    /// renew deadline.
    async fn release(&self, lease: Lease) {
        let release = async {
            let mut lease = lease;
            for _ in 0..2 {
                if holder_of(&lease) != Some(self.config.identity.as_str()) {
                    return Ok(());
                }
                let mut next = lease.clone();
                let mut spec = next.spec.clone().unwrap_or_default();
                spec.holder_identity = None;
                // For clients that do not treat an empty holder as free.
                spec.lease_duration_seconds = Some(1);
                spec.renew_time = to_micro_time(Utc::now());
                next.spec = Some(spec);
                match self
                    .api
                    .replace(&self.config.name, &PostParams::default(), &next)
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(e) if is_conflict(&e) => {}
                    Err(e) if is_not_found(&e) => return Ok(()),
                    Err(e) => return Err(e),
                }
                lease = match self.api.get(&self.config.name).await {
                    Ok(current) => current,
                    Err(e) if is_not_found(&e) => return Ok(()),
                    Err(e) => return Err(e),
                };
            }
            Ok(())
        };
        match timeout(self.config.renew_deadline, release).await {
            Ok(Ok(())) => info!(identity = %self.config.identity, "released the leader lease"),
            Ok(Err(e)) => warn!(error = %e, "cannot release the leader lease; it will expire"),
            Err(_) => warn!("releasing the leader lease timed out; it will expire"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_round_trip() {
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let m = to_micro_time(t).unwrap();
        assert_eq!(from_micro_time(&m), Some(t));
    }

    #[test]
    fn durations_must_be_ordered() {
        let mut c = LeaseConfig::new("l", "ns", "me");
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 15);
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        c.lease_duration = Duration::from_millis(1500);
        c.renew_deadline = Duration::from_millis(700);
        c.retry_period = Duration::from_millis(100);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 2);
        c.identity.clear();
        assert_eq!(c.validate(), Err(LeaseConfigError::EmptyIdentity));
    }
}
