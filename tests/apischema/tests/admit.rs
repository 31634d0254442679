//! `admit` on a realistic pool schema: defaults, pruning, OpenAPI and CEL errors as kube-apiserver reports them.

mod fixture;

use apischema::{ErrorKind, SchemaError, admit, prune, validate};
use fixture::{BUDGET_MESSAGE, IMAGE_PATTERN, minimal_pool, pool_schema};
use serde_json::{Value, json};

const CEL_SKIPPED: &str = r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#;

fn with_spec(patch: Value) -> Value {
    let mut pool = minimal_pool();
    if let (Some(spec), Value::Object(patch)) = (pool["spec"].as_object_mut(), patch) {
        spec.extend(patch);
    }
    pool
}

fn messages(errors: &[SchemaError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn minimal_pool_is_stored_with_all_nested_defaults() {
    let stored = admit(&pool_schema(), &minimal_pool(), None).unwrap();
    assert_eq!(
        stored,
        json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": "workers", "labels": {"team": "infra"}},
            "spec": {
                "image": {"ref": "quay.io/example/os:42"},
                "rollout": {"maxUnavailable": 1, "paused": false, "pause": {"seconds": 300}},
                "disruption": {"rebootPolicy": "RebootOnly", "drain": {"force": false}}
            }
        })
    );
    // What is stored is valid and admitting it again changes nothing.
    assert!(validate(&pool_schema(), &stored).is_empty());
    assert_eq!(admit(&pool_schema(), &stored, None), Ok(stored));
}

#[test]
fn unknown_fields_are_pruned_and_nulls_dropped() {
    let pool = with_spec(json!({
        "bogus": 1,
        "rollout": {"maxUnavailable": "25%", "surge": 2},
        "disruption": {"rebootPolicy": null, "drain": {"timeoutSeconds": null}},
        "nodeSelector": {"node-role.kubernetes.io/worker": ""}
    }));
    let (_, pruned) = prune(&pool_schema(), &pool);
    assert_eq!(pruned, ["spec.bogus", "spec.rollout.surge"]);
    let stored = admit(&pool_schema(), &pool, None).unwrap();
    assert_eq!(
        stored["spec"]["rollout"],
        json!({"maxUnavailable": "25%", "paused": false, "pause": {"seconds": 300}})
    );
    // A non-nullable null with a default is defaulted; a nullable null is kept.
    assert_eq!(
        stored["spec"]["disruption"],
        json!({"rebootPolicy": "RebootOnly", "drain": {"force": false, "timeoutSeconds": null}})
    );
    assert_eq!(
        stored["spec"]["nodeSelector"],
        json!({"node-role.kubernetes.io/worker": ""})
    );
}

#[test]
fn status_keeps_unknown_fields() {
    let mut pool = minimal_pool();
    pool["status"] = json!({"nodeCount": 3, "conditions": [{"type": "UpToDate"}]});
    let stored = admit(&pool_schema(), &pool, None).unwrap();
    assert_eq!(stored["status"], pool["status"]);
}

