//! Whether a CRD version's schema is structural, as kube-apiserver checks when the CRD is
//! written (`ValidateStructural` of apiextensions-apiserver, plus the shape checks of CRD
//! validation: `uniqueItems`, `properties` beside `additionalProperties`, list types).
//!
//! The point of interest is what value validations (`anyOf`, `allOf`, `oneOf`, `not`)
//! may say: no `type`, `description`, `default`, `nullable` or Kubernetes extension, and
//! only fields the structural spine specifies. The one exception is an int-or-string
//! written as `anyOf: [{type: integer}, {type: string}]`, bare, or as the first `allOf`
//! branch; branches that add keywords beside their `type` are not structural.
//! Not checked: the root `metadata` restrictions, `default` values, CEL compilation and
//! cost.

use serde_json::{Map, Value};

/// Where a spine node is: kube-apiserver words a missing `type` by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Every way `schema` (a CRD version's `openAPIV3Schema`) is not structural, as
/// `path: Kind: detail` lines under `openAPIV3Schema`, sorted as kube-apiserver sorts
/// them; empty when kube-apiserver would accept the schema's shape.
#[must_use]
pub fn structural_errors(schema: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    spine(schema, "openAPIV3Schema", Level::Root, &mut errors);
    completeness(schema, "openAPIV3Schema", &mut errors);
    errors.sort();
    errors
}

