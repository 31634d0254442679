use k8s_openapi::api::core::v1::NodeSpec;
use serde_json::json;

use bootc_pool_controller::plan::GateView;

use super::super::tests::{has, pool_why};
use super::super::{why_node, why_pool};
use crate::objects::Cluster;
use crate::status::pool_state;
use crate::tests::fixtures::*;

/// `workers` with an alert gate to an Alertmanager (`fail_closed`), planned by the
/// controller with the gate answering `gate`.
fn gated(fail_closed: bool, gate: GateView) -> Cluster {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    c.pools[0].typed.spec.health = serde_json::from_value(json!({"alerts": {
        "url": "http://alertmanager.monitoring:9093",
        "matchers": ["severity=\"critical\""],
        "failClosed": fail_closed,
    }}))
    .unwrap();
    controller_wrote(c, gate, &[])
}

#[test]
fn a_firing_alert_gate_names_the_alerts_and_holds_every_staged_node() {
    let firing = GateView::Firing {
        alerts: vec!["NodeDown{severity=\"critical\", instance=\"db-1\"}".into()],
        count: 1,
        checked: now() - chrono::Duration::minutes(1),
    };
    let c = gated(true, firing);
    let p = pool_why(&c);
    let closed = "alert gate closed: 1 matching alerts fire at http://alertmanager.monitoring:9093: NodeDown{severity=\"critical\", instance=\"db-1\"} (gate AlertsFiring: no new reboot slot or approval, on purpose)";
    assert_eq!(p.blocked, [closed], "{p:?}");
    assert!(
        has(
            &why_node(&c, "w3").blocked,
            &format!("waiting for a reboot slot: {closed}")
        ),
        "{:?}",
        why_node(&c, "w3")
    );
    assert_eq!(pool_state(&c.pools[0].typed), "gate:firing");
    // Open again: nothing said, and the state is a plain rollout.
    let open = gated(true, GateView::Open { checked: now() });
    assert!(!has(&pool_why(&open).blocked, "alert gate"));
    assert_eq!(pool_state(&open.pools[0].typed), "RollingOut");
}

