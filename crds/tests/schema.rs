//! The committed CRDs refuse bad input (as kube-apiserver would, through the structural
//! schema and its CEL rules), and validate() reports what a schema cannot say, every
//! problem with its field path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::BootcNodePool;
use bootc_crds::selector::check_dns_subdomain;
use bootc_crds::validate::check_unit_name;
use common::*;
use serde_json::{Value, json};

fn minimal() -> Value {
    load_yaml("samples/pool-minimal.yaml")
}

fn with(path: &str, value: Value) -> Value {
    let mut object = minimal();
    set(&mut object, path, value);
    object
}

/// The minimal pool without the field at `path`.
fn without(path: &str) -> Value {
    let mut object = minimal();
    remove(&mut object, path);
    object
}

/// The minimal pool with these maintenance windows.
fn windows(windows: Value) -> Value {
    with("spec.rollout.maintenanceWindows", windows)
}

/// `count` distinct labels with empty values.
fn labels(count: usize) -> Value {
    (0..count)
        .map(|i| (format!("example.com/k{i}"), json!("")))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// `what`: the minimal pool with `value` at `path`, and the refusal naming `path`.
fn refused_at(
    what: &'static str,
    path: &'static str,
    value: Value,
) -> (&'static str, Value, &'static str) {
    (what, with(path, value), path)
}

/// Inputs the schema itself refuses, and the field the refusal names.
fn refused_by_schema() -> Vec<(&'static str, Value, &'static str)> {
    let r = |v: &str| json!(v);
    vec![
        refused_at(
            "uppercase repository",
            "spec.image.ref",
            r("quay.io/Example/os:1"),
        ),
        refused_at("empty ref", "spec.image.ref", r("")),
        refused_at("empty tag", "spec.image.ref", r("quay.io/os:")),
        refused_at("empty path part", "spec.image.ref", r("quay.io//os")),
        refused_at("short digest", "spec.image.ref", r("quay.io/os@sha256:abc")),
        refused_at(
            "non-hex digest",
            "spec.image.ref",
            json!(format!("quay.io/os@sha256:{}", "g".repeat(64))),
        ),
        refused_at(
            "uppercase hex",
            "spec.image.ref",
            json!(format!("quay.io/os@sha256:{}", HEX.to_uppercase())),
        ),
        refused_at(
            "sha512",
            "spec.image.ref",
            json!(format!("quay.io/os@sha512:{HEX}{HEX}")),
        ),
        refused_at("whitespace", "spec.image.ref", r("quay.io/os :1")),
        refused_at("newline", "spec.image.ref", r("quay.io/os\n")),
        refused_at("control character", "spec.image.ref", r("quay.io/os\u{1b}")),
        refused_at("leading dash", "spec.image.ref", r("--apply")),
        refused_at("shell metacharacter", "spec.image.ref", r("x; reboot")),
        refused_at(
            "command substitution",
            "spec.image.ref",
            r("quay.io/os$(id)"),
        ),
        refused_at("too long", "spec.image.ref", json!("a".repeat(600))),
        refused_at("maxUnavailable 0", "spec.rollout.maxUnavailable", json!(0)),
        refused_at(
            "maxUnavailable -1",
            "spec.rollout.maxUnavailable",
            json!(-1),
        ),
        refused_at("maxUnavailable 0%", "spec.rollout.maxUnavailable", r("0%")),
        refused_at(
            "maxUnavailable 101%",
            "spec.rollout.maxUnavailable",
            r("101%"),
        ),
        refused_at(
            "maxUnavailable words",
            "spec.rollout.maxUnavailable",
            r("two"),
        ),
        refused_at(
            "maxUnavailable digits as string",
            "spec.rollout.maxUnavailable",
            r("10"),
        ),
        refused_at(
            "maxUnavailable bool",
            "spec.rollout.maxUnavailable",
            json!(true),
        ),
        refused_at(
            "maxUnavailable percent too long",
            "spec.rollout.maxUnavailable",
            r("99999999999%"),
        ),
        refused_at(
            "maxUnavailable 1000%",
            "spec.rollout.maxUnavailable",
            r("1000%"),
        ),
        refused_at(
            "maxUnavailable fraction",
            "spec.rollout.maxUnavailable",
            r("5.5%"),
        ),
        refused_at(
            "maxUnavailable beyond int32",
            "spec.rollout.maxUnavailable",
            json!(2_147_483_648_i64),
        ),
        refused_at("maxStaging words", "spec.rollout.maxStaging", r("two")),
        refused_at("maxStaging 0%", "spec.rollout.maxStaging", r("0%")),
        refused_at("maxStaging 0", "spec.rollout.maxStaging", json!(0)),
        refused_at(
            "resolve interval",
            "spec.image.resolveIntervalSeconds",
            json!(10),
        ),
        refused_at(
            "drain timeout",
            "spec.rollout.drainTimeoutSeconds",
            json!(-1),
        ),
        refused_at(
            "reboot timeout",
            "spec.rollout.rebootTimeoutSeconds",
            json!(0),
        ),
        refused_at(
            "halt threshold",
            "spec.rollout.haltAfterUnhealthy",
            json!(0),
        ),
        refused_at("soak", "spec.rollout.postRebootDelaySeconds", json!(-5)),
        refused_at("paused string", "spec.rollout.paused", r("yes")),
        refused_at("history 0", "spec.history.limit", json!(0)),
        refused_at("history 21", "spec.history.limit", json!(21)),
        refused_at(
            "reboot policy",
            "spec.disruption.rebootPolicy",
            r("Sometimes"),
        ),
        refused_at(
            "grace period",
            "spec.disruption.drain.gracePeriodSeconds",
            json!(-1),
        ),
        (
            "secret without namespace",
            with("spec.pullSecretRef", json!({"name": "s"})),
            "spec.pullSecretRef.namespace",
        ),
        (
            "secret empty name",
            with("spec.pullSecretRef", json!({"name": "", "namespace": "n"})),
            "spec.pullSecretRef.name",
        ),
        (
            "window day",
            windows(json!([{"days": ["Monday"], "start": "01:00", "duration": "1h"}])),
            "spec.rollout.maintenanceWindows[0].days[0]",
        ),
        (
            "window no days",
            windows(json!([{"days": [], "start": "01:00", "duration": "1h"}])),
            "spec.rollout.maintenanceWindows[0].days",
        ),
        (
            "window twice a day",
            windows(json!([{"days": ["Mon", "Mon"], "start": "01:00", "duration": "1h"}])),
            "spec.rollout.maintenanceWindows[0].days[1]",
        ),
        (
            "window start",
            windows(json!([{"days": ["Mon"], "start": "24:00", "duration": "1h"}])),
            "spec.rollout.maintenanceWindows[0].start",
        ),
        (
            "window duration unit",
            windows(json!([{"days": ["Mon"], "start": "01:00", "duration": "1d"}])),
            "spec.rollout.maintenanceWindows[0].duration",
        ),
        (
            "window zero duration",
            windows(json!([{"days": ["Mon"], "start": "01:00", "duration": "0m"}])),
            "spec.rollout.maintenanceWindows[0].duration",
        ),
        (
            "window over a week",
            windows(json!([{"days": ["Mon"], "start": "01:00", "duration": "200h"}])),
            "spec.rollout.maintenanceWindows[0].duration",
        ),
        (
            "window without start",
            windows(json!([{"days": ["Mon"], "duration": "1h"}])),
            "spec.rollout.maintenanceWindows[0].start",
        ),
        refused_at(
            "too many windows",
            "spec.rollout.maintenanceWindows",
            json!(vec![
                json!({"days": ["Mon"], "start": "01:00", "duration": "1h"});
                33
            ]),
        ),
        (
            "time zone too long",
            windows(
                json!([{"days": ["Mon"], "start": "01:00", "duration": "1h", "timeZone": "Z".repeat(65)}]),
            ),
            "spec.rollout.maintenanceWindows[0].timeZone",
        ),
        (
            "too many labels",
            with("spec.nodeSelector", json!({"matchLabels": labels(65)})),
            "spec.nodeSelector.matchLabels",
        ),
        (
            "label value too long",
            with(
                "spec.nodeSelector",
                json!({"matchLabels": {"a": "v".repeat(64)}}),
            ),
            "spec.nodeSelector.matchLabels[a]",
        ),
        (
            "too many expressions",
            with(
                "spec.nodeSelector",
                json!({"matchExpressions": vec![json!({"key": "a", "operator": "Exists"}); 33]}),
            ),
            "spec.nodeSelector.matchExpressions",
        ),
        (
            "too many values",
            with(
                "spec.nodeSelector",
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": (0..257).map(|i| format!("v{i}")).collect::<Vec<_>>()}]}),
            ),
            "spec.nodeSelector.matchExpressions[0].values",
        ),
        (
            "expression key too long",
            with(
                "spec.nodeSelector",
                json!({"matchExpressions": [{"key": "k".repeat(318), "operator": "Exists"}]}),
            ),
            "spec.nodeSelector.matchExpressions[0].key",
        ),
        (
            "pod selector with too many labels",
            with(
                "spec.disruption.drain.podSelector",
                json!({"matchLabels": labels(65)}),
            ),
            "spec.disruption.drain.podSelector.matchLabels",
        ),
        (
            "secret name too long",
            with(
                "spec.pullSecretRef",
                json!({"name": "s".repeat(254), "namespace": "n"}),
            ),
            "spec.pullSecretRef.name",
        ),
        (
            "secret namespace too long",
            with(
                "spec.pullSecretRef",
                json!({"name": "s", "namespace": "n".repeat(64)}),
            ),
            "spec.pullSecretRef.namespace",
        ),
        (
            "webhook secret without name",
            with(
                "spec.notifications.webhook.secretRef",
                json!({"namespace": "n"}),
            ),
            "spec.notifications.webhook.secretRef.name",
        ),
        (
            "webhook secret key with a slash",
            with(
                "spec.notifications.webhook.secretRef",
                json!({"name": "s", "namespace": "n", "key": "a/b"}),
            ),
            "spec.notifications.webhook.secretRef.key",
        ),
        (
            "webhook secret key too long",
            with(
                "spec.notifications.webhook.secretRef",
                json!({"name": "s", "namespace": "n", "key": "k".repeat(254)}),
            ),
            "spec.notifications.webhook.secretRef.key",
        ),
        ("no image", without("spec.image"), "spec.image"),
        (
            "no selector",
            without("spec.nodeSelector"),
            "spec.nodeSelector",
        ),
    ]
}

#[test]
fn the_schema_refuses_bad_pools() {
    admit("bootcnodepools", &minimal()).expect("the baseline is accepted");
    for (what, object, path) in refused_by_schema() {
        match admit("bootcnodepools", &object) {
            Ok(_) => panic!("{what}: accepted"),
            Err(errors) => assert!(
                errors.iter().any(|e| e.starts_with(&format!("{path}:"))),
                "{what}: no error at {path}: {errors:?}"
            ),
        }
    }
}

/// Budgets are checked by OpenAPI keywords alone (no CEL rule): every integer from 1 and
/// every percentage from 1% to 100% is accepted, and validate() agrees.
#[test]
fn the_schema_accepts_every_valid_budget() {
    let mut values = vec![json!(1), json!(3), json!(1000), json!(i32::MAX)];
    values.extend((1..=100).map(|p| json!(format!("{p}%"))));
    for value in values {
        for field in ["spec.rollout.maxUnavailable", "spec.rollout.maxStaging"] {
            let stored = admit("bootcnodepools", &with(field, value.clone()))
                .unwrap_or_else(|e| panic!("{field} = {value}: {e:?}"));
            let pool: BootcNodePool = serde_json::from_value(stored).unwrap();
            pool.spec
                .validate()
                .unwrap_or_else(|e| panic!("{field} = {value}: {e}"));
        }
    }
}

/// What the schema says about a refused budget.
#[test]
fn budget_refusals_name_the_rule_broken() {
    let cases = [
        (
            json!(0),
            "spec.rollout.maxUnavailable: Invalid value: 0: spec.rollout.maxUnavailable in body should be greater than or equal to 1",
        ),
        (
            json!("0%"),
            r#"spec.rollout.maxUnavailable: Invalid value: "0%": spec.rollout.maxUnavailable in body should match '^(100|[1-9][0-9]?)%$'"#,
        ),
        (
            json!("1000%"),
            "spec.rollout.maxUnavailable: Too long: may not be longer than 4",
        ),
    ];
    for (value, want) in cases {
        let errors = admit(
            "bootcnodepools",
            &with("spec.rollout.maxUnavailable", value),
        )
        .expect_err(want);
        assert_eq!(errors[0], want, "{errors:?}");
    }
}

#[test]
fn the_schema_refuses_bad_bootcnodes() {
    let node = load_yaml("samples/bootcnode.yaml");
    admit("bootcnodes", &node).expect("baseline");
    let bad_images = [
        "quay.io/example/node-os:stable".to_string(),
        format!("quay.io/example/node-os:stable@sha256:{HEX}"),
        format!("--apply@sha256:{HEX}"),
        format!("quay.io/x y@sha256:{HEX}"),
    ];
    for image in bad_images {
        let mut object = node.clone();
        set(&mut object, "spec.desiredImage", json!(image));
        let errors = admit("bootcnodes", &object).expect_err(&image);
        assert!(
            errors.iter().any(|e| e.starts_with("spec.desiredImage:")),
            "{image}: {errors:?}"
        );
    }
    let mut object = node.clone();
    set(&mut object, "spec.desiredImageState", json!("Rebooted"));
    assert!(admit("bootcnodes", &object).is_err());
}

/// Whatever the schema refuses, validate() refuses too: a pool that reaches the controller
/// through an old CRD, or none, is still never acted on.
#[test]
fn validate_catches_what_the_schema_catches() {
    for (what, object, path) in refused_by_schema() {
        // Type errors and missing required fields cannot even be read into the types.
        let Ok(pool) = serde_json::from_value::<BootcNodePool>(object) else {
            continue;
        };
        let errors = pool.spec.validate().expect_err(what);
        let root = path.split('[').next().unwrap_or(path);
        let root = root.rsplit_once(".days").map_or(root, |(r, _)| r);
        assert!(
            errors.0.iter().any(|e| e.path.starts_with(root)),
            "{what}: validate() says nothing at {root}: {errors}"
        );
    }
}

/// What only a program can check: validate() finds it, with the field path.
#[test]
fn validate_reports_what_no_schema_can_say() {
    let cases = [
        (
            "unknown time zone",
            "spec.rollout.maintenanceWindows",
            json!([{"days": ["Mon"], "start": "01:00", "duration": "1h", "timeZone": "Mars/Olympus"}]),
            "spec.rollout.maintenanceWindows[0].timeZone",
        ),
        (
            "port out of range",
            "spec.image.ref",
            json!("quay.io:99999/os:1"),
            "spec.image.ref",
        ),
        (
            "name too long",
            "spec.image.ref",
            json!(format!("quay.io/{}", "a".repeat(300))),
            "spec.image.ref",
        ),
        (
            "selector key",
            "spec.nodeSelector",
            json!({"matchLabels": {"bad key": "x"}}),
            "spec.nodeSelector.matchLabels[bad key]",
        ),
        (
            "selector operator",
            "spec.nodeSelector",
            json!({"matchExpressions": [{"key": "a", "operator": "Has"}]}),
            "spec.nodeSelector.matchExpressions[0].operator",
        ),
        (
            "In without values",
            "spec.nodeSelector",
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            "spec.nodeSelector.matchExpressions[0].values",
        ),
        (
            "selects the managed label",
            "spec.nodeSelector",
            json!({"matchLabels": {"node.bootc.dev/managed": ""}}),
            "spec.nodeSelector",
        ),
        (
            "pod selector",
            "spec.disruption.drain.podSelector",
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            "spec.disruption.drain.podSelector.matchExpressions[0].values",
        ),
        (
            "secret name",
            "spec.pullSecretRef",
            json!({"name": "Bad_Name", "namespace": "ns"}),
            "spec.pullSecretRef.name",
        ),
        (
            "secret namespace",
            "spec.pullSecretRef",
            json!({"name": "s", "namespace": "a.b"}),
            "spec.pullSecretRef.namespace",
        ),
        (
            "webhook secret name",
            "spec.notifications.webhook.secretRef",
            json!({"name": "Bad_Name", "namespace": "ns"}),
            "spec.notifications.webhook.secretRef.name",
        ),
        (
            "webhook secret key",
            "spec.notifications.webhook.secretRef",
            json!({"name": "s", "namespace": "ns", "key": ".."}),
            "spec.notifications.webhook.secretRef.key",
        ),
    ];
    for (what, field, value, path) in cases {
        let object = with(field, value);
        // The schema may or may not catch these; validate() must.
        let pool: BootcNodePool =
            serde_json::from_value(admit("bootcnodepools", &object).unwrap_or(object)).unwrap();
        let errors = pool.spec.validate().expect_err(what);
        assert!(errors.0.iter().any(|e| e.path == path), "{what}: {errors}");
    }
}

/// The lists of names (the pools a pool waits for, the units of its health check) are
/// each counted against their limit, each name checked, and none taken twice.
#[test]
fn validate_checks_lists_of_names() {
    let mut after: Vec<String> = (0..15).map(|i| format!("p{i}")).collect();
    after.extend(["Bad_Name".into(), "p3".into()]);
    let mut units: Vec<String> = (0..15).map(|i| format!("u{i}.service")).collect();
    units.extend(["kubelet".into(), "u3.service".into()]);
    let mut object = minimal();
    set(&mut object, "spec.rollout.after", json!(after));
    set(&mut object, "spec.health", json!({ "units": units }));
    let pool: BootcNodePool = serde_json::from_value(object).unwrap();
    let errors = pool.spec.validate().unwrap_err();
    let shown: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    let bad_pool = check_dns_subdomain("Bad_Name").unwrap_err();
    let bad_unit = check_unit_name("kubelet").unwrap_err();
    let want = [
        "spec.rollout.after: names 17 pools, more than the limit of 16".to_string(),
        format!("spec.rollout.after[15]: \"Bad_Name\" {bad_pool}"),
        "spec.rollout.after[16]: \"p3\" is listed twice".to_string(),
        "spec.health.units: names 17 units, more than the limit of 16".to_string(),
        format!("spec.health.units[15]: \"kubelet\" {bad_unit}"),
        "spec.health.units[16]: \"u3.service\" is listed twice".to_string(),
    ];
    for w in &want {
        assert!(shown.contains(w), "missing {w:?} in {shown:#?}");
    }
}

#[test]
fn validate_lists_every_problem() {
    let mut object = minimal();
    set(&mut object, "spec.image.ref", json!("quay.io/Bad"));
    set(&mut object, "spec.rollout.maxUnavailable", json!("0%"));
    set(&mut object, "spec.rollout.maxStaging", json!(-2));
    set(&mut object, "spec.history.limit", json!(50));
    set(
        &mut object,
        "spec.rollout.maintenanceWindows",
        json!([{"days": ["Mon", "Mon"], "start": "25:00", "duration": "0m", "timeZone": "Nowhere"}]),
    );
    let pool: BootcNodePool = serde_json::from_value(object).unwrap();
    let errors = pool.spec.validate().unwrap_err();
    let paths: Vec<&str> = errors.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.image.ref",
            "spec.rollout.maxUnavailable",
            "spec.rollout.maxStaging",
            "spec.rollout.maintenanceWindows[0].days",
            "spec.rollout.maintenanceWindows[0].start",
            "spec.rollout.maintenanceWindows[0].duration",
            "spec.rollout.maintenanceWindows[0].timeZone",
            "spec.history.limit",
        ]
    );
    assert_eq!(
        errors.0[0].to_string(),
        "spec.image.ref: \"quay.io/Bad\" is not a valid image reference: repository \"Bad\" must be lowercase"
    );
    assert_eq!(
        errors.0[1].to_string(),
        "spec.rollout.maxUnavailable: 0% is out of range: a percentage must be from 1% to 100% \
         (bootc-operator reads this as \"approve no reboots\"; here, set spec.rollout.paused: \
         true for that)"
    );
}

