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
//!
//! - this file: [`SimCluster`] and its nodes (add, remove, kill an agent, stop), and
//!   the health units' states per image ([`SimCluster::set_boot_units`]);
//! - `tasks`: each node's tasks, the supervised agent and the kubelet's part;
//! - `pods`: pods bound to nodes, with their owners and namespaces;
//! - `invariants`: [`Invariants`], the availability checker.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bootc_node_agent::run::{self, RunOptions};
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::error::{Result, SimError};
use crate::memory::{Behaviour, Catalog, MemoryHost};

mod invariants;
mod pods;
mod tasks;
#[cfg(test)]
mod tests;

pub use invariants::{InvariantReport, Invariants, NotSettled, PoolBudget};
use tasks::{kubelet, supervise};

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

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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

pub(crate) fn kube_error(call: &'static str) -> impl FnOnce(kube::Error) -> SimError {
    move |source| SimError::Kube { call, source }
}

pub(crate) fn is_status(error: &kube::Error, code: u16) -> bool {
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
        Self::start_with_clients(client, agent_client, catalog).await
    }

    /// A cluster on the in-process emulator behind `emulator`, reached without sockets
    /// ([`kube_emulator::Handle::local_client`]): the same handler, request log, faults
    /// and watches as over HTTP, but no connection (two file descriptors in this
    /// process) per watch of every agent, so that thousands of nodes fit in one process.
    /// The User-Agents are those of [`SimCluster::start`].
    pub async fn start_local(
        emulator: &kube_emulator::Handle,
        catalog: Arc<Catalog>,
    ) -> Result<Self> {
        let local = |user_agent: &str| {
            emulator
                .local_client(user_agent)
                .map_err(|e| SimError::InvalidOptions(format!("User-Agent `{user_agent}`: {e}")))
        };
        let client = local(USER_AGENT)?;
        let agent_client = local(run::USER_AGENT)?;
        Self::start_with_clients(client, agent_client, catalog).await
    }

    /// A cluster whose kubelets and set-up use `client` and whose agents use
    /// `agent_client` (however they reach the API server), with the project's CRDs
    /// registered through `client` as [`SimCluster::start`] does. The request log tells
    /// the two apart only if their User-Agents differ.
    pub async fn start_with_clients(
        client: Client,
        agent_client: Client,
        catalog: Arc<Catalog>,
    ) -> Result<Self> {
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

    /// From now on, hosts running the image `digest` report these units in these states
    /// (`("kubelet.service", "failed")`, `("x.service", "activating")` then later
    /// `("x.service", "active")`); units not named are `active`. The catalog's table,
    /// shared by every host: see [`Catalog::set_boot_units`].
    pub fn set_boot_units(&self, digest: &str, units: &[(&str, &str)]) {
        self.catalog.set_boot_units(digest, units);
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
            RunOptions {
                node_name: name.to_owned(),
                poll_interval: options.poll_interval,
                agent_version: "host-sim".to_owned(),
                ready_dir: None,
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
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "conditions": [crate::kubelet::ready_condition(true)],
            "nodeInfo": crate::kubelet::node_info("host-sim in-process node", boot_id),
        },
    }))
    .map_err(|e| SimError::InvalidOptions(format!("Node object: {e}")))
}
