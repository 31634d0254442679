use serde_json::{Value, json};

use bootc_pool_controller::plan::GateView;

use super::*;
use crate::tests::fixtures::*;

pub(super) fn pool_why(c: &Cluster) -> Why {
    why_pool(c, &c.pools[0].typed)
}

pub(super) fn has(items: &[String], needle: &str) -> bool {
    items.iter().any(|i| i.contains(needle))
}

/// `c` as it reads once the controller has planned it (no alert gate, no drain).
pub(super) fn planned(c: Cluster) -> Cluster {
    controller_wrote(c, GateView::NotConfigured, &[])
}

/// The staged `w3`'s finding, for a node waiting for a slot.
fn waiting(gate: &str) -> String {
    format!(
        "staged {}, waiting for a reboot slot: {gate}",
        "2".repeat(12)
    )
}

#[test]
fn a_full_budget_holds_up_the_staged_node_and_names_the_holders() {
    let c = planned(workers(json!({"maxUnavailable": 1}), in_progress()));
    let full = "reboot budget full: 1/1 slots in use (maxUnavailable 1): held by w2 (gate BudgetFull: no new reboot slot)";
    let w3 = why_node(&c, "w3");
    assert_eq!(w3.blocked, [waiting(full)], "{w3:?}");
    let p = pool_why(&c);
    assert!(p.blocked.iter().any(|b| b == full), "{p:?}");
    assert!(
        has(
            &p.progressing,
            "rolling out 222222222222 (version v2): 1/3 updated"
        ),
        "{p:?}"
    );
    // The holder itself is on its way.
    let w2 = why_node(&c, "w2");
    assert!(w2.blocked.is_empty(), "{w2:?}");
    assert_eq!(
        w2.progressing,
        [format!("rebooting into {}", "2".repeat(12))]
    );
}

#[test]
fn notready_members_count_against_the_budget() {
    let c = workers(json!({"maxUnavailable": 2}), in_progress());
    assert!(has(
        &why_node(&planned(c.clone()), "w3").progressing,
        "one is free"
    ));
    let mut c = c;
    c.nodes[0] = node("w1", false, json!({"pool": "workers"}));
    let c = planned(c);
    let w3 = why_node(&c, "w3");
    assert!(
        has(
            &w3.blocked,
            "2/2 slots in use (maxUnavailable 2): held by w2; NotReady nodes count too: w1"
        ),
        "{w3:?}"
    );
    let w1 = why_node(&c, "w1");
    assert!(
        has(
            &w1.blocked,
            "the Node is not Ready (Ready=False, KubeletNotReady: container runtime is down)"
        ),
        "{w1:?}"
    );
}

#[test]
fn a_paused_pool_says_how_to_resume() {
    let c = planned(workers(
        json!({"paused": true, "maxUnavailable": 2}),
        in_progress(),
    ));
    let p = pool_why(&c);
    let paused = "paused (gate Paused: no new reboot slot, on purpose); resume with `kubectl bootc resume workers`";
    assert_eq!(p.blocked, [paused], "{p:?}");
    assert!(has(&why_node(&c, "w3").blocked, &waiting(paused)));
    assert!(
        p.render()
            .starts_with("bootcnodepool/workers is not progressing:\n  - paused"),
        "{}",
        p.render()
    );
}

#[test]
fn outside_the_windows_the_next_opening_is_said() {
    let rollout = json!({"maxUnavailable": 2, "maintenanceWindows": [
        {"days": ["Sat", "Sun"], "start": "02:00", "duration": "4h", "timeZone": "UTC"}
    ]});
    let c = planned(workers(rollout, in_progress()));
    let outside = "outside the maintenance windows, the next maintenance window opens at 2026-03-07T02:00:00Z (gate OutsideMaintenanceWindow: no new reboot slot, on purpose)";
    assert_eq!(pool_why(&c).blocked, [outside]);
    assert!(has(&why_node(&c, "w3").blocked, &waiting(outside)));
}

#[test]
fn a_halt_and_a_tag_error_are_worded_with_their_reason_and_message() {
    // w2, holding a slot, is back on the target but its agent reports Degraded: one
    // unhealthy holder, and haltAfterUnhealthy 1.
    let mut c = workers(
        json!({"maxUnavailable": 3, "haltAfterUnhealthy": 1}),
        in_progress(),
    );
    let degraded = cond("Degraded", "True", "Error", "bootc: boot failed", 1);
    let w2 = &mut c.bootc_nodes[1].typed;
    w2.spec.desired_image_state = bootc_crds::node::DesiredImageState::Booted;
    w2.status = serde_json::from_value(agent('2', ' ', "Idle", 1, &[degraded])).unwrap();
    let c = planned(c);
    let p = pool_why(&c);
    let halted = "rollout halted: too many nodes holding reboot slots are unhealthy, so no new reboot is approved (Degraded/RolloutHalted): 1 slot holders are unhealthy (haltAfterUnhealthy 1): node w2: Error: bootc: boot failed; no new reboots are approved";
    assert!(p.blocked.iter().any(|b| b == halted), "{p:?}");
    // The halt's own verdict is said once, with the Degraded condition.
    assert!(!has(&p.blocked, "gate RolloutHalted"), "{p:?}");
    assert!(has(
        &why_node(&c, "w3").blocked,
        "(gate RolloutHalted: no new reboot slot)"
    ));

    let tag = json!([
        cond("UpToDate", "False", "RolloutInProgress", "", 5),
        cond(
            "Degraded",
            "True",
            "TagResolutionError",
            "registry.test/os:stable: manifest unknown",
            5
        ),
    ]);
    let c = workers(json!({"maxUnavailable": 3}), tag);
    assert!(has(
        &pool_why(&c).blocked,
        "the tag cannot be resolved; the last good target keeps rolling out (Degraded/TagResolutionError): registry.test/os:stable: manifest unknown"
    ));
}

