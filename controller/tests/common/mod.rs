//! What the controller's end-to-end tests share: running the controller in-process,
//! waiting on a pool, reading conditions.

// Each test file uses its own part of these helpers.
#![allow(dead_code)]

use std::time::Duration;

use std::collections::BTreeSet;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::reconcile::{self, Dependencies};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a test waits for a pool to reach a state.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// `sha256:` and 64 times `c`.
pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// A client as the binary builds it: no retry of 429 by the client, and a User-Agent.
pub fn client_as(emulator: &Emulator, agent: &'static str) -> Client {
    let mut config = emulator.config();
    config.default_retry = false;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(agent),
    ));
    Client::try_from(config).unwrap()
}

/// Sends the controller's logs (at `RUST_LOG`, or `warn`) to the test's output.
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Starts a replica of the controller as `agent`, planning only while it holds `lease`;
/// it runs until the test drops or aborts the task.
pub fn start_elected(
    emulator: &Emulator,
    agent: &'static str,
    lease: bootc_pool_controller::leader::LeaseConfig,
) -> JoinHandle<()> {
    let client = client_as(emulator, agent);
    tokio::spawn(async move {
        reconcile::run_elected(
            client,
            Dependencies::default(),
            lease,
            std::future::pending(),
        )
        .await
        .unwrap();
    })
}

/// The controller running in-process.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// Starts the controller against `emulator` with `deps`.
pub fn start(emulator: &Emulator, deps: Dependencies) -> Running {
    let client = client_as(emulator, reconcile::USER_AGENT);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(reconcile::run(client, deps, async move {
        let _ = stopped.await;
    }));
    Running {
        stop: Some(stop),
        task,
    }
}

impl Running {
    /// Stops it as on SIGTERM and waits.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), &mut self.task).await;
        self.task.abort();
    }

    /// Kills it: the task is dropped where it stands.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A condition of the pool: (status, reason, message).
pub fn condition(pool: &BootcNodePool, type_: &str) -> Option<(String, String, String)> {
    pool.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// `UpToDate=AllUpdated` with `nodes` members, all updated.
pub fn all_updated(p: &BootcNodePool, nodes: i32) -> bool {
    condition(p, "UpToDate").is_some_and(|c| c.1 == "AllUpdated")
        && p.status
            .as_ref()
            .is_some_and(|s| s.updated_count == nodes && s.node_count == nodes)
}

/// Waits until `check` holds for pool `name`; on timeout, fails with its status and
/// every BootcNode.
pub async fn wait_pool(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&BootcNodePool) -> bool,
) -> BootcNodePool {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let deadline = Instant::now() + DEADLINE;
    loop {
        let p = pools.get(name).await.unwrap();
        if check(&p) {
            return p;
        }
        if Instant::now() >= deadline {
            let bootc: Api<BootcNode> = Api::all(client.clone());
            let nodes: Vec<_> = bootc
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|b| (b.name_any(), b.metadata.annotations, b.spec, b.status))
                .collect();
            panic!(
                "timed out waiting for {what}; pool status {:#?}; BootcNodes {nodes:#?}",
                p.status
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until `check` gives a value.
pub async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Creates `pool`, as an admin's `kubectl create` would.
pub async fn create_pool(client: &Client, pool: &BootcNodePool) {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .create(&kube::api::PostParams::default(), pool)
        .await
        .unwrap();
}

/// Merges `patch` into pool `name`, as an admin's edit would.
pub async fn patch_pool(client: &Client, name: &str, patch: serde_json::Value) {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until `staged` nodes of the paused pool `workers` are staged, then resumes it.
pub async fn resume_when_staged(client: &Client, staged: i32) {
    wait_pool(client, "workers", &format!("{staged} staged"), |p| {
        p.status.as_ref().is_some_and(|s| s.staged_count == staged)
    })
    .await;
    patch_pool(
        client,
        "workers",
        json!({"spec": {"rollout": {"paused": false}}}),
    )
    .await;
}

/// The reasons and notes of the Events (events.k8s.io) recorded so far: all of them, or
/// those regarding an object of kind `regarding`.
pub async fn recorded_events(client: &Client, regarding: Option<&str>) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            regarding.is_none() || e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == regarding
        })
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Makes the controller plan pool `name` again now, by touching an annotation.
pub async fn nudge(client: &Client, name: &str, n: u32) {
    let nudge = json!({"metadata": {"annotations": {"test/nudge": n.to_string()}}});
    patch_pool(client, name, nudge).await;
}

/// A pool named `workers` targeting `image` on the `role: worker` nodes, with `rollout`.
pub fn workers_pool(image: &str, rollout: serde_json::Value) -> BootcNodePool {
    workers_pool_spec(json!({"image": {"ref": image}, "rollout": rollout}))
}

/// A pool named `workers` on the `role: worker` nodes, with the rest of its spec (image,
/// rollout, health, …) from `spec`.
pub fn workers_pool_spec(mut spec: serde_json::Value) -> BootcNodePool {
    spec["nodeSelector"] = json!({"matchLabels": {"role": "worker"}});
    serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "workers"},
        "spec": spec,
    }))
    .unwrap()
}