#[test]
fn bootcnode_validate_wants_a_canonical_pin() {
    let node: bootc_crds::BootcNode =
        serde_json::from_value(load_yaml("samples/bootcnode.yaml")).unwrap();
    node.spec.validate().unwrap();
    for bad in [
        "quay.io/os:1".to_string(),
        format!("quay.io/os:1@sha256:{HEX}"),
        format!("os@sha256:{HEX}"),
        format!("index.docker.io/library/os@sha256:{HEX}"),
        format!("-x@sha256:{HEX}"),
    ] {
        let mut n = node.clone();
        n.spec.desired_image = bad.clone();
        let errors = n.spec.validate().expect_err(&bad);
        assert_eq!(errors.0[0].path, "spec.desiredImage", "{bad}");
    }
}

/// A format rule refuses with what the field must hold, never with its regular
/// expression.
#[test]
fn format_refusals_say_what_the_field_must_hold() {
    let cases = [
        (
            "spec.image.ref",
            json!("Quay.io/Example/OS:stable"),
            "must be an image reference",
        ),
        (
            "spec.image.ref",
            json!("quay.io/x y:1"),
            "e.g. quay.io/example/os:stable",
        ),
        (
            "spec.rollout.maintenanceWindows",
            json!([{"days": ["Mon"], "start": "25:00", "duration": "1h"}]),
            "must be a 24-hour time HH:MM",
        ),
        (
            "spec.rollout.maintenanceWindows",
            json!([{"days": ["Mon"], "start": "02:00", "duration": "1d"}]),
            "must be hours and minutes such as 3h, 90m or 1h30m",
        ),
        (
            "spec.health",
            json!({"alerts": {"url": "https://u:p@am.example"}}),
            "credentialsSecretRef",
        ),
    ];
    for (field, value, want) in cases {
        let errors = admit("bootcnodepools", &with(field, value.clone())).expect_err(want);
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{value}: {errors:?}"
        );
        assert!(
            !errors.iter().any(|e| e.contains("should match")),
            "{value}: {errors:?}"
        );
    }
    let node = load_yaml("samples/bootcnode.yaml");
    let mut object = node.clone();
    set(
        &mut object,
        "spec.desiredImage",
        json!("quay.io/example/os:stable"),
    );
    let errors = admit("bootcnodes", &object).expect_err("a tag");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("must be an image pinned by digest")),
        "{errors:?}"
    );
}
