//! Many pools reconcile side by side, but their nodes' actions share one limit: a cluster
//! of many pools starting a rollout at once must not start thousands of actions, which
//! would only wait behind the API client's few dozen requests in flight, each holding a
//! running action's memory and its queued request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bootc_crds::BootcNode;
use bootc_pool_controller::reconcile::{Dependencies, USER_AGENT, execute};
use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube_emulator::{Emulator, FaultConfig};
use serde_json::json;

const POOLS: usize = 5;
const NODES_PER_POOL: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writes_of_many_pools_share_one_limit() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    // The CRDs registered and an image to roll out; the nodes are bare Node objects.
    let (_cluster, _, image) = workers_cluster(&emulator, &[], Default::default()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    for pool in 0..POOLS {
        for i in 0..NODES_PER_POOL {
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": format!("p{pool}-n{i}"), "labels": {"role": format!("r{pool}")}},
            }))
            .unwrap();
            nodes.create(&PostParams::default(), &node).await.unwrap();
        }
    }
    // Every request of the controller answered late, so that its writes overlap.
    emulator.handle().set_faults(FaultConfig {
        latency: Duration::from_millis(100),
        latency_user_agent: Some(USER_AGENT.to_owned()),
        ..FaultConfig::default()
    });
    let controller = start(&emulator, Dependencies::default());
    // Each pool's first plan labels its 40 nodes and creates their BootcNodes: 32 nodes'
    // actions at once per pool, 160 for the five, were there no shared limit.
    for pool in 0..POOLS {
        let mut p = workers_pool_spec(json!({"image": {"ref": image}}));
        p.metadata.name = Some(format!("p{pool}"));
        p.spec.node_selector = serde_json::from_value(json!({
            "matchLabels": {"role": format!("r{pool}")}
        }))
        .unwrap();
        create_pool(&client, &p).await;
    }
    let bootcs: Api<BootcNode> = Api::all(client.clone());
    wait_for("every node's BootcNode", async || {
        let n = bootcs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        (n == POOLS * NODES_PER_POOL).then_some(())
    })
    .await;
    controller.stop().await;

    let most = emulator.handle().most_writes_in_flight(USER_AGENT);
    // The nodes' actions within the limit, and at most a status write and an event per
    // pool beside them.
    let bound = execute::CONCURRENT_NODES_IN_ALL + 2 * POOLS;
    assert!(
        most <= bound,
        "{most} writes at once, more than the limit allows ({bound})"
    );
    assert!(
        most >= execute::CONCURRENT_NODES_IN_ALL * 3 / 4,
        "only {most} writes at once: the pools' writes never came near the limit"
    );
}
