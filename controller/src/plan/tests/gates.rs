//! The health gates: the alert gate, `respectCordon`, `after`, the canary, boot health
//! and automatic rollback.

use bootc_crds::node::{LastReboot, NodeHealth, UnitHealth};
use bootc_crds::pool::{
    AlertGateSpec, AlertGateState, CanaryPhase, CanarySpec, DeployHistoryEntry, FailurePolicy,
    HealthSpec,
};

use super::*;
use crate::plan::world::{GateView, PoolSummary};

fn gated(fail_closed: bool) -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(5));
    spec.health = Some(HealthSpec {
        alerts: Some(AlertGateSpec {
            url: "http://am.test:9093".into(),
            credentials_secret_ref: None,
            matchers: vec!["severity=\"critical\"".into()],
            fail_closed,
            interval_seconds: 15,
        }),
        units: Vec::new(),
        timeout_seconds: 600,
    });
    spec
}

#[test]
fn the_alert_gate_url_shows_without_credentials_or_query() {
    let mut spec = gated(true);
    let alerts = spec.health.as_mut().unwrap().alerts.as_mut().unwrap();
    alerts.url = "http://alice:s3cret@am.test:9093/?token=t0ken".into();
    let cases = [
        (
            GateView::Firing {
                alerts: vec!["NodeTrouble{severity=\"critical\"}".into()],
                count: 1,
                checked: now() - chrono::Duration::minutes(1),
            },
            "1 matching alerts fire at http://am.test:9093/: NodeTrouble{severity=\"critical\"}",
        ),
        (
            GateView::NotConfigured,
            "http://am.test:9093/ has not been asked yet",
        ),
    ];
    for (gate, said) in cases {
        let mut snap = snapshot(spec.clone(), &[node("n1").staged()]);
        snap.gate = gate;
        let plan = super::plan(&snap);
        // Not in the status, its conditions, nor any action (Events included).
        let everything = format!("{plan:?}");
        for secret in ["alice", "s3cret", "t0ken"] {
            assert!(
                !everything.contains(secret),
                "{secret:?} shows: {everything}"
            );
        }
        let message = plan.status.alert_gate.and_then(|g| g.message);
        assert_eq!(message.as_deref(), Some(said));
    }
}

#[test]
fn the_alert_gate_closes_on_firing_alerts_and_when_it_cannot_be_asked() {
    let nodes = [node("n1").staged(), node("n2").staged()];
    let cases = [
        (
            true,
            GateView::Open { checked: now() },
            2,
            AlertGateState::Open,
            "RolloutInProgress",
            "Healthy",
        ),
        (
            true,
            GateView::Firing {
                alerts: vec!["NodeTrouble{severity=\"critical\"}".into()],
                count: 1,
                checked: now(),
            },
            0,
            AlertGateState::Firing,
            "AlertGateClosed",
            "Healthy",
        ),
        (
            true,
            GateView::Unreachable {
                error: "http://am.test:9093: connection refused".into(),
                checked: now(),
            },
            0,
            AlertGateState::Unreachable,
            "AlertGateClosed",
            "AlertGateUnreachable",
        ),
        (
            false,
            GateView::Unreachable {
                error: "http://am.test:9093: connection refused".into(),
                checked: now(),
            },
            2,
            AlertGateState::Unreachable,
            "RolloutInProgress",
            "Healthy",
        ),
        (
            true,
            GateView::NotConfigured,
            0,
            AlertGateState::Unreachable,
            "AlertGateClosed",
            "AlertGateUnreachable",
        ),
    ];
    for (fail_closed, gate, grants, state, up, degraded) in cases {
        let mut snap = snapshot(gated(fail_closed), &nodes);
        snap.gate = gate.clone();
        let plan = super::plan(&snap);
        assert_eq!(granted(&plan).len(), grants, "{gate:?}");
        let status = plan.status.alert_gate.clone().unwrap();
        assert_eq!(status.state, state, "{gate:?}");
        assert_eq!(condition_of(&plan, "UpToDate").reason, up, "{gate:?}");
        assert_eq!(condition_of(&plan, "Degraded").reason, degraded, "{gate:?}");
        assert!(
            plan.requeue_after.unwrap() <= Duration::from_secs(15),
            "{gate:?}"
        );
        if state == AlertGateState::Firing {
            let m = &condition_of(&plan, "UpToDate").message;
            assert!(m.contains("NodeTrouble"), "{m}");
        }
        if degraded == "AlertGateUnreachable" {
            let m = &condition_of(&plan, "Degraded").message;
            assert!(m.contains("http://am.test:9093"), "{m}");
        }
        // Asked again later with the same answer: the status is the same.
        let mut again = snapshot(gated(fail_closed), &nodes);
        again.pool.status = Some(plan.status.clone());
        again.now = now() + chrono::Duration::seconds(30);
        again.gate = match gate {
            GateView::Open { .. } => GateView::Open { checked: again.now },
            GateView::Firing { alerts, count, .. } => GateView::Firing {
                alerts,
                count,
                checked: again.now,
            },
            GateView::Unreachable { error, .. } => GateView::Unreachable {
                error,
                checked: again.now,
            },
            GateView::NotConfigured => GateView::NotConfigured,
        };
        let later = super::plan(&again);
        assert_eq!(later.status.alert_gate, plan.status.alert_gate);
    }
    // Without a gate in the spec, there is no alertGate status.
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(5)), &nodes));
    assert_eq!(plan.status.alert_gate, None);
}

