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
    let states = BTreeMap::from([
        ("n1".to_owned(), NodeState::Degraded),
        ("n2".to_owned(), NodeState::UpToDate),
        ("n3".to_owned(), NodeState::UpToDate),
    ]);
    let m = Metrics::new();
    m.set_node_states("p", &states);
    let text = m.encode();
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"UpToDate\"} 2"));
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"Degraded\"} 1"));
    assert!(text.contains("bootc_pool_nodes{pool=\"p\",state=\"Pending\"} 0"));
}
