//! Pruning: dropping the fields a structural schema does not declare, as kube-apiserver does on write.

use serde_json::Value;

use crate::path;
use crate::schema::{self, Additional, MAX_DEPTH, META_FIELDS};

/// Removes from `value` every field that `schema` (the `openAPIV3Schema` of a
/// CRD version) does not declare, like kube-apiserver's structural pruning.
///
/// * A field is kept when it is in `properties`, or when the object's schema
///   has `additionalProperties` (a schema makes the object a map whose values
///   are pruned with it; `true` keeps the values as they are).
/// * Under `x-kubernetes-preserve-unknown-fields: true` unknown fields are
///   kept, while declared properties are still pruned inside.
/// * `apiVersion`, `kind` and `metadata` are kept at the root and in
///   `x-kubernetes-embedded-resource` objects; the root `metadata` is not
///   looked into.
/// * An object with no schema at all (inside an array without `items`) loses
///   all its fields.
///
/// Returns the pruned object and the paths of the removed fields, e.g.
/// `spec.foo`, `spec.items[0].bar`, `spec.labels[key].x`.
#[must_use]
pub fn prune(schema: &Value, value: &Value) -> (Value, Vec<String>) {
    let mut out = value.clone();
    let pruned = prune_in_place(schema, &mut out);
    (out, pruned)
}

/// [`prune`] of `value` itself, without a copy; returns the paths of the removed fields.
pub fn prune_in_place(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    let root = At {
        path: String::new(),
        root: true,
        depth: 0,
    };
    prune_node(Some(schema), value, &root, &mut pruned);
    pruned
}

/// Where the walk stands: the path of the value, whether it is a resource root, and how deep.
struct At {
    path: String,
    root: bool,
    depth: usize,
}

impl At {
    fn below(&self, path: String) -> Self {
        Self {
            path,
            root: false,
            depth: self.depth + 1,
        }
    }

    /// Property `name` of the object here.
    fn child(&self, name: &str) -> Self {
        self.below(path::child(&self.path, name))
    }

    /// Entry `key` of the map (`additionalProperties`) here.
    fn key(&self, key: &str) -> Self {
        self.below(path::key(&self.path, key))
    }

    /// Item `index` of the list here.
    fn index(&self, index: usize) -> Self {
        self.below(path::index(&self.path, index))
    }
}

/// `prune` of the apiserver's `pruning/algorithm.go`; a resource root is handled like an
/// embedded resource.
fn prune_node(schema: Option<&Value>, value: &mut Value, at: &At, pruned: &mut Vec<String>) {
    if at.depth > MAX_DEPTH {
        return;
    }
    if let Some(s) = schema.filter(|s| schema::preserves_unknown(s)) {
        skip_prune(s, value, at, pruned);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(s) = schema else {
                pruned.extend(map.keys().map(|k| path::child(&at.path, k)));
                map.clear();
                return;
            };
            let keeps_meta = at.root || schema::embedded(s);
            let props = schema::properties(s);
            let additional = schema::additional(s);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if keeps_meta && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let Some(v) = map.get_mut(&k) else { continue };
                if let Some(p) = props.and_then(|p| p.get(&k)) {
                    prune_node(Some(p), v, &at.child(&k), pruned);
                } else {
                    match additional {
                        Additional::Schema(a) => prune_node(Some(a), v, &at.key(&k), pruned),
                        Additional::Any => {}
                        Additional::No => {
                            pruned.push(path::child(&at.path, &k));
                            map.remove(&k);
                        }
                    }
                }
            }
        }
        Value::Array(list) => {
            let items = schema.and_then(schema::items);
            for (i, item) in list.iter_mut().enumerate() {
                prune_node(items, item, &at.index(i), pruned);
            }
        }
        _ => {}
    }
}

