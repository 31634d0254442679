use super::*;
use serde_json::json;

/// Validates `{"spec": {"f": field}}` against a schema whose `spec.f` is `prop`.
fn check(prop: Value, field: Value) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": prop}}}});
    validate(&schema, &json!({"spec": {"f": field}}))
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn kinds(prop: Value, field: Value) -> Vec<ErrorKind> {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": prop}}}});
    validate(&schema, &json!({"spec": {"f": field}}))
        .iter()
        .map(|e| e.kind)
        .collect()
}

#[test]
fn type_object_array_string_boolean() {
    assert!(check(json!({"type": "object"}), json!({})).is_empty());
    assert_eq!(
        check(json!({"type": "object"}), json!([])),
        [r#"spec.f: Invalid value: "array": spec.f in body must be of type object: "array""#]
    );
    assert!(check(json!({"type": "array"}), json!([1])).is_empty());
    assert_eq!(
        kinds(json!({"type": "array"}), json!("x")),
        [ErrorKind::TypeInvalid]
    );
    assert!(check(json!({"type": "string"}), json!("")).is_empty());
    assert_eq!(
        kinds(json!({"type": "string"}), json!(1)),
        [ErrorKind::TypeInvalid]
    );
    assert!(check(json!({"type": "boolean"}), json!(false)).is_empty());
    assert_eq!(
        check(json!({"type": "boolean"}), json!("true")),
        [r#"spec.f: Invalid value: "string": spec.f in body must be of type boolean: "string""#]
    );
}

#[test]
fn type_integer_accepts_integers_only_and_number_accepts_both() {
    assert!(check(json!({"type": "integer"}), json!(-3)).is_empty());
    assert!(check(json!({"type": "integer"}), json!(u64::MAX)).is_empty());
    assert_eq!(
        check(json!({"type": "integer"}), json!(1.5)),
        [r#"spec.f: Invalid value: "number": spec.f in body must be of type integer: "number""#]
    );
    assert_eq!(
        kinds(json!({"type": "integer"}), json!(1.0)),
        [ErrorKind::TypeInvalid]
    );
    assert!(check(json!({"type": "number"}), json!(1)).is_empty());
    assert!(check(json!({"type": "number"}), json!(1.5)).is_empty());
    assert_eq!(
        kinds(json!({"type": "number"}), json!("1")),
        [ErrorKind::TypeInvalid]
    );
}

#[test]
fn nullable() {
    assert_eq!(
        check(json!({"type": "string"}), json!(null)),
        [r#"spec.f: Invalid value: "null": spec.f in body must be of type string: "null""#]
    );
    assert!(check(json!({"type": "string", "nullable": true}), json!(null)).is_empty());
    // Untyped schemas accept null.
    assert!(check(json!({}), json!(null)).is_empty());
    // The enum still applies to null.
    assert_eq!(
        kinds(
            json!({"type": "string", "nullable": true, "enum": ["a"]}),
            json!(null)
        ),
        [ErrorKind::Unsupported]
    );
}

#[test]
fn required() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["image", "name"],
        "properties": {"image": {"type": "string"}, "name": {"type": "string"}}
    }}});
    let errs = validate(&schema, &json!({"spec": {"name": "x"}}));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].to_string(), "spec.image: Required value");
    assert_eq!(errs[0].kind, ErrorKind::Required);
    assert!(validate(&schema, &json!({"spec": {"name": "x", "image": "i"}})).is_empty());
    // A null value is present: only the type is wrong.
    let errs = validate(&schema, &json!({"spec": {"name": "x", "image": null}}));
    assert_eq!(
        errs.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [ErrorKind::TypeInvalid]
    );
}

