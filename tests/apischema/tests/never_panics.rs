//! Property tests: no JSON value (or schema) makes the write path panic, and what `admit` stores is stable.

mod fixture;

use apischema::{admit, apply_defaults, prune, structural_errors, validate, validate_cel};
use fixture::{minimal_pool, pool_schema};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Keys that hit the pool schema, plus a few that do not.
const KEYS: [&str; 20] = [
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "image",
    "ref",
    "class",
    "rollout",
    "maxUnavailable",
    "paused",
    "pause",
    "seconds",
    "disruption",
    "rebootPolicy",
    "windows",
    "name",
    "start",
    "duration",
    "days",
];

/// Strings that are meaningful somewhere in the pool schema.
const STRINGS: [&str; 12] = [
    "",
    "25%",
    "0%",
    "100%",
    "RebootOnly",
    "Foo",
    "Mon",
    "01:00",
    "1h",
    "200h",
    "quay.io/x/y:1",
    "é\u{0}\"\\",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        (0..STRINGS.len()).prop_map(|i| Value::from(STRINGS[i])),
        ".{0,12}".prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0..KEYS.len()).prop_map(|i| KEYS[i].to_owned()),
        1 => "[a-z.\\-_/]{0,6}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Schemas built from the structural keywords with arbitrary (often wrong) values.
fn schema_value() -> impl Strategy<Value = Value> {
    const KEYWORDS: [&str; 24] = [
        "type",
        "nullable",
        "required",
        "enum",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "multipleOf",
        "minItems",
        "maxItems",
        "uniqueItems",
        "maxProperties",
        "format",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-validations",
        "default",
        "x-kubernetes-embedded-resource",
        "additionalProperties",
    ];
    let keyword_value = prop_oneof![
        scalar(),
        prop_oneof![
            Just("object"),
            Just("array"),
            Just("string"),
            Just("integer"),
            Just("set"),
            Just("map"),
            Just("date-time"),
            Just("int32"),
            Just("(["),
            Just("^[a-z]+$"),
            Just("self > 0"),
        ]
        .prop_map(Value::from),
        prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        Just(
            serde_json::json!([{"rule": "self.size() > 1"}, {"rule": "type(self) == int ? self > 0 : true"}, {"rule": "(("}])
        ),
    ];
    let leaf = prop::collection::vec((0..KEYWORDS.len(), keyword_value), 0..6).prop_map(|kv| {
        Value::Object(
            kv.into_iter()
                .map(|(k, v)| (KEYWORDS[k].to_owned(), v))
                .collect(),
        )
    });
    leaf.prop_recursive(4, 48, 6, |inner| {
        (
            inner.clone(),
            prop::collection::vec((key(), inner.clone()), 0..5),
            prop::option::of(inner.clone()),
            prop::collection::vec(inner, 0..3),
        )
            .prop_map(|(mut node, props, items, all_of)| {
                if let Value::Object(map) = &mut node {
                    map.insert(
                        "properties".to_owned(),
                        Value::Object(props.into_iter().collect()),
                    );
                    if let Some(items) = items {
                        map.insert("items".to_owned(), items);
                    }
                    if !all_of.is_empty() {
                        map.insert("allOf".to_owned(), Value::Array(all_of));
                    }
                }
                node
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn pool_schema_never_panics_and_admitted_objects_are_stable(value in json_value(), old in json_value()) {
        let schema = pool_schema();
        let _ = validate(&schema, &value);
        let _ = validate_cel(&schema, &value, Some(&old));
        let _ = admit(&schema, &value, Some(&old));
        if let Ok(stored) = admit(&schema, &value, None) {
            // What is stored is valid and already pruned and defaulted.
            prop_assert_eq!(validate(&schema, &stored), vec![]);
            prop_assert_eq!(prune(&schema, &stored).1, Vec::<String>::new());
            prop_assert_eq!(apply_defaults(&schema, &stored), stored.clone());
            prop_assert_eq!(admit(&schema, &stored, Some(&stored)), Ok(stored));
        }
    }

    #[test]
    fn pool_fields_with_arbitrary_values_never_panic(field in 0..KEYS.len(), value in json_value()) {
        let schema = pool_schema();
        let mut pool = minimal_pool();
        pool["spec"][KEYS[field]] = value.clone();
        pool["spec"]["rollout"] = serde_json::json!({KEYS[field]: value});
        let _ = validate(&schema, &pool);
        let _ = admit(&schema, &pool, Some(&minimal_pool()));
    }

    #[test]
    fn arbitrary_schemas_never_panic(schema in schema_value(), value in json_value()) {
        let _ = prune(&schema, &value);
        let _ = apply_defaults(&schema, &value);
        let _ = validate(&schema, &value);
        let _ = validate_cel(&schema, &value, Some(&value));
        let _ = admit(&schema, &value, None);
        let _ = structural_errors(&schema);
        let _ = structural_errors(&value);
    }
}