#[test]
fn a_drained_node_waits_for_the_alert_gate_before_its_approval() {
    let drained = node("n1").staged().slot().cordoned();
    let approved = |plan: &Plan| {
        plan.actions.iter().any(|a| {
            matches!(a, Action::Update { node, spec, .. }
                if node == "n1" && spec.desired_image_state == DesiredImageState::Booted)
        })
    };
    for (gate, approves) in [
        (GateView::Open { checked: now() }, true),
        (
            GateView::Firing {
                alerts: vec!["X".into()],
                count: 1,
                checked: now(),
            },
            false,
        ),
    ] {
        let mut snap = snapshot(gated(true), std::slice::from_ref(&drained));
        snap.drains.insert("n1".into(), DrainView::Drained);
        snap.gate = gate.clone();
        let plan = super::plan(&snap);
        assert_eq!(approved(&plan), approves, "{gate:?}");
        // Either way it keeps its slot and its cordon.
        assert!(
            !plan
                .actions
                .contains(&Action::Uncordon { node: "n1".into() })
        );
        assert_eq!(plan.states.get("n1"), Some(&NodeState::Rebooting));
    }
}

#[test]
fn a_node_someone_else_cordoned_is_left_alone_unless_told_otherwise() {
    let nodes = [node("n1").staged().cordoned(), node("n2").updated()];
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(2)), &nodes));
    assert!(granted(&plan).is_empty());
    assert_eq!(plan.status.cordoned_count, 1);
    let progressing = condition_of(&plan, "Progressing");
    assert_eq!(progressing.reason, "HeldNodesLeft");
    assert!(
        progressing.message.contains("cordoned by someone else: n1"),
        "{}",
        progressing.message
    );
    // Never uncordoned by us.
    assert!(
        !plan
            .actions
            .contains(&Action::Uncordon { node: "n1".into() })
    );

    let mut spec = pool_spec(IntOrString::Int(2));
    spec.disruption.respect_cordon = false;
    let plan = super::plan(&snapshot(spec, &nodes));
    assert_eq!(granted(&plan), vec!["n1"]);
    assert_eq!(plan.status.cordoned_count, 0);
}

fn after(pools: &[&str]) -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(5));
    spec.rollout.after = pools.iter().map(|p| (*p).to_owned()).collect();
    spec
}

fn summary(after: &[&str], up_to_date: bool, halted: bool) -> PoolSummary {
    PoolSummary {
        after: after.iter().map(|p| (*p).to_owned()).collect(),
        up_to_date,
        halted,
    }
}

