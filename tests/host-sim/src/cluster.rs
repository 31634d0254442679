//! A simulated cluster of in-process nodes, for controller tests and the benchmark.
//!
//! [`SimCluster`] drives an API server (normally the in-process emulator) the way a
//! cluster's nodes would: for every node it keeps a Node object, a [`MemoryHost`], the
//! kubelet's part (the Node's `Ready` condition follows the host: `False` as soon as the
//! host goes down, `True` a configurable delay after it is up again) and a supervised
//! agent (the real run loop of `bootc_node_agent`, started again whenever it loses the
//! host or is killed, as a DaemonSet would). Pods can be bound to nodes for drain tests.
//!
//! [`Invariants`] follows the emulator's stream of every stored change and checks, after
//! each change of a Node or a BootcNode, that no more nodes are unavailable than the
//! rollout's budget allows.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_node_agent::host::Host as _;
use bootc_node_agent::run::{self, Options, RunError};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Node as KubeNode, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use crate::error::{Result, SimError};
use crate::kubelet::{boot_id_with_dashes, set_ready};
use crate::memory::{Behaviour, Catalog, MemoryHost};

/// The CRDs the cluster serves, as `crds/` holds them.
const CRDS: [(&str, &str); 2] = [
    (
        "bootcnodepools",
        include_str!("../../../crds/node.bootc.dev_bootcnodepools.yaml"),
    ),
    (
        "bootcnodes",
        include_str!("../../../crds/node.bootc.dev_bootcnodes.yaml"),
    ),
];

/// How long a supervisor waits before restarting an agent that failed for another
/// reason than a lost host (a DaemonSet's restart backoff, shortened).
const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// How long an agent may run on once its host went down before it is killed.
const DOWN_GRACE: Duration = Duration::from_millis(100);
/// How long the kubelet part waits before retrying a failed write.
const KUBELET_RETRY: Duration = Duration::from_millis(100);
/// How long a stopping agent may take to end on its own before it is aborted.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How every node of a [`SimCluster`] behaves.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The host's timings and failures (stage and reboot times).
    pub behaviour: Behaviour,
    /// Once the host is up again after a reboot, how long until the kubelet marks the
    /// Node `Ready` again.
    pub ready_delay: Duration,
    /// The agents' poll interval.
    pub poll_interval: Duration,
    /// Labels every node gets (e.g. `role=worker`), besides `kubernetes.io/hostname` and
    /// `kubernetes.io/os`.
    pub node_labels: BTreeMap<String, String>,
}

impl Default for SimOptions {
    /// The quick timings of the tests: stage 50 ms, reboot 200 ms, Ready 100 ms after,
    /// poll every 5 s, no extra labels.
    fn default() -> Self {
        Self {
            behaviour: Behaviour::default(),
            ready_delay: Duration::from_millis(100),
            poll_interval: Duration::from_secs(5),
            node_labels: BTreeMap::new(),
        }
    }
}

/// Who owns a pod made with [`SimCluster::add_pod`]. Owners are created in the pod's
/// namespace when missing, so that garbage collection keeps the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodOwner {
    /// A ReplicaSet of this name (drained by eviction).
    ReplicaSet(String),
    /// A DaemonSet of this name (skipped by drains).
    DaemonSet(String),
    /// No controller (a drain evicts it only when forced).
    None,
}

/// One node's moving parts.
#[derive(Debug)]
struct SimNode {
    host: MemoryHost,
    stop: watch::Sender<bool>,
    /// The running agent's task, if any (none while the host is down).
    agent: Arc<Mutex<Option<AbortHandle>>>,
    /// How many agents were started on this node.
    starts: Arc<AtomicU32>,
    supervisor: JoinHandle<()>,
    kubelet: JoinHandle<()>,
}

