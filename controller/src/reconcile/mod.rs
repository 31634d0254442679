//! The reconcile shell around the planner, on kube-runtime's `Controller`: it reads,
//! plans once, executes, writes. Every decision is the planner's ([`crate::plan`]).
//!
//! Module map:
//!
//! - this file: the controller's watches and triggers, one reconcile, the error policy;
//! - [`cache`]: caches trimmed to what plans read, and the overlay of the reconciler's
//!   own writes;
//! - [`lean`]: Nodes and BootcNodes decoded as the caches keep them, and Pods as drains
//!   read them, the rest of each read past;
//! - [`lookup`]: the pull Secret and the registry, asked for each reconcile;
//! - [`copies`]: the Secrets watched, and the copy of each pool's pull Secret in the
//!   install's namespace (what its BootcNodes name);
//! - [`observe`]: the [`Snapshot`](crate::plan::Snapshot) a plan looks at; the pools'
//!   selectors and ordering summaries in it are shared between pools (`pool_index`);
//! - [`execute`]: carrying out the plan's actions;
//! - [`pools`]: the pools' watch, each pool read on its own (one the controller cannot
//!   read is reported and left alone; the others go on);
//! - [`elect`]: running only while holding the leader Lease.
//!
//! Watches: pools (the controller's own), BootcNodes (owned by pools), Nodes (mapped to
//! every pool whose selector matches and to the pool owning the node's BootcNode; only
//! label, Ready, `spec.unschedulable` and boot ID changes pass), Secrets in the namespaces
//! sources may be read in (metadata only, mapped to the pools naming them), the pull
//! Secrets' copies (metadata only, mapped to their owning pool), the drainer's
//! completions, and each pool's changes again for the pools that follow it
//! (`rollout.after`).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_common::backoff::Backoff;
use bootc_pool_common::error::error_chain;
use bootc_pool_common::node::owner_pool;
use chrono::Utc;
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

mod batch;
pub mod cache;
pub mod copies;
pub mod elect;
pub mod event_queue;
pub mod execute;
pub mod lean;
pub mod lookup;
pub mod membership;
pub mod observe;
pub mod pacing;
pub mod pool_index;
pub mod pools;
mod synced;
pub mod views;

/// The User-Agent of the controller's requests, as the shell's callers name it.
pub use crate::shared::USER_AGENT;
pub use elect::run_elected;

use crate::drain::{DrainDone, Drainer};
use crate::metrics::Metrics;
use crate::plan::{self, Progress};
use crate::resolve::{Resolver, ResolverOptions};
use crate::server::Health;
use crate::shared::{Clock, FIELD_MANAGER};
use cache::{Overlay, lock, node_fingerprint};
use lean::Lean;
use synced::{Synced, ready_when_synced};

/// Re-plan at least this often, even when nothing signals a change.
const RESYNC: Duration = Duration::from_secs(300);
/// The wait after failed reconciles in a row: 1 s doubling to 5 minutes.
pub const ERROR_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));

/// The planner a reconcile calls once: [`plan::plan`], or a test's wrapper around it.
pub type PlanFn = Arc<dyn Fn(&plan::Snapshot) -> plan::Plan + Send + Sync>;

/// What the reconciler works with besides its client: the clock, the planner, the tag
/// resolver shared by all pools, the metrics, and the name this replica gives in Events.
#[derive(Clone)]
pub struct Dependencies {
    /// The time source.
    pub clock: Clock,
    /// The planner, injectable for tests (one that counts the plans made).
    pub plan: PlanFn,
    /// The name this instance reports in events.
    pub instance: String,
    /// The tag resolver, shared by all pools.
    pub resolver: Resolver,
    /// Where metrics are recorded.
    pub metrics: Metrics,
    /// What `/readyz` answers: a replica leading is ready once its caches have synced; a
    /// standby replica (watching the Lease, ready to take over) is ready.
    pub health: Health,
    /// How the pools' rollout events are delivered to their webhooks.
    pub notifications: crate::notify::NotifyOptions,
    /// The alert gates' sources, shared by all pools.
    pub alert_gate: crate::gate::AlertGate,
    /// Where pull Secrets are copied to and where sources may be read.
    pub secrets: crate::secrets::SecretNamespaces,
    /// The client the elector reads and renews the Lease with, when not the
    /// reconcilers' own: one of its own, with no bound on requests in flight, so a
    /// renewal never waits behind the pools' requests (the write fence would refuse
    /// every write while it waits).
    pub lease_client: Option<kube::Client>,
}

