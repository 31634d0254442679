//! `x-kubernetes-validations` CEL rules, evaluated where kube-apiserver would evaluate them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::cel_eval::{self, CompiledRule, Outcome};
use crate::cel_value::to_cel;
use crate::error::{ErrorKind, SchemaError};
use crate::schema::{self, MAX_DEPTH};
use crate::{listtype, path};

/// Evaluates every `x-kubernetes-validations` rule of `schema` against
/// `value` (a whole custom resource), with `old` as the stored object on
/// update (`None` on create), and returns the failures in kube-apiserver's
/// shape.
///
/// The walk follows the apiserver's CEL validator: rules run on every
/// non-null node of the structural spine (`properties`, `additionalProperties`
/// values, `items`) and in `allOf` branches, but not on the root `metadata`.
/// `oldSelf` is the old value at the same path: same property, same map key,
/// and for `x-kubernetes-list-type: map` lists the old item with the same
/// keys (items of other lists have no `oldSelf`). Transition rules (those
/// using `oldSelf`) are skipped when there is no old value, unless
/// `optionalOldSelf: true`, which binds `oldSelf` to an optional.
///
/// Rules run on kube-cel's Kubernetes CEL library (see `cel_eval` for why
/// not through its `Validator`), with values converted as the apiserver
/// does (escaped property names, `date-time`/`duration`/`byte` formats).
///
/// A failed rule is an `Invalid value` error at the node (or at its
/// `fieldPath`) showing the value (omitted for objects and arrays), or
/// `Forbidden`/`Required value`/`Duplicate value` per its `reason`; the
/// detail is its `messageExpression`, `message`, or `failed rule: <rule>`.
/// Rules that do not compile or fail to evaluate are `Invalid value`
/// errors too, never panics.
#[must_use]
pub fn validate_cel(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<SchemaError> {
    let mut walker = CelWalker::default();
    walker.node(schema, schema, value, old, "", 0, true);
    walker.errors
}

/// Whether `schema` has any `x-kubernetes-validations` on its structural
/// spine (the apiserver only runs its CEL validator when it does).
pub(crate) fn has_rules(schema: &Value) -> bool {
    fn walk(s: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH || !s.is_object() {
            return false;
        }
        if s.get("x-kubernetes-validations").is_some() {
            return true;
        }
        schema::properties(s).is_some_and(|p| p.values().any(|c| walk(c, depth + 1)))
            || schema::items(s).is_some_and(|i| walk(i, depth + 1))
            || matches!(schema::additional(s), schema::Additional::Schema(a) if walk(a, depth + 1))
            || s.get("allOf")
                .and_then(Value::as_array)
                .is_some_and(|b| b.iter().any(|c| walk(c, depth + 1)))
    }
    walk(schema, 0)
}

/// One `x-kubernetes-validations` entry, read leniently.
#[derive(Debug)]
struct RuleSpec<'a> {
    rule: &'a str,
    message: Option<&'a str>,
    message_expression: Option<&'a str>,
    reason: Option<&'a str>,
    field_path: Option<&'a str>,
    optional_old_self: bool,
}

