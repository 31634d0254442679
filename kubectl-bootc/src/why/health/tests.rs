use k8s_openapi::api::core::v1::NodeSpec;
use serde_json::{Value, json};

use super::super::tests::{has, in_progress, pool_why, workers};
use super::super::{why_node, why_pool};
use crate::objects::Cluster;
use crate::status::pool_state;
use crate::tests::fixtures::*;

/// `workers` with `conditions`, an alert gate to an Alertmanager (`fail_closed`) that
/// last said `gate` (null: nothing yet).
fn gated(conditions: Value, fail_closed: bool, gate: Value) -> Cluster {
    let mut c = workers(json!({"maxUnavailable": 2}), conditions);
    let pool = &mut c.pools[0].typed;
    pool.spec.health = serde_json::from_value(json!({"alerts": {
        "url": "http://alertmanager.monitoring:9093",
        "matchers": ["severity=\"critical\""],
        "failClosed": fail_closed,
    }}))
    .unwrap();
    pool.status.as_mut().unwrap().alert_gate = serde_json::from_value(gate).unwrap();
    c
}

fn up_to_date(reason: &str) -> Value {
    json!([
        cond("UpToDate", "False", reason, "1/3 updated", 5),
        cond("Degraded", "False", "Healthy", "", 60),
    ])
}

#[test]
fn a_firing_alert_gate_names_the_alerts_and_holds_every_staged_node() {
    let gate = json!({
        "state": "Firing",
        "message": "NodeDown{severity=\"critical\", instance=\"db-1\"}",
        "checkedTime": ago(1),
    });
    let c = gated(up_to_date("AlertGateClosed"), true, gate);
    let p = pool_why(&c);
    assert_eq!(
        p.blocked,
        [
            "alert gate closed: alerts matching severity=\"critical\" fire at http://alertmanager.monitoring:9093 (UpToDate/AlertGateClosed): NodeDown{severity=\"critical\", instance=\"db-1\"}; checked 60s ago; no new reboot is approved until they stop (nodes already rebooting finish)"
        ]
    );
    assert!(
        has(
            &why_node(&c, "w3").blocked,
            "waiting for a reboot slot: alert gate closed: alerts matching"
        ),
        "{:?}",
        why_node(&c, "w3")
    );
    assert_eq!(pool_state(&c.pools[0].typed), "gate:firing");
    // Open again: nothing said, and the state is a plain rollout.
    let open = gated(
        up_to_date("RolloutInProgress"),
        true,
        json!({"state": "Open"}),
    );
    assert!(!has(&pool_why(&open).blocked, "alert gate"));
    assert_eq!(pool_state(&open.pools[0].typed), "RollingOut");
}

#[test]
fn an_unreachable_gate_names_its_url_and_error_and_says_whether_it_fails_closed() {
    let gate = json!({
        "state": "Unreachable",
        "message": "connection refused",
        "checkedTime": ago(2),
    });
    let degraded = json!([
        cond("UpToDate", "False", "AlertGateClosed", "", 5),
        cond(
            "Degraded",
            "True",
            "AlertGateUnreachable",
            "http://alertmanager.monitoring:9093: connection refused",
            2
        ),
    ]);
    let c = gated(degraded, true, gate.clone());
    let p = pool_why(&c);
    assert_eq!(
        p.blocked,
        [
            "alert gate unreachable: http://alertmanager.monitoring:9093 cannot be asked (connection refused) and failClosed is true, so no new reboot is approved (Degraded/AlertGateUnreachable): http://alertmanager.monitoring:9093: connection refused"
        ]
    );
    assert!(has(
        &why_node(&c, "w3").blocked,
        "waiting for a reboot slot: alert gate unreachable: http://alertmanager.monitoring:9093"
    ));
    assert_eq!(
        pool_state(&c.pools[0].typed),
        "AlertGateUnreachable,gate:unreachable"
    );

    // Failing closed without the Degraded reason (another one wins): still a gate.
    let halted = json!([cond("Degraded", "True", "NodeConflict", "w9", 2)]);
    let c = gated(halted, true, gate.clone());
    assert!(has(
        &pool_why(&c).blocked,
        "alert gate unreachable: http://alertmanager.monitoring:9093 cannot be asked: connection refused; checked 2m ago; failClosed is true"
    ));

    // Failing open: a note, nothing held.
    let c = gated(up_to_date("RolloutInProgress"), false, gate);
    let p = pool_why(&c);
    assert!(!has(&p.blocked, "alert gate"), "{p:?}");
    assert!(
        has(
            &p.progressing,
            "the alert gate at http://alertmanager.monitoring:9093 cannot be asked (connection refused); checked 2m ago; failClosed is false, so the rollout goes on"
        ),
        "{p:?}"
    );
}