/// `skipPrune`: below `x-kubernetes-preserve-unknown-fields` unknown fields
/// stay, declared ones are pruned by their own schema.
fn skip_prune(schema: &Value, value: &mut Value, at: &At, pruned: &mut Vec<String>) {
    if at.depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            let keeps_meta = at.root || schema::embedded(schema);
            for (k, v) in map.iter_mut() {
                if keeps_meta && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(p) = schema::properties(schema).and_then(|p| p.get(k)) {
                    prune_node(Some(p), v, &at.child(k), pruned);
                } else if let Additional::Schema(a) = schema::additional(schema) {
                    prune_node(Some(a), v, &at.key(k), pruned);
                }
            }
        }
        Value::Array(list) => {
            if let Some(items) = schema::items(schema) {
                for (i, item) in list.iter_mut().enumerate() {
                    skip_prune(items, item, &at.index(i), pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec_schema(spec: Value) -> Value {
        json!({"type": "object", "properties": {"spec": spec}})
    }

    #[test]
    fn drops_undeclared_fields_and_reports_them() {
        let schema = spec_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "o": {"type": "object", "properties": {"x": {"type": "integer"}}}}
        }));
        let (out, pruned) = prune(
            &schema,
            &json!({"spec": {"a": "1", "b": 2, "o": {"x": 1, "y": 2}}, "status": {}}),
        );
        assert_eq!(out, json!({"spec": {"a": "1", "o": {"x": 1}}}));
        assert_eq!(pruned, vec!["spec.b", "spec.o.y", "status"]);
    }

    #[test]
    fn root_keeps_meta_fields_untouched() {
        let schema = spec_schema(json!({"type": "object"}));
        let obj = json!({
            "apiVersion": "x/v1", "kind": "K",
            "metadata": {"name": "n", "whatever": {"deep": 1}},
            "spec": {"gone": 1}
        });
        let (out, pruned) = prune(&schema, &obj);
        assert_eq!(
            out,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "whatever": {"deep": 1}}, "spec": {}})
        );
        assert_eq!(pruned, vec!["spec.gone"]);
    }

    #[test]
    fn preserve_unknown_fields_keeps_unknown_but_prunes_declared() {
        let schema = spec_schema(json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"known": {"type": "object", "properties": {"k": {"type": "string"}}}}
        }));
        let (out, pruned) = prune(
            &schema,
            &json!({"spec": {"free": {"any": [1, {"x": 2}]}, "known": {"k": "v", "drop": 1}}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"free": {"any": [1, {"x": 2}]}, "known": {"k": "v"}}})
        );
        assert_eq!(pruned, vec!["spec.known.drop"]);
    }

    #[test]
    fn additional_properties_schema_makes_a_map() {
        let schema = spec_schema(json!({
            "type": "object",
            "properties": {"labels": {
                "type": "object",
                "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}
            }}
        }));
        let (out, pruned) = prune(
            &schema,
            &json!({"spec": {"labels": {"a": {"v": "1", "w": 2}, "b": {}}}}),
        );
        assert_eq!(out, json!({"spec": {"labels": {"a": {"v": "1"}, "b": {}}}}));
        assert_eq!(pruned, vec!["spec.labels[a].w"]);
    }

    #[test]
    fn additional_properties_true_keeps_values() {
        let schema = spec_schema(json!({"type": "object", "additionalProperties": true}));
        let obj = json!({"spec": {"a": {"deep": [1]}}});
        assert_eq!(prune(&schema, &obj), (obj.clone(), vec![]));
    }

    #[test]
    fn array_items_are_pruned_with_index_paths() {
        let schema = spec_schema(json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}}
            }}}
        }));
        let (out, pruned) = prune(
            &schema,
            &json!({"spec": {"items": [{"name": "a"}, {"name": "b", "extra": true}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}})
        );
        assert_eq!(pruned, vec!["spec.items[1].extra"]);
    }

    #[test]
    fn array_without_items_empties_its_objects() {
        let schema = spec_schema(json!({
            "type": "object", "properties": {"l": {"type": "array"}}
        }));
        let (out, pruned) = prune(&schema, &json!({"spec": {"l": [{"a": 1}, 2]}}));
        assert_eq!(out, json!({"spec": {"l": [{}, 2]}}));
        assert_eq!(pruned, vec!["spec.l[0].a"]);
    }

    #[test]
    fn embedded_resource_keeps_its_meta_fields() {
        let schema = spec_schema(json!({
            "type": "object",
            "properties": {"template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object"}}
            }}
        }));
        let (out, pruned) = prune(
            &schema,
            &json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "junk": 1}}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}})
        );
        assert_eq!(pruned, vec!["spec.template.junk"]);
        // Without the extension, apiVersion/kind/metadata are ordinary unknown fields.
        let plain = spec_schema(json!({"type": "object", "properties": {"t": {"type": "object"}}}));
        let (out, _) = prune(&plain, &json!({"spec": {"t": {"kind": "Pod"}}}));
        assert_eq!(out, json!({"spec": {"t": {}}}));
    }

    #[test]
    fn scalars_and_type_mismatches_are_left_alone() {
        let schema = spec_schema(json!({"type": "string"}));
        let obj = json!({"spec": {"a": 1}});
        let (out, pruned) = prune(&schema, &obj);
        // A string schema declares no properties: the object's fields go.
        assert_eq!(out, json!({"spec": {}}));
        assert_eq!(pruned, vec!["spec.a"]);
        assert_eq!(prune(&schema, &json!(5)), (json!(5), vec![]));
    }
}
