use serde_json::json;

use super::*;
use crate::tests::fixtures::*;

/// `workers` with two slots, w2 (rebooting) NotReady, w3 staged for two hours.
fn rolling_cluster() -> Cluster {
    let mut c = workers(json!({"maxUnavailable": 2}), in_progress());
    let status = c.pools[0].typed.status.as_mut().unwrap();
    status
        .conditions
        .push(serde_json::from_value(cond("Progressing", "True", "Advancing", "", 5)).unwrap());
    c.nodes[1] = node("w2", false, json!({"pool": "workers"}));
    worker_reports(&mut c, "w3", agent('1', '2', "Staged", 125, &[]));
    c
}

#[test]
fn the_pools_table_shows_target_counts_slots_and_state() {
    let c = rolling_cluster();
    let pools: Vec<_> = c.pools.iter().collect();
    let t = pools_table(&c, &pools);
    assert_eq!(t.headers, POOL_HEADERS);
    assert_eq!(
        t.rows,
        [[
            "workers",
            "222222222222",
            "v2",
            "3",
            "1",
            "1",
            "0",
            "1/2",
            "RollingOut"
        ]]
    );
}

#[test]
fn the_nodes_table_shows_state_digests_and_time_in_state() {
    let c = rolling_cluster();
    let nodes: Vec<_> = c.bootc_nodes.iter().collect();
    let t = nodes_table(&c, &nodes);
    let short = |ch: char| ch.to_string().repeat(12);
    assert_eq!(
        t.rows,
        [
            [
                "w1",
                "workers",
                "Idle",
                &short('2'),
                "-",
                &short('2'),
                "30m",
                "-"
            ],
            [
                "w2",
                "workers",
                "Rebooting",
                &short('1'),
                &short('2'),
                &short('2'),
                "3m",
                "-"
            ],
            [
                "w3",
                "workers",
                "Staged",
                &short('1'),
                &short('2'),
                &short('2'),
                "125m",
                "-"
            ],
        ]
    );
    let text = render(&c, Some("workers")).unwrap();
    assert!(
        text.starts_with("NAME      TARGET         VERSION   NODES"),
        "{text}"
    );
    assert!(text.contains("\n\nNAME   POOL      STATE"), "{text}");
}

#[test]
fn a_held_node_a_degraded_node_and_a_silent_agent_have_their_own_state() {
    let degraded = cond("Degraded", "True", "Error", "pull failed", 7);
    let c = cluster(
        vec![],
        vec![
            bootc("h", "", '2', json!({}), agent('1', ' ', "Staging", 1, &[])),
            bootc(
                "d",
                "",
                '2',
                json!({}),
                agent('1', ' ', "Staging", 1, &[degraded]),
            ),
            bootc(
                "f",
                "",
                '2',
                json!({"node.bootc.dev/drain-failed": digest('2')}),
                agent('1', '2', "Staged", 1, &[]),
            ),
            bootc("s", "", '2', json!({}), serde_json::Value::Null),
        ],
        vec![node("h", true, json!({"node.bootc.dev/hold": "true"}))],
    );
    let states: Vec<(String, Option<String>)> = c
        .bootc_nodes
        .iter()
        .map(|b| {
            let (state, since) = node_state(&c, &b.typed);
            (state, since.map(|t| crate::table::age(t, c.now)))
        })
        .collect();
    assert_eq!(
        states,
        [
            ("Held".into(), Some("60s".into())),
            ("Degraded".into(), Some("7m".into())),
            ("Degraded".into(), Some("60s".into())),
            ("Unknown".into(), None),
        ]
    );
}

#[test]
fn pool_states_follow_the_conditions() {
    assert_eq!(
        pool_state(&pool("p", json!({}), serde_json::Value::Null).typed),
        "Pending"
    );
    let in_progress = cond("UpToDate", "False", "RolloutInProgress", "", 1);
    // (rollout, conditions, state shown)
    let cases = [
        (
            json!({}),
            json!([cond("UpToDate", "True", "AllUpdated", "", 1)]),
            "UpToDate",
        ),
        (json!({"paused": true}), json!([in_progress]), "Paused"),
        (
            json!({}),
            json!([cond("UpToDate", "False", "OutsideMaintenanceWindow", "", 1)]),
            "OutsideMaintenanceWindow",
        ),
        (
            json!({}),
            json!([
                in_progress,
                cond("Degraded", "True", "RolloutHalted", "2 unhealthy", 1),
            ]),
            "RolloutHalted",
        ),
        (
            json!({}),
            json!([in_progress, cond("Progressing", "False", "Stalled", "", 1)]),
            "Stalled",
        ),
    ];
    for (rollout, conditions, want) in cases {
        let p = pool("p", rollout, pool_status('2', [1, 0, 0, 0], conditions));
        assert_eq!(pool_state(&p.typed), want, "{want}");
    }
}