impl std::fmt::Debug for Dependencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dependencies")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Default for Dependencies {
    fn default() -> Self {
        Dependencies {
            clock: Arc::new(Utc::now),
            plan: Arc::new(plan::plan),
            instance: "bootc-pool-controller".to_owned(),
            resolver: Resolver::new(ResolverOptions::default()),
            metrics: Metrics::new(),
            health: Health::new(),
            notifications: crate::notify::NotifyOptions::default(),
            alert_gate: crate::gate::AlertGate::default(),
            secrets: crate::secrets::SecretNamespaces::default(),
            lease_client: None,
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A cache's writer is gone (the controller is stopping).
    #[error("the Node or BootcNode cache stopped")]
    CacheGone,
    /// A write lost a race (409): the plan is redone from fresh data at once.
    #[error("{0} changed meanwhile; planning again")]
    Conflict(String),
}

impl ReconcileError {
    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Api { .. } => "api",
            ReconcileError::CacheGone => "cache",
            ReconcileError::Conflict(_) => "conflict",
        }
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let what = what.into();
    move |source| match &source {
        kube::Error::Api(s) if s.code == 409 => ReconcileError::Conflict(what),
        _ => ReconcileError::Api { what, source },
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Shared state of the reconciler.
pub struct Context {
    client: Client,
    pools: Store<BootcNodePool>,
    bootc: Store<BootcNode>,
    nodes: Store<Node>,
    /// The pull Secrets' copies (see [`copies`]).
    copies: copies::Copies,
    drainer: Drainer,
    /// Where the Events on the pools and nodes wait to be sent.
    events: event_queue::EventQueue,
    deps: Dependencies,
    bootc_overlay: Arc<Mutex<Overlay<BootcNode>>>,
    node_overlay: Arc<Mutex<Overlay<Node>>>,
    /// The pools as last written, until the watch delivers them ([`pools::PoolOverlay`]).
    pool_overlay: pools::PoolOverlay,
    /// Failed reconciles in a row, by pool (for the backoff).
    failures: Mutex<HashMap<String, u32>>,
    /// When each pool's status was last written (see [`pacing`]).
    pacing: pacing::StatusPacing,
    /// Whether the BootcNode and Node caches have been filled.
    synced: Synced,
    /// By pool: the progress the last plan returned (for stall detection; restarts begin
    /// a new count).
    progress: Mutex<HashMap<String, Progress>>,
    /// Sends the pools' rollout events to their webhooks.
    notifier: crate::notify::Notifier,
    /// Each pool's candidate members, kept while no label or owner changed.
    membership: Arc<membership::Membership>,
    /// Each pool's members as its last plan saw them.
    views: views::Views,
    /// Every pool's selector and summary, shared by the snapshots.
    pool_index: Mutex<pool_index::PoolIndex>,
    /// Turns for the nodes' actions of all pools (see [`execute::CONCURRENT_NODES_IN_ALL`]).
    node_turns: tokio::sync::Semaphore,
    /// The pools let go (their finalizer removed), forgotten once that reconcile ends.
    gone: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// Every BootcNode change, and the cache they fill; `synced` turns true once it is full.
fn bootc_changes(
    api: Api<Lean<BootcNode>>,
    synced: watch::Sender<bool>,
    (overlay, membership): (Arc<Mutex<Overlay<BootcNode>>>, Arc<membership::Membership>),
) -> (
    impl Stream<Item = Result<BootcNode, watcher::Error>> + use<>,
    Store<BootcNode>,
) {
    let (store, writer) = reflector::store();
    let changes = reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map_ok(lean::unwrap_event),
    )
    .inspect(move |event| {
        if let Ok(event) = event {
            lock(&overlay).observe(event);
            membership.bootc_event(event);
        }
        if matches!(event, Ok(Event::InitDone)) {
            synced.send_replace(true);
        }
    })
    .touched_objects();
    (changes, store)
}

/// Node changes a plan can see (labels, Ready, unschedulable, boot ID) and deletions.
fn node_changes(
    api: Api<Lean<Node>>,
    writer: reflector::store::Writer<Node>,
    synced: watch::Sender<bool>,
    (overlay, membership): (Arc<Mutex<Overlay<Node>>>, Arc<membership::Membership>),
) -> impl Stream<Item = Result<Node, watcher::Error>> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map_ok(lean::unwrap_event),
    )
    .filter_map(move |event| {
        if let Ok(event) = &event {
            lock(&overlay).observe(event);
            membership.node_event(event);
        }
        let out = match event {
            Err(e) => Some(Err(e)),
            Ok(Event::Apply(node)) | Ok(Event::InitApply(node)) => {
                let fp = node_fingerprint(&node);
                let name = node.name_any();
                (seen.insert(name, fp) != Some(fp)).then_some(Ok(node))
            }
            Ok(Event::Delete(node)) => {
                seen.remove(&node.name_any());
                Some(Ok(node))
            }
            Ok(Event::InitDone) => {
                synced.send_replace(true);
                None
            }
            Ok(Event::Init) => None,
        };
        std::future::ready(out)
    })
}

