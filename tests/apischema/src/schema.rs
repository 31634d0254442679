//! Lenient readers of the structural-schema keywords that pruning, defaulting and the walkers share.

use serde_json::{Map, Value};

/// Fields of a resource root (and of an `x-kubernetes-embedded-resource`)
/// that pruning always keeps.
pub(crate) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Deepest object/array nesting this crate walks. Pruning and defaulting leave
/// deeper values untouched; validation reports them.
pub(crate) const MAX_DEPTH: usize = 256;

/// What `additionalProperties` says about keys not in `properties`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Additional<'a> {
    /// Absent or `false`: unknown keys are not part of the schema.
    No,
    /// `true`: any value is allowed and kept.
    Any,
    /// A schema: the object is a map whose values follow it.
    Schema(&'a Value),
}

/// Whether `key` is `true` on `schema`.
pub(crate) fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// `properties` of `schema`, if it is an object.
pub(crate) fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// `additionalProperties` of `schema`.
pub(crate) fn additional(schema: &Value) -> Additional<'_> {
    match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => Additional::Any,
        Some(s @ Value::Object(_)) => Additional::Schema(s),
        _ => Additional::No,
    }
}

/// `items` of `schema`, if it is a single schema object.
pub(crate) fn items(schema: &Value) -> Option<&Value> {
    schema.get("items").filter(|i| i.is_object())
}

/// `default` of `schema`; `default: null` counts as no default, as in the apiserver.
pub(crate) fn default(schema: &Value) -> Option<&Value> {
    schema.get("default").filter(|d| !d.is_null())
}

/// `nullable: true` on `schema`.
pub(crate) fn nullable(schema: &Value) -> bool {
    flag(schema, "nullable")
}

/// `x-kubernetes-preserve-unknown-fields: true` on `schema`.
pub(crate) fn preserves_unknown(schema: &Value) -> bool {
    flag(schema, "x-kubernetes-preserve-unknown-fields")
}

/// `x-kubernetes-embedded-resource: true` on `schema`.
pub(crate) fn embedded(schema: &Value) -> bool {
    flag(schema, "x-kubernetes-embedded-resource")
}

/// `type` of `schema` when it is a string.
pub(crate) fn type_of(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

/// The schema of member `key` of an object validated by `schema`, and
/// whether it is a map entry (`additionalProperties`) rather than a property.
pub(crate) fn member<'a>(schema: &'a Value, key: &str) -> Option<(&'a Value, bool)> {
    if let Some(p) = properties(schema).and_then(|p| p.get(key)) {
        return Some((p, false));
    }
    match additional(schema) {
        Additional::Schema(s) => Some((s, true)),
        Additional::Any | Additional::No => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_keywords() {
        let s = json!({
            "type": "object",
            "nullable": true,
            "properties": {"a": {"type": "string", "default": "x"}, "n": {"default": null}},
            "additionalProperties": {"type": "integer"},
        });
        assert_eq!(type_of(&s), Some("object"));
        assert!(nullable(&s));
        assert!(!preserves_unknown(&s));
        assert_eq!(
            member(&s, "a").map(|(m, is_map)| (m["type"].clone(), is_map)),
            Some((json!("string"), false))
        );
        assert_eq!(
            member(&s, "zz").map(|(m, is_map)| (m["type"].clone(), is_map)),
            Some((json!("integer"), true))
        );
        assert_eq!(default(&s["properties"]["a"]), Some(&json!("x")));
        assert_eq!(default(&s["properties"]["n"]), None);
        assert!(matches!(
            additional(&json!({"additionalProperties": true})),
            Additional::Any
        ));
        assert!(matches!(
            additional(&json!({"additionalProperties": false})),
            Additional::No
        ));
        assert!(items(&json!({"items": [{}]})).is_none());
    }
}
