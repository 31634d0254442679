//! `x-kubernetes-validations` CEL rules, evaluated where kube-apiserver would evaluate them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::cel_eval::{self, CelOutcome, CompiledRule};
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
    let schemas = Schemas {
        rules: schema,
        typing: schema,
    };
    walker.node(schemas, value, old, "", 0, true);
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

/// Whether any `x-kubernetes-validations` entry anywhere in `schema` may read `oldSelf`
/// (its `rule` or `messageExpression` names it). When none does, a rule's outcome and
/// message do not depend on the old object, so [`validate_cel`] with no old object
/// reports what it reports with one, and a caller may skip preparing it. Read as text, so
/// a rule that only mentions the word counts too: never a false "no".
#[must_use]
pub fn reads_old_self(schema: &Value) -> bool {
    fn names_it(entry: &Value) -> bool {
        ["rule", "messageExpression"].iter().any(|k| {
            entry
                .get(*k)
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains("oldSelf"))
        })
    }
    match schema {
        Value::Object(map) => map.iter().any(|(k, v)| {
            (k == "x-kubernetes-validations"
                && v.as_array().is_some_and(|rules| rules.iter().any(names_it)))
                || reads_old_self(v)
        }),
        Value::Array(list) => list.iter().any(reads_old_self),
        _ => false,
    }
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
type Cache = HashMap<(usize, usize), std::rc::Rc<Result<CompiledRule, String>>>;

#[derive(Debug, Default)]
struct CelWalker {
    cache: Cache,
    errors: Vec<SchemaError>,
}

/// The two schemas of a node: `rules` supplies the rules and `typing` the
/// structure (they differ inside `allOf` branches).
#[derive(Debug, Clone, Copy)]
struct Schemas<'s> {
    rules: &'s Value,
    typing: &'s Value,
}

impl CelWalker {
    /// Walks `value` with `schemas.rules` supplying the rules and
    /// `schemas.typing` the structure.
    fn node(
        &mut self,
        schemas: Schemas<'_>,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        depth: usize,
        root: bool,
    ) {
        if depth > MAX_DEPTH
            || !schemas.rules.is_object()
            || !schemas.typing.is_object()
            || value.is_null()
        {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.rules(schemas, value, old, path, root);
        if let Some(branches) = schemas.rules.get("allOf").and_then(Value::as_array) {
            for branch in branches {
                let branch = Schemas {
                    rules: branch,
                    typing: schemas.typing,
                };
                self.node(branch, value, old, path, depth + 1, root);
            }
        }
        match value {
            Value::Object(map) => self.properties(schemas, map, old, path, depth, root),
            Value::Array(list) => self.items(schemas, list, old, path, depth),
            _ => {}
        }
    }

    /// Walks the members of an object node (but not the root `metadata`).
    fn properties(
        &mut self,
        schemas: Schemas<'_>,
        map: &Map<String, Value>,
        old: Option<&Value>,
        path: &str,
        depth: usize,
        root: bool,
    ) {
        for (k, v) in map {
            if root && k == "metadata" {
                continue;
            }
            let (Some((rules, _)), Some((typing, is_map))) = (
                schema::member(schemas.rules, k),
                schema::member(schemas.typing, k),
            ) else {
                continue;
            };
            let child_path = if is_map {
                path::key(path, k)
            } else {
                path::child(path, k)
            };
            let old_child = old.and_then(|o| o.get(k));
            let child = Schemas { rules, typing };
            self.node(child, v, old_child, &child_path, depth + 1, false);
        }
    }

    /// Walks the items of an array node; items of `map` lists get the old
    /// item with the same keys as `oldSelf`.
    fn items(
        &mut self,
        schemas: Schemas<'_>,
        list: &[Value],
        old: Option<&Value>,
        path: &str,
        depth: usize,
    ) {
        let (Some(rules), Some(typing)) =
            (schema::items(schemas.rules), schema::items(schemas.typing))
        else {
            return;
        };
        let map_keys = list_map_keys(schemas.typing);
        let old_list = old.and_then(Value::as_array);
        for (i, item) in list.iter().enumerate() {
            let old_item = match (&map_keys, old_list) {
                (Some(keys), Some(old_list)) => listtype::correlate(item, old_list, keys),
                _ => None,
            };
            let child = Schemas { rules, typing };
            self.node(
                child,
                item,
                old_item,
                &path::index(path, i),
                depth + 1,
                false,
            );
        }
    }

    /// Evaluates the rules declared on `schemas.rules` at this node.
    fn rules(
        &mut self,
        schemas: Schemas<'_>,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        let rules = match schemas.rules.get("x-kubernetes-validations") {
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
            schema::type_of(schemas.typing)
                .unwrap_or_default()
                .to_owned(),
        );
        let this = to_cel(value, Some(schemas.typing), root);
        let old_cel = old.map(|o| to_cel(o, Some(schemas.typing), root));
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
            let key = (std::ptr::from_ref(schemas.rules) as usize, i);
            let compiled = self
                .cache
                .entry(key)
                .or_insert_with(|| cel_eval::compile_cached(spec.rule, spec.message_expression));
            let outcome = match &**compiled {
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
                CelOutcome::Pass | CelOutcome::Skipped => continue,
                CelOutcome::Fail(message) => failure(&spec, message, schemas.typing, value, path),
                CelOutcome::NotBool(t) => SchemaError::invalid(
                    path,
                    type_name.clone(),
                    format!("rule evaluated to {t}, not bool: {}", spec.rule.trim()),
                ),
                CelOutcome::Error(e) => SchemaError::invalid(
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
mod tests;