#[test]
fn a_pool_approves_only_once_the_pools_it_follows_are_up_to_date() {
    let nodes = [node("n1").staged()];
    type Case = (
        Vec<(&'static str, PoolSummary)>,
        usize,
        &'static str,
        &'static str,
    );
    let cases: [Case; 5] = [
        (vec![], 0, "WaitingForPools", "pool infra does not exist"),
        (
            vec![("infra", summary(&[], false, false))],
            0,
            "WaitingForPools",
            "pool infra is not up to date",
        ),
        (
            vec![("infra", summary(&[], true, true))],
            0,
            "WaitingForPools",
            "pool infra is halted",
        ),
        (
            vec![("infra", summary(&[], true, false))],
            1,
            "RolloutInProgress",
            "0/1 updated; 1 rebooting",
        ),
        (
            vec![
                ("infra", summary(&["db"], true, false)),
                ("db", summary(&[POOL], true, false)),
            ],
            0,
            "WaitingForPools",
            "rollout.after forms a cycle (workers -> infra",
        ),
    ];
    for (pools, grants, reason, says) in cases {
        let mut snap = snapshot(after(&["infra"]), &nodes);
        snap.pools =
            std::sync::Arc::new(pools.into_iter().map(|(n, s)| (n.to_owned(), s)).collect());
        let plan = super::plan(&snap);
        assert_eq!(granted(&plan).len(), grants, "{reason} {says}");
        let up = condition_of(&plan, "UpToDate");
        assert_eq!(up.reason, reason);
        assert!(up.message.contains(says), "{}", up.message);
        // Staging is not held back.
        assert_eq!(plan.status.staged_count + plan.status.updating_count, 1);
    }
    // The cycle is named in the Degraded condition.
    let mut snap = snapshot(after(&["infra"]), &nodes);
    snap.pools = std::sync::Arc::new(
        [
            ("infra".to_owned(), summary(&["db"], true, false)),
            ("db".to_owned(), summary(&[POOL], true, false)),
        ]
        .into(),
    );
    let d = condition_of(&super::plan(&snap), "Degraded").clone();
    assert_eq!(d.reason, "OrderingCycle");
    assert!(
        d.message.contains("workers -> infra -> db -> workers"),
        "{}",
        d.message
    );
}

#[test]
fn the_summary_of_another_pool_reads_its_current_status() {
    let mut pool: BootcNodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": "infra", "generation": 2},
        "spec": {"nodeSelector": {}, "image": {"ref": pin('b')}, "rollout": {"after": ["base"]}},
    }))
    .unwrap();
    let cond = |type_: &str, status: &str, reason: &str| agent_condition(type_, status, reason, "");
    pool.status = Some(BootcNodePoolStatus {
        observed_generation: Some(2),
        conditions: vec![
            cond("UpToDate", "True", "AllUpdated"),
            cond("Degraded", "False", "Healthy"),
        ],
        ..Default::default()
    });
    assert_eq!(
        super::ordering::summary(&pool),
        summary(&["base"], true, false)
    );
    // A status from an older spec says nothing about the current one.
    pool.metadata.generation = Some(3);
    assert!(!super::ordering::summary(&pool).up_to_date);
}

fn with_canary(nodes: &str, soak: i64) -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(5));
    let nodes = match nodes.parse::<i32>() {
        Ok(n) => IntOrString::Int(n),
        Err(_) => IntOrString::String(nodes.into()),
    };
    spec.rollout.canary = Some(CanarySpec {
        nodes,
        soak_seconds: soak,
    });
    spec
}

fn updated(name: &'static str) -> N {
    node(name).updated()
}