impl SimNode {
    /// Stops the agent (through its shutdown signal, aborted if it does not end in time)
    /// and the kubelet part.
    async fn stop(self) {
        let _ = self.stop.send(true);
        self.kubelet.abort();
        let abort = self.supervisor.abort_handle();
        if tokio::time::timeout(STOP_WAIT, self.supervisor)
            .await
            .is_err()
        {
            tracing::warn!("host-sim cluster: an agent did not stop in time; aborted");
            abort.abort();
            if let Some(agent) = lock(&self.agent).take() {
                agent.abort();
            }
        }
        let _ = self.kubelet.await;
    }
}

/// A simulated cluster: Node objects, in-process hosts, kubelets and supervised agents
/// against one API server, with a shared image [`Catalog`].
///
/// Dropping it ends every agent (their shutdown signal fires) and leaves the kubelet
/// parts to end with the runtime; [`SimCluster::stop`] ends everything and waits.
pub struct SimCluster {
    client: Client,
    agent_client: Client,
    catalog: Arc<Catalog>,
    nodes: Mutex<BTreeMap<String, SimNode>>,
}

impl fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimCluster")
            .field("catalog", &self.catalog)
            .field("nodes", &*lock(&self.nodes))
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The User-Agent of the simulated kubelets' and the cluster set-up's requests.
pub const USER_AGENT: &str = "host-sim";

/// A client for `config` whose requests carry `user_agent`.
fn client_as(config: &kube::Config, user_agent: &'static str) -> Result<Client> {
    let mut config = config.clone();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(user_agent),
    ));
    Client::try_from(config).map_err(kube_error("make a client"))
}

fn kube_error(call: &'static str) -> impl FnOnce(kube::Error) -> SimError {
    move |source| SimError::Kube { call, source }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(e) if e.code == code)
}

