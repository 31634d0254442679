//! Rollout notifications by webhook (`spec.notifications.webhook` of a pool).
//!
//! After the reconciler has written a pool's status, [`Notifier::status_written`] works out
//! which rollout events the write announces ([`events::transitions`], a pure function of
//! the status replaced and the status written) and queues them for the pool's delivery
//! task ([`deliver`]). Each pool has its own bounded queue and task, so a webhook that
//! never answers holds up only its own pool's events; a full queue drops the event and
//! counts it: a reconcile never waits for a webhook.
//!
//! Every event ends counted in `bootc_pool_notifications_total{pool,event,outcome}`
//! (`delivered`, `failed` after the retries, or `dropped`); a failed one is logged and
//! recorded as a `NotificationFailed` Warning Event on the pool.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bootc_crds::pool::{BootcNodePool, BootcNodePoolStatus, SecretKeyRef};
use bootc_pool_common::backoff::Backoff;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::warn;

use crate::metrics::{Metrics, NotificationLabels};
use crate::secrets::SecretNamespaces;
use crate::shared::Clock;

pub mod deliver;
pub mod events;

pub use events::{EVENT_KINDS, EventKind, Notice};

/// How notifications are delivered.
#[derive(Debug, Clone)]
pub struct NotifyOptions {
    /// The longest wait for the webhook's answer (and for its Secret), per attempt.
    pub attempt_timeout: Duration,
    /// The most attempts for one event.
    pub attempts: u32,
    /// The wait after a failed attempt, before jitter (half to all of it is waited).
    pub backoff: Backoff,
    /// No attempt starts later than this after the first one.
    pub give_up_after: Duration,
    /// The events one pool may have waiting; more are dropped.
    pub queue: usize,
}

impl Default for NotifyOptions {
    fn default() -> Self {
        NotifyOptions {
            attempt_timeout: Duration::from_secs(10),
            attempts: 6,
            backoff: Backoff::new(Duration::from_secs(2), Duration::from_secs(60)),
            give_up_after: Duration::from_secs(300),
            queue: 32,
        }
    }
}

/// How an event's notification ended (`outcome` of `bootc_pool_notifications_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The webhook answered 2xx.
    Delivered,
    /// Every attempt failed, or one failed in a way a retry cannot mend.
    Failed,
    /// The pool's queue was full.
    Dropped,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Failed => "failed",
            Outcome::Dropped => "dropped",
        }
    }
}

/// One event on its way to a webhook.
#[derive(Debug)]
struct Job {
    notice: Notice,
    time: DateTime<Utc>,
    secret: SecretKeyRef,
    reference: ObjectReference,
}

/// What the delivery tasks share.
struct Shared {
    client: Client,
    recorder: crate::shared::Recorders,
    metrics: Metrics,
    options: NotifyOptions,
    /// Where webhook Secrets may be read.
    secrets: SecretNamespaces,
    /// The HTTP client, or why there is none.
    http: Result<reqwest::Client, String>,
}

impl Shared {
    fn count(&self, pool: &str, event: EventKind, outcome: Outcome) {
        self.metrics.record_notification(&NotificationLabels {
            pool: pool.to_owned(),
            event: event.as_str(),
            outcome: outcome.as_str(),
        });
    }
}

/// One pool's queue and what this replica wrote of its status.
struct PoolQueue {
    jobs: mpsc::Sender<Job>,
    written: Written,
}

/// Sends the pools' rollout events to their webhooks. One per leadership term: what it
/// remembers of the statuses written is this replica's own.
pub struct Notifier {
    shared: Arc<Shared>,
    clock: Clock,
    pools: Mutex<HashMap<String, PoolQueue>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier reading webhook Secrets with `client` where `secrets` allows, recording
    /// failures with `recorder` and counting every event in `metrics`.
    pub fn new(
        client: Client,
        recorder: crate::shared::Recorders,
        options: NotifyOptions,
        secrets: SecretNamespaces,
        metrics: Metrics,
        clock: Clock,
    ) -> Self {
        let http = crate::shared::http_client()
            .timeout(options.attempt_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"));
        Notifier {
            shared: Arc::new(Shared {
                client,
                recorder,
                metrics,
                options,
                secrets,
                http,
            }),
            clock,
            pools: Mutex::new(HashMap::new()),
        }
    }

    /// Queues the events announced by the write of `new` as `pool`'s status (`pool` as the
    /// reconcile read it). Never waits: a full queue drops the event and counts it.
    pub fn status_written(&self, pool: &BootcNodePool, new: &BootcNodePoolStatus) {
        let name = pool.name_any();
        let webhook = pool.spec.notifications.as_ref();
        let webhook = webhook.and_then(|n| n.webhook.as_ref());
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(webhook) = webhook else {
            // Dropping the queue ends its task once what it holds is delivered.
            pools.remove(&name);
            return;
        };
        let queue = pools.entry(name.clone()).or_insert_with(|| {
            let (jobs, receiver) = mpsc::channel(self.shared.options.queue.max(1));
            tokio::spawn(deliver::run(Arc::clone(&self.shared), receiver));
            PoolQueue {
                jobs,
                written: Written::default(),
            }
        });
        let old = queue.written.replaced(pool.status.as_ref(), new);
        for event in events::transitions(old.as_ref(), new) {
            let job = Job {
                notice: events::describe(event, &name, new),
                time: (self.clock)(),
                secret: webhook.secret_ref.clone(),
                reference: pool.object_ref(&()),
            };
            if queue.jobs.try_send(job).is_err() {
                warn!(pool = %name, event = event.as_str(), "webhook queue full; event dropped");
                self.shared.count(&name, event, Outcome::Dropped);
            }
        }
    }

    /// Forgets a pool that is gone; its queued events are still delivered.
    pub fn forget(&self, pool: &str) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.remove(pool);
    }
}

/// How many statuses a pool's [`Written`] recognises.
const WRITTEN_KEPT: usize = 16;

/// What this replica wrote of one pool's status. The pool a reconcile reads comes from a
/// watch that may lag behind the reconciler's own writes; a reconcile that still sees
/// an earlier status would otherwise announce the same transition twice.
#[derive(Debug, Default)]
pub struct Written {
    /// Fingerprints of the statuses written and of those they replaced, oldest first.
    seen: VecDeque<u64>,
    /// The last status written.
    last: Option<BootcNodePoolStatus>,
}

fn fingerprint(status: Option<&BootcNodePoolStatus>) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(&status)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

impl Written {
    /// The status the write of `new` replaced, given the one the reconcile read: the last
    /// one written here when what was read is one this replica wrote or replaced (the
    /// watch lags behind), else what was read (a new term, or another writer). Records
    /// the write.
    pub fn replaced(
        &mut self,
        read: Option<&BootcNodePoolStatus>,
        new: &BootcNodePoolStatus,
    ) -> Option<BootcNodePoolStatus> {
        let read_print = fingerprint(read);
        let old = match self.last.take() {
            Some(last) if self.seen.contains(&read_print) => Some(last),
            _ => read.cloned(),
        };
        for print in [read_print, fingerprint(Some(new))] {
            self.seen.retain(|p| *p != print);
            self.seen.push_back(print);
        }
        while self.seen.len() > WRITTEN_KEPT {
            self.seen.pop_front();
        }
        self.last = Some(new.clone());
        old
    }
}

#[cfg(test)]
mod tests;