#[test]
fn enums() {
    let policy = json!({"type": "string", "enum": ["RebootOnly", "AllowSoftReboot"]});
    assert!(check(policy.clone(), json!("RebootOnly")).is_empty());
    assert_eq!(
        check(policy, json!("Foo")),
        [r#"spec.f: Unsupported value: "Foo": supported values: "RebootOnly", "AllowSoftReboot""#]
    );
    assert_eq!(
        check(json!({"type": "integer", "enum": [1, 2]}), json!(3)),
        [r#"spec.f: Unsupported value: 3: supported values: "1", "2""#]
    );
    assert!(check(json!({"enum": [1.0]}), json!(1)).is_empty());
    assert!(check(json!({"enum": [{"a": [1]}]}), json!({"a": [1]})).is_empty());
}

#[test]
fn patterns() {
    let p = json!({"type": "string", "pattern": "^[a-z]+$"});
    assert!(check(p.clone(), json!("abc")).is_empty());
    assert_eq!(
        check(p, json!("aBc")),
        [r#"spec.f: Invalid value: "aBc": spec.f in body should match '^[a-z]+$'"#]
    );
    // Unanchored like Go.
    assert!(check(json!({"pattern": "b"}), json!("abc")).is_empty());
    // A pattern only applies to strings.
    assert!(check(json!({"pattern": "^x$"}), json!(5)).is_empty());
}

#[test]
fn uncompilable_pattern_is_an_internal_error() {
    let errs = kinds(json!({"type": "string", "pattern": "(["}), json!("x"));
    assert_eq!(errs, [ErrorKind::Internal]);
    let text = check(json!({"type": "string", "pattern": "(["}), json!("x"));
    assert!(
        text[0].starts_with(
            r#"spec.f: Internal error: invalid schema: pattern "([" does not compile"#
        ),
        "{text:?}"
    );
}

#[test]
fn lengths_count_code_points() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 3});
    assert!(check(s.clone(), json!("ééé")).is_empty());
    assert_eq!(
        check(s.clone(), json!("éééé")),
        ["spec.f: Too long: may not be longer than 3"]
    );
    assert_eq!(kinds(s.clone(), json!("éééé")), [ErrorKind::TooLong]);
    assert_eq!(
        check(s, json!("é")),
        [r#"spec.f: Invalid value: "é": spec.f in body should be at least 2 chars long"#]
    );
}

#[test]
fn minimum_and_maximum() {
    let s = json!({"type": "integer", "minimum": 1, "maximum": 10});
    assert!(check(s.clone(), json!(1)).is_empty());
    assert!(check(s.clone(), json!(10)).is_empty());
    assert_eq!(
        check(s.clone(), json!(0)),
        ["spec.f: Invalid value: 0: spec.f in body should be greater than or equal to 1"]
    );
    assert_eq!(
        check(s, json!(11)),
        ["spec.f: Invalid value: 11: spec.f in body should be less than or equal to 10"]
    );
    let x = json!({"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1.5, "exclusiveMaximum": true});
    assert!(check(x.clone(), json!(0.5)).is_empty());
    assert_eq!(
        check(x.clone(), json!(0)),
        ["spec.f: Invalid value: 0: spec.f in body should be greater than 0"]
    );
    assert_eq!(
        check(x, json!(1.5)),
        ["spec.f: Invalid value: 1.5: spec.f in body should be less than 1.5"]
    );
}

#[test]
fn multiple_of() {
    assert!(check(json!({"multipleOf": 5}), json!(15)).is_empty());
    assert_eq!(
        check(json!({"multipleOf": 5}), json!(12)),
        ["spec.f: Invalid value: 12: spec.f in body should be a multiple of 5"]
    );
    assert!(check(json!({"multipleOf": 0.1}), json!(0.3)).is_empty());
    assert_eq!(
        kinds(json!({"multipleOf": 0.5}), json!(0.7)),
        [ErrorKind::Invalid]
    );
    assert_eq!(
        kinds(json!({"multipleOf": 0}), json!(1)),
        [ErrorKind::Internal]
    );
}

#[test]
fn items_counts_and_uniqueness() {
    let s = json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}});
    assert!(check(s.clone(), json!(["a"])).is_empty());
    assert_eq!(
        check(s.clone(), json!([])),
        ["spec.f: Invalid value: 0: spec.f in body should have at least 1 items"]
    );
    assert_eq!(
        check(s.clone(), json!(["a", "b", "c"])),
        ["spec.f: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        check(s, json!(["a", 1])),
        [
            r#"spec.f[1]: Invalid value: "integer": spec.f[1] in body must be of type string: "integer""#
        ]
    );
    let u = json!({"type": "array", "uniqueItems": true});
    assert!(check(u.clone(), json!([1, 2, {"a": 1}])).is_empty());
    assert_eq!(
        check(u, json!([{"a": 1}, {"a": 1}])),
        [r#"spec.f: Invalid value: "": spec.f in body shouldn't contain duplicates"#]
    );
}

#[test]
fn property_counts() {
    let s = json!({"type": "object", "minProperties": 1, "maxProperties": 2});
    assert!(check(s.clone(), json!({"a": 1})).is_empty());
    assert_eq!(
        check(s.clone(), json!({})),
        ["spec.f: Invalid value: 0: spec.f in body should have at least 1 properties"]
    );
    assert_eq!(
        check(s.clone(), json!({"a": 1, "b": 2, "c": 3})),
        ["spec.f: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        kinds(s, json!({"a": 1, "b": 2, "c": 3})),
        [ErrorKind::TooMany]
    );
}

#[test]
fn formats() {
    let dt = json!({"type": "string", "format": "date-time"});
    assert!(check(dt.clone(), json!("2024-05-01T10:00:00Z")).is_empty());
    assert_eq!(
        check(dt, json!("tomorrow")),
        [
            r#"spec.f: Invalid value: "tomorrow": spec.f in body must be of type date-time: "tomorrow""#
        ]
    );
    assert!(
        check(
            json!({"type": "string", "format": "no-such-format"}),
            json!("x")
        )
        .is_empty()
    );
    let i32s = json!({"type": "integer", "format": "int32"});
    assert!(check(i32s.clone(), json!(2_147_483_647)).is_empty());
    assert_eq!(
        check(i32s, json!(2_147_483_648_i64)),
        [
            "spec.f: Invalid value: 2147483648: Checked value must be of type integer with format int32 in spec.f"
        ]
    );
    let i64s = json!({"type": "integer", "format": "int64"});
    assert!(check(i64s.clone(), json!(i64::MIN)).is_empty());
    assert_eq!(kinds(i64s, json!(u64::MAX)), [ErrorKind::Invalid]);
}

#[test]
fn int_or_string() {
    let s = json!({"x-kubernetes-int-or-string": true});
    assert!(check(s.clone(), json!(3)).is_empty());
    assert!(check(s.clone(), json!("30%")).is_empty());
    assert_eq!(
        check(s.clone(), json!(1.5)),
        [
            r#"spec.f: Invalid value: "number": spec.f in body must be of type integer or string: "number""#
        ]
    );
    assert_eq!(kinds(s.clone(), json!(true)), [ErrorKind::TypeInvalid]);
    assert_eq!(kinds(s.clone(), json!(null)), [ErrorKind::TypeInvalid]);
    assert!(
        check(
            json!({"x-kubernetes-int-or-string": true, "nullable": true}),
            json!(null)
        )
        .is_empty()
    );
    // Other keywords apply to the variant they fit.
    let p = json!({"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+%$", "minimum": 1});
    assert_eq!(kinds(p.clone(), json!("x")), [ErrorKind::Invalid]);
    assert_eq!(kinds(p, json!(0)), [ErrorKind::Invalid]);
}

#[test]
fn preserve_unknown_fields_and_unknown_properties_validate() {
    let s = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}});
    assert!(check(s.clone(), json!({"zzz": [1, {"b": null}]})).is_empty());
    assert_eq!(
        kinds(s, json!({"a": 1, "zzz": 2})),
        [ErrorKind::TypeInvalid]
    );
    // Without it, unknown fields are still not a validation error (pruning handles them).
    assert!(check(json!({"type": "object", "properties": {}}), json!({"u": 1})).is_empty());
    assert!(
        check(
            json!({"x-kubernetes-preserve-unknown-fields": true}),
            json!(7)
        )
        .is_empty()
    );
}