impl<'a> RuleSpec<'a> {
    fn read(raw: &'a Value) -> Self {
        let text = |key: &str| raw.get(key).and_then(Value::as_str);
        Self {
            rule: text("rule").unwrap_or_default(),
            message: text("message").filter(|m| !m.trim().is_empty()),
            message_expression: text("messageExpression").filter(|m| !m.trim().is_empty()),
            reason: text("reason"),
            field_path: text("fieldPath").filter(|f| !f.is_empty()),
            optional_old_self: raw.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        match self.message {
            Some(m) => m.trim().to_owned(),
            None => format!("failed rule: {}", self.rule.trim()),
        }
    }

    /// `ruleErrorString`: the message if there is one, else the rule.
    fn error_string(&self) -> &str {
        self.message.unwrap_or(self.rule).trim()
    }
}

/// Compiled rules, keyed by the address of the schema node declaring them
/// and their index (valid for one walk, during which the schema is borrowed).
type Cache = HashMap<(usize, usize), Result<CompiledRule, String>>;

#[derive(Debug, Default)]
struct CelWalker {
    cache: Cache,
    errors: Vec<SchemaError>,
}

impl CelWalker {
    /// Walks `value` with `rules_schema` supplying the rules and
    /// `typing_schema` the structure (they differ inside `allOf` branches).
    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        rules_schema: &Value,
        typing_schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        depth: usize,
        root: bool,
    ) {
        if depth > MAX_DEPTH
            || !rules_schema.is_object()
            || !typing_schema.is_object()
            || value.is_null()
        {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.rules(rules_schema, typing_schema, value, old, path, root);
        if let Some(branches) = rules_schema.get("allOf").and_then(Value::as_array) {
            for branch in branches {
                self.node(branch, typing_schema, value, old, path, depth + 1, root);
            }
        }
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if root && k == "metadata" {
                        continue;
                    }
                    let (Some((rules_child, _)), Some((typing_child, is_map))) = (
                        schema::member(rules_schema, k),
                        schema::member(typing_schema, k),
                    ) else {
                        continue;
                    };
                    let child_path = if is_map {
                        path::key(path, k)
                    } else {
                        path::child(path, k)
                    };
                    let old_child = old.and_then(|o| o.get(k));
                    self.node(
                        rules_child,
                        typing_child,
                        v,
                        old_child,
                        &child_path,
                        depth + 1,
                        false,
                    );
                }
            }
            Value::Array(list) => {
                let (Some(rules_items), Some(typing_items)) =
                    (schema::items(rules_schema), schema::items(typing_schema))
                else {
                    return;
                };
                let map_keys = list_map_keys(typing_schema);
                let old_list = old.and_then(Value::as_array);
                for (i, item) in list.iter().enumerate() {
                    let old_item = match (&map_keys, old_list) {
                        (Some(keys), Some(old_list)) => listtype::correlate(item, old_list, keys),
                        _ => None,
                    };
                    self.node(
                        rules_items,
                        typing_items,
                        item,
                        old_item,
                        &path::index(path, i),
                        depth + 1,
                        false,
                    );
                }
            }
            _ => {}
        }
    }

    /// Evaluates the rules declared on `rules_schema` at this node.
    fn rules(
        &mut self,
        rules_schema: &Value,
        typing_schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        let rules = match rules_schema.get("x-kubernetes-validations") {
            None => return,
            Some(Value::Array(rules)) => rules,
            Some(_) => {
                self.errors.push(SchemaError::internal(
                    path,
                    "invalid schema: x-kubernetes-validations must be a list of rules",
                ));
                return;
            }
        };
        if rules.is_empty() {
            return;
        }
        let type_name = Value::String(
            schema::type_of(typing_schema)
                .unwrap_or_default()
                .to_owned(),
        );
        let this = to_cel(value, Some(typing_schema), root);
        let old_cel = old.map(|o| to_cel(o, Some(typing_schema), root));
        for (i, raw) in rules.iter().enumerate() {
            if !raw.is_object() {
                self.errors.push(SchemaError::invalid(
                    path,
                    type_name.clone(),
                    format!("rule compile error: a rule must be an object, got {raw}"),
                ));
                continue;
            }
            let spec = RuleSpec::read(raw);
            if spec.rule.trim().is_empty() {
                continue;
            }
            let key = (std::ptr::from_ref(rules_schema) as usize, i);
            let compiled = self
                .cache
                .entry(key)
                .or_insert_with(|| cel_eval::compile(spec.rule, spec.message_expression));
            let outcome = match compiled {
                Ok(compiled) => cel_eval::run(
                    compiled,
                    this.clone(),
                    old_cel.clone(),
                    spec.optional_old_self,
                ),
                Err(e) => {
                    let detail = format!("rule compile error: {e}");
                    self.errors
                        .push(SchemaError::invalid(path, type_name.clone(), detail));
                    continue;
                }
            };
            let error = match outcome {
                Outcome::Pass | Outcome::Skipped => continue,
                Outcome::Fail(message) => failure(&spec, message, typing_schema, value, path),
                Outcome::NotBool(t) => SchemaError::invalid(
                    path,
                    type_name.clone(),
                    format!("rule evaluated to {t}, not bool: {}", spec.rule.trim()),
                ),
                Outcome::Error(e) => SchemaError::invalid(
                    path,
                    type_name.clone(),
                    format!("{e} evaluating rule: {}", spec.error_string()),
                ),
            };
            self.errors.push(error);
        }
    }
}

/// The `x-kubernetes-list-map-keys` of a `map` list schema.
fn list_map_keys(schema: &Value) -> Option<Vec<&str>> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys = schema.get("x-kubernetes-list-map-keys")?.as_array()?;
    Some(keys.iter().filter_map(Value::as_str).collect())
}

/// The error for a rule that evaluated to false (`fieldErrorForReason`).
fn failure(
    spec: &RuleSpec<'_>,
    message: Option<String>,
    typing_schema: &Value,
    value: &Value,
    path: &str,
) -> SchemaError {
    let field = spec
        .field_path
        .and_then(|fp| resolve_field_path(fp, typing_schema, path))
        .unwrap_or_else(|| path.to_owned());
    let detail = message.unwrap_or_else(|| spec.message_or_default());
    // Objects and arrays are not printed, scalars are.
    let shown = match schema::type_of(typing_schema) {
        Some("object" | "array") => None,
        _ => Some(value.clone()),
    };
    match spec.reason {
        Some("FieldValueForbidden") => SchemaError::new(&field, ErrorKind::Forbidden, None, detail),
        Some("FieldValueRequired") => SchemaError::required(&field, detail),
        Some("FieldValueDuplicate") => SchemaError::new(&field, ErrorKind::Duplicate, shown, ""),
        _ => SchemaError::new(&field, ErrorKind::Invalid, shown, detail),
    }
}

/// `ValidFieldPath`: resolves a rule's `fieldPath` (`.a.b`, `['a.b']`)
/// against the schema of the rule's node into a field path under `base`;
/// `None` if it is malformed or names no field.
fn resolve_field_path(field_path: &str, schema: &Value, base: &str) -> Option<String> {
    let mut out = base.to_owned();
    let mut node = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', ']']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            name = r[..end].to_owned();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let (quoted, after) = split_quoted(r)?;
            name = quoted;
            rest = after.strip_prefix(']')?;
        } else {
            return None;
        }
        let props: Option<&Map<String, Value>> = schema::properties(node);
        if let Some(props) = props {
            node = props.get(&name)?;
            out = path::child(&out, &name);
        } else if let schema::Additional::Schema(a) = schema::additional(node) {
            node = a;
            out = path::key(&out, &name);
        } else {
            return None;
        }
    }
    Some(out)
}

/// Splits `abc'rest` into the unescaped `abc` and `rest` (single-quoted
/// string body with `\'`, `\\` and the usual control escapes).
fn split_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => return Some((out, &s[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                out.push(match e {
                    'a' => '\u{07}',
                    'b' => '\u{08}',
                    'f' => '\u{0c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{0b}',
                    '\'' | '\\' => e,
                    _ => return None,
                });
            }
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
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
}