impl SimCluster {
    /// A cluster on the API server `config` points at, with the project's CRDs
    /// (`crds/node.bootc.dev_*.yaml`) registered (already registered ones are kept) and
    /// `catalog` as every host's registry.
    ///
    /// The agents' requests carry the agent's User-Agent (`run::USER_AGENT`), as the
    /// binary's do, and the kubelets' and the set-up's carry [`USER_AGENT`], so a request
    /// log tells them apart (the RBAC audit holds the agents' to the agent's role).
    pub async fn start(config: kube::Config, catalog: Arc<Catalog>) -> Result<Self> {
        let client = client_as(&config, USER_AGENT)?;
        let agent_client = client_as(&config, run::USER_AGENT)?;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for (plural, yaml) in CRDS {
            let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).map_err(|e| {
                SimError::InvalidOptions(format!("crds/node.bootc.dev_{plural}.yaml: {e}"))
            })?;
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {}
                Err(source) => {
                    return Err(SimError::Kube {
                        call: "create CustomResourceDefinition",
                        source,
                    });
                }
            }
        }
        Ok(Self {
            client,
            agent_client,
            catalog,
            nodes: Mutex::new(BTreeMap::new()),
        })
    }

    /// The client the cluster's kubelets and set-up use (the agents have their own).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The image catalog every host pulls from.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The names of the nodes, sorted.
    pub fn nodes(&self) -> Vec<String> {
        lock(&self.nodes).keys().cloned().collect()
    }

    /// Adds node `name` booted on `image` (a pin the catalog holds): creates its Node
    /// object (`options.node_labels`, `Ready=True`, `status.nodeInfo.bootID`), an
    /// in-process host, the kubelet's part and a supervised agent. Returns the host
    /// (a clone shares it), for failure injection and counters.
    pub async fn add_node(
        &self,
        name: &str,
        image: &str,
        options: &SimOptions,
    ) -> Result<MemoryHost> {
        if lock(&self.nodes).contains_key(name) {
            return Err(SimError::InvalidOptions(format!(
                "node `{name}` is already in the cluster"
            )));
        }
        let host = MemoryHost::new(self.catalog.clone(), image, options.behaviour.clone())
            .map_err(SimError::InvalidOptions)?;
        let nodes: Api<KubeNode> = Api::all(self.client.clone());
        let node = node_object(name, &host.boot_id(), &options.node_labels)?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .map_err(kube_error("create Node"))?;

        let (stop, stopped) = watch::channel(false);
        let agent = Arc::new(Mutex::new(None));
        let starts = Arc::new(AtomicU32::new(0));
        let supervisor = tokio::spawn(supervise(
            self.agent_client.clone(),
            host.clone(),
            Options {
                node_name: name.to_owned(),
                poll_interval: options.poll_interval,
                agent_version: "host-sim".to_owned(),
            },
            stopped.clone(),
            agent.clone(),
            starts.clone(),
        ));
        let kubelet = tokio::spawn(kubelet(
            nodes,
            name.to_owned(),
            host.clone(),
            options.ready_delay,
            stopped,
        ));
        let sim = SimNode {
            host: host.clone(),
            stop,
            agent,
            starts,
            supervisor,
            kubelet,
        };
        let previous = lock(&self.nodes).insert(name.to_owned(), sim);
        if let Some(previous) = previous {
            // Added twice at once: keep the newer one.
            previous.stop().await;
        }
        Ok(host)
    }

    /// The host of node `name` (a clone shares it).
    pub fn host(&self, name: &str) -> Option<MemoryHost> {
        lock(&self.nodes).get(name).map(|n| n.host.clone())
    }

    /// How many agents were started on node `name` so far: one at first, one more after
    /// every reboot and every [`SimCluster::kill_agent`].
    pub fn agent_starts(&self, name: &str) -> Option<u32> {
        lock(&self.nodes)
            .get(name)
            .map(|n| n.starts.load(Ordering::SeqCst))
    }

    /// Whether an agent is running on node `name` now (none while its host is down).
    pub fn agent_running(&self, name: &str) -> bool {
        lock(&self.nodes)
            .get(name)
            .is_some_and(|n| lock(&n.agent).as_ref().is_some_and(|a| !a.is_finished()))
    }

    /// Removes node `name`: stops its agent and kubelet, deletes the pods bound to it (as
    /// the pod garbage collector does) and its Node object. Its BootcNode is left to the
    /// controller. Removing an unknown node only deletes its Node object, if any.
    pub async fn remove_node(&self, name: &str) -> Result<()> {
        let node = lock(&self.nodes).remove(name);
        if let Some(node) = node {
            node.stop().await;
        }
        let pods: Api<Pod> = Api::all(self.client.clone());
        let bound = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
            .await
            .map_err(kube_error("list Pods"))?;
        for pod in bound {
            let Some(namespace) = pod.namespace() else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            match api.delete(&pod.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(source) => {
                    return Err(SimError::Kube {
                        call: "delete Pod",
                        source,
                    });
                }
            }
        }
        let nodes: Api<KubeNode> = Api::all(self.client.clone());
        match nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(source) => Err(SimError::Kube {
                call: "delete Node",
                source,
            }),
        }
    }

    /// Kills node `name`'s agent (its task is aborted, like a SIGKILL: whatever it was
    /// doing on the host keeps going); the supervisor starts a new one. Returns whether an
    /// agent was running.
    pub async fn kill_agent(&self, name: &str) -> bool {
        let handle = lock(&self.nodes)
            .get(name)
            .and_then(|n| lock(&n.agent).clone());
        match handle {
            Some(agent) if !agent.is_finished() => {
                agent.abort();
                true
            }
            _ => false,
        }
    }

    /// Binds a pod `namespace/name` with `labels` to node `node` (`spec.nodeName`),
    /// `Running` and `Ready`, owned by `owner` (created when missing). The namespace is
    /// created when missing. Evicted pods are not recreated.
    pub async fn add_pod(
        &self,
        node: &str,
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        owner: PodOwner,
    ) -> Result<Pod> {
        self.ensure_namespace(namespace).await?;
        let owner_reference = match &owner {
            PodOwner::ReplicaSet(owner) => {
                let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
                Some(ensure_owner(&api, namespace, owner, &labels).await?)
            }
            PodOwner::DaemonSet(owner) => {
                let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
                Some(ensure_owner(&api, namespace, owner, &labels).await?)
            }
            PodOwner::None => None,
        };
        let mut metadata = json!({"name": name, "namespace": namespace, "labels": labels});
        if let Some(reference) = owner_reference {
            metadata["ownerReferences"] = json!([reference]);
        }
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "nodeName": node,
                "containers": [{"name": "app", "image": "registry.test/app:1"}],
            },
        }))
        .map_err(|e| SimError::InvalidOptions(format!("Pod object: {e}")))?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), &pod)
            .await
            .map_err(kube_error("create Pod"))?;
        let status = json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(kube_error("patch Pod status"))
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if api
            .get_opt(namespace)
            .await
            .map_err(kube_error("get Namespace"))?
            .is_some()
        {
            return Ok(());
        }
        let object: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        }))
        .map_err(|e| SimError::InvalidOptions(format!("Namespace object: {e}")))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(source) => Err(SimError::Kube {
                call: "create Namespace",
                source,
            }),
        }
    }

    /// Stops every agent and kubelet and waits for them. The Node objects stay.
    pub async fn stop(self) {
        let nodes = std::mem::take(&mut *lock(&self.nodes));
        // Signal every node first, so that they all wind down at once.
        for node in nodes.values() {
            let _ = node.stop.send(true);
        }
        for node in nodes.into_values() {
            node.stop().await;
        }
    }
}