/// `workers` with a canary of 1 node soaking 600 s, in `phase`, its soak begun
/// `minutes` ago.
fn canary(phase: &str, minutes: i64) -> Cluster {
    let rollout = json!({"maxUnavailable": 1, "canary": {"nodes": 1, "soakSeconds": 600}});
    let mut c = workers(rollout, up_to_date("Canary"));
    let status = c.pools[0].typed.status.as_mut().unwrap();
    let mut canary = json!({"digest": digest('2'), "phase": phase, "nodes": 1});
    if phase != "Updating" {
        canary["soakStartedTime"] = json!(ago(minutes));
    }
    status.canary = serde_json::from_value(canary).unwrap();
    c
}

#[test]
fn a_soaking_canary_says_how_long_is_left_and_is_progress_not_a_problem() {
    let c = canary("Soaking", 2);
    let p = pool_why(&c);
    let soaking = "canary soaking (UpToDate/Canary): its 1 node(s) run 222222222222 and are watched; the rest of the pool goes on at 2026-03-02T12:08:00Z (in 8m) if they stay healthy and no alert gate closes (a problem meanwhile starts the soak again)";
    assert!(p.progressing.iter().any(|t| t == soaking), "{p:?}");
    // The budget is full (w2 reboots), but the canary is what w3 waits for too.
    let w3 = why_node(&c, "w3");
    assert!(
        has(&w3.progressing, "waiting for a reboot slot: canary soaking"),
        "{w3:?}"
    );
    assert!(!has(&w3.blocked, "canary"), "{w3:?}");
    assert_eq!(pool_state(&c.pools[0].typed), "canary:soaking");

    let over = canary("Soaking", 11);
    assert!(has(
        &pool_why(&over).progressing,
        "the soak is over; the controller lets the rest of the pool go on at its next plan"
    ));

    let updating = canary("Updating", 0);
    assert!(has(
        &pool_why(&updating).progressing,
        "canary updating (UpToDate/Canary): 1 node(s) go first to 222222222222; the rest of the pool waits until they run it and stay healthy for the 600 s soak"
    ));
    assert_eq!(pool_state(&updating.pools[0].typed), "canary:updating");

    let complete = canary("Complete", 20);
    assert!(!has(&pool_why(&complete).progressing, "canary"));
    // A canary of an older target is not this rollout's.
    let mut old = canary("Soaking", 2);
    old.pools[0]
        .typed
        .status
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .digest = digest('1');
    assert!(!has(&pool_why(&old).progressing, "canary"));
}