#[test]
fn int_or_string_budget_rule() {
    for ok in [
        json!(1),
        json!(10),
        json!("1%"),
        json!("25%"),
        json!("100%"),
    ] {
        let pool = with_spec(json!({"rollout": {"maxUnavailable": ok}}));
        assert!(admit(&pool_schema(), &pool, None).is_ok(), "{ok}");
    }
    let zero = admit(
        &pool_schema(),
        &with_spec(json!({"rollout": {"maxUnavailable": "0%"}})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        messages(&zero),
        [format!(
            r#"spec.rollout.maxUnavailable: Invalid value: "0%": {BUDGET_MESSAGE}"#
        )]
    );
    let zero = admit(
        &pool_schema(),
        &with_spec(json!({"rollout": {"maxUnavailable": 0}})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        messages(&zero),
        [format!(
            "spec.rollout.maxUnavailable: Invalid value: 0: {BUDGET_MESSAGE}"
        )]
    );
    // A boolean is a type error: the apiserver skips the CEL rules and says so.
    let wrong = admit(
        &pool_schema(),
        &with_spec(json!({"rollout": {"maxUnavailable": true}})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        messages(&wrong),
        [
            r#"spec.rollout.maxUnavailable: Invalid value: "boolean": spec.rollout.maxUnavailable in body must be of type integer or string: "boolean""#,
            CEL_SKIPPED
        ]
    );
}

#[test]
fn enum_violation_is_unsupported_and_blocks_cel() {
    let pool = with_spec(
        json!({"disruption": {"rebootPolicy": "Foo"}, "rollout": {"maxUnavailable": "0%"}}),
    );
    let errors = admit(&pool_schema(), &pool, None).unwrap_err();
    assert_eq!(
        messages(&errors),
        [
            r#"spec.disruption.rebootPolicy: Unsupported value: "Foo": supported values: "RebootOnly", "AllowSoftReboot""#,
            CEL_SKIPPED
        ]
    );
    assert_eq!(errors[0].kind, ErrorKind::Unsupported);
}

#[test]
fn pattern_violation_does_not_block_cel() {
    let mut pool = with_spec(json!({"rollout": {"maxUnavailable": "0%"}}));
    pool["spec"]["image"]["ref"] = json!("Quay.io/UPPER CASE");
    let errors = admit(&pool_schema(), &pool, None).unwrap_err();
    assert_eq!(
        messages(&errors),
        [
            format!(
                r#"spec.image.ref: Invalid value: "Quay.io/UPPER CASE": spec.image.ref in body should match '{IMAGE_PATTERN}'"#
            ),
            format!(r#"spec.rollout.maxUnavailable: Invalid value: "0%": {BUDGET_MESSAGE}"#)
        ]
    );
}

#[test]
fn missing_required_fields() {
    let mut pool = minimal_pool();
    pool["spec"] = json!({});
    assert_eq!(
        messages(&admit(&pool_schema(), &pool, None).unwrap_err()),
        ["spec.image: Required value", CEL_SKIPPED]
    );
    // No spec at all: nothing below it is required or defaulted.
    let mut bare = minimal_pool();
    bare.as_object_mut().map(|o| o.remove("spec"));
    assert_eq!(admit(&pool_schema(), &bare, None), Ok(bare));
}

#[test]
fn map_list_windows() {
    let good = with_spec(json!({"windows": [
        {"name": "night", "start": "01:00", "days": ["Mon", "Tue"]},
        {"name": "weekend", "start": "10:00", "duration": "48h"}
    ]}));
    let stored = admit(&pool_schema(), &good, None).unwrap();
    assert_eq!(stored["spec"]["windows"][0]["duration"], json!("1h"));

    let bad = with_spec(json!({"windows": [
        {"name": "night", "start": "25:00", "duration": "200h", "days": ["Mon", "Mon"]},
        {"name": "night", "start": "01:00"}
    ]}));
    let errors = admit(&pool_schema(), &bad, None).unwrap_err();
    assert_eq!(
        messages(&errors),
        [
            r#"spec.windows[0].start: Invalid value: "25:00": spec.windows[0].start in body should match '^([01][0-9]|2[0-3]):[0-5][0-9]$'"#,
            r#"spec.windows[1]: Duplicate value: {"name":"night"}"#,
            r#"spec.windows[0].days[1]: Duplicate value: "Mon""#,
            r#"spec.windows[0].duration: Invalid value: "200h": must be from 1m to 168h"#
        ]
    );
    assert_eq!(errors[1].kind, ErrorKind::Duplicate);
}

#[test]
fn too_many_windows_and_bad_day_block_cel() {
    let windows: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("w{i}"), "start": "01:00", "days": ["Someday"]}))
        .collect();
    let errors = admit(
        &pool_schema(),
        &with_spec(json!({"windows": windows})),
        None,
    )
    .unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "spec.windows: Too many: 9: must have at most 8 items"
    );
    assert_eq!(
        errors[1].to_string(),
        r#"spec.windows[0].days[0]: Unsupported value: "Someday": supported values: "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun""#
    );
    assert_eq!(errors.len(), 11);
    assert_eq!(errors[10].to_string(), CEL_SKIPPED);
}