/// The pools a Node change concerns: those selecting it and the one owning its BootcNode.
fn pools_of_node(
    pools: &Store<BootcNodePool>,
    bootc: &Store<BootcNode>,
    node: &Node,
) -> Vec<ObjectRef<BootcNodePool>> {
    let mut names: BTreeSet<String> = pools
        .state()
        .iter()
        .filter(|p| bootc_crds::selector::matches(&p.spec.node_selector, node.labels()))
        .map(|p| p.name_any())
        .collect();
    if let Some(b) = bootc.get(&ObjectRef::new(&node.name_any()))
        && let Some(owner) = owner_pool(&b)
    {
        names.insert(owner);
    }
    names.iter().map(|p| ObjectRef::new(p)).collect()
}

/// The pools' changes, passed on, and a stream of the pools that follow each changed pool
/// (`rollout.after`): a pool's change is also a change for them.
fn with_followers(
    pools: impl Stream<Item = Result<BootcNodePool, watcher::Error>> + Send + 'static,
    store: Store<BootcNodePool>,
) -> (
    impl Stream<Item = Result<BootcNodePool, watcher::Error>> + Send + 'static,
    impl Stream<Item = ObjectRef<BootcNodePool>> + Send + 'static,
) {
    let (tx, rx) = mpsc::unbounded_channel::<ObjectRef<BootcNodePool>>();
    let pools = pools.inspect(move |changed| {
        if let Ok(pool) = changed {
            for follower in followers(&store, &pool.name_any()) {
                // The receiver lives as long as the controller; a send after it is gone
                // has nobody left to tell.
                let _ = tx.send(follower);
            }
        }
    });
    (
        pools,
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
    )
}

/// The pools whose `rollout.after` names `pool`.
fn followers(pools: &Store<BootcNodePool>, pool: &str) -> Vec<ObjectRef<BootcNodePool>> {
    pools
        .state()
        .iter()
        .filter(|p| p.spec.rollout.after.iter().any(|a| a == pool))
        .map(|p| ObjectRef::new(&p.name_any()))
        .collect()
}

/// What records the controller's Events, naming this instance.
fn recorder(client: &Client, deps: &Dependencies) -> crate::shared::Recorders {
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_owned(),
        instance: Some(deps.instance.clone()),
    };
    crate::shared::Recorders::new(client, &reporter)
}

/// What sends the pools' rollout events to their webhooks.
fn notifier(
    client: &Client,
    recorder: &crate::shared::Recorders,
    deps: &Dependencies,
) -> crate::notify::Notifier {
    crate::notify::Notifier::new(
        client.clone(),
        recorder.clone(),
        deps.notifications.clone(),
        deps.secrets.clone(),
        deps.metrics.clone(),
        Arc::clone(&deps.clock),
    )
}

