//! Every string, list and map in both CRDs has a declared bound, so that kube-apiserver's
//! CEL cost estimate (made from the declared bounds of what a rule reads) stays within its
//! budget by construction, and no field a rule may read one day is unbounded.
//! (`docs/architecture.md`, "Validation cost".)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::bounds::{
    ARCHITECTURE_MAX_LEN, BOOT_ID_MAX_LEN, CONDITION_MESSAGE_MAX_LEN, CONDITION_REASON_PATTERN,
    CONDITION_TYPE_PATTERN, DRAIN_MESSAGE_MAX_LEN, PROGRESS_STEP_MAX_LEN, SHORT_DIGEST_LEN,
    UNIT_NAME_MAX_LEN, VERSION_MAX_LEN,
};
use bootc_crds::conditions::{
    self, DEGRADED, DRIFTED, IDLE, NewCondition, PROGRESSING, UP_TO_DATE, drifted, idle,
    node_degraded, pool_degraded, progressing, up_to_date,
};
use bootc_crds::image_ref::{NAME_MAX_LEN, REF_MAX_LEN, TAG_MAX_LEN};
use bootc_crds::node::{
    BootedImage, DrainBlocked, HOST_STATE_MAX_LEN, HostState, ImageStatus, LastReboot, NodeHealth,
    StagedImage, StagingProgress, UnitHealth,
};
use bootc_crds::pool::{
    AlertGateState, AlertGateStatus, CanaryPhase, CanaryStatus, DeployHistoryEntry,
    FAILED_REASON_MAX_LEN, MAX_HEALTH_UNITS, MAX_HISTORY,
};
use bootc_crds::{BootcNodePoolStatus, BootcNodeStatus, ImageRef};
use common::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Value, json};

/// Whether an anchored pattern bounds the length of what it matches: `^...$` with no `*`,
/// `+` or open `{n,}` repetition and no top-level alternation (which would unanchor a
/// branch). Conservative: a pattern it cannot read as bounded is taken as unbounded.
fn pattern_bounds_length(pattern: &str) -> bool {
    let Some(body) = pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$')) else {
        return false;
    };
    if body.ends_with('\\') {
        return false; // the `$` was escaped
    }
    let mut chars = body.chars().peekable();
    let (mut depth, mut in_class) = (0usize, false);
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '[' => in_class = true,
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '*' | '+' => return false,
            '|' if depth == 0 => return false,
            '{' => {
                let repeat: String = chars.by_ref().take_while(|&c| c != '}').collect();
                if repeat.ends_with(',') {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// Why a string node (`type: string`, or int-or-string) is bounded, if it is.
fn string_is_bounded(schema: &Value) -> bool {
    schema.get("maxLength").is_some()
        || schema.get("enum").is_some()
        || schema.get("format").and_then(Value::as_str) == Some("date-time")
        || schema
            .get("pattern")
            .and_then(Value::as_str)
            .is_some_and(pattern_bounds_length)
}

/// The JSON path and fault of every unbounded node under `schema` (at `path`).
fn unbounded(schema: &Value, path: &str, faults: &mut Vec<String>) {
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    let int_or_string = flag("x-kubernetes-int-or-string");
    if flag("x-kubernetes-preserve-unknown-fields") {
        faults.push(format!(
            "{path}: keeps unknown fields, which nothing bounds"
        ));
    }
    if int_or_string && schema.get("x-kubernetes-validations").is_some() {
        faults.push(format!(
            "{path}: a CEL rule on an int-or-string (kube-apiserver before 1.34 ignores its maxLength when estimating the rule's cost)"
        ));
    }
    match schema.get("type").and_then(Value::as_str) {
        _ if int_or_string && !string_is_bounded(schema) => {
            faults.push(format!("{path}: int-or-string without maxLength"));
        }
        Some("string") if !string_is_bounded(schema) => {
            faults.push(format!("{path}: string without maxLength"));
        }
        Some("array") => {
            if schema.get("maxItems").is_none() {
                faults.push(format!("{path}: array without maxItems"));
            }
            if let Some(items) = schema.get("items") {
                unbounded(items, &format!("{path}[*]"), faults);
            }
        }
        _ => {}
    }
    if let Some(values) = schema.get("additionalProperties") {
        if schema.get("maxProperties").is_none() {
            faults.push(format!("{path}: map without maxProperties"));
        }
        if values.is_object() {
            unbounded(values, &format!("{path}.*"), faults);
        }
    }
    for (name, property) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        unbounded(property, &format!("{path}.{name}"), faults);
    }
}

/// Every unbounded node of every version of a CRD, spec and status, as
/// `<plural>/<version>: <path>: <fault>`.
fn faults_of(crd: &Value) -> Vec<String> {
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("?");
    let mut faults = Vec::new();
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let name = version["name"].as_str().unwrap_or("?");
        let root = &version["schema"]["openAPIV3Schema"]["properties"];
        for top in ["spec", "status"] {
            let mut found = Vec::new();
            unbounded(&root[top], top, &mut found);
            faults.extend(found.into_iter().map(|f| format!("{plural}/{name}: {f}")));
        }
    }
    faults
}

