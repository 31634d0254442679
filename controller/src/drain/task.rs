//! One drain, round by round: list the node's pods, fix the set to evict, evict what is
//! due, and wait for the next round, until no pod of the set is left, the timeout passes
//! or the drain is cancelled.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::core::Selector;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::eviction::{describe, evict, is_not_found};
use super::pods::{self, PodKey, key_of, refusal, show};
use super::{DrainError, DrainOptions, DrainOutcome};
use crate::reconcile::lean::Lean;

/// Called when what holds up a drain changes.
pub(super) type Wake = Box<dyn Fn() + Send + Sync>;

/// What a running drain reports while it runs.
pub(super) struct DrainProgress {
    last_error: Mutex<Option<String>>,
    /// Told when `last_error` changes, so that the pool is planned again and its status
    /// says what holds the drain up (or no longer does).
    wake: Option<Wake>,
}

impl DrainProgress {
    pub(super) fn new(wake: Option<Wake>) -> Self {
        DrainProgress {
            last_error: Mutex::new(None),
            wake,
        }
    }

    pub(super) fn last_error(&self) -> Option<String> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        if let Some(wake) = &self.wake {
            wake();
        }
    }

    /// Records `error`; logs it and wakes the pool when it differs from the previous one.
    fn set_error(&self, node: &str, error: String) {
        let mut last = self.lock();
        if last.as_deref() == Some(error.as_str()) {
            tracing::debug!(node, error = %error, "drain still blocked");
            return;
        }
        tracing::warn!(node, error = %error, "drain blocked; retrying");
        *last = Some(error);
        drop(last);
        self.wake();
    }

    /// Forgets the last error: nothing holds the drain up any more.
    fn clear_error(&self, node: &str) {
        if self.lock().take().is_some() {
            tracing::info!(node, "drain no longer blocked");
            self.wake();
        }
    }
}

/// Why a guarded wait stopped early.
enum Stop {
    Cancelled,
    TimedOut,
}

/// `fut`, unless the drain is cancelled or times out first.
async fn guard<F: Future>(
    fut: F,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
) -> Result<F::Output, Stop> {
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Stop::Cancelled),
        () = timeout => Err(Stop::TimedOut),
        out = fut => Ok(out),
    }
}

/// Resolves when the options change; never when they cannot change any more.
async fn options_changed(rx: &mut watch::Receiver<DrainOptions>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A pod the drain evicts and waits for.
#[derive(Debug)]
struct PodToEvict {
    uid: String,
    /// The API server accepted its eviction (or it was already gone).
    accepted: bool,
    next_attempt: Instant,
    /// Evictions of it that failed in a row.
    failures: u32,
}

/// How a round ended.
enum Round {
    /// Something moved (the set was fixed, a pod was evicted or left).
    Progressed,
    /// Nothing moved.
    Stalled,
    /// The drain is over.
    Ended(DrainOutcome),
}

/// One drain. `options` may change while it runs (see
/// [`Drainer::start`](super::Drainer::start)).
pub(super) struct DrainTask<'a> {
    client: Client,
    node: &'a str,
    options: watch::Receiver<DrainOptions>,
    cancel: &'a CancellationToken,
    progress: &'a DrainProgress,
    started: Instant,
    /// The pods to evict, fixed by the first round without refusals.
    plan: Option<BTreeMap<PodKey, PodToEvict>>,
    /// What a timeout would report as still there.
    waiting_for: Vec<String>,
    /// Evictions the API server accepted.
    evicted: usize,
    /// Rounds in a row in which nothing moved.
    stalled_rounds: u32,
}

impl<'a> DrainTask<'a> {
    pub(super) fn new(
        client: Client,
        node: &'a str,
        options: watch::Receiver<DrainOptions>,
        cancel: &'a CancellationToken,
        progress: &'a DrainProgress,
    ) -> Self {
        DrainTask {
            client,
            node,
            options,
            cancel,
            progress,
            started: Instant::now(),
            plan: None,
            waiting_for: Vec::new(),
            evicted: 0,
            stalled_rounds: 0,
        }
    }

    /// Runs rounds until the drain ends.
    pub(super) async fn run(mut self) -> Result<DrainOutcome, DrainError> {
        let node = self.node;
        let all: Api<Lean<Pod>> = Api::all(self.client.clone());
        let list_params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        tracing::info!(node, "draining node");
        loop {
            let opts = self.options.borrow_and_update().clone();
            let deadline = opts.timeout.map(|t| self.started + t);
            let round = match guard(all.list(&list_params), self.cancel, deadline).await {
                Err(stop) => return Ok(self.stopped(stop)),
                Ok(Err(e)) => {
                    let error = format!("listing pods: {}", describe(&e));
                    self.progress.set_error(node, error);
                    Round::Stalled
                }
                Ok(Ok(list)) => {
                    let pods: Vec<Pod> = list.items.into_iter().map(|Lean(p)| p).collect();
                    self.round(&pods, &opts, deadline).await?
                }
            };
            let progressed = match round {
                Round::Progressed => true,
                Round::Stalled => false,
                Round::Ended(outcome) => return Ok(outcome),
            };
            if let Err(stop) = self.pause(progressed, &opts, deadline).await {
                return Ok(self.stopped(stop));
            }
        }
    }

