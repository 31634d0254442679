//! What the plugin's end-to-end tests share: the API emulator with the project's CRDs,
//! a pool with nodes whose statuses are written as the controller and the agents write
//! them, and the real kubectl run with the built plugin on its PATH.

// Each test file uses its own part of these helpers.
#![allow(dead_code)]

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use kube_emulator::Emulator;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[path = "../support/planned.rs"]
mod planned;
#[path = "../support/statuses.rs"]
mod statuses;

pub use statuses::{cond, digest, pin, pool_status};

pub use bootc_pool_controller::plan::GateView;

/// How long a test waits for a condition.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The emulator, a client of it, and a kubeconfig file for kubectl.
pub struct Cluster {
    pub emulator: Emulator,
    pub client: Client,
    pub dir: tempfile::TempDir,
}

/// A time `minutes` ago, as the API writes it.
pub fn ago(minutes: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::minutes(minutes))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The directory of the built plugin, first on the PATH kubectl gets.
pub fn plugin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kubectl-bootc"))
        .parent()
        .unwrap()
        .to_path_buf()
}

impl Cluster {
    /// An emulator with the project's CRDs, as the generator renders them.
    pub async fn start() -> Cluster {
        let emulator = Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in bootc_crds::crdgen::crds().unwrap() {
            let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        emulator
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Cluster {
            emulator,
            client,
            dir,
        }
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// `kubectl ARGS` with `KUBECONFIG` set, the plugin first on the PATH and a HOME
    /// of its own.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![plugin_dir()];
        dirs.extend(std::env::split_paths(&path));
        let mut c = tokio::process::Command::new("kubectl");
        c.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("HOME", self.dir.path())
            .kill_on_drop(true);
        c
    }

    /// Runs `kubectl ARGS` to its end.
    pub async fn kubectl(&self, args: &[&str]) -> Output {
        let run = self.command(args).output();
        tokio::time::timeout(DEADLINE, run)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish"))
            .expect("kubectl is on the PATH (.ci/run installs it where it is missing)")
    }

    /// Runs `kubectl ARGS`, which must succeed; its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `kubectl ARGS`, which must fail with exit code 1; its stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert_eq!(
            out.status.code(),
            Some(1),
            "kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// The pool `name`.
    pub async fn pool(&self, name: &str) -> BootcNodePool {
        Api::<BootcNodePool>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    /// The Node `name`.
    pub async fn node(&self, name: &str) -> Node {
        Api::<Node>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    /// Creates pool `name` (`rollout`) and writes its `status` through the status
    /// subresource, as the controller does.
    pub async fn create_pool(&self, name: &str, rollout: Value, status: Value) -> BootcNodePool {
        let pools: Api<BootcNodePool> = Api::all(self.client.clone());
        let pool: BootcNodePool = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"matchLabels": {"pool": name}},
                "image": {"ref": "registry.test/os:stable"},
                "rollout": rollout,
            },
        }))
        .unwrap();
        pools.create(&PostParams::default(), &pool).await.unwrap();
        write_status(&pools, name, status).await
    }

    /// Creates Node `name` in `pool`, Ready or not, with its status written as a
    /// kubelet does.
    pub async fn create_node(&self, name: &str, pool: &str, ready: bool) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"pool": pool}},
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let status = json!({"conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "False" },
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "message": "",
            "lastHeartbeatTime": ago(0),
            "lastTransitionTime": ago(30),
        }]});
        write_status(&nodes, name, status).await;
    }

    /// Creates BootcNode `name` owned by `pool` (desired `desired`, `annotations`) as the
    /// controller does, and writes the agent's `status`.
    pub async fn create_bootc_node(
        &self,
        name: &str,
        pool: &BootcNodePool,
        desired: char,
        annotations: Value,
        status: Value,
    ) {
        let api: Api<BootcNode> = Api::all(self.client.clone());
        let mut object: BootcNode = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"desiredImage": pin(desired)},
        }))
        .unwrap();
        object.metadata.owner_references = pool.controller_owner_ref(&()).map(|o| vec![o]);
        api.create(&PostParams::default(), &object).await.unwrap();
        write_status(&api, name, status).await;
    }
}

