//! The election's requests on its Lease: acquire (create a missing one, or take over one
//! that is free, ours or expired), renew, release. Every write is an update carrying the
//! read `resourceVersion` (or a create), so of two replicas racing for one record exactly
//! one wins; the other gets 409.

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tokio::time::timeout;
use tracing::{debug, info, warn};

use super::LeaseConfig;
use super::record::{Observer, expired, holder_of, spec_for_us, to_micro_time};

/// What a candidate's attempt found.
#[derive(Debug)]
pub(super) enum Attempt {
    /// We hold the lease now (the Lease as written).
    Acquired(Box<Lease>),
    /// Someone else holds it, or won the race.
    Held,
}

/// What a renewal found.
#[derive(Debug)]
pub(super) enum Renewal {
    /// Renewed (the Lease as written).
    Renewed(Box<Lease>),
    /// Someone else holds it, or it is gone.
    Lost(String),
}

/// The Lease as this replica asks for it, with what it has seen of the record.
#[derive(Debug)]
pub(super) struct LeaseRequests {
    api: Api<Lease>,
    config: LeaseConfig,
    observer: Observer,
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl LeaseRequests {
    /// Requests on `config`'s Lease through `api`.
    pub(super) fn new(api: Api<Lease>, config: LeaseConfig) -> Self {
        Self {
            api,
            config,
            observer: Observer::default(),
        }
    }

    /// One attempt of a candidate: creates a missing Lease, or takes over one that is
    /// free, ours, or expired; every write carries the read `resourceVersion`.
    pub(super) async fn try_acquire(&mut self) -> Result<Attempt, kube::Error> {
        let current = match self.api.get(&self.config.name).await {
            Ok(lease) => lease,
            Err(e) if is_not_found(&e) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec_for_us(&self.config, Utc::now(), None)),
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
        let since = self.observer.observe(&current);
        let spec = current.spec.clone().unwrap_or_default();
        match holder_of(&current) {
            None => {}
            Some(holder) if holder == self.config.identity => {}
            Some(holder) => {
                if !expired(&self.config, &spec, since) {
                    return Ok(Attempt::Held);
                }
                info!(previous = %holder, "the leader lease expired; taking over");
            }
        }
        let mut next = current;
        next.spec = Some(spec_for_us(&self.config, Utc::now(), Some(&spec)));
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

    /// Renews the Lease we hold (as last written).
    pub(super) async fn renew(&self, lease: &Lease) -> Result<Renewal, kube::Error> {
        let mut lease = lease.clone();
        // One retry after a conflict: someone may have touched the lease (a label, an
        // annotation) without taking it.
        for _ in 0..2 {
            let mut next = lease.clone();
            next.spec = Some(spec_for_us(&self.config, Utc::now(), lease.spec.as_ref()));
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
    pub(super) async fn release(&self, lease: Lease) {
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