#[test]
fn every_string_list_and_map_is_bounded() {
    let crds = bootc_crds::crdgen::crds().expect("render");
    assert_eq!(crds.len(), 2);
    let faults: Vec<String> = crds.iter().flat_map(faults_of).collect();
    assert!(
        faults.is_empty(),
        "fields without a bound (give each a maxLength, maxItems or maxProperties):\n  {}",
        faults.join("\n  ")
    );
}

/// The walk itself: each kind of unbounded node is found and named by its path.
#[test]
fn the_walk_names_every_kind_of_unbounded_node() {
    let spec = json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "named": {"type": "string", "maxLength": 253},
        "policy": {"type": "string", "enum": ["A", "B"]},
        "at": {"type": "string", "format": "date-time"},
        "start": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "word": {"type": "string", "pattern": "^[a-z]+$"},
        "budget": {"x-kubernetes-int-or-string": true},
        "ruled": {"x-kubernetes-int-or-string": true, "maxLength": 4, "x-kubernetes-validations": [{"rule": "true"}]},
        "list": {"type": "array", "items": {"type": "string", "maxLength": 1}},
        "bounded": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }});
    let crd = json!({"spec": {"names": {"plural": "things"}, "versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}
    ]}});
    let mut faults = faults_of(&crd);
    faults.sort();
    assert_eq!(
        faults,
        [
            "things/v1: spec.bounded[*].x: string without maxLength",
            "things/v1: spec.budget: int-or-string without maxLength",
            "things/v1: spec.free: keeps unknown fields, which nothing bounds",
            "things/v1: spec.labels.*: string without maxLength",
            "things/v1: spec.labels: map without maxProperties",
            "things/v1: spec.list: array without maxItems",
            "things/v1: spec.name: string without maxLength",
            "things/v1: spec.ruled: a CEL rule on an int-or-string (kube-apiserver before 1.34 ignores its maxLength when estimating the rule's cost)",
            "things/v1: spec.word: string without maxLength",
        ]
    );
}

#[test]
fn patterns_that_bound_length() {
    for bounded in [
        r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        r"^(100|[1-9][0-9]?)%$",
        r"^sha256:[a-f0-9]{64}$",
        r"^[*+]{1,3}$",
        r"^a\*$",
    ] {
        assert!(pattern_bounds_length(bounded), "{bounded}");
    }
    for unbounded in [
        r"^[a-z]+$",
        r"^a*$",
        r"^a{2,}$",
        r"^a|b$",
        r"[a-z]{3}",
        r"^a{3}",
        r"^a\$",
    ] {
        assert!(!pattern_bounds_length(unbounded), "{unbounded}");
    }
}

