//! Structural defaulting, as kube-apiserver applies `default` to custom resources.
//!
//! `kube_cel::apply_defaults` is not reused: it does not recurse into a
//! default it has just inserted (so `default: {}` objects never get their
//! nested defaults), it ignores `nullable` (no null pruning, no defaulting of
//! non-nullable nulls), and it silently stops at a depth of 64.

use serde_json::{Map, Value};

use crate::schema::{self, Additional, MAX_DEPTH};

/// Applies the `default`s of `schema` to `value` the way kube-apiserver does:
///
/// 1. `null` values of properties and map entries that are not `nullable` and
///    have no `default` are removed (`PruneNonNullableNullsWithoutDefaults`).
/// 2. A property that is missing, or `null` while not `nullable`, gets a copy
///    of its `default`; then every member is defaulted recursively, including
///    the defaults just inserted, so a property defaulted to `{}` gets the
///    defaults of its own properties.
/// 3. Items of arrays (`items`) and values of maps (`additionalProperties`)
///    are defaulted the same way; a non-nullable `null` item or value is
///    replaced by the `default` of its schema.
///
/// The root `metadata` is left alone. Returns the defaulted copy.
#[must_use]
pub fn apply_defaults(schema: &Value, value: &Value) -> Value {
    let mut out = value.clone();
    apply_defaults_in_place(schema, &mut out);
    out
}

/// [`apply_defaults`] to `value` itself, without a copy.
pub fn apply_defaults_in_place(schema: &Value, value: &mut Value) {
    prune_nulls(schema, value, true, 0);
    default_node(schema, value, true, 0);
}

/// `isNonNullableNull`: `value` is `null` and `schema` does not allow it.
fn non_nullable_null(value: &Value, schema: &Value) -> bool {
    value.is_null() && !schema::nullable(schema)
}

/// The schema of member `key`, skipping the root `metadata`.
fn member_schema<'a>(schema: &'a Value, key: &str, root: bool) -> Option<&'a Value> {
    if root && key == "metadata" {
        return None;
    }
    schema::member(schema, key).map(|(s, _)| s)
}

/// Removes non-nullable nulls that have no default to replace them.
fn prune_nulls(schema: &Value, value: &mut Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let Some(s) = member_schema(schema, &k, root) else {
                    continue;
                };
                let Some(v) = map.get_mut(&k) else { continue };
                if non_nullable_null(v, s) && schema::default(s).is_none() {
                    map.remove(&k);
                } else {
                    prune_nulls(s, v, false, depth + 1);
                }
            }
        }
        Value::Array(list) => {
            if let Some(items) = schema::items(schema) {
                for item in list {
                    prune_nulls(items, item, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// `Default` of the apiserver's `defaulting/algorithm.go`.
fn default_node(schema: &Value, value: &mut Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = schema::properties(schema) {
                fill_properties(props, map, root);
            }
            let additional = schema::additional(schema);
            for (k, v) in map.iter_mut() {
                if root && k == "metadata" {
                    continue;
                }
                if let Some(p) = schema::properties(schema).and_then(|p| p.get(k)) {
                    default_node(p, v, false, depth + 1);
                } else if let Additional::Schema(a) = additional {
                    replace_null(a, v);
                    default_node(a, v, false, depth + 1);
                }
            }
        }
        Value::Array(list) => {
            if let Some(items) = schema::items(schema) {
                for item in list {
                    replace_null(items, item);
                    default_node(items, item, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Gives missing (or non-nullable `null`) properties their default.
fn fill_properties(props: &Map<String, Value>, map: &mut Map<String, Value>, root: bool) {
    for (k, p) in props {
        if root && k == "metadata" {
            continue;
        }
        let Some(default) = schema::default(p) else {
            continue;
        };
        let missing = map.get(k).is_none_or(|v| non_nullable_null(v, p));
        if missing {
            map.insert(k.clone(), default.clone());
        }
    }
}

/// Replaces a non-nullable `null` item or map value by its schema's default.
fn replace_null(schema: &Value, value: &mut Value) {
    if non_nullable_null(value, schema)
        && let Some(default) = schema::default(schema)
    {
        *value = default.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_missing_properties_and_keeps_present_ones() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "integer", "default": 1}
        }});
        assert_eq!(
            apply_defaults(&schema, &json!({"b": 5})),
            json!({"a": "x", "b": 5})
        );
    }

    #[test]
    fn nested_defaults_apply_inside_a_defaulted_empty_object() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"rollout": {
                "type": "object",
                "default": {},
                "properties": {
                    "maxUnavailable": {"x-kubernetes-int-or-string": true, "default": 1},
                    "pause": {"type": "object", "default": {}, "properties": {"s": {"type": "integer", "default": 30}}}
                }
            }}
        }}});
        assert_eq!(
            apply_defaults(&schema, &json!({"spec": {}})),
            json!({"spec": {"rollout": {"maxUnavailable": 1, "pause": {"s": 30}}}})
        );
        // No `spec` at all: it has no default, so nothing below it appears.
        assert_eq!(apply_defaults(&schema, &json!({})), json!({}));
    }

    #[test]
    fn array_items_and_map_values_are_defaulted() {
        let schema = json!({"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "object", "properties": {"p": {"type": "integer", "default": 80}}}},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}}}
        }});
        assert_eq!(
            apply_defaults(
                &schema,
                &json!({"l": [{}, {"p": 1}], "m": {"a": {}, "b": {"x": "keep"}}})
            ),
            json!({"l": [{"p": 80}, {"p": 1}], "m": {"a": {"x": "d"}, "b": {"x": "keep"}}})
        );
    }

    #[test]
    fn non_nullable_null_gets_the_default() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string", "nullable": true, "default": "y"},
            "c": {"type": "string"},
            "d": {"type": "string", "nullable": true}
        }});
        assert_eq!(
            apply_defaults(
                &schema,
                &json!({"a": null, "b": null, "c": null, "d": null})
            ),
            json!({"a": "x", "b": null, "d": null})
        );
    }

    #[test]
    fn null_items_and_map_values() {
        let schema = json!({"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "string", "default": "z"}},
            "n": {"type": "array", "items": {"type": "string"}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "md": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}}
        }});
        assert_eq!(
            apply_defaults(
                &schema,
                &json!({"l": [null, "a"], "n": [null], "m": {"k": null}, "md": {"k": null}})
            ),
            // Null list items without a default stay (validation rejects them);
            // null map values without a default are dropped.
            json!({"l": ["z", "a"], "n": [null], "m": {}, "md": {"k": "v"}})
        );
    }

    #[test]
    fn default_null_is_no_default_and_metadata_is_untouched() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "n"}}},
            "a": {"type": "string", "default": null}
        }});
        assert_eq!(
            apply_defaults(&schema, &json!({"metadata": {}})),
            json!({"metadata": {}})
        );
    }

    #[test]
    fn scalars_and_unknown_fields_are_left_alone() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"default": 1}}}}});
        assert_eq!(
            apply_defaults(&schema, &json!({"a": "str", "u": {}})),
            json!({"a": "str", "u": {}})
        );
        assert_eq!(apply_defaults(&schema, &json!(3)), json!(3));
    }
}