/// Simulated nodes labelled `role: worker`, booted on v1, behaving as `behaviour`, with
/// v1 and v2 of `registry.test/os` in their catalog: the cluster, v1 and v2.
pub async fn workers_cluster(
    emulator: &Emulator,
    nodes: &[&str],
    behaviour: host_sim::memory::Behaviour,
) -> (host_sim::cluster::SimCluster, String, String) {
    let catalog = host_sim::memory::Catalog::new();
    let [v1, v2] = catalog.push_versions("registry.test/os", [Some("k1"), Some("k2")]);
    let cluster = host_sim::cluster::SimCluster::start(emulator.config(), catalog)
        .await
        .unwrap();
    let options = host_sim::cluster::SimOptions {
        behaviour,
        node_labels: [("role".to_owned(), "worker".to_owned())].into(),
        ..host_sim::cluster::SimOptions::default()
    };
    for n in nodes {
        cluster.add_node(n, &v1, &options).await.unwrap();
    }
    (cluster, v1, v2)
}

/// A rollout under test: the emulator, a client of it, simulated `role: worker` nodes on
/// v1 with v2 in their catalog ([`workers_cluster`]), the availability checker and the
/// controller.
pub struct Rollout {
    pub emulator: Emulator,
    pub client: Client,
    pub cluster: host_sim::cluster::SimCluster,
    pub v1: String,
    pub v2: String,
    pub invariants: host_sim::cluster::Invariants,
    pub controller: Running,
}

impl Rollout {
    /// Nodes `names`, checked against `budget` unavailable nodes besides the `cordoned`
    /// ones, and the controller with its default dependencies.
    pub async fn start(names: &[&str], budget: usize, cordoned: BTreeSet<String>) -> Rollout {
        let emulator = Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let (cluster, v1, v2) = workers_cluster(&emulator, names, Default::default()).await;
        let invariants = host_sim::cluster::Invariants::follow(emulator.handle(), budget, cordoned);
        let controller = start(&emulator, Dependencies::default());
        Rollout {
            emulator,
            client,
            cluster,
            v1,
            v2,
            invariants,
            controller,
        }
    }
}

/// The digest the simulated host `node` runs.
pub fn booted(cluster: &host_sim::cluster::SimCluster, node: &str) -> String {
    cluster
        .host(node)
        .unwrap()
        .state()
        .booted
        .unwrap()
        .info
        .digest
}

/// The BootcNodes holding a reboot slot now.
pub async fn slot_holders(client: &Client) -> BTreeSet<String> {
    let api: Api<BootcNode> = Api::all(client.clone());
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| b.annotations().contains_key(REBOOT_SLOT_ANNOTATION))
        .map(|b| b.name_any())
        .collect()
}

/// Cordons (`true`) or uncordons `node`, as an admin would.
pub async fn set_unschedulable(client: &Client, node: &str, value: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": value}})),
        )
        .await
        .unwrap();
}

