//! `kubectl bootc` on a health-gated rollout, run by the real kubectl against the API
//! emulator: the pool's status as the controller's planner writes it (a canary soaking,
//! an alert firing, a node cordoned with `kubectl cordon`) and a failed history entry go
//! through the committed CRD's status schema, and `status`, `why` and `history` say
//! what they mean.

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
    // What the controller last wrote of the canary: soaking for two minutes.
    let status = json!({
        "canary": {"digest": digest('2'), "phase": "Soaking", "nodes": 1,
                   "soakStartedTime": ago(2)},
    });
    write_status(&pools, "workers", status).await;
    cluster.ok(&["cordon", "w3"]).await;
    // The controller plans with the alert gate answering one firing alert.
    let firing = GateView::Firing {
        alerts: vec!["NodeDown{severity=\"critical\"}".into()],
        count: 1,
        checked: chrono::Utc::now(),
    };
    controller_plans_with(&cluster, "workers", firing).await;

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
        "alert gate closed: 1 matching alerts fire at http://alertmanager.monitoring:9093: NodeDown{severity=\"critical\"} (gate AlertsFiring: no new reboot slot or approval, on purpose)",
        "cordoned by someone else: w3; uncordon them (or set disruption.respectCordon to false) to update them (gate CordonedByOthers",
        // A firing alert is a problem for the canary: its soak starts again.
        "canary: 1 nodes run the target, soaking for 600s, restarted because of a problem; the rest of the pool waits (gate CanarySoaking",
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

    // A digest marked failed, from a spec before this one.
    let mut history = rolling_status('2', json!([]))["deployHistory"].clone();
    history[1]["failed"] = json!(true);
    history[1]["failedReason"] = json!("node w9: boot-complete.target failed");
    history[1]["failedTime"] = json!(ago(100));
    history[1]["failedGeneration"] = json!(0);
    let status = json!({"deployHistory": history});
    write_status(&pools, "workers", status).await;
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