#[test]
fn an_unreachable_gate_names_its_url_and_error_and_says_whether_it_fails_closed() {
    let unreachable = GateView::Unreachable {
        error: "connection refused".into(),
        checked: now() - chrono::Duration::minutes(2),
    };
    let c = gated(true, unreachable.clone());
    let p = pool_why(&c);
    // The Degraded condition says it; the gate's verdict, with the same reason, is not
    // said twice.
    assert_eq!(
        p.blocked,
        [
            "alert gate unreachable: http://alertmanager.monitoring:9093 cannot be asked (connection refused) and failClosed is true, so no new reboot is approved (Degraded/AlertGateUnreachable): connection refused; no reboots are approved while the alert gate cannot be asked (failClosed)"
        ],
        "{p:?}"
    );
    assert!(has(
        &why_node(&c, "w3").blocked,
        "waiting for a reboot slot: alert gate closed: the alert gate cannot be asked: connection refused (gate AlertGateUnreachable"
    ));
    assert_eq!(
        pool_state(&c.pools[0].typed),
        "AlertGateUnreachable,gate:unreachable"
    );

    // Failing open: a note, nothing held.
    let c = gated(false, unreachable);
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

/// `workers` with a canary of 1 node soaking 600 s, as the controller planned it from
/// the canary in `phase`, its soak begun `minutes` ago.
fn canary(phase: &str, minutes: i64) -> Cluster {
    let rollout = json!({"maxUnavailable": 1, "canary": {"nodes": 1, "soakSeconds": 600}});
    let mut c = workers(rollout, in_progress());
    let status = c.pools[0].typed.status.as_mut().unwrap();
    let mut canary = json!({"digest": digest('2'), "phase": phase, "nodes": 1});
    if phase != "Updating" {
        canary["soakStartedTime"] = json!(ago(minutes));
    }
    status.canary = serde_json::from_value(canary).unwrap();
    controller_wrote(c, GateView::NotConfigured, &[])
}

#[test]
fn a_soaking_canary_is_progress_not_a_problem() {
    let c = canary("Soaking", 2);
    let p = pool_why(&c);
    let soaking = "canary: 1 nodes run the target, soaking for 600s; the rest of the pool waits (gate CanarySoaking: no new reboot slot, on purpose)";
    assert!(p.progressing.iter().any(|t| t == soaking), "{p:?}");
    let w3 = why_node(&c, "w3");
    assert!(
        has(
            &w3.progressing,
            &format!("waiting for a reboot slot: {soaking}")
        ),
        "{w3:?}"
    );
    assert!(!has(&w3.blocked, "canary"), "{w3:?}");
    assert_eq!(pool_state(&c.pools[0].typed), "canary:soaking");

    // The soak is over: the controller says the canary is complete; the rest goes on.
    let over = canary("Soaking", 11);
    assert!(!has(&pool_why(&over).progressing, "soaking for"));
    assert_eq!(pool_state(&over.pools[0].typed), "RollingOut");

    let complete = canary("Complete", 20);
    assert!(!has(&pool_why(&complete).progressing, "canary"));
}

#[test]
fn waiting_for_pools_names_each_pool_and_why() {
    let rollout = json!({"maxUnavailable": 1, "after": ["infra", "db", "edge"]});
    let mut c = workers(rollout, in_progress());
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
    let planned = controller_wrote(c.clone(), GateView::NotConfigured, &[]);
    let p = pool_why(&planned);
    let waiting = "waiting for other pools: pool infra is not up to date; pool db does not exist (gate WaitingForPools: no new reboot slot, on purpose)";
    assert!(p.blocked.iter().any(|t| t == waiting), "{p:?}");
    assert!(has(
        &why_node(&planned, "w3").blocked,
        &format!("waiting for a reboot slot: {waiting}")
    ));
    assert_eq!(pool_state(&planned.pools[0].typed), "WaitingForPools");
    // A halted pool is named as halted; once every pool is there, nothing is said.
    let halted = json!([cond("Degraded", "True", "RolloutHalted", "", 5)]);
    c.pools[2] = pool("infra", json!({}), pool_status('2', [2, 1, 1, 1], halted));
    let planned = controller_wrote(c.clone(), GateView::NotConfigured, &[]);
    assert!(has(&pool_why(&planned).blocked, "pool infra is halted"));
    c.pools[0].typed.spec.rollout.after = vec!["edge".into()];
    let planned = controller_wrote(c, GateView::NotConfigured, &[]);
    assert!(!has(&pool_why(&planned).blocked, "other pools"));
}

#[test]
fn an_ordering_cycle_is_said_once_with_its_path() {
    let mut c = workers(
        json!({"maxUnavailable": 1, "after": ["infra"]}),
        in_progress(),
    );
    let mut infra = pool("infra", json!({}), serde_json::Value::Null);
    infra.typed.spec.rollout.after = vec!["workers".into()];
    c.pools.push(infra);
    let c = controller_wrote(c, GateView::NotConfigured, &[]);
    let p = pool_why(&c);
    let cycle = "ordering cycle: spec.rollout.after waits, through other pools, on this pool itself, so nothing is approved; take a name out of one pool's spec.rollout.after (Degraded/OrderingCycle): rollout.after forms a cycle (workers -> infra -> workers); no reboots are approved until it is broken";
    assert_eq!(
        p.blocked
            .iter()
            .filter(|t| t.contains("forms a cycle"))
            .count(),
        1,
        "{p:?}"
    );
    assert!(p.blocked.iter().any(|t| t == cycle), "{p:?}");
    assert!(has(
        &why_node(&c, "w3").blocked,
        "rollout.after forms a cycle (workers -> infra -> workers)"
    ));
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
    let planned = controller_wrote(c.clone(), GateView::NotConfigured, &[]);
    let text = "cordoned by someone else: w3; uncordon them (or set disruption.respectCordon to false) to update them (gate CordonedByOthers: no new reboot slot, on purpose); `kubectl uncordon w3`";
    let w3 = why_node(&planned, "w3");
    assert!(has(&w3.blocked, text), "{w3:?}");
    assert!(
        pool_why(&planned).blocked.iter().any(|t| t == text),
        "{:?}",
        pool_why(&planned)
    );
    assert_eq!(pool_state(&planned.pools[0].typed), "RollingOut,cordoned:1");
    // A pool that does not respect cordons updates it anyway.
    c.pools[0].typed.spec.disruption.respect_cordon = false;
    let planned = controller_wrote(c, GateView::NotConfigured, &[]);
    assert!(!has(&why_node(&planned, "w3").blocked, "cordoned"));
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