    /// One round over the node's `pods`: fixes the set to evict if not yet done, then
    /// evicts what is due.
    async fn round(
        &mut self,
        pods: &[Pod],
        opts: &DrainOptions,
        deadline: Option<Instant>,
    ) -> Result<Round, DrainError> {
        let mut progressed = false;
        if self.plan.is_none() {
            progressed |= self.fix_plan(pods, opts)?;
        }
        if self.plan.is_some() {
            progressed |= self.forget_gone(pods);
            if self.plan.as_ref().is_some_and(BTreeMap::is_empty) {
                tracing::info!(node = self.node, evicted = self.evicted, "node drained");
                return Ok(Round::Ended(DrainOutcome::Drained {
                    evicted: self.evicted,
                }));
            }
            match self.evict_due(opts, deadline).await {
                Ok(evicted_some) => progressed |= evicted_some,
                Err(stop) => return Ok(Round::Ended(self.stopped(stop))),
            }
            if self
                .plan
                .as_ref()
                .is_some_and(|pods| pods.values().all(|p| p.accepted))
            {
                // Every eviction was accepted: only waiting for the pods to go.
                self.progress.clear_error(self.node);
            }
        }
        Ok(if progressed {
            Round::Progressed
        } else {
            Round::Stalled
        })
    }

    /// Sorts the pods; without refusals their evictable ones become the plan (true),
    /// otherwise the refusal becomes the last error (false).
    fn fix_plan(&mut self, pods: &[Pod], opts: &DrainOptions) -> Result<bool, DrainError> {
        let selector = opts
            .pod_selector
            .clone()
            .map(Selector::try_from)
            .transpose()
            .map_err(|e| DrainError::InvalidPodSelector(e.to_string()))?;
        let sorted = pods::sort(self.node, pods, opts, selector.as_ref());
        let now = Instant::now();
        let targets: BTreeMap<PodKey, PodToEvict> = sorted
            .evict
            .into_iter()
            .map(|(key, uid)| {
                let pod = PodToEvict {
                    uid,
                    accepted: false,
                    next_attempt: now,
                    failures: 0,
                };
                (key, pod)
            })
            .collect();
        if sorted.refused.is_empty() {
            tracing::info!(node = self.node, pods = targets.len(), "evicting pods");
            self.plan = Some(targets);
            return Ok(true);
        }
        let error = refusal(self.node, &sorted.unmanaged, &sorted.empty_dir);
        self.progress.set_error(self.node, error);
        let mut all_keys: Vec<_> = targets.keys().chain(&sorted.refused).collect();
        all_keys.sort();
        self.waiting_for = all_keys.into_iter().map(show).collect();
        Ok(false)
    }

    /// Drops from the plan the pods no longer on the node (or replaced by a pod of the
    /// same name with another uid); true when any went.
    fn forget_gone(&mut self, pods: &[Pod]) -> bool {
        let Some(targets) = self.plan.as_mut() else {
            return false;
        };
        let present: HashMap<PodKey, String> = pods
            .iter()
            .map(|p| (key_of(p), p.uid().unwrap_or_default()))
            .collect();
        let before = targets.len();
        targets.retain(|key, t| present.get(key) == Some(&t.uid));
        self.waiting_for = targets.keys().map(show).collect();
        targets.len() < before
    }

    /// Evicts every pod of the plan whose eviction is due; true when any was accepted
    /// (or found gone).
    async fn evict_due(
        &mut self,
        opts: &DrainOptions,
        deadline: Option<Instant>,
    ) -> Result<bool, Stop> {
        let (node, cancel, progress) = (self.node, self.cancel, self.progress);
        let Some(targets) = self.plan.as_mut() else {
            return Ok(false);
        };
        let mut progressed = false;
        for (key, target) in targets.iter_mut() {
            if target.accepted || target.next_attempt > Instant::now() {
                continue;
            }
            let (ns, name) = key;
            let attempt = evict(&self.client, ns, name, opts.grace_period_seconds);
            match guard(attempt, cancel, deadline).await? {
                Ok(()) => {
                    tracing::info!(node, pod = %show(key), "evicted pod");
                    target.accepted = true;
                    self.evicted += 1;
                    progressed = true;
                }
                Err(e) if is_not_found(&e) => {
                    tracing::debug!(node, pod = %show(key), "pod already gone");
                    target.accepted = true;
                    progressed = true;
                }
                Err(e) => {
                    let error = format!("evicting {}: {}", show(key), describe(&e));
                    progress.set_error(node, error);
                    target.failures += 1;
                    target.next_attempt = Instant::now() + opts.delay(target.failures);
                }
            }
        }
        Ok(progressed)
    }

    /// Sleeps until the next eviction is due or the next re-list, whichever is first, or
    /// until the options change.
    async fn pause(
        &mut self,
        progressed: bool,
        opts: &DrainOptions,
        deadline: Option<Instant>,
    ) -> Result<(), Stop> {
        self.stalled_rounds = if progressed {
            0
        } else {
            self.stalled_rounds.saturating_add(1)
        };
        let round_delay = opts.delay(self.stalled_rounds.saturating_add(1));
        let mut wake = Instant::now() + round_delay;
        if let Some(due) = self
            .plan
            .iter()
            .flat_map(|p| p.values())
            .filter(|t| !t.accepted)
            .map(|t| t.next_attempt)
            .min()
        {
            wake = wake.min(due);
        }
        let node = self.node;
        let options = &mut self.options;
        let pause = async {
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                () = options_changed(options) => {
                    tracing::info!(node, "drain options changed");
                }
            }
        };
        guard(pause, self.cancel, deadline).await
    }

    /// The outcome of a drain stopped by its cancellation or its timeout.
    fn stopped(&self, stop: Stop) -> DrainOutcome {
        let node = self.node;
        match stop {
            Stop::Cancelled => {
                tracing::info!(node, "drain cancelled");
                DrainOutcome::Cancelled
            }
            Stop::TimedOut => {
                let waiting_for = self.waiting_for.clone();
                let last_error = self.progress.last_error();
                tracing::warn!(node, ?waiting_for, ?last_error, "drain timed out");
                DrainOutcome::TimedOut {
                    waiting_for,
                    last_error,
                }
            }
        }
    }
}