#[test]
fn drains_blocked_and_failed_are_named_with_the_way_out() {
    let mut c = workers(json!({"maxUnavailable": 1}), in_progress());
    c.bootc_nodes[1].typed.status.as_mut().unwrap().drain_blocked = serde_json::from_value(json!({
        "message": "evicting shop/web-0: Cannot evict pod as it would violate the pod's disruption budget.",
        "since": ago(2),
    }))
    .unwrap();
    let w2 = why_node(&c, "w2");
    assert_eq!(
        w2.blocked,
        [
            "drain blocked for 2m: evicting shop/web-0: Cannot evict pod as it would violate the pod's disruption budget."
        ]
    );
    assert!(has(
        &pool_why(&c).blocked,
        "node w2: drain blocked for 2m: evicting shop/web-0"
    ));

    c.bootc_nodes[2]
        .typed
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("node.bootc.dev/drain-failed".into(), digest('2'));
    let w3 = why_node(&c, "w3");
    assert!(
        has(
            &w3.blocked,
            &format!("its drain for {} timed out", digest('2'))
        ),
        "{w3:?}"
    );
    assert!(
        has(
            &w3.blocked,
            "kubectl annotate bootcnode w3 node.bootc.dev/drain-failed-"
        ),
        "{w3:?}"
    );
}

#[test]
fn a_held_node_and_a_degraded_agent_are_reported() {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    c.nodes[2] = node(
        "w3",
        true,
        json!({"pool": "workers", "node.bootc.dev/hold": "true"}),
    );
    let mut c = planned(c);
    let w3 = why_node(&c, "w3");
    assert!(
        has(
            &w3.blocked,
            "held: the Node has the label node.bootc.dev/hold=true"
        ),
        "{w3:?}"
    );
    assert!(has(&w3.blocked, "kubectl bootc release w3"), "{w3:?}");
    assert!(
        has(
            &pool_why(&c).blocked,
            "held: w3; remove their node.bootc.dev/hold label to update them (gate Held: no new reboot slot, on purpose); release with `kubectl bootc release w3`"
        ),
        "{:?}",
        pool_why(&c)
    );

    let degraded = cond(
        "Degraded",
        "True",
        "Error",
        "bootc switch: no space left on device",
        4,
    );
    worker_reports(&mut c, "w1", agent('1', ' ', "Staging", 4, &[degraded]));
    let w1 = why_node(&c, "w1");
    assert_eq!(
        w1.blocked,
        ["its agent reports Degraded/Error for 4m: bootc switch: no space left on device"]
    );
}

#[test]
fn nothing_wrong_reads_up_to_date() {
    let conditions = json!([cond(
        "UpToDate",
        "True",
        "AllUpdated",
        "3/3 nodes run the target",
        5
    )]);
    let mut c = workers(json!({}), conditions);
    c.bootc_nodes.truncate(1);
    let p = pool_why(&c);
    assert_eq!(
        p.render(),
        "bootcnodepool/workers: up to date: all 3 nodes run the target 222222222222 (version v2)\n"
    );
    assert_eq!(
        why_node(&c, "w1").render(),
        "node/w1: up to date: runs its pool's target 222222222222\n"
    );
}

#[test]
fn staging_shows_its_progress() {
    let mut c = workers(json!({}), in_progress());
    let mut raw = c.bootc_nodes[2].raw.clone();
    raw["status"] = agent('1', ' ', "Staging", 1, &[]);
    raw["status"]["progress"] = json!({"step": "pulling", "bytesDone": 1024, "bytesTotal": 4096});
    c.bootc_nodes[2] = crate::objects::Object::from_raw("BootcNode", raw).unwrap();
    let w3 = why_node(&c, "w3");
    assert_eq!(
        w3.progressing,
        [format!("staging {}: pulling 25% (1Ki/4Ki)", "2".repeat(12))]
    );
    assert!(
        w3.render().starts_with("node/w3 is progressing:\n"),
        "{}",
        w3.render()
    );
}

