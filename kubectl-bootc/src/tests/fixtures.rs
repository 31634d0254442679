//! Pools, BootcNodes, Nodes and clusters for the unit tests.

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;

use bootc_pool_controller::plan::{DrainView, GateView};

#[path = "../../tests/support/planned.rs"]
mod planned;
#[path = "../../tests/support/statuses.rs"]
mod statuses;

pub use statuses::{agent, cond, digest, in_progress, pin, pool_status};

use crate::objects::{Cluster, Object, Versions};

/// The tests' "now": Monday 2026-03-02 12:00 UTC.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 12, 0, 0).unwrap()
}

/// `now` minus `minutes`, as the API writes times.
pub fn ago(minutes: i64) -> String {
    (now() - chrono::Duration::minutes(minutes)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Pool `name` following `registry.test/os:stable` on `pool=<name>` nodes, with
/// `rollout` and `status` (null: none).
pub fn pool(name: &str, rollout: Value, status: Value) -> Object<BootcNodePool> {
    let mut raw = json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "nodeSelector": {"matchLabels": {"pool": name}},
            "image": {"ref": "registry.test/os:stable"},
            "rollout": rollout,
        },
    });
    if !status.is_null() {
        raw["status"] = status;
    }
    Object::from_raw("BootcNodePool", raw).unwrap()
}

/// BootcNode `name` owned by `pool` (none when empty), desired `desired`, with
/// `annotations` and `status` (null: none).
pub fn bootc(
    name: &str,
    pool: &str,
    desired: char,
    annotations: Value,
    status: Value,
) -> Object<BootcNode> {
    let mut raw = json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": name, "generation": 1, "annotations": annotations},
        "spec": {"desiredImage": pin(desired)},
    });
    if !pool.is_empty() {
        raw["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool", "name": pool,
            "uid": "u", "controller": true,
        }]);
    }
    if !status.is_null() {
        raw["status"] = status;
    }
    Object::from_raw("BootcNode", raw).unwrap()
}

/// Node `name`, Ready or not, with labels.
pub fn node(name: &str, ready: bool, labels: Value) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "False" },
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "message": if ready { "kubelet is posting ready status" } else { "container runtime is down" },
        }]},
    }))
    .unwrap()
}

/// A cluster of these objects, read at [`now`].
pub fn cluster(
    pools: Vec<Object<BootcNodePool>>,
    bootc_nodes: Vec<Object<BootcNode>>,
    nodes: Vec<Node>,
) -> Cluster {
    Cluster {
        pools,
        bootc_nodes,
        nodes,
        now: now(),
        versions: Versions::default(),
    }
}

/// Pool `workers` (target 2, `rollout`, `conditions`): w1 on the target, w2 holding a
/// slot and rebooting, w3 staged without a slot.
pub fn workers(rollout: Value, conditions: Value) -> Cluster {
    let p = pool(
        "workers",
        rollout,
        pool_status('2', [3, 1, 1, 0], conditions),
    );
    let slot = json!({"node.bootc.dev/reboot-slot": ago(3)});
    let labels = json!({"pool": "workers"});
    cluster(
        vec![p],
        vec![
            bootc(
                "w1",
                "workers",
                '2',
                json!({}),
                agent('2', ' ', "Idle", 30, &[]),
            ),
            bootc(
                "w2",
                "workers",
                '2',
                slot,
                agent('1', '2', "Rebooting", 3, &[]),
            ),
            bootc(
                "w3",
                "workers",
                '2',
                json!({}),
                agent('1', '2', "Staged", 10, &[]),
            ),
        ],
        vec![
            node("w1", true, labels.clone()),
            node("w2", true, labels.clone()),
            node("w3", true, labels),
        ],
    )
}

/// `c` (of [`workers`]) with the BootcNode of worker `name`, without annotations, carrying
/// the agent's `status`.
pub fn worker_reports(c: &mut Cluster, name: &str, status: Value) {
    let i = c
        .bootc_nodes
        .iter()
        .position(|b| b.typed.metadata.name.as_deref() == Some(name))
        .expect("a worker");
    c.bootc_nodes[i] = bootc(name, "workers", '2', json!({}), status);
}

/// `c` with each pool's status as the controller writes it: its own planner, run once on
/// the cluster's objects at `c.now` as its reconcile would see them, from the status
/// given, with the alert gate answering `gate` and the drains in `drains`.
pub fn controller_wrote(mut c: Cluster, gate: GateView, drains: &[(&str, DrainView)]) -> Cluster {
    let pools: Vec<BootcNodePool> = c.pools.iter().map(|p| p.typed.clone()).collect();
    let bootc_nodes: Vec<BootcNode> = c.bootc_nodes.iter().map(|b| b.typed.clone()).collect();
    let world = planned::World {
        pools: &pools,
        nodes: &c.nodes,
        bootc_nodes: &bootc_nodes,
        now: c.now,
    };
    for (i, pool) in pools.iter().enumerate() {
        let answers = planned::Answers {
            gate: gate.clone(),
            drains,
        };
        let status = planned::planned_status(&world, pool, answers);
        c.pools[i].raw["status"] = serde_json::to_value(&status).unwrap();
        c.pools[i].typed.status = Some(status);
    }
    c
}
