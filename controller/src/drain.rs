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
//!   its timeout, so an administrator's fix (removing the pod, or changing the pool's
//!   drain settings, which reach a running drain through [`Drainer::start`]) is picked up;
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

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bootc_crds::BootcNodePoolSpec;
use bootc_crds::pool::DrainSpec;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};
use kube::core::{Selector, SelectorExt};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
pub use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Retry pacing of a drain: per-pod eviction retries, re-checks of refused pods and
/// re-lists while waiting for evicted pods to go all start at `initial` and double up to
/// `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First delay.
    pub initial: Duration,
    /// Longest delay.
    pub max: Duration,
}

impl Backoff {
    /// The default: 1 s doubling up to 10 s.
    pub const DEFAULT: Backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(10),
    };

    fn next(&self, current: Duration) -> Duration {
        current.saturating_mul(2).min(self.max).max(self.initial)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::DEFAULT
    }
}

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
    /// Retry pacing.
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
            backoff: Backoff::DEFAULT,
        }
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
    run(client, node, options_rx, cancel, &Progress::default()).await
}

/// What a running drain reports while it runs.
#[derive(Debug, Default)]
struct Progress {
    last_error: Mutex<Option<String>>,
}

impl Progress {
    fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records `error`; logs it when it differs from the previous one.
    fn set_error(&self, node: &str, error: String) {
        let mut last = self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.as_deref() == Some(error.as_str()) {
            tracing::debug!(node, error = %error, "drain still blocked");
        } else {
            tracing::warn!(node, error = %error, "drain blocked; retrying");
            *last = Some(error);
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
struct Target {
    uid: String,
    /// The API server accepted its eviction (or it was already gone).
    accepted: bool,
    next_attempt: Instant,
    delay: Duration,
}

/// How a pod on the node is treated.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Skip(&'static str),
    Evict,
    Refuse { unmanaged: bool, empty_dir: bool },
}

fn classify(pod: &Pod, options: &DrainOptions, selector: Option<&Selector>) -> Verdict {
    if pod.annotations().contains_key(MIRROR_ANNOTATION) {
        return Verdict::Skip("mirror pod");
    }
    let controller = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    if controller.is_some_and(|o| o.kind == "DaemonSet") {
        return Verdict::Skip("DaemonSet pod");
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Verdict::Skip("terminated pod");
    }
    if selector.is_some_and(|s| !s.matches(pod.labels())) {
        return Verdict::Skip("not selected by podSelector");
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Verdict::Evict;
    }
    let unmanaged = controller.is_none() && !options.force;
    let empty_dir = !options.delete_empty_dir_data
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some()));
    if unmanaged || empty_dir {
        Verdict::Refuse {
            unmanaged,
            empty_dir,
        }
    } else {
        Verdict::Evict
    }
}

fn key_of(pod: &Pod) -> (String, String) {
    (pod.namespace().unwrap_or_default(), pod.name_any())
}

fn show((ns, name): &(String, String)) -> String {
    format!("{ns}/{name}")
}

/// The refusal message for the pods that block a drain.
fn refusal(node: &str, unmanaged: &[String], empty_dir: &[String]) -> String {
    let mut parts = Vec::new();
    if !unmanaged.is_empty() {
        parts.push(format!(
            "pods not managed by a controller (set disruption.drain.force to evict them): {}",
            unmanaged.join(", ")
        ));
    }
    if !empty_dir.is_empty() {
        parts.push(format!(
            "pods with emptyDir volumes (set disruption.drain.deleteEmptyDirData to evict them and lose that data): {}",
            empty_dir.join(", ")
        ));
    }
    format!("cannot drain node {node}: {}", parts.join("; "))
}

/// An API error with the details a person needs (a budget's refusal names the budget in
/// its causes).
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = status.message.clone();
            for cause in status.details.iter().flat_map(|d| &d.causes) {
                if !cause.message.is_empty() {
                    text.push(' ');
                    text.push_str(&cause.message);
                }
            }
            format!("{text} ({} {})", status.code, status.reason)
        }
        other => other.to_string(),
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 404)
}