/// The longest reference the parser accepts fits the schema's `maxLength`, which is the
/// parser's own limit: the schema and the parser agree on what is too long.
#[test]
fn image_bounds_agree_with_the_parser() {
    let pool = committed_schema("bootcnodepools");
    let node = committed_schema("bootcnodes");
    let spec_ref = &pool["properties"]["spec"]["properties"]["image"]["properties"]["ref"];
    let desired = &node["properties"]["spec"]["properties"]["desiredImage"];
    assert_eq!(spec_ref["maxLength"], json!(REF_MAX_LEN));
    assert_eq!(desired["maxLength"], json!(REF_MAX_LEN));

    let registry = "registry.example.com";
    let repository = "r".repeat(NAME_MAX_LEN - registry.len() - 1);
    let tag = "t".repeat(TAG_MAX_LEN);
    let longest = format!("{registry}/{repository}:{tag}@sha256:{HEX}");
    ImageRef::parse(&longest).expect("the longest reference parses");
    assert!(longest.chars().count() <= REF_MAX_LEN);
    let mut object = load_yaml("samples/pool-minimal.yaml");
    set(&mut object, "spec.image.ref", json!(longest));
    admit("bootcnodepools", &object).expect("the longest reference is admitted");

    let too_long = format!("quay.io/{}", "a".repeat(REF_MAX_LEN));
    assert!(ImageRef::parse(&too_long).is_err());
    set(&mut object, "spec.image.ref", json!(too_long));
    let errors = admit("bootcnodepools", &object).expect_err("too long");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("spec.image.ref: Too long")),
        "{errors:?}"
    );
}

#[test]
fn deploy_history_holds_as_many_entries_as_the_limit_allows() {
    let pool = committed_schema("bootcnodepools");
    let limit = &pool["properties"]["spec"]["properties"]["history"]["properties"]["limit"];
    let history = &pool["properties"]["status"]["properties"]["deployHistory"];
    assert_eq!(limit["maximum"], json!(MAX_HISTORY));
    assert_eq!(history["maxItems"], json!(MAX_HISTORY));
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 3, 1, 12, 0, 0).unwrap()
}

fn condition(type_: &str, reason: &str, message: String) -> Condition {
    let new = NewCondition {
        type_,
        status: true,
        reason,
        message,
    };
    conditions::next(&[], new, Some(1), now()).unwrap()
}

fn digest(i: usize) -> String {
    format!("sha256:{i:064x}")
}

/// A status as full as the controller writes one, every string at its longest, is stored.
#[test]
fn the_longest_pool_status_is_admitted() {
    let time = conditions::to_time(now()).unwrap();
    let image = |i| format!("quay.io/example/os@{}", digest(i));
    let version = "v".repeat(VERSION_MAX_LEN);
    let status = BootcNodePoolStatus {
        observed_generation: Some(1),
        target_image: Some(image(0)),
        target_digest: Some(digest(0)),
        target_short_digest: Some("0".repeat(SHORT_DIGEST_LEN)),
        target_version: Some(version.clone()),
        last_resolved_time: Some(time.clone()),
        next_resolve_time: Some(time.clone()),
        deploy_history: (0..MAX_HISTORY as usize)
            .map(|i| DeployHistoryEntry {
                digest: digest(i),
                image: image(i),
                version: Some(version.clone()),
                node_count: 3,
                first_deployed: time.clone(),
                last_deployed: time.clone(),
                origin: bootc_crds::pool::HistoryOrigin::Targeted,
                failed: true,
                failed_reason: Some("r".repeat(FAILED_REASON_MAX_LEN)),
                failed_time: Some(time.clone()),
                failed_generation: Some(i64::MAX),
            })
            .collect(),
        conditions: vec![
            condition(UP_TO_DATE, up_to_date::ROLLOUT_IN_PROGRESS, String::new()),
            condition(
                DEGRADED,
                pool_degraded::TAG_RESOLUTION_ERROR,
                "x".repeat(CONDITION_MESSAGE_MAX_LEN * 2),
            ),
            condition(PROGRESSING, progressing::ADVANCING, "advancing".into()),
        ],
        canary: Some(CanaryStatus {
            digest: digest(0),
            phase: CanaryPhase::Soaking,
            nodes: i32::MAX,
            soak_started_time: Some(time.clone()),
        }),
        alert_gate: Some(AlertGateStatus {
            state: AlertGateState::Firing,
            message: Some("a".repeat(FAILED_REASON_MAX_LEN)),
            checked_time: Some(time.clone()),
        }),
        ..Default::default()
    };
    assert_stored_whole("bootcnodepools", "samples/pool-minimal.yaml", &status);
}