#[test]
fn waiting_for_pools_names_each_pool_and_why() {
    let rollout = json!({"maxUnavailable": 1, "after": ["infra", "db", "edge"]});
    let mut c = workers(rollout, up_to_date("WaitingForPools"));
    let done = json!([cond("UpToDate", "True", "AllUpdated", "", 5)]);
    c.pools.push(pool(
        "edge",
        json!({}),
        pool_status('2', [1, 1, 0, 0], done),
    ));
    let rolling = json!([cond("UpToDate", "False", "RolloutInProgress", "", 5)]);
    c.pools.push(pool(
        "infra",
        json!({}),
        pool_status('2', [2, 1, 1, 0], rolling),
    ));
    let p = pool_why(&c);
    assert!(
        p.blocked.iter().any(|t| t
            == "waiting for the pools in spec.rollout.after (UpToDate/WaitingForPools): bootcnodepool/infra is not up to date (RollingOut); bootcnodepool/db does not exist; staging goes on meanwhile"),
        "{p:?}"
    );
    assert!(has(
        &why_node(&c, "w3").blocked,
        "waiting for a reboot slot: waiting for the pools in spec.rollout.after"
    ));
    assert_eq!(pool_state(&c.pools[0].typed), "WaitingForPools");
    // A halted pool is named as halted; once every pool is there, nothing is said.
    let halted = json!([cond("Degraded", "True", "RolloutHalted", "", 5)]);
    c.pools[2] = pool("infra", json!({}), pool_status('2', [2, 1, 1, 1], halted));
    assert!(has(
        &pool_why(&c).blocked,
        "bootcnodepool/infra is halted (Degraded/RolloutHalted)"
    ));
    c.pools[0].typed.spec.rollout.after = vec!["edge".into()];
    assert!(!has(&pool_why(&c).blocked, "spec.rollout.after"));
}

#[test]
fn an_ordering_cycle_is_a_gate_with_its_path() {
    let conditions = json!([
        cond("UpToDate", "False", "RolloutInProgress", "", 5),
        cond(
            "Degraded",
            "True",
            "OrderingCycle",
            "workers waits on itself: workers -> infra -> workers",
            5
        ),
    ]);
    let c = workers(json!({"maxUnavailable": 1, "after": ["infra"]}), conditions);
    let p = pool_why(&c);
    let cycle = "ordering cycle: spec.rollout.after waits, through other pools, on this pool itself, so nothing is approved; take a name out of one pool's spec.rollout.after (Degraded/OrderingCycle): workers waits on itself: workers -> infra -> workers";
    assert_eq!(
        p.blocked
            .iter()
            .filter(|t| t.contains("ordering cycle"))
            .count(),
        1,
        "{p:?}"
    );
    assert!(p.blocked.iter().any(|t| t == cycle), "{p:?}");
    assert!(has(&why_node(&c, "w3").blocked, cycle));
}

#[test]
fn a_failed_target_names_the_digest_the_reason_and_how_to_clear_it() {
    let conditions = json!([
        cond(
            "UpToDate",
            "False",
            "RollingBack",
            "1/3 back on the image before",
            5
        ),
        cond("Degraded", "True", "TargetFailed", "sha256:2222… failed", 5),
    ]);
    let mut c = workers(
        json!({"maxUnavailable": 2, "onFailure": "Rollback"}),
        conditions,
    );
    let status = c.pools[0].typed.status.as_mut().unwrap();
    status.deploy_history = serde_json::from_value(json!([
        {"digest": digest('2'), "image": pin('2'), "nodeCount": 2,
         "firstDeployed": ago(30), "lastDeployed": ago(10), "failed": true,
         "failedReason": "node w2: boot-complete.target failed", "failedTime": ago(6),
         "failedGeneration": 1},
        {"digest": digest('1'), "image": pin('1'), "nodeCount": 3,
         "firstDeployed": ago(900), "lastDeployed": ago(1)},
    ]))
    .unwrap();
    status.target_digest = Some(digest('1'));
    status.target_short_digest = Some("1".repeat(12));
    status.target_version = Some("v1".into());
    let p = pool_why(&c);
    assert_eq!(
        p.blocked,
        [
            "target failed: 222222222222 is marked failed in deployHistory (node w2: boot-complete.target failed); the nodes that booted it roll back to the image before (onFailure: Rollback) and it is not targeted again until the spec changes: point spec.image.ref at a fixed image, or change any spec field to try it again (Degraded/TargetFailed): sha256:2222… failed"
        ]
    );
    assert!(
        has(
            &p.progressing,
            "rolling back to 111111111111 (version v1): 1/3 back on the image before"
        ),
        "{p:?}"
    );
    assert_eq!(pool_state(&c.pools[0].typed), "TargetFailed");

    let text = crate::history::render(&c.pools[0].typed, now());
    assert!(
        text.contains(&format!("\n{}!   ", "2".repeat(12))),
        "{text}"
    );
    assert!(
        text.contains(&format!("\n{}*   ", "1".repeat(12))),
        "{text}"
    );
    assert!(
        text.ends_with(
            "* the current target\n! 222222222222 failed at 2026-03-02T11:54:00Z (6m): node w2: boot-complete.target failed (not targeted again until the spec changes past generation 1)\n"
        ),
        "{text}"
    );
    // A later spec lifts the mark: the history says so.
    c.pools[0].typed.metadata.generation = Some(2);
    let text = crate::history::render(&c.pools[0].typed, now());
    assert!(
        text.contains("(the spec changed since: the mark no longer holds)"),
        "{text}"
    );
    assert!(super::failed_entries(&c.pools[0].typed).is_empty());
}

