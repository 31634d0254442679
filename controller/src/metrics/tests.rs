use super::*;

#[test]
fn forget_pool_removes_all_its_series() {
    let m = Metrics::new();
    m.observe_reconcile("a", Duration::from_millis(3));
    m.record_reconcile_error("a", "kube");
    m.set_nodes("a", &BTreeMap::from([("Staged", 2)]));
    m.set_target("a", "quay.io/x:1", "sha256:aa", None);
    m.observe_drain("a", DrainResult::Drained, Duration::from_secs(4));
    m.record_reboot_approved("a");
    m.record_reboot_approved("b");
    m.forget_pool("a");
    let text = m.encode();
    assert!(!text.contains("pool=\"a\""), "{text}");
    assert!(text.contains("pool=\"b\""), "{text}");
}

#[test]
fn node_states_match_plan_states() {
    let states = [
        ("n1".to_owned(), NodeState::Degraded),
        ("n2".to_owned(), NodeState::UpToDate),
        ("n3".to_owned(), NodeState::UpToDate),
    ]
    .into_iter()
    .collect();
    let m = Metrics::new();
    m.set_node_states("p", &states);
    let text = m.encode();
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"UpToDate\"} 2"));
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"Degraded\"} 1"));
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"Pending\"} 0"));
}

mod health {
    use super::*;
    use crate::plan::{BootcView, NodeView, Plan, PoolView, Progress, Snapshot};
    use bootc_crds::node::BootcNodeStatus;
    use bootc_crds::pool::BootcNodePoolStatus;
    use chrono::{DateTime, Utc};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2026-11-22T12:00:00Z".parse().unwrap()
    }

    fn condition(type_: &str, status: &str, reason: &str, since: &str) -> Condition {
        serde_json::from_value(json!({
            "type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": since,
        }))
        .unwrap()
    }

    /// A member whose BootcNode is at `generation`, its agent having answered `observed`,
    /// with an `Idle` condition and annotations.
    fn member(
        name: &str,
        generation: i64,
        observed: Option<i64>,
        idle: Option<Condition>,
        annotations: &[(&str, &str)],
    ) -> NodeView {
        NodeView {
            name: name.into(),
            node: None,
            bootc: Some(BootcView::of_parts(
                Some("p"),
                Some(generation),
                None,
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                serde_json::from_value(json!({"desiredImage": "quay.io/os@sha256:aa"})).unwrap(),
                Some(BootcNodeStatus {
                    observed_generation: observed,
                    conditions: idle.into_iter().collect(),
                    ..BootcNodeStatus::default()
                }),
            )),
        }
    }

    fn snapshot(nodes: Vec<NodeView>) -> Snapshot {
        Snapshot::of(
            PoolView {
                name: "p".to_owned(),
                generation: Some(1),
                spec: serde_json::from_value(json!({
                    "nodeSelector": {}, "image": {"ref": "quay.io/os:stable"}
                }))
                .unwrap(),
                status: None,
                deleting: false,
                finalized: true,
            },
            nodes,
            now(),
        )
    }

    fn plan(states: &[(&str, NodeState)], conditions: Vec<Condition>) -> Plan {
        Plan {
            actions: Vec::new(),
            grants_from: 0,
            releases: 0,
            status: BootcNodePoolStatus {
                conditions,
                ..BootcNodePoolStatus::default()
            },
            states: states.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect(),
            requeue_after: None,
            target: None,
            progress: Progress {
                fingerprint: 0,
                since: now(),
            },
        }
    }

    #[test]
    fn health_counts_unreported_members_and_the_oldest_in_each_state() {
        let staging_since = "2026-11-22T11:00:00Z";
        let snap = snapshot(vec![
            // Staging for an hour, answered.
            member(
                "a",
                3,
                Some(3),
                Some(condition("Idle", "False", "Staging", staging_since)),
                &[],
            ),
            // Staging for ten minutes, its agent behind.
            member(
                "b",
                4,
                Some(3),
                Some(condition(
                    "Idle",
                    "False",
                    "Staging",
                    "2026-11-22T11:50:00Z",
                )),
                &[],
            ),
            // Pending with an agent that never reported: unreported, not timed.
            member("c", 1, None, None, &[]),
            // Its agent has not left Idle: not timed as Staging.
            member(
                "d",
                2,
                Some(2),
                Some(condition("Idle", "True", "Idle", "2026-01-01T00:00:00Z")),
                &[],
            ),
            // Holds a slot granted 20 minutes ago (the Idle time is older: not used).
            member(
                "e",
                5,
                Some(5),
                Some(condition("Idle", "False", "Rebooting", staging_since)),
                &[(bootc_crds::REBOOT_SLOT_ANNOTATION, "2026-11-22T11:40:00Z")],
            ),
            // Not a member (left the pool): not counted at all.
            member("f", 9, Some(1), None, &[]),
        ]);
        let mut planned = plan(
            &[
                ("a", NodeState::Staging),
                ("b", NodeState::Staging),
                ("c", NodeState::Pending),
                ("d", NodeState::Staging),
                ("e", NodeState::Rebooting),
            ],
            vec![
                condition("Progressing", "False", "Stalled", staging_since),
                condition("Degraded", "True", "RolloutHalted", staging_since),
            ],
        );
        planned.status.drifted_count = 2;
        let health = PoolHealth::of(&snap, &planned);
        assert_eq!(health.unreported, 2, "{health:?}");
        assert_eq!(health.drifted, 2, "{health:?}");
        assert_eq!(health.oldest, [3600, 1200], "{health:?}");
        assert_eq!(
            health.conditions,
            [
                ("Progressing".to_owned(), "Stalled".to_owned(), false),
                ("Degraded".to_owned(), "RolloutHalted".to_owned(), true),
            ]
        );

        // A slot granted by this very plan (no annotation yet) counts 0, not the Idle time.
        let snap = snapshot(vec![member(
            "e",
            5,
            Some(5),
            Some(condition("Idle", "False", "Staged", staging_since)),
            &[],
        )]);
        let granted = plan(&[("e", NodeState::Rebooting)], Vec::new());
        assert_eq!(PoolHealth::of(&snap, &granted).oldest, [0, 0]);
    }

    #[test]
    fn a_condition_keeps_one_series_as_its_reason_changes() {
        let m = Metrics::new();
        let mut health = PoolHealth {
            conditions: vec![("Progressing".to_owned(), "Stalled".to_owned(), false)],
            unreported: 1,
            oldest: [60, 0],
            drifted: 3,
        };
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(
            text.contains(
                "bootc_pool_condition{pool=\"p\",type=\"Progressing\",reason=\"Stalled\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains("bootc_pool_nodes_unreported{pool=\"p\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("bootc_pool_nodes_drifted{pool=\"p\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("bootc_pool_oldest_in_state_seconds{pool=\"p\",state=\"Staging\"} 60"),
            "{text}"
        );
        health.conditions = vec![("Progressing".to_owned(), "Advancing".to_owned(), true)];
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(!text.contains("Stalled"), "{text}");
        assert!(text.contains("reason=\"Advancing\"} 1"), "{text}");
        m.forget_pool("p");
        let text = m.encode();
        assert!(!text.contains("pool=\"p\""), "{text}");
    }
}