#[test]
fn additional_properties_maps_use_key_paths() {
    let s = json!({"type": "object", "additionalProperties": {"type": "string", "maxLength": 2}});
    assert!(check(s.clone(), json!({"a": "xy"})).is_empty());
    assert_eq!(
        check(s, json!({"app.kubernetes.io/name": "xyz"})),
        ["spec.f[app.kubernetes.io/name]: Too long: may not be longer than 2"]
    );
    let closed = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
    assert_eq!(
        check(closed, json!({"a": 1, "b": 2})),
        [r#"spec.f: Invalid value: "b": spec.f.b in body is a forbidden property"#]
    );
}

#[test]
fn list_type_set() {
    let s = json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}});
    assert!(check(s.clone(), json!(["a", "b"])).is_empty());
    assert_eq!(
        check(s.clone(), json!(["a", "b", "a", "a"])),
        [r#"spec.f[2]: Duplicate value: "a""#]
    );
    assert_eq!(kinds(s, json!(["a", "a"])), [ErrorKind::Duplicate]);
    let atomic = json!({"type": "array", "x-kubernetes-list-type": "atomic"});
    assert!(check(atomic, json!(["a", "a"])).is_empty());
}

#[test]
fn list_type_map() {
    let s = json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}
    });
    assert!(
        check(
            s.clone(),
            json!([{"name": "a", "v": 1}, {"name": "b", "v": 1}])
        )
        .is_empty()
    );
    assert_eq!(
        check(
            s.clone(),
            json!([{"name": "a", "v": 1}, {"name": "a", "v": 2}])
        ),
        [r#"spec.f[1]: Duplicate value: {"name":"a"}"#]
    );
    // Type errors come before list errors, like the apiserver.
    assert_eq!(
        kinds(s.clone(), json!([{"name": "a"}, "x"])),
        [ErrorKind::TypeInvalid, ErrorKind::Invalid]
    );
    assert_eq!(
        check(s, json!([{"name": "a"}, "x"]))[1],
        r#"spec.f[1]: Invalid value: "x": must be an object for an array of list-type map"#
    );
    let no_keys =
        json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}});
    assert_eq!(kinds(no_keys, json!([{}])), [ErrorKind::Internal]);
}

