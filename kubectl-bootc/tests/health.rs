//! `kubectl bootc` on a health-gated rollout, run by the real kubectl against the API
//! emulator: the pool's canary, alert gate and failed history entry go through the
//! committed CRD's status schema, the Node is cordoned with `kubectl cordon`, and
//! `status`, `why` and `history` say what they mean.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::pool::BootcNodePool;
use common::*;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soaking_canary_a_firing_gate_a_failed_digest_and_a_cordon_are_explained() {
    let cluster = Cluster::start().await;
    let conditions = json!([
        cond(
            "UpToDate",
            "False",
            "Canary",
            "canary soaking: 1/3 updated",
            2
        ),
        cond("Degraded", "False", "Healthy", "", 60),
        cond("Progressing", "True", "Advancing", "", 2),
    ]);
    let rollout = json!({"maxUnavailable": 2, "canary": {"nodes": 1, "soakSeconds": 600}});
    workers(&cluster, rollout, conditions).await;
    let pools: Api<BootcNodePool> = Api::all(cluster.client.clone());
    let spec = json!({"spec": {"health": {"alerts": {
        "url": "http://alertmanager.monitoring:9093",
        "matchers": ["severity=\"critical\""],
    }}}});
    pools
        .patch("workers", &PatchParams::default(), &Patch::Merge(spec))
        .await
        .unwrap();
    let mut history = rolling_status('2', json!([]))["deployHistory"].clone();
    history[1]["failed"] = json!(true);
    history[1]["failedReason"] = json!("node w9: boot-complete.target failed");
    history[1]["failedTime"] = json!(ago(100));
    history[1]["failedGeneration"] = json!(0);
    let status = json!({"status": {
        "cordonedCount": 1,
        "canary": {"digest": digest('2'), "phase": "Soaking", "nodes": 1,
                   "soakStartedTime": ago(2)},
        "alertGate": {"state": "Firing", "checkedTime": ago(0),
                      "message": "NodeDown{severity=\"critical\"}"},
        "deployHistory": history,
    }});
    pools
        .patch_status("workers", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    cluster.ok(&["cordon", "w3"]).await;

    let status = cluster.ok(&["bootc", "status", "workers"]).await;
    println!("{status}");
    let row: Vec<&str> = status.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row.last(),
        Some(&"canary:soaking,gate:firing,cordoned:1"),
        "{status}"
    );

    let why = cluster.ok(&["bootc", "why", "workers"]).await;
    println!("{why}");
    for said in [
        "alert gate closed: alerts matching severity=\"critical\" fire at http://alertmanager.monitoring:9093: NodeDown{severity=\"critical\"}",
        "node w3: cordoned by someone else",
        "canary soaking (UpToDate/Canary): its 1 node(s) run 222222222222 and are watched; the rest of the pool goes on at ",
    ] {
        assert!(why.contains(said), "{said:?} not in:\n{why}");
    }
    let w3 = cluster.ok(&["bootc", "why", "w3"]).await;
    println!("{w3}");
    assert!(w3.contains("`kubectl uncordon w3`"), "{w3}");
    assert!(
        w3.contains("waiting for a reboot slot: alert gate closed"),
        "{w3}"
    );

    let history = cluster.ok(&["bootc", "history", "workers"]).await;
    println!("{history}");
    assert!(
        history.contains(&format!("\n{}!   ", "1".repeat(12))),
        "{history}"
    );
    assert!(
        history.contains(
            "! 111111111111 failed at 20"
        ) && history.contains(
            ": node w9: boot-complete.target failed (the spec changed since: the mark no longer holds)\n"
        ),
        "{history}"
    );
}