#[test]
fn the_canary_goes_first_then_soaks_then_lets_the_rest_go() {
    // 5 nodes, canary 40%: two nodes, then a 300 s soak.
    let staged = ["n1", "n2", "n3", "n4", "n5"].map(|n| node(n).staged());
    let plan = super::plan(&snapshot(with_canary("40%", 300), &staged));
    assert_eq!(granted(&plan), vec!["n1", "n2"]);
    let canary = plan.status.canary.clone().unwrap();
    assert_eq!((canary.phase, canary.nodes), (CanaryPhase::Updating, 2));
    assert_eq!(condition_of(&plan, "UpToDate").reason, "Canary");

    // Both canaries back: soaking, nobody else.
    let nodes = [
        updated("n1"),
        updated("n2"),
        node("n3").staged(),
        node("n4").staged(),
        node("n5").staged(),
    ];
    let plan = super::plan(&snapshot(with_canary("40%", 300), &nodes));
    assert!(granted(&plan).is_empty());
    let canary = plan.status.canary.clone().unwrap();
    assert_eq!(canary.phase, CanaryPhase::Soaking);
    assert_eq!(canary.soak_started_time, to_time(now()));
    assert!(plan.requeue_after.unwrap() <= Duration::from_secs(301));
    assert_eq!(condition_of(&plan, "Progressing").reason, "Advancing");

    // 200 s on: still soaking, from the same start.
    let mut snap = snapshot(with_canary("40%", 300), &nodes);
    snap.pool.status = Some(plan.status.clone());
    snap.now = now() + chrono::Duration::seconds(200);
    let mid = super::plan(&snap);
    assert!(granted(&mid).is_empty());
    assert_eq!(
        mid.status.canary.as_ref().unwrap().soak_started_time,
        to_time(now())
    );

    // An alert meanwhile starts the soak again.
    let mut alerted = snap.clone();
    alerted.pool.spec = gated(true);
    alerted.pool.spec.rollout.canary = with_canary("40%", 300).rollout.canary;
    alerted.gate = GateView::Firing {
        alerts: vec!["X".into()],
        count: 1,
        checked: alerted.now,
    };
    let restarted = super::plan(&alerted);
    assert_eq!(
        restarted.status.canary.as_ref().unwrap().soak_started_time,
        to_time(alerted.now)
    );

    // 300 s on, all well: complete, written before anyone else goes; at once again.
    snap.pool.status = Some(mid.status.clone());
    snap.now = now() + chrono::Duration::seconds(300);
    let done = super::plan(&snap);
    assert!(granted(&done).is_empty(), "{:?}", granted(&done));
    assert_eq!(
        done.status.canary.as_ref().unwrap().phase,
        CanaryPhase::Complete
    );
    assert!(done.requeue_after.unwrap() <= Duration::from_secs(1));
    // Once the status says so, the rest go (budget 5), and it stays complete.
    snap.pool.status = Some(done.status.clone());
    assert_eq!(granted(&super::plan(&snap)), vec!["n3", "n4", "n5"]);
    snap.now = now() + chrono::Duration::seconds(301);
    let after = super::plan(&snap);
    assert_eq!(granted(&after), vec!["n3", "n4", "n5"]);
    assert_eq!(
        after.status.canary.as_ref().unwrap().phase,
        CanaryPhase::Complete
    );
}

#[test]
fn a_canary_node_gone_degraded_stops_the_canary() {
    let sick = node("n1").with(
        'b',
        DesiredImageState::Staged,
        agent('b', None, "Idle", Some("bad")),
    );
    let nodes = [sick, updated("n2"), node("n3").staged()];
    let plan = super::plan(&snapshot(with_canary("2", 0), &nodes));
    assert!(granted(&plan).is_empty(), "{:?}", granted(&plan));
    assert_eq!(plan.status.canary.unwrap().phase, CanaryPhase::Soaking);
}

fn health_spec(units: &[&str], rollback: bool) -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(2));
    spec.health = Some(HealthSpec {
        alerts: None,
        units: units.iter().map(|u| (*u).to_owned()).collect(),
        timeout_seconds: 120,
    });
    spec.rollout.halt_after_unhealthy = 1;
    if rollback {
        spec.rollout.on_failure = FailurePolicy::Rollback;
    }
    spec
}