/// Merges `status` into the status of object `name`, through the status subresource, as
/// the controller and the agents write it; the object as the API then holds it.
pub async fn write_status<K>(api: &Api<K>, name: &str, status: Value) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    let patch = Patch::Merge(json!({ "status": status }));
    api.patch_status(name, &PatchParams::default(), &patch)
        .await
        .unwrap()
}

/// An agent's status: booted `booted`, staged `staged` (none for ' '), the Idle reason
/// (from 5 minutes ago).
pub fn agent(booted: char, staged: char, idle: &str) -> Value {
    statuses::agent(booted, staged, idle, 5, &[])
}

/// A pool status rolling out `target` to three nodes, one updated, with `conditions`
/// and a deployHistory of 1 then 2.
pub fn rolling_status(target: char, conditions: Value) -> Value {
    let entry = |c: char, last: i64| {
        json!({
            "digest": digest(c), "image": pin(c), "version": format!("v{c}"),
            "nodeCount": 3, "firstDeployed": ago(last + 60), "lastDeployed": ago(last),
            "origin": "Targeted",
        })
    };
    let mut status = pool_status(target, [3, 1, 1, 0], conditions);
    status["stagedCount"] = json!(1);
    status["deployHistory"] = json!([entry(target, 0), entry('1', 24 * 60)]);
    status
}

/// Pool `workers` rolling out 2 with `maxUnavailable: 1`: w1 on 2, w2 holding the one
/// slot and rebooting, w3 staged and waiting.
pub async fn workers(cluster: &Cluster, rollout: Value, conditions: Value) -> BootcNodePool {
    let pool = cluster
        .create_pool("workers", rollout, rolling_status('2', conditions))
        .await;
    let slot = json!({"node.bootc.dev/reboot-slot": ago(3)});
    for name in ["w1", "w2", "w3"] {
        cluster.create_node(name, "workers", true).await;
    }
    cluster
        .create_bootc_node("w1", &pool, '2', json!({}), agent('2', ' ', "Idle"))
        .await;
    cluster
        .create_bootc_node("w2", &pool, '2', slot, agent('1', '2', "Rebooting"))
        .await;
    cluster
        .create_bootc_node("w3", &pool, '2', json!({}), agent('1', '2', "Staged"))
        .await;
    pool
}

/// A cluster with [`workers`] rolling out 2 under `maxUnavailable: 1`.
pub async fn rolling_workers() -> Cluster {
    let cluster = Cluster::start().await;
    workers(&cluster, json!({"maxUnavailable": 1}), in_progress()).await;
    cluster
}

/// `UpToDate=False/RolloutInProgress`, `Degraded=False/Healthy`,
/// `Progressing=True/Advancing`.
pub fn in_progress() -> Value {
    let mut conditions = statuses::in_progress();
    let progressing = cond("Progressing", "True", "Advancing", "", 5);
    conditions.as_array_mut().unwrap().push(progressing);
    conditions
}

/// The controller's own planner, run on pool `name` as the API holds it now, writing the
/// status it plans (as the controller's reconcile would, minus the other actions).
pub async fn controller_plans(cluster: &Cluster, name: &str) {
    controller_plans_with(cluster, name, GateView::NotConfigured).await;
}

/// [`controller_plans`], with the pool's alert gate answering `gate`.
pub async fn controller_plans_with(cluster: &Cluster, name: &str, gate: GateView) {
    let pools_api: Api<BootcNodePool> = Api::all(cluster.client.clone());
    let pools = pools_api.list(&Default::default()).await.unwrap().items;
    let nodes = Api::<Node>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let bootc_nodes = Api::<BootcNode>::all(cluster.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let world = planned::World {
        pools: &pools,
        nodes: &nodes,
        bootc_nodes: &bootc_nodes,
        now: chrono::Utc::now(),
    };
    let pool = pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .expect("the pool");
    let answers = planned::Answers {
        gate,
        ..Default::default()
    };
    let status = planned::planned_status(&world, pool, answers);
    write_status(&pools_api, name, serde_json::to_value(&status).unwrap()).await;
}
