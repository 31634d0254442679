//! The pool reconciler on kube-runtime's `Controller`: caches, triggers, snapshots, and
//! carrying out plans.
//!
//! Watches: pools (the controller's own), BootcNodes (owned by pools), Nodes (mapped to
//! every pool whose selector matches and to the pool owning the node's BootcNode; only
//! label, Ready and `spec.unschedulable` changes pass), and the drainer's completions.
//! Caches keep only what plans read: managed fields, Node images and every Node
//! condition but Ready are stripped.
//!
//! Writes go through an overlay: what a write returned is used instead of the cache
//! until the cache has caught up (by `resourceVersion`), so that a plan never sees the
//! world from before its own last write (a stale cache could otherwise grant a slot
//! twice).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_crds::MANAGED_LABEL;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::drain::{DrainDone, DrainOptions, DrainOutcome, DrainState, Drainer};
use crate::history::{self, Observed, TargetImage};
use crate::metrics::{DrainResult, Metrics, TagResult};
use crate::plan::{
    self, Action, BootcView, DrainView, NodeInfo, NodeView, PoolView, Snapshot, Target,
    TargetProblem,
};
use crate::resolve::{Resolved, Resolver, ResolverOptions, parse_pull_secret, secret_hash};

/// The User-Agent of the controller's requests (for audit logs and request counts).
pub const USER_AGENT: &str = concat!("bootc-pool-controller/", env!("CARGO_PKG_VERSION"));
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "bootc-pool-controller";
/// Re-plan at least this often, even when nothing signals a change.
const RESYNC: Duration = Duration::from_secs(300);
/// Shortest wait after a failed reconcile.
const ERROR_BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest wait after failed reconciles.
const ERROR_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// A clock, injectable for tests.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// What the controller needs besides its client.
#[derive(Clone)]
pub struct Options {
    /// The time source.
    pub clock: Clock,
    /// The name this instance reports in events.
    pub instance: String,
    /// The tag resolver, shared by all pools.
    pub resolver: Resolver,
    /// Where metrics are recorded.
    pub metrics: Metrics,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            clock: Arc::new(Utc::now),
            instance: "bootc-pool-controller".to_owned(),
            resolver: Resolver::new(ResolverOptions::default()),
            metrics: Metrics::new(),
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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

impl Error {
    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Api { .. } => "api",
            Error::CacheGone => "cache",
            Error::Conflict(_) => "conflict",
        }
    }
}

/// What the last write of an object returned, until the cache catches up.
#[derive(Debug, Clone)]
enum Written<K> {
    Object(Arc<K>),
    Deleted,
}

#[derive(Debug)]
struct Overlay<K> {
    entries: HashMap<String, (u64, Written<K>)>,
}

impl<K> Default for Overlay<K> {
    fn default() -> Self {
        Overlay {
            entries: HashMap::new(),
        }
    }
}

fn rv_of<K: Resource>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl<K: Resource + Clone> Overlay<K> {
    fn wrote(&mut self, name: &str, object: K) {
        let rv = rv_of(&object);
        self.entries
            .insert(name.to_owned(), (rv, Written::Object(Arc::new(object))));
    }

    fn deleted(&mut self, name: &str, rv: u64) {
        self.entries.insert(name.to_owned(), (rv, Written::Deleted));
    }

    /// The newer of the cached object and the written one.
    fn pick(&mut self, name: &str, cached: Option<Arc<K>>) -> Option<Arc<K>> {
        let Some((rv, written)) = self.entries.get(name) else {
            return cached;
        };
        let cached_rv = cached.as_deref().map(rv_of);
        match (written, cached_rv) {
            (Written::Object(_), Some(c)) if c >= *rv => {
                self.entries.remove(name);
                cached
            }
            (Written::Deleted, Some(c)) if c > *rv => {
                self.entries.remove(name);
                cached
            }
            (Written::Deleted, None) => {
                self.entries.remove(name);
                None
            }
            (Written::Object(o), _) => Some(Arc::clone(o)),
            (Written::Deleted, _) => None,
        }
    }
}

