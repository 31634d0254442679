use serde_json::{Value, json};

use super::structural_errors;

/// A root schema with one field `f` under `spec`.
fn with_field(field: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"f": field}}}})
}

const F: &str = "openAPIV3Schema.properties[spec].properties[f]";

fn errors_of(field: Value) -> Vec<String> {
    structural_errors(&with_field(field))
}

#[test]
fn int_or_string_budgets_are_structural_as_plain_keywords() {
    let budget = json!({
        "x-kubernetes-int-or-string": true,
        "minimum": 1, "maximum": 2_147_483_647, "maxLength": 4, "pattern": "^(100|[1-9][0-9]?)%$",
        "default": 1, "description": "a budget"
    });
    assert_eq!(errors_of(budget), Vec::<String>::new());
}

#[test]
fn int_or_string_allows_only_the_bare_any_of_pattern() {
    let bare = json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]});
    assert_eq!(errors_of(bare), Vec::<String>::new());
    let first_all_of = json!({"x-kubernetes-int-or-string": true, "allOf": [
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        {"anyOf": [{"minimum": 1}, {"maxLength": 4}]}
    ]});
    assert_eq!(errors_of(first_all_of), Vec::<String>::new());
    // Typed branches that say more than their type are not the pattern: `type` is then
    // forbidden in each.
    let typed = json!({"x-kubernetes-int-or-string": true, "anyOf": [
        {"type": "integer", "minimum": 1},
        {"type": "string", "pattern": "^(100|[1-9][0-9]?)%$"}
    ]});
    assert_eq!(
        errors_of(typed),
        [
            format!("{F}.anyOf[0].type: Forbidden: must be empty to be structural"),
            format!("{F}.anyOf[1].type: Forbidden: must be empty to be structural"),
        ]
    );
    let swapped = json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "string"}, {"type": "integer"}]});
    assert_eq!(errors_of(swapped).len(), 2);
}

#[test]
fn value_validations_carry_no_generics_or_extensions() {
    let field = json!({"type": "string", "anyOf": [
        {"description": "d", "maxLength": 3},
        {"nullable": true, "x-kubernetes-validations": [{"rule": "true"}]}
    ], "not": {"default": "x"}});
    assert_eq!(
        errors_of(field),
        [
            format!("{F}.anyOf[0].description: Forbidden: must be empty to be structural"),
            format!("{F}.anyOf[1].nullable: Forbidden: must be false to be structural"),
            format!(
                "{F}.anyOf[1].x-kubernetes-validations: Forbidden: must be empty to be structural"
            ),
            format!("{F}.not.default: Forbidden: must be undefined to be structural"),
        ]
    );
}

#[test]
fn every_spine_node_has_a_type() {
    assert_eq!(
        errors_of(json!({"maxLength": 3})),
        [format!(
            "{F}.type: Required value: must not be empty for specified object fields"
        )]
    );
    assert_eq!(
        errors_of(json!({"type": "array"})),
        [format!("{F}.items: Required value: must be specified")]
    );
    assert_eq!(
        errors_of(json!({"type": "array", "items": {}})),
        [format!(
            "{F}.items.type: Required value: must not be empty for specified array items"
        )]
    );
    assert!(errors_of(json!({"x-kubernetes-preserve-unknown-fields": true})).is_empty());
    assert_eq!(
        structural_errors(&json!({"type": "string"})),
        ["openAPIV3Schema.type: Invalid value: must be object at the root"]
    );
}

#[test]
fn junctors_name_only_fields_of_the_spine() {
    let field = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "oneOf": [{"required": ["a"], "properties": {"a": {"minLength": 1}}}, {"properties": {"b": {}}}]});
    assert_eq!(
        errors_of(field),
        [format!(
            "{F}.properties[b]: Required value: because it is defined in {F}.oneOf[1].properties[b]"
        )]
    );
    let list = json!({"type": "object", "allOf": [{"items": {"maxLength": 1}}]});
    assert_eq!(
        errors_of(list),
        [format!(
            "{F}.items: Required value: because it is defined in {F}.allOf[0].items"
        )]
    );
}

#[test]
fn shape_checks_of_crd_validation() {
    let map_and_fields = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}});
    assert_eq!(
        errors_of(map_and_fields),
        [format!(
            "{F}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
    let unique = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    assert_eq!(errors_of(unique).len(), 1);
    let keys_without_map = json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set", "x-kubernetes-list-map-keys": ["a"]});
    assert_eq!(errors_of(keys_without_map).len(), 1);
    let root_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    assert_eq!(
        structural_errors(&root_map),
        ["openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"]
    );
}