#[test]
fn nodes_outside_pools_and_in_two_pools_are_explained() {
    let mut c = workers(json!({}), in_progress());
    c.nodes.push(node("lonely", true, json!({})));
    assert_eq!(
        why_node(&c, "lonely").blocked,
        ["no BootcNodePool selects it, so nothing updates it (it has no BootcNode)"]
    );
    c.pools.push(pool("other", json!({}), Value::Null));
    c.nodes.push(node("both", true, json!({"pool": "workers"})));
    c.pools[1].typed.spec.node_selector = Default::default();
    assert!(has(
        &why_node(&c, "both").blocked,
        "selected by pools workers and other"
    ));
    c.nodes.push(node("new", true, json!({"pool": "workers"})));
    c.pools.pop();
    assert!(has(
        &why_node(&c, "new").progressing,
        "bootcnodepool/workers selects it but has no BootcNode"
    ));
}

#[test]
fn a_name_is_a_pool_a_node_both_or_neither() {
    let mut c = workers(json!({}), in_progress());
    assert!(
        why(&c, "workers")
            .unwrap()
            .starts_with("bootcnodepool/workers ")
    );
    assert!(why(&c, "w1").unwrap().starts_with("node/w1"));
    c.nodes.push(node("workers", true, json!({})));
    let both = why(&c, "workers").unwrap();
    assert!(
        both.starts_with("\"workers\" is both a BootcNodePool and a node; both follow.\n"),
        "{both}"
    );
    assert!(both.contains("\nnode/workers"), "{both}");
    let e = why(&c, "nobody").unwrap_err();
    assert_eq!(
        e.message(),
        "\"nobody\" is neither a BootcNodePool nor a node (no BootcNodePool, Node or BootcNode has that name)"
    );
}

#[test]
fn a_pool_the_controller_never_answered_says_so() {
    let c = cluster(vec![pool("fresh", json!({}), Value::Null)], vec![], vec![]);
    assert!(has(
        &pool_why(&c).blocked,
        "the controller has not written its status yet"
    ));
}

#[test]
fn a_pool_with_no_target_says_so_instead_of_a_rollout() {
    let status = json!({
        "nodeCount": 0,
        "conditions": [
            cond("UpToDate", "False", "NoTarget", "0/0 updated", 5),
            cond("Degraded", "False", "Healthy", "", 60),
        ],
    });
    let c = cluster(vec![pool("empty", json!({}), status)], vec![], vec![]);
    let why = pool_why(&c);
    assert_eq!(
        why.progressing,
        ["no target yet, nothing to roll out (UpToDate/NoTarget: 0/0 updated)"]
    );
    assert!(!has(&why.progressing, "rolling out -"), "{why:?}");
}

#[test]
fn degraded_nodes_are_named_by_reason_with_what_it_asks() {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    let no_space = cond(
        "Degraded",
        "True",
        "InsufficientSpace",
        "the host has too little free disk space to stage the image (free space under /sysroot): error: Switching: Switching (ostree): Insufficient free space for registry.test/os@sha256:22 (available: 0 bytes required: 322 bytes)",
        4,
    );
    worker_reports(&mut c, "w1", agent('1', ' ', "Staging", 4, &[no_space]));
    let mut raw = serde_json::to_value(&c.pools[0].typed).unwrap();
    raw["status"]["degradedByReason"] = json!([
        {"reason": "InsufficientSpace", "count": 1},
        {"reason": "DrainTimeout", "count": 1},
    ]);
    c.pools[0] = crate::objects::Object::from_raw("BootcNodePool", raw).unwrap();

    let w1 = why_node(&c, "w1");
    assert_eq!(w1.blocked.len(), 1, "{w1:?}");
    assert!(
        w1.blocked[0].starts_with(
            "its agent reports Degraded/InsufficientSpace for 4m (out of disk: free space on the node's /sysroot; the agent tries again): the host has too little"
        ),
        "{w1:?}"
    );
    let pool = pool_why(&c);
    assert!(
        pool.blocked.contains(
            &"degraded nodes by reason: InsufficientSpace 1 (w1), DrainTimeout 1".to_owned()
        ),
        "{pool:?}"
    );
}

#[test]
fn a_drifted_node_is_noted_by_why_and_status() {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    let drifted = cond(
        "Drifted",
        "True",
        "UsrOverlay",
        "/usr carries a writable overlay (readWrite/transient, `bootc usr-overlay`): what runs may differ from the image",
        2,
    );
    worker_reports(&mut c, "w1", agent('2', ' ', "Idle", 30, &[drifted]));
    let w1 = why_node(&c, "w1");
    assert!(w1.blocked.is_empty(), "{w1:?}");
    assert_eq!(w1.notes.len(), 1, "{w1:?}");
    assert!(
        w1.notes[0].contains("Drifted/UsrOverlay: /usr carries a writable overlay"),
        "{w1:?}"
    );
    assert!(
        w1.render()
            .contains("  note: the booted system is not the image it claims")
    );
    let pool = pool_why(&c);
    assert!(
        pool.notes.iter().any(|n| n.starts_with(
            "1 drifted from their image (status.driftedCount): w1 (Drifted/UsrOverlay"
        )),
        "{pool:?}"
    );
    let nodes: Vec<_> = c.bootc_nodes.iter().collect();
    let table = crate::status::nodes_table(&c, &nodes);
    assert_eq!(table.rows[0][2], "Idle+Drifted");
    assert_eq!(table.rows[1][2], "Rebooting");
}
