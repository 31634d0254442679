use super::*;
use serde_json::json;

fn spec_with(prop: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": prop}}}})
}

fn run(prop: Value, f: Value) -> Vec<String> {
    validate_cel(&spec_with(prop), &json!({"spec": {"f": f}}), None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn passing_and_failing_rules() {
    let p = json!({"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 1", "message": "must be positive"}]});
    assert!(run(p.clone(), json!(3)).is_empty());
    assert_eq!(
        run(p, json!(0)),
        ["spec.f: Invalid value: 0: must be positive"]
    );
}

#[test]
fn default_message_and_object_values_are_omitted() {
    let p = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": " self.a < self.b "}]});
    assert_eq!(
        run(p, json!({"a": 2, "b": 1})),
        ["spec.f: Invalid value: failed rule: self.a < self.b"]
    );
}

#[test]
fn int_or_string_rule() {
    let p = json!({
        "x-kubernetes-int-or-string": true,
        "x-kubernetes-validations": [{
            "rule": "type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",
            "message": "must be a positive count or a percentage from 1% to 100%"
        }]
    });
    assert_eq!(run(p.clone(), json!(2)), Vec::<String>::new());
    assert!(run(p.clone(), json!("25%")).is_empty());
    assert!(run(p.clone(), json!("100%")).is_empty());
    assert_eq!(
        run(p.clone(), json!("0%")),
        [
            r#"spec.f: Invalid value: "0%": must be a positive count or a percentage from 1% to 100%"#
        ]
    );
    assert_eq!(run(p, json!(0)).len(), 1);
}

#[test]
fn reasons_and_field_paths() {
    let p = json!({"type": "object",
    "properties": {"a": {"type": "string"}, "m": {"type": "object", "additionalProperties": {"type": "string"}}},
    "x-kubernetes-validations": [
        {"rule": "!has(self.a) || self.a != 'x'", "message": "a may not be x", "reason": "FieldValueForbidden", "fieldPath": ".a"},
        {"rule": "has(self.a)", "message": "a is needed", "reason": "FieldValueRequired"},
        {"rule": "!('k.z' in self.m)", "message": "no k.z", "fieldPath": ".m['k.z']"}
    ]});
    assert_eq!(
        run(p.clone(), json!({"a": "x", "m": {"k.z": "v"}})),
        [
            "spec.f.a: Forbidden: a may not be x",
            "spec.f.m[k.z]: Invalid value: no k.z"
        ]
    );
    assert_eq!(
        run(p, json!({"m": {}})),
        ["spec.f: Required value: a is needed"]
    );
}

#[test]
fn message_expression() {
    let p = json!({"type": "string", "x-kubernetes-validations": [
        {"rule": "self.size() < 3", "messageExpression": "'too long: ' + string(self.size())"}
    ]});
    assert_eq!(
        run(p, json!("abcd")),
        [r#"spec.f: Invalid value: "abcd": too long: 4"#]
    );
}

#[test]
fn rules_in_items_maps_and_all_of() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}},
        "m": {"type": "object", "additionalProperties": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]}},
        "n": {"type": "integer", "allOf": [{"x-kubernetes-validations": [{"rule": "self < 10"}]}]}
    }}}});
    let errs: Vec<String> = validate_cel(
        &schema,
        &json!({"spec": {"l": ["ok", "bad"], "m": {"a": 1, "b": 0}, "n": 10}}),
        None,
    )
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        errs,
        [
            r#"spec.l[1]: Invalid value: "bad": failed rule: self != 'bad'"#,
            "spec.m[b]: Invalid value: 0: failed rule: self > 0",
            "spec.n: Invalid value: 10: failed rule: self < 10"
        ]
    );
}

#[test]
fn rules_see_escaped_names_formats_and_root_metadata() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object",
            "properties": {
                "max-surge": {"type": "integer"},
                "notBefore": {"type": "string", "format": "date-time"},
                "notAfter": {"type": "string", "format": "date-time"}
            },
            "x-kubernetes-validations": [
                {"rule": "self.max__dash__surge > 0", "message": "surge"},
                {"rule": "self.notBefore < self.notAfter", "message": "order"}
            ]}
        },
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('pool-')", "message": "name"},
            {"rule": "!has(self.metadata.labels)", "message": "labels are not visible"}
        ]
    });
    let ok = json!({"metadata": {"name": "pool-a", "labels": {"a": "b"}}, "spec": {
        // Later as an instant, earlier as a string.
        "max-surge": 1, "notBefore": "2024-01-02T00:00:00Z", "notAfter": "2024-01-01T23:00:00-02:00"
    }});
    assert!(validate_cel(&schema, &ok, None).is_empty());
    let bad = json!({"metadata": {"name": "a"}, "spec": {
        // Earlier as an instant, later as a string.
        "max-surge": 0, "notBefore": "2024-01-01T00:00:00Z", "notAfter": "2024-01-01T01:00:00+02:00"
    }});
    let errs: Vec<String> = validate_cel(&schema, &bad, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        [
            "<nil>: Invalid value: name",
            "spec: Invalid value: surge",
            "spec: Invalid value: order"
        ]
    );
}

