//! A node an admin holds (label `node.bootc.dev/hold=true`), against the API emulator and
//! simulated nodes: the other nodes roll to the new image, the held one stays on its own,
//! pulls nothing and is marked in its BootcNode and the pool's status; once the label is
//! removed it rolls too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::HOLD_LABEL;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

async fn label_hold(client: &Client, node: &str, value: Value) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {HOLD_LABEL: value}}})),
        )
        .await
        .unwrap();
}

async fn bootc_node(client: &Client, node: &str) -> BootcNode {
    let api: Api<BootcNode> = Api::all(client.clone());
    api.get(node).await.unwrap()
}

fn held_mark(b: &BootcNode) -> Option<bool> {
    b.status.as_ref().and_then(|s| s.held)
}

fn held_count(p: &BootcNodePool) -> Option<i32> {
    p.status.as_ref().map(|s| s.held_count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_node_stays_on_its_image_until_the_hold_is_lifted() {
    let names = ["n1", "n2", "n3"];
    let r = Rollout::start(&names, 1, BTreeSet::new()).await;

    // The pool starts on the image the nodes run, then n2 is held.
    let pools: Api<BootcNodePool> = Api::all(r.client.clone());
    let pool = workers_pool(&r.v1, json!({"maxUnavailable": 1}));
    pools.create(&PostParams::default(), &pool).await.unwrap();
    wait_pool(&r.client, "workers", "all on v1", |p| all_updated(p, 3)).await;
    label_hold(&r.client, "n2", json!("true")).await;
    wait_for("n2 marked held", async || {
        (held_mark(&bootc_node(&r.client, "n2").await) == Some(true)).then_some(())
    })
    .await;

    // A new image: n1 and n3 roll, n2 stays where it is.
    patch_pool(
        &r.client,
        "workers",
        json!({"spec": {"image": {"ref": r.v2}}}),
    )
    .await;
    let p = wait_pool(&r.client, "workers", "all but the held node on v2", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 2)
            && condition(p, "Progressing").is_some_and(|c| c.1 == "HeldNodesLeft")
    })
    .await;
    assert_eq!(held_count(&p), Some(1));
    let up = condition(&p, "UpToDate").unwrap();
    assert_eq!(
        (up.0.as_str(), up.2.as_str()),
        ("False", "2/3 updated; 1 held")
    );
    assert_eq!(condition(&p, "Degraded").unwrap().0, "False");
    for n in ["n1", "n3"] {
        assert_eq!(booted(&r.cluster, n), digest('2'), "{n}");
        assert_eq!(held_mark(&bootc_node(&r.client, n).await), None, "{n}");
    }
    assert_eq!(booted(&r.cluster, "n2"), digest('1'));
    let n2 = bootc_node(&r.client, "n2").await;
    assert_eq!(
        n2.spec.desired_image, r.v1,
        "n2 is not moved to the new image"
    );
    assert_eq!(held_mark(&n2), Some(true));
    let counters = r.cluster.host("n2").unwrap().counters();
    assert_eq!(
        (counters.stages, counters.reboots),
        (0, 0),
        "n2 pulled nothing"
    );

    // The hold is lifted: n2 rolls too and its mark goes.
    label_hold(&r.client, "n2", Value::Null).await;
    let p = wait_pool(&r.client, "workers", "all on v2", |p| all_updated(p, 3)).await;
    assert_eq!(held_count(&p), Some(0));
    assert_eq!(booted(&r.cluster, "n2"), digest('2'));
    assert_eq!(held_mark(&bootc_node(&r.client, "n2").await), None);

    let report = r.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    r.controller.stop().await;
}