/// A Node as a kubelet registers it: labels, `Ready=True` and the boot ID.
fn node_object(
    name: &str,
    boot_id: &str,
    extra_labels: &BTreeMap<String, String>,
) -> Result<KubeNode> {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), name.to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
    ]);
    labels.extend(extra_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "architecture": std::env::consts::ARCH,
                "operatingSystem": "linux",
                "osImage": "host-sim in-process node",
                "kernelVersion": "",
                "containerRuntimeVersion": "",
                "kubeletVersion": "host-sim",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": boot_id_with_dashes(boot_id),
            },
        },
    }))
    .map_err(|e| SimError::InvalidOptions(format!("Node object: {e}")))
}

/// The owner reference to the workload `name` of kind `K` in `namespace`, created (one
/// replica, selecting `labels`) when missing.
async fn ensure_owner<K>(
    api: &Api<K>,
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Value>
where
    K: Resource<DynamicType = ()>
        + Clone
        + fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let existing = api.get_opt(name).await.map_err(kube_error("get owner"))?;
    let object = match existing {
        Some(object) => object,
        None => {
            let object: K = serde_json::from_value(json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "registry.test/app:1"}]},
                    },
                },
            }))
            .map_err(|e| SimError::InvalidOptions(format!("{} object: {e}", K::kind(&()))))?;
            match api.create(&PostParams::default(), &object).await {
                Ok(object) => object,
                Err(e) if is_status(&e, 409) => {
                    api.get(name).await.map_err(kube_error("get owner"))?
                }
                Err(source) => {
                    return Err(SimError::Kube {
                        call: "create owner",
                        source,
                    });
                }
            }
        }
    };
    Ok(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": name,
        "uid": object.meta().uid.clone().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }))
}