/// `POST pods/<name>/eviction`. kube's `Api::evict` sends its delete options under a
/// snake_case key the API server ignores, so the Eviction is built here.
async fn evict(
    client: &Client,
    namespace: &str,
    name: &str,
    grace_period_seconds: Option<i64>,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create_subresource::<_, serde_json::Value>(
        "eviction",
        name,
        &PostParams::default(),
        &eviction(namespace, name, grace_period_seconds),
    )
    .await
    .map(drop)
}

/// The policy/v1 Eviction of a pod.
fn eviction(namespace: &str, name: &str, grace_period_seconds: Option<i64>) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        delete_options: grace_period_seconds.map(|g| DeleteOptions {
            grace_period_seconds: Some(g),
            ..DeleteOptions::default()
        }),
    }
}

/// The drain loop. `options` may change while it runs (see [`Drainer::start`]).
async fn run(
    client: Client,
    node: &str,
    mut options: watch::Receiver<DrainOptions>,
    cancel: &CancellationToken,
    progress: &Progress,
) -> Result<DrainOutcome, DrainError> {
    let started = Instant::now();
    let all: Api<Pod> = Api::all(client.clone());
    let list_params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    // The pods to evict, fixed by the first round without refusals.
    let mut plan: Option<BTreeMap<(String, String), Target>> = None;
    // What a timeout would report as still there.
    let mut waiting_for: Vec<String> = Vec::new();
    let mut evicted = 0;
    let mut round_delay = options.borrow().backoff.initial;
    tracing::info!(node, "draining node");

    loop {
        let opts = options.borrow_and_update().clone();
        let deadline = opts.timeout.map(|t| started + t);
        let stopped = |stop: Stop, waiting_for: Vec<String>| match stop {
            Stop::Cancelled => {
                tracing::info!(node, "drain cancelled");
                DrainOutcome::Cancelled
            }
            Stop::TimedOut => {
                let last_error = progress.last_error();
                tracing::warn!(node, ?waiting_for, ?last_error, "drain timed out");
                DrainOutcome::TimedOut {
                    waiting_for,
                    last_error,
                }
            }
        };
        let mut progressed = false;

        match guard(all.list(&list_params), cancel, deadline).await {
            Err(stop) => return Ok(stopped(stop, waiting_for)),
            Ok(Err(e)) => progress.set_error(node, format!("listing pods: {}", describe(&e))),
            Ok(Ok(list)) => {
                let pods = list.items;
                if plan.is_none() {
                    let selector = opts
                        .pod_selector
                        .clone()
                        .map(Selector::try_from)
                        .transpose()
                        .map_err(|e| DrainError::InvalidPodSelector(e.to_string()))?;
                    let mut targets = BTreeMap::new();
                    let (mut unmanaged, mut empty_dir, mut refused) =
                        (Vec::new(), Vec::new(), Vec::new());
                    for pod in &pods {
                        let key = key_of(pod);
                        match classify(pod, &opts, selector.as_ref()) {
                            Verdict::Skip(why) => {
                                tracing::debug!(node, pod = %show(&key), why, "leaving pod");
                            }
                            Verdict::Evict => {
                                let target = Target {
                                    uid: pod.uid().unwrap_or_default(),
                                    accepted: false,
                                    next_attempt: Instant::now(),
                                    delay: opts.backoff.initial,
                                };
                                targets.insert(key, target);
                            }
                            Verdict::Refuse {
                                unmanaged: u,
                                empty_dir: e,
                            } => {
                                if u {
                                    unmanaged.push(show(&key));
                                }
                                if e {
                                    empty_dir.push(show(&key));
                                }
                                refused.push(key);
                            }
                        }
                    }
                    if refused.is_empty() {
                        tracing::info!(node, pods = targets.len(), "evicting pods");
                        plan = Some(targets);
                        progressed = true;
                    } else {
                        progress.set_error(node, refusal(node, &unmanaged, &empty_dir));
                        let mut all_keys: Vec<_> = targets.keys().chain(&refused).collect();
                        all_keys.sort();
                        waiting_for = all_keys.into_iter().map(show).collect();
                    }
                }
                if let Some(targets) = plan.as_mut() {
                    let present: HashMap<(String, String), String> = pods
                        .iter()
                        .map(|p| (key_of(p), p.uid().unwrap_or_default()))
                        .collect();
                    let before = targets.len();
                    targets.retain(|key, t| present.get(key) == Some(&t.uid));
                    progressed |= targets.len() < before;
                    waiting_for = targets.keys().map(show).collect();
                    if targets.is_empty() {
                        tracing::info!(node, evicted, "node drained");
                        return Ok(DrainOutcome::Drained { evicted });
                    }
                    for (key, target) in targets.iter_mut() {
                        if target.accepted || target.next_attempt > Instant::now() {
                            continue;
                        }
                        let (ns, name) = key;
                        let attempt = evict(&client, ns, name, opts.grace_period_seconds);
                        match guard(attempt, cancel, deadline).await {
                            Err(stop) => return Ok(stopped(stop, waiting_for)),
                            Ok(Ok(())) => {
                                tracing::info!(node, pod = %show(key), "evicted pod");
                                target.accepted = true;
                                evicted += 1;
                                progressed = true;
                            }
                            Ok(Err(e)) if is_not_found(&e) => {
                                tracing::debug!(node, pod = %show(key), "pod already gone");
                                target.accepted = true;
                                progressed = true;
                            }
                            Ok(Err(e)) => {
                                let error = format!("evicting {}: {}", show(key), describe(&e));
                                progress.set_error(node, error);
                                target.next_attempt = Instant::now() + target.delay;
                                target.delay = opts.backoff.next(target.delay);
                            }
                        }
                    }
                }
            }
        }

        // Sleep until the next eviction is due or the next re-list, whichever is first.
        round_delay = if progressed {
            opts.backoff.initial
        } else {
            opts.backoff.next(round_delay)
        };
        let mut wake = Instant::now() + round_delay;
        if let Some(due) = plan
            .iter()
            .flat_map(|p| p.values())
            .filter(|t| !t.accepted)
            .map(|t| t.next_attempt)
            .min()
        {
            wake = wake.min(due);
        }
        let pause = async {
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                () = options_changed(&mut options) => {
                    tracing::info!(node, "drain options changed");
                }
            }
        };
        if let Err(stop) = guard(pause, cancel, deadline).await {
            return Ok(stopped(stop, waiting_for));
        }
    }
}