fn cordon(c: &mut Cluster, i: usize) {
    c.nodes[i].spec = Some(NodeSpec {
        unschedulable: Some(true),
        ..Default::default()
    });
}

#[test]
fn a_node_someone_else_cordoned_is_left_alone_while_the_pool_respects_cordons() {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    cordon(&mut c, 2);
    let status = c.pools[0].typed.status.as_mut().unwrap();
    status.cordoned_count = 1;
    status.held_count = 1;
    let w3 = why_node(&c, "w3");
    let text = "cordoned by someone else: the Node is unschedulable and bootcnodepool/workers respects cordons (spec.disruption.respectCordon), so it may stage but gets no reboot slot until it is uncordoned (`kubectl uncordon w3`)";
    assert!(w3.blocked.iter().any(|t| t == text), "{w3:?}");
    assert!(
        pool_why(&c)
            .blocked
            .iter()
            .any(|t| *t == format!("node w3: {text}")),
        "{:?}",
        pool_why(&c)
    );
    assert_eq!(
        pool_state(&c.pools[0].typed),
        "RollingOut,held:1,cordoned:1"
    );
    // The controller's own cordon comes with a slot; a node on the target is done; a
    // pool that does not respect cordons updates it anyway.
    cordon(&mut c, 1);
    assert!(!has(&why_node(&c, "w2").blocked, "cordoned"));
    cordon(&mut c, 0);
    assert!(!has(&why_node(&c, "w1").blocked, "cordoned"));
    c.pools[0].typed.spec.disruption.respect_cordon = false;
    assert!(!has(&why_node(&c, "w3").blocked, "cordoned"));
}

#[test]
fn a_node_whose_health_units_are_not_active_names_them_and_their_states() {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    c.pools[0].typed.spec.health = serde_json::from_value(json!({
        "units": ["boot-complete.target", "app.service"], "timeoutSeconds": 300,
    }))
    .unwrap();
    c.bootc_nodes[0].typed.status.as_mut().unwrap().health = serde_json::from_value(json!({
        "bootID": "b1", "healthy": false, "units": [
            {"name": "boot-complete.target", "activeState": "inactive", "subState": "dead"},
            {"name": "app.service", "activeState": "active", "subState": "running"},
            {"name": "db.service", "activeState": "failed"},
        ],
    }))
    .unwrap();
    let text = "unhealthy: health units not active in its running boot: boot-complete.target inactive (dead), db.service failed; each must be active within 300 s of its return on the target, or the node counts toward haltAfterUnhealthy (`journalctl -u UNIT` on the node says why)";
    let w1 = why_node(&c, "w1");
    assert_eq!(w1.blocked, [text], "{w1:?}");
    assert!(
        pool_why(&c)
            .blocked
            .iter()
            .any(|t| *t == format!("node w1: {text}")),
        "{:?}",
        pool_why(&c)
    );
    // Healthy: nothing said.
    c.bootc_nodes[0]
        .typed
        .status
        .as_mut()
        .unwrap()
        .health
        .as_mut()
        .unwrap()
        .healthy = true;
    assert!(why_node(&c, "w1").blocked.is_empty());
    assert_eq!(
        why_pool(&c, &c.pools[0].typed).blocked,
        Vec::<String>::new()
    );
}