/// Whether the node was told to stop (or its cluster is gone).
fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// Waits until the host is up; false when told to stop first.
async fn wait_up(host: &MemoryHost, stop: &mut watch::Receiver<bool>) -> bool {
    let mut boots = host.boots();
    loop {
        if stopped(stop) {
            return false;
        }
        if host.is_up() {
            return true;
        }
        tokio::select! {
            changed = boots.changed() => {
                if changed.is_err() {
                    // Cannot happen while the host lives; poll instead.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            _ = stop.changed() => {}
        }
    }
}

/// Returns when the host's current boot ends (the channel of this boot closes).
async fn host_down(changes: &mut watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {}
}

/// Plays the DaemonSet: runs the agent whenever the host is up, ends it when the host
/// goes down (if it does not end by itself), and starts a new one once the host is up
/// again, and after it is killed or fails.
async fn supervise(
    client: Client,
    host: MemoryHost,
    options: Options,
    mut stop: watch::Receiver<bool>,
    slot: Arc<Mutex<Option<AbortHandle>>>,
    starts: Arc<AtomicU32>,
) {
    let node = options.node_name.clone();
    loop {
        if !wait_up(&host, &mut stop).await {
            return;
        }
        // Subscribed before looking at the host: a reboot from now on closes this.
        let mut changes = host.changes();
        if !host.is_up() {
            continue;
        }
        starts.fetch_add(1, Ordering::SeqCst);
        let mut shutdown_rx = stop.clone();
        let shutdown = async move {
            let _ = shutdown_rx.wait_for(|s| *s).await;
        };
        let mut task = tokio::spawn(run::run(
            client.clone(),
            Arc::new(host.clone()),
            options.clone(),
            shutdown,
        ));
        *lock(&slot) = Some(task.abort_handle());
        let result = tokio::select! {
            result = &mut task => result,
            () = host_down(&mut changes) => {
                // The agent normally notices by itself (HostLost); a reboot ends its
                // process anyway, so one that does not is killed after a grace period.
                match tokio::time::timeout(DOWN_GRACE, &mut task).await {
                    Ok(result) => result,
                    Err(_) => {
                        task.abort();
                        (&mut task).await
                    }
                }
            }
        };
        *lock(&slot) = None;
        if stopped(&stop) {
            return;
        }
        match result {
            Ok(Err(RunError::HostLost)) => {
                tracing::debug!(%node, "host-sim cluster: agent lost its host");
            }
            Err(e) if e.is_cancelled() => {
                tracing::debug!(%node, "host-sim cluster: agent killed");
            }
            Ok(Ok(())) => {
                tracing::warn!(%node, "host-sim cluster: agent returned without being stopped");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(%node, error = %e, "host-sim cluster: agent stopped");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
            Err(e) => {
                tracing::warn!(%node, error = %e, "host-sim cluster: agent panicked");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
        }
    }
}

/// Writes the Node's readiness until it succeeds; false when told to stop first.
async fn write_ready(
    api: &Api<KubeNode>,
    name: &str,
    ready: bool,
    boot_id: Option<&str>,
    stop: &watch::Receiver<bool>,
) -> bool {
    loop {
        if stopped(stop) {
            return false;
        }
        match set_ready(api, name, ready, boot_id).await {
            Ok(()) => return true,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "host-sim cluster: cannot write the Node");
                tokio::time::sleep(KUBELET_RETRY).await;
            }
        }
    }
}

/// The kubelet's part: `Ready=False` as soon as the host goes down, `Ready=True` (with
/// the new boot ID) `ready_delay` after it is up again. The Node starts `Ready`.
async fn kubelet(
    api: Api<KubeNode>,
    name: String,
    host: MemoryHost,
    ready_delay: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut ready = true;
    loop {
        // Subscribed before looking at the host: a reboot from now on closes this.
        let mut changes = host.changes();
        if host.is_up() {
            if !ready {
                let mut stop_rx = stop.clone();
                tokio::select! {
                    () = tokio::time::sleep(ready_delay) => {}
                    _ = stop_rx.wait_for(|s| *s) => return,
                }
                if changes.has_changed().is_err() || !host.is_up() {
                    // Down again meanwhile: Ready only after a full delay of this boot.
                    continue;
                }
                if !write_ready(&api, &name, true, Some(&host.boot_id()), &stop).await {
                    return;
                }
                ready = true;
            }
            // Until the host goes down.
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    _ = stop.changed() => if stopped(&stop) { return },
                }
            }
        }
        if ready {
            if !write_ready(&api, &name, false, None, &stop).await {
                return;
            }
            ready = false;
        }
        if !wait_up(&host, &mut stop).await {
            return;
        }
    }
}

/// What the invariant checker knows of one Node.
#[derive(Debug, Clone, Copy, Default)]
struct NodeFacts {
    rv: u64,
    unschedulable: bool,
    /// The `Ready` condition: `None` when the Node has none yet.
    ready: Option<bool>,
}

/// What the invariant checker knows of one BootcNode.
#[derive(Debug, Clone, Copy, Default)]
struct SlotFacts {
    rv: u64,
    slot: bool,
}