/// The drainer, and the pools whose drains ended or are held up (each a reason to plan
/// the pool again).
fn drainer(
    client: &Client,
) -> (
    Drainer,
    impl Stream<Item = ObjectRef<BootcNodePool>> + Send + 'static,
) {
    let (done_tx, done_rx) = mpsc::unbounded_channel::<DrainDone>();
    let drained = tokio_stream::wrappers::UnboundedReceiverStream::new(done_rx)
        .map(|done| ObjectRef::<BootcNodePool>::new(&done.pool));
    let drainer = Drainer::new(client.clone(), done_tx.clone()).announcing_blocks(done_tx);
    (drainer, drained)
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    client: Client,
    deps: Dependencies,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (bootc_synced, bootc_synced_rx) = watch::channel(false);
    let (bootc_overlay, node_overlay) = (Arc::default(), Arc::default());
    let membership = Arc::new(membership::Membership::default());
    let (bootc_stream, bootc_store) = bootc_changes(
        Api::all(client.clone()),
        bootc_synced,
        (Arc::clone(&bootc_overlay), Arc::clone(&membership)),
    );
    let (node_store, node_writer) = reflector::store();
    let (nodes_synced, nodes_synced_rx) = watch::channel(false);
    let node_stream = node_changes(
        Api::all(client.clone()),
        node_writer,
        nodes_synced,
        (Arc::clone(&node_overlay), Arc::clone(&membership)),
    );
    let synced = Synced::new(bootc_synced_rx, nodes_synced_rx);
    let (drainer, drained) = drainer(&client);
    let secret_stream = copies::source_changes(&client, &deps.secrets);
    let (copy_store, copy_writer) = reflector::store();
    let copy_stream = copies::copy_changes(&client, &deps.secrets, copy_writer);
    let health = deps.health.clone();
    health.set_not_ready("leading: caches not synced yet");
    let recorder = recorder(&client, &deps);
    let (pool_stream, pool_store, pool_overlay) = pools::pool_changes(&client, recorder.clone());
    let (pool_stream, followed) = with_followers(pool_stream, pool_store.clone());
    let controller = Controller::for_stream(pool_stream, pool_store.clone());
    let ready = tokio::spawn(ready_when_synced(health.clone(), synced.clone()));
    let (events, events_sender) =
        event_queue::EventQueue::start(recorder.clone(), deps.metrics.clone());
    let ctx = Arc::new(Context {
        notifier: notifier(&client, &recorder, &deps),
        events,
        drainer,
        client,
        pools: pool_store.clone(),
        bootc: bootc_store.clone(),
        nodes: node_store,
        copies: copy_store,
        deps,
        bootc_overlay,
        node_overlay,
        pool_overlay,
        failures: Mutex::new(HashMap::new()),
        pacing: pacing::StatusPacing::default(),
        synced,
        progress: Mutex::new(HashMap::new()),
        membership,
        views: views::Views::default(),
        pool_index: Mutex::default(),
        node_turns: tokio::sync::Semaphore::new(execute::CONCURRENT_NODES_IN_ALL),
        gone: Mutex::default(),
    });
    let (node_pools, secret_pools) = (pool_store.clone(), pool_store);
    controller
        .owns_stream(bootc_stream)
        .watches_stream(node_stream, move |node: Node| {
            pools_of_node(&node_pools, &bootc_store, &node)
        })
        .watches_stream(secret_stream, move |secret| {
            copies::pools_of_secret(&secret_pools, &secret)
        })
        .watches_stream(copy_stream, |copy| copies::pool_of_copy(&copy))
        .reconcile_on(drained)
        .reconcile_on(followed)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(log_outcome)
        .await;
    events_sender.stop().await;
    ready.abort();
    health.set_not_ready("the controller stopped");
}

/// What one run of the reconciler gave.
type Outcome = Result<
    (ObjectRef<BootcNodePool>, Requeue),
    kube::runtime::controller::Error<ReconcileError, watcher::Error>,
>;

/// A reconcile's own failure is logged by [`error_policy`]; a watch that failed (it is
/// retried with a backoff, relisting when its version is gone) is logged here, so that an
/// admin sees why the controller's view of the cluster lags.
async fn log_outcome(result: Outcome) {
    use kube::runtime::controller::Error;
    match result {
        Ok((pool, _)) => debug!(pool = %pool.name, "reconciled"),
        Err(Error::QueueError(e)) => warn!(error = %error_chain(&e), "watch failed; retrying"),
        Err(e) => debug!(error = %e, "reconcile failed"),
    }
}