fn flag(s: &Map<String, Value>, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

fn properties(s: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    s.get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn spine(schema: &Value, path: &str, level: Level, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        errors.push(format!("{path}: Invalid value: a schema must be an object"));
        return;
    };
    let ty = s.get("type").and_then(Value::as_str).unwrap_or_default();
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    let has_properties = properties(s).next().is_some();
    if ty == "array" && !s.contains_key("items") {
        errors.push(format!("{path}.items: Required value: must be specified"));
    }
    if let Some(items) = s.get("items") {
        spine(items, &format!("{path}.items"), Level::Item, errors);
    }
    for (name, property) in properties(s) {
        let here = format!("{path}.properties[{name}]");
        spine(property, &here, Level::Field, errors);
    }
    if let Some(additional) = s.get("additionalProperties") {
        let here = format!("{path}.additionalProperties");
        if level == Level::Root {
            errors.push(format!("{here}: Forbidden: must not be used at the root"));
        }
        if embedded {
            errors.push(format!(
                "{here}: Forbidden: must not be used if x-kubernetes-embedded-resource is set"
            ));
        }
        if has_properties && additional != &Value::Bool(true) {
            errors.push(format!(
                "{here}: Forbidden: additionalProperties and properties are mutual exclusive"
            ));
        }
        if additional.is_object() {
            spine(additional, &here, Level::Field, errors);
        }
    }
    if int_or_string && preserve {
        errors.push(format!("{path}.x-kubernetes-preserve-unknown-fields: Invalid value: must be false if x-kubernetes-int-or-string is true"));
    }
    if int_or_string && embedded {
        errors.push(format!("{path}.x-kubernetes-embedded-resource: Invalid value: must be false if x-kubernetes-int-or-string is true"));
    }
    let skip_any_of = is_int_or_string_any_of(s.get("anyOf"));
    let skip_first_all_of = s
        .get("allOf")
        .and_then(|a| a.get(0))
        .is_some_and(|first| is_int_or_string_any_of(first.get("anyOf")));
    junctors(s, skip_any_of, skip_first_all_of, path, errors);
    if embedded && ty != "object" {
        errors.push(format!(
            "{path}.type: Required value: must be object if x-kubernetes-embedded-resource is true"
        ));
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(format!("{path}.type: Required value: {detail}"));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        errors.push(format!(
            "{path}.type: Invalid value: must be object at the root"
        ));
    }
    if embedded && !preserve && !has_properties {
        errors.push(format!("{path}.properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"));
    }
    shape(s, ty, path, errors);
}

/// The checks of CRD validation on one node's shape.
fn shape(s: &Map<String, Value>, ty: &str, path: &str, errors: &mut Vec<String>) {
    if flag(s, "uniqueItems") {
        errors.push(format!("{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    if list_type.is_some() && ty != "array" {
        errors.push(format!(
            "{path}.type: Invalid value: must be array if x-kubernetes-list-type is specified"
        ));
    }
    let has_keys = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .is_some_and(|k| !k.is_empty());
    if has_keys && list_type != Some("map") {
        errors.push(format!("{path}.x-kubernetes-list-type: Invalid value: must be map if x-kubernetes-list-map-keys is non-empty"));
    }
}

/// `anyOf: [{type: integer}, {type: string}]`, exactly: the one place a value validation
/// may name a type.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    let bare = |ty: &str| serde_json::json!({ "type": ty });
    any_of.and_then(Value::as_array).is_some_and(|branches| {
        branches.len() == 2 && branches[0] == bare("integer") && branches[1] == bare("string")
    })
}

fn junctors(
    s: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of: bool,
    path: &str,
    errors: &mut Vec<String>,
) {
    for (key, skip) in [("anyOf", skip_any_of), ("oneOf", false)] {
        if skip {
            continue;
        }
        for (i, branch) in branches(s, key) {
            nested(branch, false, &format!("{path}.{key}[{i}]"), errors);
        }
    }
    for (i, branch) in branches(s, "allOf") {
        let skip = skip_first_all_of && i == 0;
        nested(branch, skip, &format!("{path}.allOf[{i}]"), errors);
    }
    if let Some(not) = s.get("not") {
        nested(not, false, &format!("{path}.not"), errors);
    }
}

fn branches<'a>(s: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    s.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// Keywords a value validation may not carry, and how kube-apiserver words each refusal.
const FORBIDDEN_IN_JUNCTORS: [(&str, &str); 13] = [
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-embedded-resource",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-int-or-string",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    ),
    (
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    ),
    (
        "x-kubernetes-map-type",
        "must be undefined to be structural",
    ),
    ("x-kubernetes-validations", "must be empty to be structural"),
];

/// A value validation under a junctor, at `path`.
fn nested(schema: &Value, skip_any_of: bool, path: &str, errors: &mut Vec<String>) {
    let Some(v) = schema.as_object() else {
        errors.push(format!("{path}: Invalid value: a schema must be an object"));
        return;
    };
    junctors(v, skip_any_of, false, path, errors);
    if let Some(items) = v.get("items") {
        nested(items, false, &format!("{path}.items"), errors);
    }
    for (name, property) in properties(v) {
        let here = format!("{path}.properties[{name}]");
        if name == "metadata" {
            errors.push(format!(
                "{here}: Forbidden: must not be specified in a nested context"
            ));
        }
        nested(property, false, &here, errors);
    }
    for (key, detail) in FORBIDDEN_IN_JUNCTORS {
        let set = match v.get(key) {
            None | Some(Value::Null | Value::Bool(false)) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            errors.push(format!("{path}.{key}: Forbidden: {detail}"));
        }
    }
}

/// Every field or list a value validation names is also in the spine: the junctors of
/// the spine node `s` (at `path`), then those of the nodes below it.
fn completeness(s: &Value, path: &str, errors: &mut Vec<String>) {
    value_completeness(s, s, path, path, errors);
    if let Some(items) = s.get("items") {
        completeness(items, &format!("{path}.items"), errors);
    }
    for (name, property) in s.as_object().map(properties).into_iter().flatten() {
        completeness(property, &format!("{path}.properties[{name}]"), errors);
    }
    if let Some(additional) = s.get("additionalProperties").filter(|a| a.is_object()) {
        completeness(additional, &format!("{path}.additionalProperties"), errors);
    }
}

/// The junctor branches of `v` (at `v_path`) against the spine node `s` (at `s_path`).
fn value_completeness(s: &Value, v: &Value, s_path: &str, v_path: &str, errors: &mut Vec<String>) {
    for key in ["anyOf", "allOf", "oneOf"] {
        let branches = v.get(key).and_then(Value::as_array).into_iter().flatten();
        for (i, branch) in branches.enumerate() {
            named_in_spine(s, branch, s_path, &format!("{v_path}.{key}[{i}]"), errors);
        }
    }
    if let Some(not) = v.get("not") {
        named_in_spine(s, not, s_path, &format!("{v_path}.not"), errors);
    }
}

/// The value validation `v` (at `v_path`) against the spine node `s` (at `s_path`): its
/// items and properties must be there.
fn named_in_spine(s: &Value, v: &Value, s_path: &str, v_path: &str, errors: &mut Vec<String>) {
    value_completeness(s, v, s_path, v_path, errors);
    if let Some(items) = v.get("items") {
        let (s_here, v_here) = (format!("{s_path}.items"), format!("{v_path}.items"));
        match s.get("items") {
            Some(s_items) => named_in_spine(s_items, items, &s_here, &v_here, errors),
            None => errors.push(format!(
                "{s_here}: Required value: because it is defined in {v_here}"
            )),
        }
    }
    for (name, property) in v.as_object().map(properties).into_iter().flatten() {
        let s_here = format!("{s_path}.properties[{name}]");
        let v_here = format!("{v_path}.properties[{name}]");
        match s.get("properties").and_then(|p| p.get(name)) {
            Some(s_property) => named_in_spine(s_property, property, &s_here, &v_here, errors),
            None => errors.push(format!(
                "{s_here}: Required value: because it is defined in {v_here}"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