#[derive(Debug, Default)]
struct Tracker {
    budget: usize,
    admin_cordoned: BTreeSet<String>,
    nodes: BTreeMap<String, NodeFacts>,
    bootc_nodes: BTreeMap<String, SlotFacts>,
    /// The newest resourceVersion whose event was handled (or that the start covers).
    processed_rv: u64,
    events: u64,
    max_unavailable_seen: usize,
    last: BTreeSet<String>,
    violations: Vec<String>,
    reboots: BTreeMap<String, u32>,
}

fn object_rv(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn object_name(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn node_facts(object: &Value, rv: u64) -> NodeFacts {
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    NodeFacts {
        rv,
        unschedulable: object
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ready,
    }
}

fn slot_facts(object: &Value, rv: u64) -> SlotFacts {
    SlotFacts {
        rv,
        slot: object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION)),
    }
}

const BOOTC_GROUP: &str = "node.bootc.dev";

impl Tracker {
    /// Applies one object's state at `rv` (ignored when older than what is known);
    /// returns whether it was a Node or a BootcNode.
    fn apply(&mut self, group: &str, plural: &str, object: &Value, deleted: bool, rv: u64) -> bool {
        let Some(name) = object_name(object) else {
            return false;
        };
        match (group, plural) {
            ("", "nodes") => {
                let known = self.nodes.get(&name).copied();
                if known.is_some_and(|k| k.rv >= rv) {
                    return true;
                }
                if deleted {
                    self.nodes.remove(&name);
                    return true;
                }
                let facts = node_facts(object, rv);
                if known.is_some_and(|k| k.ready == Some(true)) && facts.ready == Some(false) {
                    *self.reboots.entry(name.clone()).or_default() += 1;
                }
                self.reboots.entry(name.clone()).or_default();
                self.nodes.insert(name, facts);
                true
            }
            (BOOTC_GROUP, "bootcnodes") => {
                if self.bootc_nodes.get(&name).is_some_and(|k| k.rv >= rv) {
                    return true;
                }
                if deleted {
                    self.bootc_nodes.remove(&name);
                } else {
                    self.bootc_nodes.insert(name, slot_facts(object, rv));
                }
                true
            }
            _ => false,
        }
    }

    /// The unavailable nodes now, each with why.
    fn unavailable(&self) -> BTreeMap<String, Vec<&'static str>> {
        let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        for (name, facts) in &self.nodes {
            if facts.unschedulable && !self.admin_cordoned.contains(name) {
                out.entry(name.clone()).or_default().push("cordoned");
            }
            if facts.ready == Some(false) {
                out.entry(name.clone()).or_default().push("NotReady");
            }
        }
        for (name, facts) in &self.bootc_nodes {
            if facts.slot {
                out.entry(name.clone()).or_default().push("reboot-slot");
            }
        }
        out
    }

    fn evaluate(&mut self, rv: u64) {
        let unavailable = self.unavailable();
        let count = unavailable.len();
        self.max_unavailable_seen = self.max_unavailable_seen.max(count);
        let names: BTreeSet<String> = unavailable.keys().cloned().collect();
        if count > self.budget && names != self.last {
            let which: Vec<String> = unavailable
                .iter()
                .map(|(n, why)| format!("{n} ({})", why.join(", ")))
                .collect();
            self.violations.push(format!(
                "rv {rv}: {count} nodes unavailable, budget {}: {}",
                self.budget,
                which.join("; ")
            ));
        }
        self.last = names;
    }

    fn report(&self) -> InvariantReport {
        InvariantReport {
            budget: self.budget,
            events: self.events,
            max_unavailable_seen: self.max_unavailable_seen,
            violations: self.violations.clone(),
            reboots: self.reboots.clone(),
            left_cordoned: self
                .nodes
                .iter()
                .filter(|(n, f)| f.unschedulable && !self.admin_cordoned.contains(*n))
                .map(|(n, _)| n.clone())
                .collect(),
            unavailable_now: self.unavailable().into_keys().collect(),
        }
    }
}

