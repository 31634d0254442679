//! One replica's election: a follower tries to acquire the Lease every `retry_period`;
//! the leader renews it every `retry_period` and steps down when a renewal does not
//! succeed within `renew_deadline` of the last one, or another replica holds the Lease;
//! on shutdown, leadership ends first and the Lease is released.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tracing::{info, warn};

use super::LeaseConfig;
use super::fence::{Authority, Signal};
use super::requests::{Attempt, LeaseRequests, Renewal};

/// The election's state: its requests on the Lease, and the signal of its leadership.
#[derive(Debug)]
pub(super) struct Election {
    pub(super) config: LeaseConfig,
    pub(super) lease: LeaseRequests,
    pub(super) signal: Signal,
}

impl Election {
    /// Runs the election until `shutdown` completes.
    pub(super) async fn run<F: Future<Output = ()>>(&mut self, shutdown: F) {
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
                    a = timeout(self.config.renew_deadline, self.lease.try_acquire()) => a,
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
                    () = &mut shutdown => return self.shut_down(lease).await,
                    () = sleep_until(deadline) => break "renewals failed past the renew deadline".to_owned(),
                    () = sleep(self.config.retry_period) => {}
                }
                let sent = Instant::now();
                let renewal = tokio::select! {
                    biased;
                    () = &mut shutdown => return self.shut_down(lease).await,
                    r = timeout_at(deadline, self.lease.renew(&lease)) => r,
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

    /// Shutdown while leading: leadership ends first, then the Lease is released.
    async fn shut_down(&self, lease: Lease) {
        self.signal.set(false);
        info!(identity = %self.config.identity, "shutting down: releasing the leader lease");
        self.lease.release(lease).await;
    }

    /// The write authority a Lease write sent at `sent` gives.
    fn authority(&self, sent: Instant) -> Authority {
        Authority::from_renewal(sent, self.config.renew_deadline, self.config.lease_duration)
    }
}