/// Shared state of the reconciler.
pub struct Context {
    client: Client,
    pools: Store<BootcNodePool>,
    bootc: Store<BootcNode>,
    nodes: Store<Node>,
    drainer: Drainer,
    recorder: Recorder,
    options: Options,
    bootc_overlay: Mutex<Overlay<BootcNode>>,
    node_overlay: Mutex<Overlay<Node>>,
    /// Failed reconciles in a row, by pool (for the backoff).
    failures: Mutex<HashMap<String, u32>>,
    /// By pool: a fingerprint of the members' states and since when it has not changed
    /// (for stall detection; restarts begin a new count).
    progress: Mutex<HashMap<String, (u64, DateTime<Utc>)>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps only what plans read of a Node.
fn strip_node(node: &mut Node) {
    node.managed_fields_mut().clear();
    node.annotations_mut().clear();
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.addresses = None;
        status.capacity = None;
        status.allocatable = None;
        status.daemon_endpoints = None;
        status.config = None;
        status.features = None;
        status.runtime_handlers = None;
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| c.type_ == "Ready");
        }
    }
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = None;
        spec.pod_cidrs = None;
        spec.provider_id = None;
        spec.config_source = None;
    }
}

fn ready_condition(node: &Node) -> Option<&k8s_openapi::api::core::v1::NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
}

fn node_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

fn node_boot_id(node: &Node) -> Option<&str> {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.as_str())
}

fn node_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// What of a Node can change a plan: labels, Ready, unschedulable, and the boot ID (a
/// new one is the kubelet's first report after a full reboot). Heartbeats are left out:
/// they change on every status post.
fn node_fingerprint(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.labels().hash(&mut h);
    node_ready(node).hash(&mut h);
    node_unschedulable(node).hash(&mut h);
    node_boot_id(node).hash(&mut h);
    h.finish()
}