/// Announced when a background drain finishes, so the reconciler re-enqueues the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainDone {
    /// The pool that started the drain.
    pub pool: String,
    /// The drained node.
    pub node: String,
}

/// Where a node's background drain is.
#[derive(Debug, Clone, PartialEq)]
pub enum DrainState {
    /// Still running.
    Running {
        /// The pool that started it.
        pool: String,
        /// When it started.
        since: std::time::Instant,
        /// The last error it met (a budget's refusal, refused pods, API errors), if any.
        last_error: Option<String>,
    },
    /// Finished and not yet forgotten.
    Finished {
        /// The pool that started it.
        pool: String,
        /// When it started.
        since: std::time::Instant,
        /// When it finished.
        finished: std::time::Instant,
        /// How it ended.
        result: Result<DrainOutcome, DrainError>,
    },
}

struct Entry {
    id: u64,
    pool: String,
    since: std::time::Instant,
    cancel: CancellationToken,
    options: watch::Sender<DrainOptions>,
    progress: Arc<Progress>,
    finished: Option<(std::time::Instant, Result<DrainOutcome, DrainError>)>,
}

impl Entry {
    fn state(&self) -> DrainState {
        match &self.finished {
            None => DrainState::Running {
                pool: self.pool.clone(),
                since: self.since,
                last_error: self.progress.last_error(),
            },
            Some((finished, result)) => DrainState::Finished {
                pool: self.pool.clone(),
                since: self.since,
                finished: *finished,
                result: result.clone(),
            },
        }
    }
}

#[derive(Default)]
struct Drains {
    next_id: u64,
    by_node: HashMap<String, Entry>,
}

/// The background drains, at most one per node. Each runs as a tokio task; its end is
/// announced on the `done` channel and kept (see [`Drainer::state`]) until
/// [`Drainer::forget`] or [`Drainer::cancel`]. Dropping the Drainer cancels every drain.
pub struct Drainer {
    client: Client,
    done: mpsc::UnboundedSender<DrainDone>,
    drains: Arc<Mutex<Drains>>,
}