/// A holder back on `b` after its reboot (boot "old" before it), reporting `units`.
fn back_with(name: &'static str, boot: &str, units: &[(&str, &str)]) -> N {
    let mut status = agent('b', None, "Idle", None);
    status.last_reboot = Some(LastReboot {
        digest: digest('b').to_string(),
        boot_id: "old".into(),
        soft_reboots: 0,
        time: to_time(now() - chrono::Duration::hours(2)).unwrap(),
    });
    if !units.is_empty() {
        status.health = Some(NodeHealth {
            boot_id: boot.into(),
            soft_reboots: 0,
            healthy: units.iter().all(|(_, s)| *s == "active"),
            units: units
                .iter()
                .map(|(n, s)| UnitHealth {
                    name: (*n).into(),
                    active_state: (*s).into(),
                    sub_state: String::new(),
                })
                .collect(),
        });
    }
    node(name)
        .with('b', DesiredImageState::Booted, status)
        .slot()
        .annotate(APPROVED_AT_ANNOTATION, "2026-11-22T11:59:00Z")
        .annotate(
            BACK_AT_ANNOTATION,
            &stamp_of(now() - chrono::Duration::hours(1)),
        )
        .cordoned()
}

fn stamp_of(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn released(plan: &Plan, name: &str) -> bool {
    plan.actions.iter().any(|a| {
        matches!(a, Action::Update { node, annotations, .. }
        if node == name && annotations.get(REBOOT_SLOT_ANNOTATION) == Some(&None))
    })
}

#[test]
fn a_node_back_counts_healthy_only_with_its_units_active() {
    let unit = "boot-complete.target";
    let spec = || health_spec(&[unit], false);
    // All active in the new boot: released.
    let plan = super::plan(&snapshot(
        spec(),
        &[back_with("n1", "new", &[(unit, "active")])],
    ));
    assert!(released(&plan, "n1"));
    // No report, a report from the old boot, or still activating (booted an hour ago,
    // timeout 120 s: too late).
    for n in [
        back_with("n1", "new", &[]),
        back_with("n1", "old", &[(unit, "active")]),
    ] {
        let plan = super::plan(&snapshot(spec(), &[n]));
        assert!(!released(&plan, "n1"));
        let d = condition_of(&plan, "Degraded");
        assert!(d.message.contains("BootHealthTimeout"), "{}", d.message);
    }
    let plan = super::plan(&snapshot(
        spec(),
        &[back_with("n1", "new", &[(unit, "failed")])],
    ));
    assert!(!released(&plan, "n1"));
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "RolloutHalted");
    assert!(
        d.message
            .contains("UnhealthyUnits: boot-complete.target is failed"),
        "{}",
        d.message
    );
    assert_eq!(plan.status.degraded_count, 1);
    // Within the timeout, an activating unit is waited for.
    // The controller saw it back 30 s ago; its own clock says it booted an hour ago,
    // which does not count.
    let n = back_with("n1", "new", &[(unit, "activating")]).annotate(
        BACK_AT_ANNOTATION,
        &stamp_of(now() - chrono::Duration::seconds(30)),
    );
    let plan = super::plan(&snapshot(spec(), &[n]));
    assert!(!released(&plan, "n1"));
    assert_eq!(condition_of(&plan, "Degraded").reason, "Healthy");
    assert!(plan.requeue_after.unwrap() <= Duration::from_secs(92));
}

pub(crate) fn history(c: char, count: i32, minutes_ago: i64) -> DeployHistoryEntry {
    let t = to_time(now() - chrono::Duration::minutes(minutes_ago)).unwrap();
    DeployHistoryEntry {
        digest: digest(c).to_string(),
        image: pin(c),
        version: Some(format!("v-{c}")),
        node_count: count,
        first_deployed: t.clone(),
        last_deployed: t,
        origin: bootc_crds::pool::HistoryOrigin::Targeted,
        failed: false,
        failed_reason: None,
        failed_time: None,
        failed_generation: None,
    }
}