#[test]
fn slots_count_annotated_members_against_the_resolved_budget() {
    let c = rolling_cluster();
    assert_eq!(
        Slots::of(&c, &c.pools[0].typed),
        Slots {
            in_use: 1,
            budget: Some(2)
        }
    );
    let percent = pool(
        "workers",
        json!({"maxUnavailable": "50%"}),
        pool_status('2', [3, 0, 0, 0], json!([])),
    );
    assert_eq!(Slots::of(&c, &percent.typed).cell(), "1/1");
    let bad = pool(
        "workers",
        json!({"maxUnavailable": "0%"}),
        pool_status('2', [3, 0, 0, 0], json!([])),
    );
    assert_eq!(Slots::of(&c, &bad.typed).cell(), "1/?");
}

#[test]
fn progress_is_read_from_the_raw_status_when_there_is_one() {
    let raw = |p: serde_json::Value| json!({"status": {"progress": p}});
    assert_eq!(progress(&json!({})), "-");
    assert_eq!(progress(&raw(json!(null))), "-");
    assert_eq!(progress(&raw(json!({}))), "-");
    assert_eq!(
        progress(&raw(
            json!({"bytesDone": 150 * 1024 * 1024, "bytesTotal": 300 * 1024 * 1024, "step": "pulling"})
        )),
        "pulling 50% (150Mi/300Mi)"
    );
    assert_eq!(
        progress(&raw(json!({"step": "importing", "stepsDone": 2}))),
        "importing"
    );
    assert_eq!(
        progress(&raw(
            json!({"step": "staging", "bytesDone": 0, "bytesTotal": 0, "stepsDone": 2, "stepsTotal": 5})
        )),
        "staging 2/5"
    );
    assert_eq!(progress(&raw(json!({"bytesDone": 2048}))), "2Ki");
    // Done beyond total, or a zero total, never gives more than 100% or a division by zero.
    assert_eq!(
        progress(&raw(json!({"bytesDone": 10, "bytesTotal": 5}))),
        "100% (10/5)"
    );
    assert_eq!(
        progress(&raw(json!({"bytesDone": 10, "bytesTotal": 0}))),
        "10"
    );
    assert_eq!(
        progress(&raw(json!({"bytesDone": 0, "bytesTotal": 0}))),
        "-"
    );
    // Bytes with no total (bootc's composefs backend): the bytes so far and the steps,
    // no percentage.
    assert_eq!(
        progress(&raw(
            json!({"step": "pulling: Pulling Image", "bytesDone": 12 * 1024 * 1024, "bytesTotal": 0, "stepsDone": 2, "stepsTotal": 5})
        )),
        "pulling: Pulling Image 12Mi 2/5"
    );
    // Fields of the wrong type are left out, not a panic.
    assert_eq!(progress(&raw(json!({"bytesDone": "x", "step": 3}))), "-");
    assert_eq!(progress(&raw(json!("busy"))), "-");
}

#[test]
fn a_booted_reference_that_carries_a_digest_shows_that_digest() {
    let image = bootc_crds::node::ImageStatus {
        image: pin('a'),
        image_digest: digest('b'),
        ..Default::default()
    };
    assert_eq!(image_short(Some(&image)), "a".repeat(12));
    let plain = bootc_crds::node::ImageStatus {
        image: "registry.test/os:stable".into(),
        image_digest: digest('b'),
        ..Default::default()
    };
    assert_eq!(image_short(Some(&plain)), "b".repeat(12));
    assert_eq!(image_short(None), "-");
}

#[test]
fn an_unknown_pool_is_an_error_and_nothing_at_all_says_so() {
    let c = rolling_cluster();
    let e = render(&c, Some("nope")).unwrap_err();
    assert_eq!(
        e.message(),
        "bootcnodepools.node.bootc.dev \"nope\" not found"
    );
    let empty = cluster(vec![], vec![], vec![]);
    assert_eq!(render(&empty, None).unwrap(), "No resources found\n");
}

#[test]
fn a_progress_the_types_cannot_read_is_still_shown_and_other_bad_objects_are_named() {
    let mut raw = bootc("w", "", '2', json!({}), agent('1', ' ', "Staging", 1, &[])).raw;
    raw["status"]["progress"] = json!({"step": "pulling", "bytesDone": 1, "bytesTotal": 2});
    let object = Object::<BootcNode>::from_raw("BootcNode", raw.clone()).unwrap();
    assert_eq!(progress(&object.raw), "pulling 50% (1/2)");
    raw["spec"]["desiredImage"] = json!(42);
    let e = Object::<BootcNode>::from_raw("BootcNode", raw).unwrap_err();
    assert!(
        e.message().starts_with("cannot read BootcNode \"w\": "),
        "{e}"
    );
}
