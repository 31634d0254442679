//! The write fence: the controller's writes go out only while this replica's leadership
//! is certain, and each is cut off before the Lease could pass to another replica.
//!
//! A renewal sent at `t` keeps the Lease ours until at least `t + lease_duration` (another
//! replica takes over only after seeing the renewed record unchanged for the whole lease
//! duration). So a write may start until `t + renew_deadline` (when the elector steps
//! down without a newer renewal) and must be done by the cut-off, half-way between that
//! and `t + lease_duration`: what the server has not answered by then is abandoned (the
//! connection dropped) and reported as failed. A reconcile still running when leadership
//! ends (the runtime lets it finish) has every further write refused at once, so the
//! grants it planned from a cache the new leader no longer shares are dropped.
//! Reads (GET: get, list, watch) are not fenced.

use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// Until when this replica may start writes, and by when each must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authority {
    /// No write starts at or after this instant.
    pub writes_until: Instant,
    /// A write not answered by this instant is abandoned.
    pub cut_off: Instant,
}

impl Authority {
    /// The authority a Lease write sent at `sent` gives, under these durations.
    pub fn from_renewal(sent: Instant, renew_deadline: Duration, lease_duration: Duration) -> Self {
        let margin = lease_duration.saturating_sub(renew_deadline);
        Authority {
            writes_until: sent + renew_deadline,
            cut_off: sent + renew_deadline + margin / 2,
        }
    }
}

/// A write refused or cut off by the fence.
#[derive(Debug, thiserror::Error)]
pub enum Fenced {
    /// This replica does not hold the Lease (or its last renewal is too old).
    #[error("not writing: this replica is not the leader (or no longer sure it is)")]
    NotLeading,
    /// The write was not answered before the Lease could pass to another replica.
    #[error("write abandoned: not answered before the leader lease could pass to another replica")]
    CutOff,
}

/// The fence's view of the elector: readable anywhere, cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence {
    authority: watch::Receiver<Option<Authority>>,
}

impl Fence {
    /// The cut-off of a write that may start now, or why it may not.
    pub fn admit(&self) -> Result<Instant, Fenced> {
        match *self.authority.borrow() {
            Some(a) if Instant::now() < a.writes_until => Ok(a.cut_off),
            _ => Err(Fenced::NotLeading),
        }
    }

    /// `client`, its writes behind this fence.
    pub fn guard(&self, client: Client) -> Client {
        let namespace = client.default_namespace().to_owned();
        let fence = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let (client, fence) = (client.clone(), fence.clone());
            async move { fence.send(&client, request).await }
        });
        Client::new(service, namespace)
    }

    async fn send(
        &self,
        client: &Client,
        request: Request<Body>,
    ) -> Result<Response<Body>, tower::BoxError> {
        if matches!(*request.method(), Method::GET | Method::HEAD) {
            return Ok(client.send(request).await?);
        }
        let cut_off = self.admit()?;
        match tokio::time::timeout_at(cut_off, client.send(request)).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(Fenced::CutOff.into()),
        }
    }
}

/// The elector's side: the leadership flag and the write authority, both withdrawn when
/// dropped (the election task ended, panicked or was aborted).
#[derive(Debug)]
pub(super) struct Signal {
    leader: watch::Sender<bool>,
    authority: watch::Sender<Option<Authority>>,
    metrics: Option<Metrics>,
}

impl Signal {
    pub(super) fn new(metrics: Option<Metrics>) -> (Self, watch::Receiver<bool>, Fence) {
        let (leader, leader_rx) = watch::channel(false);
        let (authority, authority_rx) = watch::channel(None);
        let signal = Signal {
            leader,
            authority,
            metrics,
        };
        signal.set(false);
        let fence = Fence {
            authority: authority_rx,
        };
        (signal, leader_rx, fence)
    }

    /// Leading or not; stepping down withdraws the write authority first.
    pub(super) fn set(&self, leader: bool) {
        if !leader {
            self.authority.send_replace(None);
        }
        self.leader.send_if_modified(|current| {
            let changed = *current != leader;
            *current = leader;
            changed
        });
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(leader);
        }
    }

    /// A Lease write sent at `sent` succeeded: writes may go on for a renew deadline.
    pub(super) fn renewed(&self, authority: Authority) {
        self.authority.send_replace(Some(authority));
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        self.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_start_only_within_the_renew_deadline_and_stop_when_stepping_down() {
        let (signal, _leader, fence) = Signal::new(None);
        assert!(
            matches!(fence.admit(), Err(Fenced::NotLeading)),
            "never elected"
        );
        let sent = Instant::now();
        let authority =
            Authority::from_renewal(sent, Duration::from_secs(10), Duration::from_secs(15));
        assert_eq!(authority.writes_until, sent + Duration::from_secs(10));
        assert_eq!(authority.cut_off, sent + Duration::from_millis(12_500));
        signal.renewed(authority);
        signal.set(true);
        assert_eq!(fence.admit().unwrap(), authority.cut_off);
        // A renewal too old admits nothing, even before the elector notices.
        signal.renewed(Authority::from_renewal(
            Instant::now() - Duration::from_secs(11),
            Duration::from_secs(10),
            Duration::from_secs(15),
        ));
        assert!(fence.admit().is_err());
        signal.renewed(authority);
        signal.set(false);
        assert!(fence.admit().is_err(), "stepped down");
        signal.renewed(authority);
        drop(signal);
        assert!(fence.admit().is_err(), "the election ended");
    }
}