impl fmt::Debug for Drainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let drains = lock(&self.drains);
        let mut nodes: Vec<(&String, bool)> = drains
            .by_node
            .iter()
            .map(|(node, e)| (node, e.finished.is_some()))
            .collect();
        nodes.sort();
        f.debug_struct("Drainer")
            .field("drains (node, finished)", &nodes)
            .finish_non_exhaustive()
    }
}

fn lock(drains: &Mutex<Drains>) -> MutexGuard<'_, Drains> {
    drains.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drainer {
    /// A Drainer evicting with `client` (which should not retry 429 answers itself, see
    /// the [module documentation](self)) and announcing finished drains on `done`.
    pub fn new(client: Client, done: mpsc::UnboundedSender<DrainDone>) -> Self {
        Drainer {
            client,
            done,
            drains: Arc::default(),
        }
    }

    /// Starts draining `node` for `pool` in the background (on the current tokio runtime),
    /// unless a drain of `node` is running or finished and not yet forgotten: then nothing
    /// new starts, but a running drain takes `options` from its next round (so a fixed
    /// `force` or `deleteEmptyDirData` unblocks it; the set of pods to evict, once fixed,
    /// does not change). Idempotent.
    pub fn start(&self, pool: &str, node: &str, options: DrainOptions) {
        let mut drains = lock(&self.drains);
        if let Some(entry) = drains.by_node.get(node) {
            if entry.pool != pool {
                tracing::warn!(
                    node,
                    pool,
                    draining_for = %entry.pool,
                    "node is already drained for another pool"
                );
            } else if entry.finished.is_none() {
                entry.options.send_if_modified(|current| {
                    let changed = *current != options;
                    *current = options;
                    changed
                });
            }
            return;
        }
        drains.next_id += 1;
        let id = drains.next_id;
        let cancel = CancellationToken::new();
        let (options_tx, options_rx) = watch::channel(options);
        let progress = Arc::new(Progress::default());
        drains.by_node.insert(
            node.to_string(),
            Entry {
                id,
                pool: pool.to_string(),
                since: std::time::Instant::now(),
                cancel: cancel.clone(),
                options: options_tx,
                progress: Arc::clone(&progress),
                finished: None,
            },
        );
        drop(drains);

        let client = self.client.clone();
        let done = self.done.clone();
        let shared = Arc::clone(&self.drains);
        let (pool, node) = (pool.to_string(), node.to_string());
        let span = tracing::info_span!("drain", pool = %pool, node = %node);
        tokio::spawn(
            async move {
                let result = run(client, &node, options_rx, &cancel, &progress).await;
                if let Err(e) = &result {
                    tracing::error!(error = %e, "drain failed");
                }
                let announce = match lock(&shared).by_node.get_mut(&node) {
                    Some(entry) if entry.id == id => {
                        entry.finished = Some((std::time::Instant::now(), result));
                        true
                    }
                    // Cancelled and forgotten (perhaps already restarted): nobody waits.
                    _ => false,
                };
                if announce {
                    // A closed channel means the reconciler is gone; nothing to tell.
                    let _ = done.send(DrainDone { pool, node });
                }
            }
            .instrument(span),
        );
    }

    /// Cancels the drain of `node` (the node left the pool, the target was rolled back)
    /// and forgets it, running or finished. Its task stops within a moment and announces
    /// nothing.
    pub fn cancel(&self, node: &str) {
        if let Some(entry) = lock(&self.drains).by_node.remove(node) {
            tracing::info!(node, pool = %entry.pool, "cancelling drain");
            entry.cancel.cancel();
        }
    }

    /// Where the drain of `node` is; `None` when there is none (never started, cancelled
    /// or forgotten).
    pub fn state(&self, node: &str) -> Option<DrainState> {
        lock(&self.drains).by_node.get(node).map(Entry::state)
    }

    /// Forgets the finished drain of `node` (after the reconciler acted on its result), so
    /// a later [`Drainer::start`] starts a new one. A running drain is left alone.
    pub fn forget(&self, node: &str) {
        let mut drains = lock(&self.drains);
        if drains
            .by_node
            .get(node)
            .is_some_and(|e| e.finished.is_some())
        {
            drains.by_node.remove(node);
        }
    }

    /// The nodes with a drain, running or finished and not forgotten (sorted).
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = lock(&self.drains).by_node.keys().cloned().collect();
        nodes.sort();
        nodes
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        for entry in lock(&self.drains).by_node.values() {
            entry.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, PodStatus, Volume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(owner: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                owner_references: owner.map(|kind| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: kind.into(),
                        name: "o".into(),
                        uid: "u".into(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn a_zero_drain_timeout_waits_forever_like_kubectl() {
        let drain = DrainSpec::default();
        assert_eq!(DrainOptions::from_spec(&drain, None).timeout, None);
        assert_eq!(DrainOptions::from_spec(&drain, Some(0)).timeout, None);
        assert_eq!(
            DrainOptions::from_spec(&drain, Some(90)).timeout,
            Some(Duration::from_secs(90))
        );
    }

    #[test]
    fn classification() {
        let opts = DrainOptions::default();
        assert_eq!(
            classify(&pod(Some("ReplicaSet")), &opts, None),
            Verdict::Evict
        );
        assert_eq!(
            classify(&pod(Some("DaemonSet")), &opts, None),
            Verdict::Skip("DaemonSet pod")
        );
        assert_eq!(
            classify(&pod(None), &opts, None),
            Verdict::Refuse {
                unmanaged: true,
                empty_dir: false
            }
        );
        let forced = DrainOptions {
            force: true,
            ..DrainOptions::default()
        };
        assert_eq!(classify(&pod(None), &forced, None), Verdict::Evict);

        let mut mirror = pod(None);
        mirror.metadata.annotations = Some([(MIRROR_ANNOTATION.to_string(), "x".into())].into());
        assert_eq!(classify(&mirror, &opts, None), Verdict::Skip("mirror pod"));

        let mut done = pod(Some("ReplicaSet"));
        done.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..PodStatus::default()
        });
        assert_eq!(
            classify(&done, &opts, None),
            Verdict::Skip("terminated pod")
        );

        let mut scratch = pod(Some("ReplicaSet"));
        scratch.spec = Some(PodSpec {
            volumes: Some(vec![Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        });
        assert_eq!(classify(&scratch, &opts, None), Verdict::Evict);
        let keep_data = DrainOptions {
            delete_empty_dir_data: false,
            ..DrainOptions::default()
        };
        assert_eq!(
            classify(&scratch, &keep_data, None),
            Verdict::Refuse {
                unmanaged: false,
                empty_dir: true
            }
        );

        let other: Selector = [("app", "db")].into_iter().collect();
        assert_eq!(
            classify(&pod(None), &opts, Some(&other)),
            Verdict::Skip("not selected by podSelector")
        );
    }

    #[test]
    fn eviction_body_carries_the_grace_period() {
        assert_eq!(
            serde_json::to_value(eviction("ns", "p", Some(7))).unwrap(),
            serde_json::json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "p", "namespace": "ns"},
                "deleteOptions": {"gracePeriodSeconds": 7}
            })
        );
        let plain = serde_json::to_value(eviction("ns", "p", None)).unwrap();
        assert!(plain.get("deleteOptions").is_none(), "{plain}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff::DEFAULT;
        let mut d = b.initial;
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(d.as_secs());
            d = b.next(d);
        }
        assert_eq!(seen, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn options_from_a_pool() {
        let spec: BootcNodePoolSpec = serde_json::from_value(serde_json::json!({
            "nodeSelector": {},
            "image": {"ref": "quay.io/x/y:1"},
            "rollout": {"drainTimeoutSeconds": 600},
            "disruption": {"drain": {"gracePeriodSeconds": 30, "force": true,
                "podSelector": {"matchLabels": {"a": "b"}}}}
        }))
        .unwrap();
        let opts = DrainOptions::from_pool(&spec);
        assert_eq!(opts.grace_period_seconds, Some(30));
        assert!(opts.force);
        assert!(opts.delete_empty_dir_data);
        assert_eq!(opts.timeout, Some(Duration::from_secs(600)));
        assert!(opts.pod_selector.is_some());
        assert_eq!(DrainOptions::default().timeout, None);
    }
}