/// The pool named in a BootcNode's controller owner reference.
pub fn owner_pool(bootc: &BootcNode) -> Option<String> {
    bootc
        .owner_references()
        .iter()
        .find(|o| o.kind == "BootcNodePool" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    client: Client,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let pools_api: Api<BootcNodePool> = Api::all(client.clone());
    let bootc_api: Api<BootcNode> = Api::all(client.clone());
    let node_api: Api<Node> = Api::all(client.clone());

    let (bootc_store, bootc_writer) = reflector::store();
    let bootc_stream = reflector::reflector(
        bootc_writer,
        watcher::watcher(bootc_api, watcher::Config::default())
            .default_backoff()
            .modify(|b: &mut BootcNode| b.managed_fields_mut().clear()),
    )
    .touched_objects();

    let (node_store, node_writer) = reflector::store();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let node_stream = reflector::reflector(
        node_writer,
        watcher::watcher(node_api, watcher::Config::default())
            .default_backoff()
            .modify(strip_node),
    )
    .filter_map(move |event| {
        // Only changes a plan can see pass: labels, Ready, unschedulable; and deletions.
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
            Ok(Event::Init | Event::InitDone) => None,
        };
        std::future::ready(out)
    });

    let (done_tx, done_rx) = mpsc::unbounded_channel::<DrainDone>();
    let drained = tokio_stream::wrappers::UnboundedReceiverStream::new(done_rx)
        .map(|done| ObjectRef::<BootcNodePool>::new(&done.pool));

    let controller = Controller::new(pools_api, watcher::Config::default());
    let pool_store = controller.store();
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_owned(),
        instance: Some(options.instance.clone()),
    };
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        drainer: Drainer::new(client.clone(), done_tx),
        client,
        pools: pool_store.clone(),
        bootc: bootc_store.clone(),
        nodes: node_store,
        options,
        bootc_overlay: Mutex::new(Overlay::default()),
        node_overlay: Mutex::new(Overlay::default()),
        failures: Mutex::new(HashMap::new()),
        progress: Mutex::new(HashMap::new()),
    });
    // Secrets: metadata only (names and versions, never content), mapped to the pools
    // that reference them; the content is read when a pool is reconciled.
    let secret_stream = watcher::watcher(
        Api::<kube::core::PartialObjectMeta<Secret>>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    let secret_pools = pool_store.clone();
    let mapper_pools = pool_store;
    let mapper_bootc = bootc_store;
    controller
        .owns_stream(bootc_stream)
        .watches_stream(node_stream, move |node: Node| {
            let mut pools: BTreeSet<String> = mapper_pools
                .state()
                .iter()
                .filter(|p| bootc_crds::selector::matches(&p.spec.node_selector, node.labels()))
                .map(|p| p.name_any())
                .collect();
            if let Some(b) = mapper_bootc.get(&ObjectRef::new(&node.name_any()))
                && let Some(owner) = owner_pool(&b)
            {
                pools.insert(owner);
            }
            pools
                .into_iter()
                .map(|p| ObjectRef::new(&p))
                .collect::<Vec<_>>()
        })
        .watches_stream(
            secret_stream,
            move |secret: kube::core::PartialObjectMeta<Secret>| {
                let (ns, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
                secret_pools
                    .state()
                    .iter()
                    .filter(|p| {
                        p.spec
                            .pull_secret_ref
                            .as_ref()
                            .is_some_and(|r| r.namespace == ns && r.name == name)
                    })
                    .map(|p| ObjectRef::new(&p.name_any()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_on(drained)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((pool, _)) => debug!(pool = %pool.name, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
}

/// The wait before retrying after `failures` failed reconciles in a row: 1 s doubling to
/// 5 minutes.
pub fn error_backoff(failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    ERROR_BACKOFF_MIN
        .saturating_mul(factor)
        .min(ERROR_BACKOFF_MAX)
}

/// Runs the controller only while this replica holds the Lease of `lease`: a standby
/// replica watches nothing and writes nothing but the Lease. Returns after `shutdown`,
/// once the controller has stopped and the Lease is released.
pub async fn run_elected(
    client: Client,
    options: Options,
    lease: crate::leader::LeaseConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), crate::leader::LeaseConfigError> {
    let elector = crate::leader::LeaderElector::new(client.clone(), lease)?
        .with_metrics(options.metrics.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    // The election ends (and releases the Lease) only after the controller has stopped.
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let (mut leader, election) = elector.run(async move {
        let _ = stopped_rx.await;
    });
    // Dropped without a shutdown (the task aborted, the process dying), the election
    // stops where it is, without releasing the Lease: the other replica takes over when
    // it expires, exactly as after a crash.
    let mut election = AbortOnDrop(Some(election));
    let mut stop = stop_rx.clone();
    loop {
        tokio::select! {
            r = leader.wait_for(|l| *l) => if r.is_err() { break },
            _ = stop.wait_for(|s| *s) => break,
        }
        info!("leading: starting the controller");
        // Stop when leadership is lost or on shutdown; a oneshot so the future is Sync.
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
        let (mut l, mut s) = (leader.clone(), stop.clone());
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = l.wait_for(|l| !*l) => {}
                _ = s.wait_for(|s| *s) => {}
            }
            let _ = lost_tx.send(());
        });
        run(client.clone(), options.clone(), async move {
            let _ = lost_rx.await;
        })
        .await;
        watcher.abort();
        info!("the controller stopped");
        if *stop.borrow() {
            break;
        }
    }
    let _ = stopped_tx.send(());
    if let Some(election) = election.0.take() {
        let _ = election.await;
    }
    Ok(())
}

/// Aborts the task when dropped before it was taken out.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

fn error_policy(pool: Arc<BootcNodePool>, error: &Error, ctx: Arc<Context>) -> Requeue {
    let name = pool.name_any();
    match error {
        Error::Conflict(what) => {
            debug!(pool = %name, %what, "conflict; planning again");
            Requeue::requeue(Duration::from_millis(50))
        }
        Error::Api { .. } | Error::CacheGone => {
            let failures = {
                let mut failures = lock(&ctx.failures);
                let n = failures.entry(name.clone()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            };
            let wait = error_backoff(failures);
            warn!(pool = %name, error = %error, failures, retry_in = ?wait, "reconcile failed");
            Requeue::requeue(wait)
        }
    }
}

/// What resolving a pool's target gave.
#[derive(Debug, Clone)]
struct Resolution {
    target: Result<Target, TargetProblem>,
    /// A problem that leaves the last good target in place.
    error: Option<String>,
    /// The target's version label.
    version: Option<String>,
    /// For tags: when the answer was obtained and when it is asked again.
    times: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// The pull Secret's content hash.
    secret_hash: Option<String>,
    /// When to try again after a failure.
    retry_after: Option<Duration>,
}

fn tag_result(kind: &str) -> TagResult {
    match kind {
        "unauthorized" => TagResult::Unauthorized,
        "not_found" => TagResult::NotFound,
        "rate_limited" => TagResult::RateLimited,
        "timeout" => TagResult::Timeout,
        "connection" => TagResult::Connection,
        _ => TagResult::Other,
    }
}

fn secret_name(pool: &BootcNodePool) -> (String, String) {
    pool.spec
        .pull_secret_ref
        .as_ref()
        .map(|r| (r.namespace.clone(), r.name.clone()))
        .unwrap_or_default()
}

impl Context {
    /// Reads the pool's pull Secret: its `.dockerconfigjson` bytes, or why not. The
    /// message names the Secret and never its content.
    async fn pull_secret(&self, pool: &BootcNodePool) -> Option<Result<Vec<u8>, String>> {
        let r = pool.spec.pull_secret_ref.as_ref()?;
        let what = format!("pull Secret {}/{}", r.namespace, r.name);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &r.namespace);
        Some(match api.get_opt(&r.name).await {
            Err(e) => Err(format!("cannot read the {what}: {e}")),
            Ok(None) => Err(format!("the {what} does not exist")),
            Ok(Some(secret)) => match secret
                .data
                .as_ref()
                .and_then(|d| d.get(".dockerconfigjson"))
            {
                Some(bytes) => Ok(bytes.0.clone()),
                None => Err(format!(
                    "the {what} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                )),
            },
        })
    }

    async fn resolve(&self, pool: &BootcNodePool) -> Resolution {
        let mut out = Resolution {
            target: target_of(pool),
            error: None,
            version: None,
            times: None,
            secret_hash: None,
            retry_after: None,
        };
        if matches!(out.target, Err(TargetProblem::InvalidSpec(_))) {
            return out;
        }
        let (ns, name) = secret_name(pool);
        let mut secret_problem = None;
        let credentials = match self.pull_secret(pool).await {
            Some(Ok(bytes)) => {
                out.secret_hash = Some(secret_hash(&bytes));
                match parse_pull_secret(&bytes) {
                    Ok(creds) => Some(creds.with_source(&ns, &name)),
                    Err(e) => {
                        secret_problem = Some(format!("pull Secret {ns}/{name}: {e}"));
                        None
                    }
                }
            }
            Some(Err(message)) => {
                secret_problem = Some(message);
                None
            }
            None => None,
        };
        if let Ok(target) = &out.target {
            // A digest reference: nothing to resolve; a Secret problem is still reported.
            let digest = target.digest.to_string();
            out.error = secret_problem;
            out.version = pool
                .status
                .as_ref()
                .filter(|s| s.target_digest.as_deref() == Some(digest.as_str()))
                .and_then(|s| s.target_version.clone());
            return out;
        }
        let Ok(reference) = bootc_crds::ImageRef::parse(&pool.spec.image.r#ref) else {
            return out;
        };
        let interval = Duration::from_secs(
            u64::try_from(pool.spec.image.resolve_interval_seconds.max(30)).unwrap_or(300),
        );
        let creds = credentials
            .as_ref()
            .and_then(|c| c.for_registry(reference.registry()));
        match self
            .options
            .resolver
            .resolve(&reference, creds.as_ref(), interval)
            .await
        {
            Ok(Resolved {
                image,
                digest,
                version,
                resolved_at,
            }) => {
                let previous = pool
                    .status
                    .as_ref()
                    .and_then(|s| s.last_resolved_time.as_ref())
                    .and_then(bootc_crds::conditions::from_time);
                let resolved_at = bootc_crds::conditions::to_time(resolved_at)
                    .as_ref()
                    .and_then(bootc_crds::conditions::from_time)
                    .unwrap_or(resolved_at);
                if previous != Some(resolved_at) {
                    self.options
                        .metrics
                        .record_tag_resolution(TagResult::Success);
                }
                let next = resolved_at
                    + chrono::Duration::from_std(interval).unwrap_or(chrono::Duration::minutes(5));
                out.target = Ok(Target { image, digest });
                out.version = version;
                out.times = Some((resolved_at, next));
                out.error = secret_problem;
            }
            Err(e) => {
                self.options
                    .metrics
                    .record_tag_resolution(tag_result(e.kind()));
                let message = match &secret_problem {
                    Some(p) => format!("{e} ({p})"),
                    None => e.to_string(),
                };
                let retry = e.retry_after().unwrap_or(interval).min(interval);
                out.retry_after = Some(retry);
                // Keep the last good target of the same repository, and say why it is old.
                let last = pool.status.as_ref().and_then(|s| {
                    let image = s.target_image.as_deref()?;
                    let parsed = bootc_crds::ImageRef::parse(image).ok()?;
                    if parsed.name() != reference.name() {
                        return None;
                    }
                    let target = Target::from_ref(image)?;
                    let last = s
                        .last_resolved_time
                        .as_ref()
                        .and_then(bootc_crds::conditions::from_time)?;
                    Some((target, s.target_version.clone(), last))
                });
                match last {
                    Some((target, version, last)) => {
                        out.target = Ok(target);
                        out.version = version;
                        let next = (self.options.clock)()
                            + chrono::Duration::from_std(retry)
                                .unwrap_or(chrono::Duration::minutes(5));
                        out.times = Some((last, next));
                        out.error = Some(format!(
                            "{message}; still rolling out the last resolved target"
                        ));
                    }
                    None => out.target = Err(TargetProblem::Resolution(message)),
                }
            }
        }
        out
    }
}

/// The pool's target when its reference is pinned, or why there is none (an invalid
/// spec, or a tag, which `Context::resolve` resolves).
pub fn target_of(pool: &BootcNodePool) -> Result<Target, TargetProblem> {
    if let Err(errors) = pool.spec.validate() {
        return Err(TargetProblem::InvalidSpec(
            errors.0.iter().map(ToString::to_string).collect(),
        ));
    }
    Target::from_ref(&pool.spec.image.r#ref).ok_or_else(|| {
        TargetProblem::Resolution(format!(
            "image.ref {:?} is a tag that has not been resolved yet",
            pool.spec.image.r#ref
        ))
    })
}

impl Context {
    fn bootc_of(&self, name: &str) -> Option<Arc<BootcNode>> {
        let cached = self.bootc.get(&ObjectRef::new(name));
        lock(&self.bootc_overlay).pick(name, cached)
    }

    fn node_of(&self, name: &str) -> Option<Arc<Node>> {
        let cached = self.nodes.get(&ObjectRef::new(name));
        lock(&self.node_overlay).pick(name, cached)
    }

    fn snapshot(&self, pool: &BootcNodePool, resolution: &Resolution) -> Snapshot {
        let name = pool.name_any();
        let mut names: BTreeSet<String> = BTreeSet::new();
        for node in self.nodes.state() {
            if bootc_crds::selector::matches(&pool.spec.node_selector, node.labels()) {
                names.insert(node.name_any());
            }
        }
        for b in self.bootc.state() {
            if owner_pool(&b).as_deref() == Some(name.as_str()) {
                names.insert(b.name_any());
            }
        }
        // Objects only the overlay knows of yet (just created, just labelled).
        for n in lock(&self.bootc_overlay).entries.keys() {
            names.insert(n.clone());
        }
        let nodes = names
            .into_iter()
            .filter_map(|n| {
                let node = self.node_of(&n);
                let bootc = self.bootc_of(&n);
                if node.is_none() && bootc.is_none() {
                    return None;
                }
                let owned_or_matching = bootc
                    .as_deref()
                    .is_some_and(|b| owner_pool(b).as_deref() == Some(name.as_str()))
                    || node.as_deref().is_some_and(|node| {
                        bootc_crds::selector::matches(&pool.spec.node_selector, node.labels())
                    });
                owned_or_matching.then(|| NodeView {
                    name: n.clone(),
                    node: node.as_deref().map(|node| NodeInfo {
                        labels: node.labels().clone(),
                        ready: node_ready(node),
                        unschedulable: node_unschedulable(node),
                        boot_id: node_boot_id(node).map(str::to_owned),
                        ready_since: ready_condition(node)
                            .and_then(|c| c.last_transition_time.as_ref())
                            .and_then(bootc_crds::conditions::from_time),
                        heartbeat: ready_condition(node)
                            .and_then(|c| c.last_heartbeat_time.as_ref())
                            .and_then(bootc_crds::conditions::from_time),
                    }),
                    bootc: bootc.as_deref().map(|b| BootcView {
                        owner: owner_pool(b),
                        generation: b.metadata.generation,
                        resource_version: b.metadata.resource_version.clone(),
                        annotations: b.annotations().clone(),
                        spec: b.spec.clone(),
                        status: b.status.clone(),
                        deleting: b.metadata.deletion_timestamp.is_some(),
                    }),
                })
            })
            .collect::<Vec<_>>();
        let drains = nodes
            .iter()
            .filter_map(|v| {
                let state = self.drainer.state(&v.name)?;
                let view = match state {
                    DrainState::Running { pool: p, .. } if p == name => DrainView::Running,
                    DrainState::Finished {
                        pool: p, result, ..
                    } if p == name => match result {
                        Ok(DrainOutcome::Drained { .. }) => DrainView::Drained,
                        Ok(DrainOutcome::TimedOut {
                            waiting_for,
                            last_error,
                        }) => DrainView::TimedOut {
                            message: match last_error {
                                Some(e) => {
                                    format!("{e}; still on the node: {}", waiting_for.join(", "))
                                }
                                None => format!("still on the node: {}", waiting_for.join(", ")),
                            },
                        },
                        Ok(DrainOutcome::Cancelled) => return None,
                        Err(e) => DrainView::TimedOut {
                            message: e.to_string(),
                        },
                    },
                    _ => return None,
                };
                Some((v.name.clone(), view))
            })
            .collect();
        let other_pools = self
            .pools
            .state()
            .iter()
            .filter(|p| p.name_any() != name && p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), p.spec.node_selector.clone()))
            .collect();
        let now = (self.options.clock)();
        Snapshot {
            pool: PoolView {
                name,
                generation: pool.metadata.generation,
                spec: pool.spec.clone(),
                status: pool.status.clone(),
            },
            target: resolution.target.clone(),
            target_error: resolution.error.clone(),
            pull_secret_hash: resolution.secret_hash.clone(),
            other_pools,
            nodes,
            drains,
            window_closed_until: match bootc_crds::window::window_state(
                &pool.spec.rollout.maintenance_windows,
                now,
            ) {
                Ok(bootc_crds::window::WindowState::Closed { next }) => Some(next),
                // Open, none configured, or invalid (which validate() reports).
                _ => None,
            },
            last_progress: None,
            now,
        }
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| match &source {
        kube::Error::Api(s) if s.code == 409 => Error::Conflict(what),
        _ => Error::Api { what, source },
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

async fn reconcile(pool: Arc<BootcNodePool>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    // The controller waits for its pool cache only. A plan from a Node or BootcNode cache
    // that is still filling would take members for leavers (and delete their BootcNodes).
    if ctx.nodes.wait_until_ready().await.is_err() || ctx.bootc.wait_until_ready().await.is_err() {
        return Err(Error::CacheGone);
    }
    let started = std::time::Instant::now();
    let name = pool.name_any();
    let resolution = ctx.resolve(&pool).await;
    let mut snapshot = ctx.snapshot(&pool, &resolution);
    let mut plan = plan::plan(&snapshot);
    // Stall detection: when the members' states moved, the rollout advanced now.
    let fingerprint = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        plan.states.hash(&mut h);
        h.finish()
    };
    let advanced = {
        let mut progress = lock(&ctx.progress);
        let entry = progress
            .entry(name.clone())
            .or_insert((fingerprint, snapshot.now));
        if entry.0 != fingerprint {
            *entry = (fingerprint, snapshot.now);
            true
        } else {
            false
        }
    };
    let last_progress = lock(&ctx.progress).get(&name).map(|e| e.1);
    if advanced || snapshot.last_progress != last_progress {
        snapshot.last_progress = last_progress;
        plan = plan::plan(&snapshot);
    }
    complete_status(&mut plan, &snapshot, &resolution);
    let metrics = &ctx.options.metrics;
    metrics.set_node_states(&name, &plan.states);
    match &snapshot.target {
        Ok(t) => metrics.set_target(
            &name,
            &t.image,
            &t.digest.to_string(),
            resolution.version.as_deref(),
        ),
        Err(_) => metrics.clear_target(&name),
    }
    debug!(pool = %name, actions = plan.actions.len(), "planned");

    // Carry out the actions; a node's first failure stops that node's remaining ones.
    let mut failed_nodes: BTreeSet<String> = BTreeSet::new();
    let mut first_error: Option<Error> = None;
    for action in &plan.actions {
        if let Some(node) = action.node()
            && failed_nodes.contains(node)
        {
            continue;
        }
        if let Err(e) = execute(&ctx, &pool, action).await {
            if let Some(node) = action.node() {
                failed_nodes.insert(node.to_owned());
            }
            if first_error.is_none() {
                first_error = Some(e);
            }
        }
    }

    if pool.status.as_ref() != Some(&plan.status) {
        let api: Api<BootcNodePool> = Api::all(ctx.client.clone());
        let patch = json!({ "status": plan.status });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        api.patch_status(&name, &params, &Patch::Merge(&patch))
            .await
            .map_err(api_error(format!("status of pool {name}")))?;
    }
    metrics.observe_reconcile(&name, started.elapsed());
    if let Some(e) = first_error {
        metrics.record_reconcile_error(&name, e.reason());
        return Err(e);
    }
    lock(&ctx.failures).remove(&name);
    let now = (ctx.options.clock)();
    let next_resolve = resolution.times.map(|(_, next)| {
        (next - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(10)
    });
    let wait = [plan.requeue_after, next_resolve, resolution.retry_after]
        .into_iter()
        .flatten()
        .min()
        .map_or(RESYNC, |d| d.min(RESYNC));
    Ok(Requeue::requeue(wait))
}

/// Adds to the plan's status what the plan does not know: the target's version, the
/// resolution times, and deployHistory.
fn complete_status(plan: &mut plan::Plan, snapshot: &Snapshot, resolution: &Resolution) {
    let status = &mut plan.status;
    if snapshot.target.is_ok() {
        status.target_version = resolution.version.clone();
    }
    if let Some((last, next)) = resolution.times {
        status.last_resolved_time = bootc_crds::conditions::to_time(last);
        status.next_resolve_time = bootc_crds::conditions::to_time(next);
    } else if Target::from_ref(&snapshot.pool.spec.image.r#ref).is_some() {
        status.last_resolved_time = None;
        status.next_resolve_time = None;
    }
    let observed: Vec<Observed> = snapshot
        .nodes
        .iter()
        .filter(|v| plan.states.contains_key(&v.name))
        .filter_map(|v| {
            let booted = v.bootc.as_ref()?.status.as_ref()?.booted.as_ref()?;
            Some(Observed::from_booted(&v.name, booted))
        })
        .collect();
    let target = snapshot.target.as_ref().ok();
    let digest = target.map(|t| t.digest.to_string());
    let limit = usize::try_from(snapshot.pool.spec.history.limit.clamp(1, 20)).unwrap_or(5);
    status.deploy_history = history::merge(
        &status.deploy_history,
        &observed,
        target.map(|t| TargetImage {
            digest: digest.as_deref().unwrap_or_default(),
            image: t.image.as_str(),
            version: resolution.version.as_deref(),
        }),
        limit,
    );
}

async fn execute(ctx: &Context, pool: &BootcNodePool, action: &Action) -> Result<(), Error> {
    let bootc_api: Api<BootcNode> = Api::all(ctx.client.clone());
    let node_api: Api<Node> = Api::all(ctx.client.clone());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let pool_name = pool.name_any();
    match action {
        Action::Create { node, spec } => {
            let mut object = BootcNode::new(node, spec.clone());
            object.metadata.owner_references = pool.controller_owner_ref(&()).map(|o| vec![o]);
            match bootc_api.create(&PostParams::default(), &object).await {
                Ok(created) => {
                    info!(pool = %pool_name, %node, "BootcNode created");
                    lock(&ctx.bootc_overlay).wrote(node, created);
                }
                Err(e) if is_status(&e, 409) => {
                    // Another pool (or an earlier run) made it; the next plan sees it.
                    return Err(Error::Conflict(format!("BootcNode {node}")));
                }
                Err(e) => return Err(api_error(format!("create BootcNode {node}"))(e)),
            }
        }
        Action::Label { node } | Action::Unlabel { node } => {
            let value = matches!(action, Action::Label { .. }).then_some("");
            let patch = json!({"metadata": {"labels": {MANAGED_LABEL: value}}});
            match node_api.patch(node, &params, &Patch::Merge(&patch)).await {
                Ok(updated) => lock(&ctx.node_overlay).wrote(node, updated),
                Err(e) if is_status(&e, 404) => {}
                Err(e) => return Err(api_error(format!("label Node {node}"))(e)),
            }
        }
        Action::Cordon { node } | Action::Uncordon { node } => {
            let cordon = matches!(action, Action::Cordon { .. });
            let patch = json!({"spec": {"unschedulable": if cordon { Some(true) } else { None }}});
            match node_api.patch(node, &params, &Patch::Merge(&patch)).await {
                Ok(updated) => {
                    info!(pool = %pool_name, %node, cordon, "Node {}", if cordon { "cordoned" } else { "uncordoned" });
                    lock(&ctx.node_overlay).wrote(node, updated);
                }
                Err(e) if is_status(&e, 404) && !cordon => {}
                Err(e) => return Err(api_error(format!("cordon Node {node}"))(e)),
            }
        }
        Action::Update {
            node,
            resource_version,
            spec,
            annotations,
        } => {
            let Some(current) = ctx.bootc_of(node) else {
                return Err(Error::Conflict(format!("BootcNode {node}")));
            };
            let mut object = (*current).clone();
            object.metadata.resource_version = resource_version.clone();
            object.spec = spec.clone();
            let map = object.annotations_mut();
            for (key, value) in annotations {
                match value {
                    Some(v) => {
                        map.insert(key.clone(), v.clone());
                    }
                    None => {
                        map.remove(key);
                    }
                }
            }
            object.status = None;
            match bootc_api
                .replace(node, &PostParams::default(), &object)
                .await
            {
                Ok(updated) => lock(&ctx.bootc_overlay).wrote(node, updated),
                Err(e) => return Err(api_error(format!("BootcNode {node}"))(e)),
            }
        }
        Action::StartDrain { node } => {
            ctx.drainer
                .start(&pool_name, node, DrainOptions::from_pool(&pool.spec));
        }
        Action::CancelDrain { node } => ctx.drainer.cancel(node),
        Action::ForgetDrain { node } => {
            if let Some(DrainState::Finished {
                since,
                finished,
                result,
                ..
            }) = ctx.drainer.state(node)
            {
                let outcome = match result {
                    Ok(DrainOutcome::Drained { .. }) => DrainResult::Drained,
                    Ok(DrainOutcome::Cancelled) => DrainResult::Cancelled,
                    _ => DrainResult::TimedOut,
                };
                ctx.options.metrics.observe_drain(
                    &pool_name,
                    outcome,
                    finished.duration_since(since),
                );
            }
            ctx.drainer.forget(node);
        }
        Action::Delete { node } => {
            let rv = ctx.bootc_of(node).as_deref().map(rv_of).unwrap_or(0);
            match bootc_api.delete(node, &DeleteParams::default()).await {
                Ok(_) => {
                    info!(pool = %pool_name, %node, "BootcNode deleted");
                    lock(&ctx.bootc_overlay).deleted(node, rv);
                }
                Err(e) if is_status(&e, 404) => lock(&ctx.bootc_overlay).deleted(node, rv),
                Err(e) => return Err(api_error(format!("delete BootcNode {node}"))(e)),
            }
        }
        Action::Event(event) => {
            let reference = pool.object_ref(&());
            let ev = KubeEvent {
                type_: if event.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: event.reason.to_owned(),
                note: Some(event.message.clone()),
                action: event.reason.to_owned(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
                // Events are best effort; the status carries the same facts.
                warn!(pool = %pool_name, error = %e, reason = event.reason, "cannot record an event");
            }
            info!(pool = %pool_name, reason = event.reason, "{}", event.message);
            if event.reason == plan::events::REBOOT_APPROVED {
                ctx.options.metrics.record_reboot_approved(&pool_name);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_backoff_doubles_from_a_second_to_five_minutes() {
        let waits: Vec<u64> = (1..=11).map(|n| error_backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(error_backoff(u32::MAX), ERROR_BACKOFF_MAX);
    }
}