#[test]
fn null_values_and_root_metadata_are_skipped() {
    let p = json!({"type": "string", "nullable": true, "x-kubernetes-validations": [{"rule": "self == 'x'"}]});
    assert!(run(p, json!(null)).is_empty());
    let schema = json!({"type": "object", "properties": {"metadata": {"type": "object",
        "x-kubernetes-validations": [{"rule": "false"}]}}});
    assert!(validate_cel(&schema, &json!({"metadata": {"name": "a"}}), None).is_empty());
}

#[test]
fn root_rules_report_nil_path() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}},
        "x-kubernetes-validations": [{"rule": "has(self.spec)", "message": "spec is required"}]});
    let errs = validate_cel(&schema, &json!({"apiVersion": "a/v1", "kind": "K"}), None);
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].to_string(),
        "<nil>: Invalid value: spec is required"
    );
}

#[test]
fn transition_rules_need_an_old_value() {
    let p = json!({"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]});
    let schema = spec_with(p);
    let new = json!({"spec": {"f": "b"}});
    assert!(validate_cel(&schema, &new, None).is_empty());
    let old = json!({"spec": {"f": "a"}});
    assert_eq!(
        validate_cel(&schema, &new, Some(&old))
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [r#"spec.f: Invalid value: "b": immutable"#]
    );
    assert!(validate_cel(&schema, &new, Some(&new)).is_empty());
    // The field did not exist before: no oldSelf, rule skipped.
    assert!(validate_cel(&schema, &new, Some(&json!({"spec": {}}))).is_empty());
}

#[test]
fn map_lists_correlate_by_key_other_lists_do_not() {
    let item = json!({"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v may not decrease"}]});
    let map_list = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": item});
    let schema = spec_with(map_list);
    let old = json!({"spec": {"f": [{"name": "a", "v": 5}, {"name": "b", "v": 1}]}});
    // Reordered, and "b" went up: fine.
    let new = json!({"spec": {"f": [{"name": "b", "v": 2}, {"name": "a", "v": 5}]}});
    assert!(validate_cel(&schema, &new, Some(&old)).is_empty());
    let new = json!({"spec": {"f": [{"name": "b", "v": 2}, {"name": "a", "v": 4}]}});
    let errs = validate_cel(&schema, &new, Some(&old));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "spec.f[1]");
    // An atomic list has no oldSelf for its items.
    let atomic = spec_with(json!({"type": "array", "items": item}));
    assert!(validate_cel(&atomic, &new, Some(&old)).is_empty());
}

#[test]
fn broken_rules_are_errors_not_panics() {
    let p = json!({"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >>>= 1"},
        {"rule": "self > 0", "messageExpression": "'unterminated"},
        {"message": "no rule at all"},
        "not an object",
        {"rule": "self / 0 == 1"},
        {"rule": "  "}
    ]});
    let errs = validate_cel(&spec_with(p), &json!({"spec": {"f": 1}}), None);
    let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
    // The rule-less and blank entries are skipped, like the apiserver skips empty programs.
    assert_eq!(errs.len(), 4, "{texts:#?}");
    assert!(
        errs.iter()
            .all(|e| e.kind == ErrorKind::Invalid && e.path == "spec.f")
    );
    assert!(
        texts[0].starts_with(r#"spec.f: Invalid value: "integer": rule compile error: "#),
        "{texts:#?}"
    );
    assert!(texts[1].contains("rule compile error: "), "{texts:#?}");
    assert!(texts[2].contains("rule compile error: "), "{texts:#?}");
    assert!(
        texts[3].ends_with(" evaluating rule: self / 0 == 1"),
        "{texts:#?}"
    );
    let bad_list =
        spec_with(json!({"type": "integer", "x-kubernetes-validations": {"rule": "true"}}));
    assert_eq!(
        validate_cel(&bad_list, &json!({"spec": {"f": 1}}), None)[0].kind,
        ErrorKind::Internal
    );
}

#[test]
fn field_path_resolution() {
    let s = json!({"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b.c": {"type": "string"}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {}}}}
    }});
    assert_eq!(
        resolve_field_path(".a['b.c']", &s, "spec").as_deref(),
        Some("spec.a.b.c")
    );
    assert_eq!(
        resolve_field_path(".m.k.x", &s, "spec").as_deref(),
        Some("spec.m[k].x")
    );
    assert_eq!(
        resolve_field_path(".m['it\\'s'].x", &s, "").as_deref(),
        Some("m[it's].x")
    );
    assert_eq!(resolve_field_path(".nope", &s, "spec"), None);
    assert_eq!(resolve_field_path("a", &s, "spec"), None);
    assert_eq!(resolve_field_path(".a['b.c'", &s, "spec"), None);
}

#[test]
fn detects_rules() {
    assert!(has_rules(&spec_with(
        json!({"x-kubernetes-validations": []})
    )));
    assert!(has_rules(
        &json!({"items": {"allOf": [{"x-kubernetes-validations": []}]}})
    ));
    assert!(!has_rules(&spec_with(json!({"type": "string"}))));
}
