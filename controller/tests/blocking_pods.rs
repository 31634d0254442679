//! Pods that block a reboot (`spec.disruption.blockingPods`), against the API emulator and
//! simulated nodes: the node a matching pod runs on stages but gets no slot while the
//! others roll, the pool's `status.gates` names it and the pod, a matching pod in a
//! namespace the pool does not name blocks nothing, and once the pod is gone the node
//! rolls too (the controller looks again by itself: nothing watches pods).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::pool::{BootcNodePool, GateReason};
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use host_sim::cluster::Invariants;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;

/// A running pod `namespace/name` labelled `app=backup` on `node`.
async fn backup_pod(client: &Client, namespace: &str, name: &str, node: &str) {
    ensure_namespace(client, namespace).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "backup"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
    });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
}

fn blocked_nodes(p: &BootcNodePool) -> Option<Vec<String>> {
    p.status
        .as_ref()?
        .gates
        .iter()
        .find(|g| g.reason == GateReason::BlockingPods)
        .map(|g| g.nodes.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_running_a_blocking_pod_waits_for_it_to_go() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let names = ["n1", "n2", "n3"];
    let (cluster, v1, v2) = workers_cluster(&emulator, &names, Default::default()).await;
    let invariants = Invariants::follow(emulator.handle(), 1, BTreeSet::new());
    let controller = start(&emulator, Dependencies::default());

    let mut pool = workers_pool(&v1, json!({"maxUnavailable": 1}));
    // The pods here belong to no controller: a drain evicts them only when forced.
    pool.spec.disruption.drain.force = true;
    pool.spec.disruption.blocking_pods = Some(
        serde_json::from_value(json!({
            "selector": {"matchLabels": {"app": "backup"}},
            "namespaces": ["jobs"],
        }))
        .unwrap(),
    );
    create_pool(&client, &pool).await;
    wait_pool(&client, "workers", "all on v1", |p| all_updated(p, 3)).await;
    backup_pod(&client, "jobs", "backup-1", "n2").await;
    // The same labels in a namespace the pool does not name block nothing.
    backup_pod(&client, "other", "backup-9", "n3").await;

    patch_pool(&client, "workers", json!({"spec": {"image": {"ref": v2}}})).await;
    let p = wait_pool(&client, "workers", "all but the blocked node on v2", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 2)
            && condition(p, "Progressing").is_some_and(|c| c.1 == "HeldNodesLeft")
    })
    .await;
    assert_eq!(blocked_nodes(&p), Some(vec!["n2".to_owned()]));
    let verdict = &p.status.as_ref().unwrap().gates[0];
    assert_eq!(
        verdict.message,
        "pods that block a reboot run on n2 (jobs/backup-1)"
    );
    for n in ["n1", "n3"] {
        assert_eq!(booted(&cluster, n), digest('2'), "{n}");
    }
    assert_eq!(booted(&cluster, "n2"), digest('1'));
    let counters = cluster.host("n2").unwrap().counters();
    assert_eq!(
        (counters.stages, counters.reboots),
        (1, 0),
        "n2 staged the new image, and did not reboot"
    );

    // The pod goes: the controller finds out by itself and n2 rolls.
    Api::<Pod>::namespaced(client.clone(), "jobs")
        .delete("backup-1", &DeleteParams::default())
        .await
        .unwrap();
    let p = wait_pool(&client, "workers", "all on v2", |p| all_updated(p, 3)).await;
    assert_eq!(blocked_nodes(&p), None);
    assert_eq!(booted(&cluster, "n2"), digest('2'));

    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    controller.stop().await;
}
