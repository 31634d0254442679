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
    use crate::plan::health::Health;
    use crate::plan::{Plan, Progress};
    use bootc_crds::pool::BootcNodePoolStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use serde_json::json;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        serde_json::from_value(json!({
            "type": type_, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": "2026-11-22T11:00:00Z",
        }))
        .unwrap()
    }

    /// The `bootc_pool_target_info` series of an encoded registry.
    fn target_lines(text: &str) -> Vec<&str> {
        (text.lines())
            .filter(|l| l.starts_with("bootc_pool_target_info{"))
            .collect()
    }

    /// The gauges say what the plan found: its conditions and drifted count from the
    /// status, its members unreported and oldest in each state from its health.
    #[test]
    fn health_is_what_the_plan_found() {
        let planned = Plan {
            actions: Vec::new(),
            grants_from: 0,
            releases: 0,
            status: BootcNodePoolStatus {
                conditions: vec![
                    condition("Progressing", "False", "Stalled"),
                    condition("Degraded", "True", "RolloutHalted"),
                ],
                drifted_count: 2,
                ..BootcNodePoolStatus::default()
            },
            states: [("a".to_owned(), NodeState::Staging)].into_iter().collect(),
            requeue_after: None,
            target: None,
            progress: Progress {
                fingerprint: 0,
                since: "2026-11-22T12:00:00Z".parse().unwrap(),
            },
            health: Health {
                unreported: 3,
                oldest: [3600, 1200],
            },
        };
        let health = PoolHealth::of(&planned);
        assert_eq!(health.unreported, 3, "{health:?}");
        // Set from the plan as a reconcile sets them: the states counted, the health,
        // the target.
        let m = Metrics::new();
        let mut planned = planned;
        let image = format!("quay.io/os@sha256:{}", "a".repeat(64));
        planned.target = crate::plan::Target::from_ref(&image);
        m.set_plan("p", &planned);
        let text = m.encode();
        for line in [
            "bootc_pool_nodes{pool=\"p\",state=\"Staging\"} 1".to_owned(),
            "bootc_pool_nodes{pool=\"p\",state=\"UpToDate\"} 0".to_owned(),
            "bootc_pool_nodes_unreported{pool=\"p\"} 3".to_owned(),
            "bootc_pool_nodes_drifted{pool=\"p\"} 2".to_owned(),
            "bootc_pool_oldest_in_state_seconds{pool=\"p\",state=\"Rebooting\"} 1200".to_owned(),
            format!(
                "bootc_pool_target_info{{pool=\"p\",image=\"{image}\",digest=\"sha256:{}\",version=\"\"}} 1",
                "a".repeat(64)
            ),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // A new target replaces the series of the one before.
        let next = format!("quay.io/os@sha256:{}", "b".repeat(64));
        planned.target = crate::plan::Target::from_ref(&next);
        m.set_plan("p", &planned);
        let text = m.encode();
        let targets = target_lines(&text);
        assert_eq!(targets.len(), 1, "{text}");
        assert!(targets[0].contains(&"b".repeat(64)), "{text}");
        // And so does its version, once known.
        planned.status.target_version = Some("42.1".to_owned());
        m.set_plan("p", &planned);
        let text = m.encode();
        let targets = target_lines(&text);
        assert_eq!(targets.len(), 1, "{text}");
        assert!(targets[0].contains("version=\"42.1\""), "{text}");
        // The next plan moves them; a pool forgotten and planned again has them again.
        planned.states = [("a".to_owned(), NodeState::UpToDate)]
            .into_iter()
            .collect();
        planned.health.oldest = [0, 0];
        planned.target = None;
        m.set_plan("p", &planned);
        let text = m.encode();
        assert!(
            text.contains("bootc_pool_nodes{pool=\"p\",state=\"Staging\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("bootc_pool_nodes{pool=\"p\",state=\"UpToDate\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("bootc_pool_target_info{pool=\"p\""),
            "{text}"
        );
        m.forget_pool("p");
        assert!(!m.encode().contains("pool=\"p\""));
        m.set_plan("p", &planned);
        let text = m.encode();
        assert!(
            text.contains("bootc_pool_nodes{pool=\"p\",state=\"UpToDate\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("bootc_pool_nodes_unreported{pool=\"p\"} 3"),
            "{text}"
        );
        assert_eq!(health.drifted, 2, "{health:?}");
        assert_eq!(health.oldest, [3600, 1200], "{health:?}");
        assert_eq!(
            health.conditions,
            [
                ("Progressing".to_owned(), "Stalled".to_owned(), false),
                ("Degraded".to_owned(), "RolloutHalted".to_owned(), true),
            ]
        );
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
        // The same reason, now True: the series kept, its value moved.
        health.conditions = vec![("Progressing".to_owned(), "Stalled".to_owned(), true)];
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(text.contains("reason=\"Stalled\"} 1"), "{text}");
        health.conditions = vec![("Progressing".to_owned(), "Advancing".to_owned(), true)];
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(!text.contains("Stalled"), "{text}");
        assert!(text.contains("reason=\"Advancing\"} 1"), "{text}");
        // One more condition, then one fewer: a series each, the one gone removed.
        let degraded = ("Degraded".to_owned(), "RolloutHalted".to_owned(), false);
        health.conditions.push(degraded);
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(text.contains("reason=\"RolloutHalted\"} 0"), "{text}");
        assert!(text.contains("reason=\"Advancing\"} 1"), "{text}");
        health.conditions.remove(0);
        m.set_pool_health("p", &health);
        let text = m.encode();
        assert!(!text.contains("Advancing"), "{text}");
        assert!(text.contains("reason=\"RolloutHalted\"} 0"), "{text}");
        m.forget_pool("p");
        let text = m.encode();
        assert!(!text.contains("pool=\"p\""), "{text}");
    }
}