#[test]
fn a_failing_target_is_marked_and_rolled_back_and_not_tried_again() {
    let unit = "boot-complete.target";
    let nodes = [
        back_with("n1", "new", &[(unit, "failed")]),
        node("n2").staged(),
    ];
    let mut snap = snapshot(health_spec(&[unit], true), &nodes);
    snap.pool.status = Some(BootcNodePoolStatus {
        deploy_history: vec![history('a', 2, 60)],
        ..Default::default()
    });
    let plan = super::plan(&snap);
    // Marked failed, with the reason and the generation.
    let b = plan
        .status
        .deploy_history
        .iter()
        .find(|e| e.digest == digest('b').to_string())
        .unwrap();
    assert!(b.failed);
    assert!(
        b.failed_reason
            .as_deref()
            .unwrap()
            .contains("boot-complete.target is failed")
    );
    assert_eq!(b.failed_generation, Some(1));
    // The target is the image before; the failing node is sent back to it and released.
    assert_eq!(plan.status.target_image.as_deref(), Some(pin('a').as_str()));
    let n1 = actions_for(&plan, "n1");
    assert!(
        n1.iter()
            .any(|a| matches!(a, Action::Update { spec, .. } if spec.desired_image == pin('a'))),
        "{n1:?}"
    );
    assert!(released(&plan, "n1"));
    // n2 never booted b: it is simply retargeted.
    assert!(
        actions_for(&plan, "n2")
            .iter()
            .any(|a| matches!(a, Action::Update { spec, .. } if spec.desired_image == pin('a')))
    );
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "TargetFailed");
    assert!(d.message.contains("rolled back to"), "{}", d.message);
    assert!(event_reasons(&plan).contains(&events::TARGET_FAILED));

    // Planned again from that status, with b still resolved: a stays the target.
    let mut again = snapshot(health_spec(&[unit], true), &[node("n1").staged()]);
    again.pool.status = Some(plan.status.clone());
    let plan2 = super::plan(&again);
    assert_eq!(
        plan2.status.target_image.as_deref(),
        Some(pin('a').as_str())
    );
    assert_eq!(condition_of(&plan2, "UpToDate").reason, "RollingBack");
    // A spec change clears the mark: b is the target again.
    again.pool.generation = Some(2);
    let plan3 = super::plan(&again);
    assert_eq!(
        plan3.status.target_image.as_deref(),
        Some(pin('b').as_str())
    );
    assert!(plan3.status.deploy_history.iter().all(|e| !e.failed));
}

#[test]
fn with_halt_or_nothing_to_go_back_to_a_failing_target_only_halts() {
    let unit = "boot-complete.target";
    let nodes = [
        back_with("n1", "new", &[(unit, "failed")]),
        node("n2").staged(),
    ];
    // onFailure Halt: halted, nothing marked.
    let mut snap = snapshot(health_spec(&[unit], false), &nodes);
    snap.pool.status = Some(BootcNodePoolStatus {
        deploy_history: vec![history('a', 2, 60)],
        ..Default::default()
    });
    let plan = super::plan(&snap);
    assert_eq!(condition_of(&plan, "Degraded").reason, "RolloutHalted");
    assert!(plan.status.deploy_history.iter().all(|e| !e.failed));
    // Rollback without an earlier image: marked, nothing approved.
    let snap = snapshot(health_spec(&[unit], true), &nodes);
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "TargetFailed");
    assert!(
        d.message.contains("ran no other image before"),
        "{}",
        d.message
    );
}

#[test]
fn a_pinned_target_carries_its_own_version_never_the_previous_one() {
    // The pool ran v-b (digest b) and pins a, as `kubectl bootc rollback` does.
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.image.r#ref = pin('a');
    let mut snap = snapshot(spec.clone(), &[node("n1").staged()]);
    snap.pool.status = Some(BootcNodePoolStatus {
        target_digest: Some(digest('b').to_string()),
        target_version: Some("v-b".into()),
        deploy_history: vec![history('b', 1, 10), history('a', 1, 60)],
        ..BootcNodePoolStatus::default()
    });
    let plan = super::plan(&snap);
    assert_eq!(plan.status.target_digest, Some(digest('a').to_string()));
    assert_eq!(plan.status.target_version.as_deref(), Some("v-a"));
    // A digest no history entry knows: no version at all.
    spec.image.r#ref = pin('c');
    snap.pool.spec = spec;
    let plan = super::plan(&snap);
    assert_eq!(plan.status.target_version, None);
}