#[test]
fn transition_rule_on_update() {
    let created = admit(&pool_schema(), &with_spec(json!({"class": "gpu"})), None).unwrap();
    // Unchanged: fine. Changed: the transition rule fires.
    assert!(admit(&pool_schema(), &created, Some(&created)).is_ok());
    let changed = with_spec(json!({"class": "cpu"}));
    assert_eq!(
        messages(&admit(&pool_schema(), &changed, Some(&created)).unwrap_err()),
        [r#"spec.class: Invalid value: "cpu": is immutable"#]
    );
    // Setting it for the first time on update has no old value to compare with.
    let before = admit(&pool_schema(), &minimal_pool(), None).unwrap();
    assert!(admit(&pool_schema(), &changed, Some(&before)).is_ok());
}

/// The pool schema with its one transition rule (`class` immutable) made a rule on the
/// new value alone, its message an expression.
fn schema_without_old_self() -> Value {
    let mut schema = pool_schema();
    schema["properties"]["spec"]["properties"]["class"]["x-kubernetes-validations"] = json!([{
        "rule": "size(self) <= 8",
        "messageExpression": "'class ' + self + ' is longer than 8'",
        "message": "oldSelf is not read here"
    }]);
    schema
}

#[test]
fn a_rule_reads_old_self_when_its_rule_or_message_expression_names_it() {
    assert!(apischema::reads_old_self(&pool_schema()));
    assert!(!apischema::reads_old_self(&schema_without_old_self()));
    let rules = |rules: Value| json!({"type": "object", "x-kubernetes-validations": rules});
    assert!(!apischema::reads_old_self(&rules(
        json!([{"rule": "self.a > 0"}])
    )));
    assert!(apischema::reads_old_self(&rules(
        json!([{"rule": "true", "messageExpression": "'was ' + oldSelf.a"}])
    )));
    // Wherever in the schema the rule is.
    for at in [
        "/properties/a",
        "/items",
        "/additionalProperties",
        "/allOf/0",
    ] {
        let mut schema = json!({"type": "object"});
        let mut nested = json!({});
        nested["x-kubernetes-validations"] = json!([{"rule": "self == oldSelf"}]);
        let (parent, last) = at.rsplit_once('/').unwrap();
        let slot = if parent.is_empty() {
            &mut schema
        } else {
            let key = parent.trim_start_matches('/');
            schema[key] = if last == "0" { json!([]) } else { json!({}) };
            &mut schema[key]
        };
        if last == "0" {
            slot.as_array_mut().unwrap().push(nested);
        } else {
            slot[last] = nested;
        }
        assert!(apischema::reads_old_self(&schema), "{at}: {schema}");
    }
}

#[test]
fn without_a_rule_reading_old_self_the_old_object_changes_nothing() {
    let values = [
        minimal_pool(),
        with_spec(json!({"class": "gpu"})),
        with_spec(json!({"class": "much-too-long"})),
        with_spec(json!({"rollout": {"maxUnavailable": "0%"}})),
        with_spec(json!({"class": "much-too-long", "rollout": {"maxUnavailable": 0}})),
    ];
    let olds: Vec<Option<Value>> = std::iter::once(None)
        .chain(values.iter().cloned().map(Some))
        .chain([Some(json!({"spec": "not an object"})), Some(json!(null))])
        .collect();
    let schema = schema_without_old_self();
    let mut failed = 0;
    for value in &values {
        let alone = admit(&schema, value, None);
        failed += usize::from(alone.is_err());
        for old in &olds {
            assert_eq!(
                admit(&schema, value, old.as_ref()),
                alone,
                "{value} over {old:?}"
            );
        }
    }
    assert!(
        failed >= 3,
        "the values exercise the rules: {failed} refused"
    );
    // The comparison sees an old object that matters: with the transition rule, a class
    // changed from the stored one is refused only when the stored one is given.
    let (gpu, cpu) = (&values[1], with_spec(json!({"class": "cpu"})));
    assert!(admit(&pool_schema(), &cpu, None).is_ok());
    assert!(admit(&pool_schema(), &cpu, Some(gpu)).is_err());
}