#[test]
fn embedded_resource_needs_api_version_and_kind() {
    let s = json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true});
    assert!(check(s.clone(), json!({"apiVersion": "v1", "kind": "Pod"})).is_empty());
    assert_eq!(
        check(s.clone(), json!({"kind": ""})),
        [
            "spec.f.apiVersion: Required value: must not be empty",
            r#"spec.f.kind: Invalid value: "": must not be empty"#
        ]
    );
    assert_eq!(
        kinds(s, json!({"apiVersion": "a/b/c", "kind": "K"})),
        [ErrorKind::Invalid]
    );
}

#[test]
fn any_of_one_of_all_of_not() {
    let any = json!({"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]});
    assert!(check(any.clone(), json!(11)).is_empty());
    assert!(check(any.clone(), json!(-1)).is_empty());
    assert_eq!(
        check(any, json!(5)),
        [
            r#"spec.f: Invalid value: "": spec.f in body must validate at least one schema (anyOf)"#,
            "spec.f: Invalid value: 5: spec.f in body should be greater than or equal to 10"
        ]
    );
    let one = json!({"oneOf": [{"minimum": 0}, {"maximum": 10}]});
    assert!(check(one.clone(), json!(-5)).is_empty());
    assert_eq!(
        check(one, json!(5)),
        [
            r#"spec.f: Invalid value: "": spec.f in body must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
    let all = json!({"allOf": [{"minimum": 0}, {"maximum": 10}]});
    assert!(check(all.clone(), json!(5)).is_empty());
    assert_eq!(
        check(all, json!(11)),
        [
            "spec.f: Invalid value: 11: spec.f in body should be less than or equal to 10",
            r#"spec.f: Invalid value: "": spec.f in body must validate all the schemas (allOf)"#
        ]
    );
    let not = json!({"type": "string", "not": {"enum": ["forbidden"]}});
    assert!(check(not.clone(), json!("ok")).is_empty());
    assert_eq!(kinds(not, json!("forbidden")), [ErrorKind::Invalid]);
    // Junctors may constrain properties, e.g. "exactly one of a/b".
    let exclusive = json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    assert!(check(exclusive.clone(), json!({"a": 1})).is_empty());
    assert_eq!(
        kinds(exclusive, json!({})),
        [ErrorKind::Invalid, ErrorKind::Required]
    );
}

#[test]
fn reports_every_error_and_skips_root_metadata() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 1}}},
        "spec": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"enum": ["x"]}
        }}
    }});
    let errs = validate(
        &schema,
        &json!({"metadata": {"name": "long"}, "spec": {"a": 1, "b": "2", "c": "y"}}),
    );
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["spec.a", "spec.b", "spec.c"]);
}

#[test]
fn malformed_schemas_are_errors_not_panics() {
    for (bad, value) in [
        (json!({"type": 5}), json!(1)),
        (json!({"type": "null"}), json!(1)),
        (json!({"minLength": -1}), json!("x")),
        (json!({"maxLength": 1.5}), json!("x")),
        (json!({"maximum": "x"}), json!(1)),
        (json!({"enum": "x"}), json!(1)),
        (json!({"required": "x"}), json!({})),
        (json!({"required": [1]}), json!({})),
        (json!({"properties": []}), json!({})),
        (json!({"items": [1]}), json!([1])),
        (json!({"anyOf": {}}), json!(1)),
        (json!({"allOf": [7]}), json!(1)),
        (json!({"nullable": "yes"}), json!(1)),
        (json!({"format": 3}), json!("x")),
        (json!({"x-kubernetes-list-type": "bag"}), json!([])),
        (
            json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [1]}),
            json!([]),
        ),
    ] {
        assert!(
            kinds(bad.clone(), value.clone()).contains(&ErrorKind::Internal),
            "{bad} {value}"
        );
    }
    assert_eq!(kinds(json!(5), json!(1)), [ErrorKind::Internal]);
}

#[test]
fn too_deep_values_are_rejected() {
    let mut schema = json!({"type": "object"});
    let mut value = json!({});
    for _ in 0..(MAX_DEPTH + 5) {
        schema = json!({"type": "object", "properties": {"n": schema}});
        value = json!({"n": value});
    }
    let errs = validate(&schema, &value);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].message.contains("nesting deeper"));
}