/// The install's namespace (the controller's own, by default): where pull and webhook
/// Secrets may be read, and where the pull Secrets' copies are kept.
pub const INSTALL_NAMESPACE: &str = "bootc-system";

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.unwrap().is_some() {
        return;
    }
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match api.create(&kube::api::PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Successful reconciles of pool `pool` counted in `metrics`.
pub fn reconciles(metrics: &bootc_pool_controller::metrics::Metrics, pool: &str) -> u64 {
    let prefix = format!(r#"bootc_pool_reconciles_total{{pool="{pool}",outcome="ok"}} "#);
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A negative check held over counted plans, not over time: `bad` (which says what went
/// wrong, or `None`) is asked on every poll until pool `pool` has been reconciled `n`
/// more times (counted in `metrics`), and once more after. The pool is touched after each
/// counted reconcile, so the next one comes at once rather than at a requeue.
pub async fn never_over_reconciles(
    client: &Client,
    metrics: &bootc_pool_controller::metrics::Metrics,
    (pool, n): (&str, u64),
    what: &str,
    bad: impl AsyncFnMut() -> Option<String>,
) {
    let poke_pool = async || poke(client, pool).await;
    never_over_reconciles_poking(metrics, (pool, n), what, poke_pool, bad).await;
}

/// [`never_over_reconciles`], each next reconcile brought by `poke` rather than by a
/// change of the pool.
pub async fn never_over_reconciles_poking(
    metrics: &bootc_pool_controller::metrics::Metrics,
    (pool, n): (&str, u64),
    what: &str,
    mut poke: impl AsyncFnMut(),
    mut bad: impl AsyncFnMut() -> Option<String>,
) {
    let start = reconciles(metrics, pool);
    let deadline = Instant::now() + DEADLINE;
    let mut poked = None;
    loop {
        if let Some(why) = bad().await {
            panic!("{what}: {why}");
        }
        let done = reconciles(metrics, pool).saturating_sub(start);
        if done > n {
            break;
        }
        if poked != Some(done) {
            poked = Some(done);
            poke().await;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: only {done} of {n} reconciles of {pool} came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Touches an annotation of pool `name` to a value never used before: a reconcile.
pub async fn poke(client: &Client, name: &str) {
    static POKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = POKES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let poke = json!({"metadata": {"annotations": {"test/poke": n.to_string()}}});
    patch_pool(client, name, poke).await;
}

/// Touches an annotation of BootcNode `name` to a value never used before: a reconcile
/// of its pool that no change of the pool brings.
pub async fn poke_bootc(client: &Client, name: &str) {
    static POKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = POKES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let poke = json!({"metadata": {"annotations": {"test/poke": n.to_string()}}});
    let api: Api<BootcNode> = Api::all(client.clone());
    api.patch(name, &PatchParams::default(), &Patch::Merge(&poke))
        .await
        .unwrap();
}

/// A stored change and when the recorder received it.
pub type Timed = (Instant, std::sync::Arc<kube_emulator::Event>);

/// Every stored change from its start, in resourceVersion order, kept by a task that
/// reads the emulator's event stream as it comes (a continuous property is checked on
/// all of them, not on samples), with the instant each was received.
pub struct Recorder {
    seen: std::sync::Arc<std::sync::Mutex<Vec<Timed>>>,
    missed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    handle: kube_emulator::Handle,
    start: u64,
    task: JoinHandle<()>,
}

impl Recorder {
    /// Starts recording every change stored from now on.
    pub fn start(emulator: &Emulator) -> Recorder {
        let handle = emulator.handle();
        let mut events = handle.events();
        let start = handle.resource_version();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let missed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (sink, lost) = (seen.clone(), missed.clone());
        let task = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(e) => sink.lock().unwrap().push((Instant::now(), e)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        lost.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Recorder {
            seen,
            missed,
            handle,
            start,
            task,
        }
    }

    /// Every change stored so far, once all of them have been read; panics when one
    /// was missed or the reader stopped.
    pub async fn all(&self) -> Vec<std::sync::Arc<kube_emulator::Event>> {
        self.all_timed().await.into_iter().map(|(_, e)| e).collect()
    }

    /// [`Recorder::all`], each change with the instant it was received.
    pub async fn all_timed(&self) -> Vec<Timed> {
        let target = self.handle.resource_version();
        wait_for("the recorder to read every change", async || {
            let seen = self.seen.lock().unwrap();
            assert!(!self.task.is_finished(), "the recorder stopped");
            (target <= self.start || seen.last().is_some_and(|(_, e)| e.rv >= target))
                .then(|| seen.clone())
        })
        .await;
        let missed = self.missed.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(missed, 0, "the recorder missed {missed} changes");
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The controller binary run as its own process, stopped by its PID when dropped.
pub struct ControllerProcess(pub std::process::Child);

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        // Our own child, by its PID.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a controller process needs of the API: the emulator with the CRDs (through an
/// empty simulated cluster, kept alive by the caller) and the install's namespace, and a
/// kubeconfig for it written in `dir`.
pub struct ProcessApi {
    pub emulator: Emulator,
    pub client: kube::Client,
    pub kubeconfig: std::path::PathBuf,
    _cluster: host_sim::cluster::SimCluster,
}

pub async fn api_for_a_process(dir: &std::path::Path) -> ProcessApi {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    // The CRDs, and no nodes.
    let (cluster, _, _) = workers_cluster(&emulator, &[], Default::default()).await;
    ensure_namespace(&client, "bootc-system").await;
    let kubeconfig = dir.join("kubeconfig");
    emulator.write_kubeconfig(&kubeconfig).unwrap();
    ProcessApi {
        emulator,
        client,
        kubeconfig,
        _cluster: cluster,
    }
}