/// Checks the rollout's availability invariant over every stored change.
///
/// A node is unavailable when it is cordoned by the rollout (unschedulable and not in
/// the admin-cordoned set), NotReady (its `Ready` condition is `False` or `Unknown`; a
/// Node without a `Ready` condition yet does not count), or its BootcNode holds the
/// `node.bootc.dev/reboot-slot` annotation. After every event that changes a Node or a
/// BootcNode the unavailable set is computed from the event objects.
#[derive(Debug)]
pub struct Invariants {
    tracker: Arc<Mutex<Tracker>>,
    handle: kube_emulator::Handle,
    task: JoinHandle<()>,
}

/// What [`Invariants`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantReport {
    /// The budget checked against (`maxUnavailable` resolved).
    pub budget: usize,
    /// How many events were examined.
    pub events: u64,
    /// The most nodes unavailable at once: cordoned by us (unschedulable and not
    /// admin-cordoned) ∪ NotReady ∪ holding the reboot-slot annotation.
    pub max_unavailable_seen: usize,
    /// Every instant the unavailable set exceeded the budget (recorded each time the
    /// set changed while over it): the event's resourceVersion and the nodes, with why.
    /// A checker that fell behind the event stream also reports it here.
    pub violations: Vec<String>,
    /// Per node: how many times its Node's `Ready` condition went from `True` to not
    /// `True` (counted from the events, not from the hosts). Every node seen is listed.
    pub reboots: BTreeMap<String, u32>,
    /// Nodes unschedulable now that were not admin-cordoned.
    pub left_cordoned: Vec<String>,
    /// Nodes unavailable now.
    pub unavailable_now: Vec<String>,
}

impl InvariantReport {
    /// No violation and no node left cordoned.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty() && self.left_cordoned.is_empty()
    }
}

impl Invariants {
    /// Starts following `handle.events()` from now, from the current Nodes and BootcNodes.
    /// `budget` is `maxUnavailable` resolved; `admin_cordoned` names the nodes that were
    /// unschedulable before the test (their cordon does not count as the rollout's).
    /// Must be called within a Tokio runtime.
    pub fn follow(
        handle: kube_emulator::Handle,
        budget: usize,
        admin_cordoned: BTreeSet<String>,
    ) -> Self {
        let mut events = handle.events();
        // Every change after this version comes through `events`; the lists below may
        // already include some of them, which the per-object versions sort out.
        let start_rv = handle.resource_version();
        let mut tracker = Tracker {
            budget,
            admin_cordoned,
            processed_rv: start_rv,
            ..Tracker::default()
        };
        for (group, plural) in [("", "nodes"), (BOOTC_GROUP, "bootcnodes")] {
            for object in handle.list(group, plural) {
                let rv = object_rv(&object);
                tracker.apply(group, plural, &object, false, rv);
            }
        }
        tracker.evaluate(start_rv);
        let tracker = Arc::new(Mutex::new(tracker));
        let shared = tracker.clone();
        let task = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let mut t = lock(&shared);
                        t.events += 1;
                        let deleted = event.kind == kube_emulator::EventType::Deleted;
                        if t.apply(
                            &event.key.group,
                            &event.key.plural,
                            &event.object,
                            deleted,
                            event.rv,
                        ) {
                            t.evaluate(event.rv);
                        }
                        t.processed_rv = t.processed_rv.max(event.rv);
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        lock(&shared).violations.push(format!(
                            "the checker fell behind and missed {missed} events: results incomplete"
                        ));
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Self {
            tracker,
            handle,
            task,
        }
    }

    /// What was seen so far (events not yet examined are not included; see
    /// [`Invariants::settled`]).
    pub fn report(&self) -> InvariantReport {
        lock(&self.tracker).report()
    }

    /// Waits until every change stored before this call has been examined (for at most
    /// `timeout`), then reports.
    pub async fn settled(&self, timeout: Duration) -> InvariantReport {
        let target = self.handle.resource_version();
        let deadline = Instant::now() + timeout;
        while lock(&self.tracker).processed_rv < target
            && Instant::now() < deadline
            && !self.task.is_finished()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.report()
    }
}

impl Drop for Invariants {
    fn drop(&mut self) {
        self.task.abort();
    }
}