/// The wait before retrying after `failures` failed reconciles in a row: 1 s doubling to
/// 5 minutes.
pub fn error_backoff(failures: u32) -> Duration {
    ERROR_BACKOFF.delay(failures)
}

fn error_policy(pool: Arc<BootcNodePool>, error: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    let name = pool.name_any();
    match error {
        ReconcileError::Conflict(what) => {
            debug!(pool = %name, %what, "conflict; planning again");
            Requeue::requeue(Duration::from_millis(50))
        }
        ReconcileError::Api { .. } | ReconcileError::CacheGone => {
            // Counted by `reconcile`, which forgets a pool let go after counting: here the
            // count is only read, so a pool forgotten is not brought back.
            let failures = lock(&ctx.failures).get(&name).copied().unwrap_or(1);
            let wait = error_backoff(failures);
            warn!(pool = %name, error = %error, failures, retry_in = ?wait, "reconcile failed");
            Requeue::requeue(wait)
        }
    }
}

/// One reconcile of a pool, counted and timed with its outcome whatever happens.
async fn reconcile(pool: Arc<BootcNodePool>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let started = std::time::Instant::now();
    let name = pool.name_any();
    let pool = ctx.pool_now(pool);
    let result = reconcile_once(&pool, &ctx).await;
    let metrics = &ctx.deps.metrics;
    metrics.observe_reconcile(&name, started.elapsed());
    match &result {
        Ok(_) => {
            metrics.record_reconcile(&name, "ok");
            lock(&ctx.failures).remove(&name);
        }
        Err(e) => {
            metrics.record_reconcile(&name, e.reason());
            metrics.record_reconcile_error(&name, e.reason());
            if !matches!(e, ReconcileError::Conflict(_)) {
                let mut failures = lock(&ctx.failures);
                let n = failures.entry(name.clone()).or_insert(0);
                *n = n.saturating_add(1);
            }
        }
    }
    ctx.forget_if_gone(&name);
    result
}

/// Reads, plans once, executes, writes the status.
async fn reconcile_once(pool: &BootcNodePool, ctx: &Context) -> Result<Requeue, ReconcileError> {
    // The controller waits for its pool cache only. A plan from a Node or BootcNode cache
    // that is still filling would take members for leavers (and delete their BootcNodes).
    if !ctx.synced.wait().await {
        return Err(ReconcileError::CacheGone);
    }
    let name = pool.name_any();
    let (snapshot, stamp) = ctx.observe(pool).await?;
    let plan = (ctx.deps.plan)(&snapshot);
    lock(&ctx.progress).insert(name.clone(), plan.progress);
    debug!(pool = %name, actions = plan.actions.len(), "planned");

    // A pool being deleted keeps the status it had; it may be gone once its finalizer is.
    // A new failure mark is stored before the plan acts on it: a plan made after this one
    // (from a watch that lags, or after a write lost to an error) still knows the digest
    // failed, and sends no other node to it.
    let deleting = snapshot.pool.deleting;
    let early = !deleting && pacing::marks_failure(pool.status.as_ref(), &plan.status);
    let mut paced = if early {
        pacing::write_status(ctx, pool, &plan.status).await?
    } else {
        None
    };
    let (failed, pool_events) = execute::execute_all(ctx, pool, &plan).await;
    if !deleting && !early {
        paced = pacing::write_status(ctx, pool, &plan.status).await?;
    }
    // What the status now says, the metrics say too.
    ctx.deps.metrics.set_plan(&name, &plan);
    execute::publish_all(ctx, pool, &pool_events).await;
    let taken = views::Taken {
        pods_listed: snapshot.pool.spec.disruption.blocking_pods.is_some(),
        nodes: snapshot.nodes,
        stamp,
        changes: None,
    };
    ctx.views.keep(&name, taken);
    if let Some(e) = failed {
        return Err(e);
    }
    let wait = plan.requeue_after.map_or(RESYNC, |d| d.min(RESYNC));
    let wait = paced.map_or(wait, |d| d.min(wait));
    Ok(Requeue::requeue(wait))
}

#[cfg(test)]
mod tests;