/// The sample at `sample` with `status`, admitted as one of `resource`, is stored with the
/// status as written.
fn assert_stored_whole(resource: &str, sample: &str, status: &impl serde::Serialize) {
    let mut object = load_yaml(sample);
    object["status"] = serde_json::to_value(status).unwrap();
    let stored = admit(resource, &object).expect("admitted");
    assert_eq!(
        stored["status"], object["status"],
        "nothing pruned or changed"
    );
}

/// A node status as full as the agent writes one is stored.
#[test]
fn the_longest_node_status_is_admitted() {
    let time = conditions::to_time(now()).unwrap();
    let deployment = |i| ImageStatus {
        image: format!("quay.io/example/os:{}", "t".repeat(TAG_MAX_LEN)),
        image_digest: digest(i),
        short_digest: Some("c".repeat(SHORT_DIGEST_LEN)),
        version: Some("v".repeat(VERSION_MAX_LEN)),
        timestamp: Some(time.clone()),
        architecture: Some("a".repeat(ARCHITECTURE_MAX_LEN)),
        soft_reboot_capable: true,
        incompatible: false,
    };
    let status = BootcNodeStatus {
        observed_generation: Some(1),
        booted: Some(BootedImage {
            image: deployment(1),
            since: Some(time.clone()),
        }),
        staged: Some(StagedImage {
            image: deployment(2),
            download_only: true,
        }),
        rollback: Some(deployment(3)),
        last_reboot: Some(LastReboot {
            digest: digest(2),
            boot_id: "b".repeat(BOOT_ID_MAX_LEN),
            soft_reboots: 1,
            time: time.clone(),
        }),
        bootc_version: Some("1".repeat(VERSION_MAX_LEN)),
        agent_version: Some("0.1.0".into()),
        conditions: vec![
            condition(IDLE, idle::STAGING, "pulling".into()),
            condition(DRIFTED, drifted::USR_OVERLAY, "/usr".into()),
            condition(
                DEGRADED,
                node_degraded::ERROR,
                "error: ".repeat(CONDITION_MESSAGE_MAX_LEN),
            ),
        ],
        drain_blocked: Some(DrainBlocked {
            message: "m".repeat(DRAIN_MESSAGE_MAX_LEN),
            since: Some(time.clone()),
        }),
        held: Some(true),
        progress: Some(StagingProgress {
            image_digest: digest(2),
            bytes_done: i64::MAX,
            bytes_total: i64::MAX,
            step: "s".repeat(PROGRESS_STEP_MAX_LEN),
            steps_done: 3,
            steps_total: 3,
            summary: "p".repeat(PROGRESS_STEP_MAX_LEN),
            updated: Some(time.clone()),
        }),
        health: Some(NodeHealth {
            boot_id: "b".repeat(BOOT_ID_MAX_LEN),
            soft_reboots: i64::MAX,
            healthy: false,
            units: (0..MAX_HEALTH_UNITS)
                .map(|i| UnitHealth {
                    name: format!("{}{i:02}.service", "u".repeat(UNIT_NAME_MAX_LEN - 10)),
                    active_state: "deactivating".into(),
                    sub_state: "stop-sigterm".into(),
                })
                .collect(),
        }),
        host: Some(HostState {
            backend: Some("b".repeat(HOST_STATE_MAX_LEN)),
            usr_overlay: Some("u".repeat(HOST_STATE_MAX_LEN)),
            incompatible: true,
            update_timer_masked: Some(true),
        }),
    };
    assert_stored_whole("bootcnodes", "samples/bootcnode.yaml", &status);
}

/// Every condition type and reason the workspace writes fits the schema Kubernetes'
/// Condition declares.
#[test]
fn condition_types_and_reasons_fit_the_condition_schema() {
    let type_pattern = regex::Regex::new(CONDITION_TYPE_PATTERN).unwrap();
    let reason_pattern = regex::Regex::new(CONDITION_REASON_PATTERN).unwrap();
    for type_ in [UP_TO_DATE, DEGRADED, PROGRESSING, IDLE, DRIFTED] {
        assert!(type_pattern.is_match(type_), "{type_}");
    }
    let reasons = [
        up_to_date::ALL_UPDATED,
        up_to_date::ROLLOUT_IN_PROGRESS,
        up_to_date::PAUSED,
        up_to_date::OUTSIDE_MAINTENANCE_WINDOW,
        pool_degraded::HEALTHY,
        progressing::ADVANCING,
        progressing::STALLED,
        progressing::COMPLETE,
        progressing::INVALID_SPEC,
        progressing::HELD_NODES_LEFT,
        idle::IDLE,
        idle::STAGING,
        idle::STAGED,
        idle::REBOOTING,
        drifted::USR_OVERLAY,
        drifted::LOCAL_CHANGES,
        drifted::IN_SYNC,
    ];
    let all = reasons
        .iter()
        .chain(&node_degraded::ALL)
        .chain(&pool_degraded::PRECEDENCE);
    for reason in all {
        assert!(reason_pattern.is_match(reason), "{reason}");
    }
}

#[test]
fn an_invalid_alert_gate_url_is_named_without_its_credentials() {
    let spec: bootc_crds::pool::BootcNodePoolSpec = serde_json::from_value(json!({
        "nodeSelector": {"matchLabels": {"role": "worker"}},
        "image": {"ref": "quay.io/example/os:stable"},
        "health": {"alerts": {"url": "ftp://admin:hunter2@am.example/x?token=s3cret"}},
    }))
    .unwrap();
    let message = spec.validate().unwrap_err().to_string();
    assert!(message.contains("ftp://am.example/x"), "{message}");
    assert!(
        !message.contains("hunter2") && !message.contains("s3cret") && !message.contains("admin"),
        "{message}"
    );
}

#[test]
fn an_alert_gate_url_with_credentials_is_refused_in_favour_of_a_secret() {
    let spec = |url: &str| -> bootc_crds::pool::BootcNodePoolSpec {
        serde_json::from_value(json!({
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": "quay.io/example/os:stable"},
            "health": {"alerts": {"url": url}},
        }))
        .unwrap()
    };
    let message = spec("https://admin:hunter2@am.example/x")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(message.contains("credentialsSecretRef"), "{message}");
    assert!(message.contains("https://am.example/x"), "{message}");
    assert!(
        !message.contains("hunter2") && !message.contains("admin"),
        "{message}"
    );
    // The schema refuses it too; an `@` after the host is the path's business.
    let pattern = regex::Regex::new(bootc_crds::pool::URL_PATTERN).unwrap();
    assert!(!pattern.is_match("https://admin:hunter2@am.example/x"));
    assert!(!pattern.is_match("https://admin@am.example"));
    for fine in [
        "http://am.example:9093",
        "https://am.example/a@b",
        "http://am/?q=@",
    ] {
        assert!(pattern.is_match(fine), "{fine}");
        assert!(spec(fine).validate().is_ok(), "{fine}");
    }
}
