//! OpenAPI v3 value validation of a structural schema, as kube-apiserver runs it on custom resources.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use crate::error::{ErrorKind, SchemaError};
use crate::schema::MAX_DEPTH;
use crate::{format, gofmt, listtype, path, pattern};

/// Validates `value` (a whole custom resource) against `schema` (the
/// `openAPIV3Schema` of a CRD version) and returns every error found.
///
/// Checks the OpenAPI keywords `type`, `nullable`, `required`, `enum`,
/// `pattern`, `minLength`/`maxLength` (in Unicode code points), `minimum`/
/// `maximum` with the boolean `exclusiveMinimum`/`exclusiveMaximum`,
/// `multipleOf`, `minItems`/`maxItems`, `uniqueItems`, `minProperties`/
/// `maxProperties`, `additionalProperties: false`, `format` (`date-time`,
/// `date`, `uuid`, `byte`, `ipv4`, `ipv6`, `cidr` on strings; `int32`/`int64`
/// ranges on integers; others are ignored) and `allOf`/`anyOf`/`oneOf`/`not`
/// (as pure value validations), plus the Kubernetes extensions
/// `x-kubernetes-int-or-string`, `x-kubernetes-embedded-resource`
/// (`apiVersion` and `kind` required), and `x-kubernetes-list-type` `set`/`map`
/// with `x-kubernetes-list-map-keys` (duplicates are errors).
///
/// Errors come in the apiserver's order: OpenAPI errors, then embedded
/// resource errors, then list-type errors. The root `metadata` is not
/// validated. A keyword the schema gets wrong (say a `pattern` that does not
/// compile) is reported as an [`ErrorKind::Internal`] error at the node.
/// CEL rules are not evaluated here; see [`validate_cel`](crate::validate_cel).
#[must_use]
pub fn validate(schema: &Value, value: &Value) -> Vec<SchemaError> {
    let mut walker = Walker::default();
    walker.node(schema, value, "", 0, Mode::Root);
    let Walker {
        mut openapi,
        embedded,
        lists,
    } = walker;
    openapi.extend(embedded);
    openapi.extend(lists);
    openapi
}

/// Where in the schema the walker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The resource root: `metadata` is skipped.
    Root,
    /// The structural spine: Kubernetes extensions apply.
    Structural,
    /// Inside `allOf`/`anyOf`/`oneOf`/`not`: value validations only.
    Junctor,
}

impl Mode {
    fn below(self) -> Self {
        match self {
            Self::Root | Self::Structural => Self::Structural,
            Self::Junctor => Self::Junctor,
        }
    }
}

/// Collects errors in the three groups the apiserver reports in turn.
#[derive(Debug, Default)]
struct Walker {
    openapi: Vec<SchemaError>,
    embedded: Vec<SchemaError>,
    lists: Vec<SchemaError>,
}

impl Walker {
    fn node(&mut self, schema: &Value, value: &Value, path: &str, depth: usize, mode: Mode) {
        if depth > MAX_DEPTH {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::String(String::new()),
                format!("nesting deeper than {MAX_DEPTH} levels is not supported"),
            ));
            return;
        }
        let s = match schema {
            Value::Object(s) => s,
            Value::Bool(true) => return,
            other => {
                self.bad_schema(path, format!("a schema must be an object, got {other}"));
                return;
            }
        };
        let int_or_string =
            mode != Mode::Junctor && self.kw_bool(s, "x-kubernetes-int-or-string", path);
        let nullable = self.kw_bool(s, "nullable", path);
        let ty = self.kw_type(s, path);

        if value.is_null() {
            if !nullable {
                if int_or_string {
                    self.type_error(path, "integer or string", value);
                } else if let Some(t) = ty {
                    self.type_error(path, t, value);
                }
            }
            self.check_enum(s, value, path);
            return;
        }
        if int_or_string {
            if !(is_integer(value) || value.is_string()) {
                self.type_error(path, "integer or string", value);
            }
        } else if let Some(t) = ty.filter(|t| !type_matches(t, value)) {
            self.type_error(path, t, value);
        }

        self.check_junctors(s, value, path, depth);
        match value {
            Value::String(text) => self.check_string(s, text, value, path),
            Value::Number(n) => self.check_number(s, n, value, ty, path),
            Value::Array(list) => self.check_array(s, list, path, depth, mode),
            _ => {}
        }
        self.check_enum(s, value, path);
        if let Value::Object(map) = value {
            self.check_object(s, map, path, depth, mode);
        }
    }

    // ── keywords by kind of value ─────────────────────────────────────────

    fn check_string(&mut self, s: &Map<String, Value>, text: &str, value: &Value, path: &str) {
        let len = text.chars().count() as u64;
        if let Some(max) = self.kw_uint(s, "maxLength", path).filter(|max| len > *max) {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooLong,
                Some(value.clone()),
                format!("may not be longer than {max}"),
            ));
        }
        if let Some(min) = self.kw_uint(s, "minLength", path).filter(|min| len < *min) {
            self.openapi.push(SchemaError::invalid(
                path,
                value.clone(),
                format!(
                    "{} should be at least {min} chars long",
                    path::in_body(path)
                ),
            ));
        }
        if let Some(p) = self.kw_str(s, "pattern", path) {
            match pattern::is_match(p, text) {
                Ok(true) => {}
                Ok(false) => self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("{} should match '{p}'", path::in_body(path)),
                )),
                Err(e) => self.bad_schema(
                    path,
                    format!("pattern {} does not compile: {e}", gofmt::quote(p)),
                ),
            }
        }
        if let Some(f) = self.kw_str(s, "format", path)
            && format::check(f, text) == Some(false)
        {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TypeInvalid,
                Some(value.clone()),
                format!(
                    "{} must be of type {f}: {}",
                    path::in_body(path),
                    gofmt::quote(text)
                ),
            ));
        }
    }

    fn check_number(
        &mut self,
        s: &Map<String, Value>,
        n: &Number,
        value: &Value,
        ty: Option<&str>,
        path: &str,
    ) {
        let body = path::in_body(path);
        if ty == Some("integer") && is_integer(value) {
            let fits = match self.kw_str(s, "format", path) {
                Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                Some("int64") => n.is_i64(),
                _ => true,
            };
            if !fits {
                let f = self.kw_str(s, "format", path).unwrap_or_default();
                self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("Checked value must be of type integer with format {f} in {path}"),
                ));
            }
        }
        if let Some(factor) = self.kw_num(s, "multipleOf", path) {
            if factor <= 0.0 {
                self.bad_schema(
                    path,
                    format!(
                        "multipleOf must be greater than 0, got {}",
                        gofmt::float(factor)
                    ),
                );
            } else if !is_multiple_of(n, factor) {
                self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("{body} should be a multiple of {}", gofmt::float(factor)),
                ));
            }
        }
        if let Some(max) = self.kw_num(s, "maximum", path) {
            let exclusive = self.kw_bool(s, "exclusiveMaximum", path);
            let ord = compare(n, max);
            let bad = if exclusive {
                ord != Some(Ordering::Less)
            } else {
                ord == Some(Ordering::Greater)
            };
            if bad {
                let rel = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("{body} should be {rel} {}", gofmt::float(max)),
                ));
            }
        }
        if let Some(min) = self.kw_num(s, "minimum", path) {
            let exclusive = self.kw_bool(s, "exclusiveMinimum", path);
            let ord = compare(n, min);
            let bad = if exclusive {
                ord != Some(Ordering::Greater)
            } else {
                ord == Some(Ordering::Less)
            };
            if bad {
                let rel = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("{body} should be {rel} {}", gofmt::float(min)),
                ));
            }
        }
    }

    fn check_array(
        &mut self,
        s: &Map<String, Value>,
        list: &[Value],
        path: &str,
        depth: usize,
        mode: Mode,
    ) {
        let len = list.len() as u64;
        if let Some(min) = self.kw_uint(s, "minItems", path).filter(|min| len < *min) {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::from(len),
                format!("{} should have at least {min} items", path::in_body(path)),
            ));
        }
        if let Some(max) = self.kw_uint(s, "maxItems", path).filter(|max| len > *max) {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooMany,
                Some(Value::from(len)),
                format!("must have at most {max} items"),
            ));
        }
        if self.kw_bool(s, "uniqueItems", path) && !listtype::set_duplicates(list).is_empty() {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::String(String::new()),
                format!("{} shouldn't contain duplicates", path::in_body(path)),
            ));
        }
        // The list's own set/map check comes before its items', as in the apiserver.
        if mode != Mode::Junctor {
            self.check_list_type(s, list, path);
        }
        match s.get("items") {
            None => {}
            Some(items @ (Value::Object(_) | Value::Bool(_))) => {
                for (i, item) in list.iter().enumerate() {
                    self.node(items, item, &path::index(path, i), depth + 1, mode.below());
                }
            }
            Some(_) => self.bad_schema(path, "items must be a single schema object".to_owned()),
        }
    }

    fn check_object(
        &mut self,
        s: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        depth: usize,
        mode: Mode,
    ) {
        let count = map.len() as u64;
        if let Some(max) = self
            .kw_uint(s, "maxProperties", path)
            .filter(|max| count > *max)
        {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooMany,
                Some(Value::from(count)),
                format!("must have at most {max} items"),
            ));
        }
        if let Some(min) = self
            .kw_uint(s, "minProperties", path)
            .filter(|min| count < *min)
        {
            self.openapi.push(SchemaError::invalid(
                path,
                Value::from(count),
                format!(
                    "{} should have at least {min} properties",
                    path::in_body(path)
                ),
            ));
        }
        match s.get("required") {
            None => {}
            Some(Value::Array(required)) => {
                for r in required {
                    match r {
                        Value::String(k) if !map.contains_key(k) => {
                            self.openapi
                                .push(SchemaError::required(&path::child(path, k), ""));
                        }
                        Value::String(_) => {}
                        other => self.bad_schema(
                            path,
                            format!("required entries must be strings, got {other}"),
                        ),
                    }
                }
            }
            Some(other) => self.bad_schema(path, format!("required must be an array, got {other}")),
        }
        let props = match s.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(other) => {
                self.bad_schema(path, format!("properties must be an object, got {other}"));
                None
            }
        };
        let additional = s.get("additionalProperties");
        if additional.is_some_and(|a| !a.is_object() && !a.is_boolean()) {
            self.bad_schema(
                path,
                "additionalProperties must be a schema or a boolean".to_owned(),
            );
        }
        for (k, v) in map {
            if mode == Mode::Root && k == "metadata" {
                continue;
            }
            if let Some(p) = props.and_then(|p| p.get(k)) {
                self.node(p, v, &path::child(path, k), depth + 1, mode.below());
            } else {
                match additional {
                    Some(a @ Value::Object(_)) => {
                        self.node(a, v, &path::key(path, k), depth + 1, mode.below());
                    }
                    Some(Value::Bool(false))
                        if !(mode == Mode::Root && (k == "apiVersion" || k == "kind")) =>
                    {
                        self.openapi.push(SchemaError::invalid(
                            path,
                            Value::String(k.clone()),
                            format!(
                                "{} is a forbidden property",
                                path::in_body(&path::child(path, k))
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        if mode == Mode::Structural && self.kw_bool(s, "x-kubernetes-embedded-resource", path) {
            self.check_embedded(map, path);
        }
    }

    fn check_enum(&mut self, s: &Map<String, Value>, value: &Value, path: &str) {
        let allowed = match s.get("enum") {
            None => return,
            Some(Value::Array(a)) => a,
            Some(other) => {
                self.bad_schema(path, format!("enum must be an array, got {other}"));
                return;
            }
        };
        if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, value)) {
            return;
        }
        let supported: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => gofmt::quote(s),
                other => gofmt::quote(&other.to_string()),
            })
            .collect();
        self.openapi.push(SchemaError::new(
            path,
            ErrorKind::Unsupported,
            Some(value.clone()),
            format!("supported values: {}", supported.join(", ")),
        ));
    }

    // ── allOf / anyOf / oneOf / not ───────────────────────────────────────

    fn check_junctors(&mut self, s: &Map<String, Value>, value: &Value, path: &str, depth: usize) {
        let body = path::in_body(path);
        if let Some(branches) = self.kw_schemas(s, "anyOf", path) {
            let results: Vec<_> = branches
                .iter()
                .map(|b| self.branch(b, value, path, depth))
                .collect();
            if !results.iter().any(Vec::is_empty) {
                self.composite(
                    path,
                    format!("{body} must validate at least one schema (anyOf)"),
                );
                self.openapi.extend(best(results));
            }
        }
        if let Some(branches) = self.kw_schemas(s, "oneOf", path) {
            let results: Vec<_> = branches
                .iter()
                .map(|b| self.branch(b, value, path, depth))
                .collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid == 0 {
                self.composite(
                    path,
                    format!(
                        "{body} must validate one and only one schema (oneOf). Found none valid"
                    ),
                );
                self.openapi.extend(best(results));
            } else if valid > 1 {
                self.composite(
                    path,
                    format!("{body} must validate one and only one schema (oneOf). Found {valid} valid alternatives"),
                );
            }
        }
        if let Some(branches) = self.kw_schemas(s, "allOf", path) {
            let mut valid = 0;
            for b in branches {
                let errs = self.branch(b, value, path, depth);
                if errs.is_empty() {
                    valid += 1;
                }
                self.openapi.extend(errs);
            }
            if valid != branches.len() {
                let none = if valid == 0 { ". Found none valid" } else { "" };
                self.composite(
                    path,
                    format!("{body} must validate all the schemas (allOf){none}"),
                );
            }
        }
        if let Some(not) = s.get("not")
            && self.branch(not, value, path, depth).is_empty()
        {
            self.composite(path, format!("{body} must not validate the schema (not)"));
        }
    }

    /// The errors of `value` against one junctor branch.
    fn branch(&self, schema: &Value, value: &Value, path: &str, depth: usize) -> Vec<SchemaError> {
        let mut sub = Walker::default();
        sub.node(schema, value, path, depth + 1, Mode::Junctor);
        sub.openapi
    }

    fn composite(&mut self, path: &str, message: String) {
        self.openapi.push(SchemaError::invalid(
            path,
            Value::String(String::new()),
            message,
        ));
    }

    // ── Kubernetes extensions ─────────────────────────────────────────────

    fn check_list_type(&mut self, s: &Map<String, Value>, list: &[Value], path: &str) {
        match self.kw_str(s, "x-kubernetes-list-type", path) {
            None | Some("atomic") => {}
            Some("set") => {
                for i in listtype::set_duplicates(list) {
                    let item = list.get(i).cloned().unwrap_or(Value::Null);
                    self.lists.push(SchemaError::new(
                        &path::index(path, i),
                        ErrorKind::Duplicate,
                        Some(item),
                        "",
                    ));
                }
            }
            Some("map") => {
                let keys: Vec<&str> = match s.get("x-kubernetes-list-map-keys") {
                    Some(Value::Array(keys))
                        if !keys.is_empty() && keys.iter().all(Value::is_string) =>
                    {
                        keys.iter().filter_map(Value::as_str).collect()
                    }
                    _ => {
                        self.bad_schema(
                            path,
                            "x-kubernetes-list-map-keys must be a non-empty list of strings for x-kubernetes-list-type map"
                                .to_owned(),
                        );
                        return;
                    }
                };
                match listtype::map_duplicates(list, &keys) {
                    Err(i) => {
                        let item = list.get(i).cloned().unwrap_or(Value::Null);
                        self.lists.push(SchemaError::invalid(
                            &path::index(path, i),
                            item,
                            "must be an object for an array of list-type map",
                        ));
                    }
                    Ok(dups) => {
                        for (i, key) in dups {
                            self.lists.push(SchemaError::new(
                                &path::index(path, i),
                                ErrorKind::Duplicate,
                                Some(key),
                                "",
                            ));
                        }
                    }
                }
            }
            Some(other) => self.bad_schema(
                path,
                format!(
                    "x-kubernetes-list-type must be atomic, set or map, got {}",
                    gofmt::quote(other)
                ),
            ),
        }
    }

    /// `validateEmbeddedResource`: `apiVersion` and `kind` must be non-empty
    /// strings (`metadata` itself is not checked here).
    fn check_embedded(&mut self, map: &Map<String, Value>, path: &str) {
        for field in ["apiVersion", "kind"] {
            let p = path::child(path, field);
            match map.get(field) {
                None => self
                    .embedded
                    .push(SchemaError::required(&p, "must not be empty")),
                Some(Value::String(s)) if s.is_empty() => {
                    self.embedded.push(SchemaError::invalid(
                        &p,
                        Value::String(String::new()),
                        "must not be empty",
                    ));
                }
                Some(Value::String(s))
                    if field == "apiVersion" && s != "/" && s.matches('/').count() > 1 =>
                {
                    self.embedded.push(SchemaError::invalid(
                        &p,
                        Value::String(s.clone()),
                        format!("unexpected GroupVersion string: {s}"),
                    ));
                }
                Some(Value::String(_)) => {}
                Some(other) => {
                    self.embedded
                        .push(SchemaError::invalid(&p, other.clone(), "must be a string"));
                }
            }
        }
    }

    // ── reading keywords, reporting malformed ones ───────────────────────

    fn bad_schema(&mut self, path: &str, detail: String) {
        self.openapi.push(SchemaError::internal(
            path,
            format!("invalid schema: {detail}"),
        ));
    }

    fn type_error(&mut self, path: &str, expected: &str, value: &Value) {
        let actual = gofmt::type_name(value);
        self.openapi.push(SchemaError::new(
            path,
            ErrorKind::TypeInvalid,
            Some(Value::String(actual.to_owned())),
            format!(
                "{} must be of type {expected}: {}",
                path::in_body(path),
                gofmt::quote(actual)
            ),
        ));
    }

    fn kw_bool(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> bool {
        match s.get(key) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.bad_schema(path, format!("{key} must be a boolean, got {other}"));
                false
            }
        }
    }

    fn kw_str<'s>(&mut self, s: &'s Map<String, Value>, key: &str, path: &str) -> Option<&'s str> {
        match s.get(key) {
            None => None,
            Some(Value::String(v)) => Some(v),
            Some(other) => {
                self.bad_schema(path, format!("{key} must be a string, got {other}"));
                None
            }
        }
    }

    fn kw_uint(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
        let v = s.get(key)?;
        let n = v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        });
        if n.is_none() {
            self.bad_schema(
                path,
                format!("{key} must be a non-negative integer, got {v}"),
            );
        }
        n
    }

    fn kw_num(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> Option<f64> {
        let v = s.get(key)?;
        let n = v.as_f64();
        if n.is_none() {
            self.bad_schema(path, format!("{key} must be a number, got {v}"));
        }
        n
    }

    fn kw_type<'s>(&mut self, s: &'s Map<String, Value>, path: &str) -> Option<&'s str> {
        let t = self.kw_str(s, "type", path)?;
        if matches!(
            t,
            "object" | "array" | "string" | "integer" | "number" | "boolean"
        ) {
            Some(t)
        } else {
            self.bad_schema(path, format!("unsupported type {}", gofmt::quote(t)));
            None
        }
    }

    fn kw_schemas<'s>(
        &mut self,
        s: &'s Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<&'s [Value]> {
        match s.get(key) {
            None => None,
            Some(Value::Array(a)) => Some(a),
            Some(other) => {
                self.bad_schema(
                    path,
                    format!("{key} must be an array of schemas, got {other}"),
                );
                None
            }
        }
    }
}

/// The errors of the branch with the fewest errors (go-openapi merges the
/// errors of its best-matching branch).
fn best(results: Vec<Vec<SchemaError>>) -> Vec<SchemaError> {
    results
        .into_iter()
        .filter(|r| !r.is_empty())
        .min_by_key(Vec::len)
        .unwrap_or_default()
}

fn is_integer(value: &Value) -> bool {
    matches!(value, Value::Number(n) if n.is_i64() || n.is_u64())
}

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        _ => true,
    }
}

/// `enum` equality: JSON equality, except that numbers compare by value (so
/// `1` matches `1.0`, as the apiserver converts the enum value to the type of
/// the data before comparing).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Some(Ordering::Equal),
        _ => a == b,
    }
}

fn compare_numbers(x: &Number, y: &Number) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (as_i128(x), as_i128(y)) {
        return Some(a.cmp(&b));
    }
    x.as_f64()?.partial_cmp(&y.as_f64()?)
}

fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// `n` compared with a bound given as a float, exactly when both are integral.
fn compare(n: &Number, bound: f64) -> Option<Ordering> {
    if let Some(i) = as_i128(n)
        && bound.fract() == 0.0
        && bound.abs() < 1.0e30
    {
        return Some(i.cmp(&(bound as i128)));
    }
    n.as_f64()?.partial_cmp(&bound)
}

/// `multipleOf`: exact for integers and integral factors, otherwise
/// go-openapi's float test (the quotient is an integer within 1e-9).
fn is_multiple_of(n: &Number, factor: f64) -> bool {
    if let Some(i) = as_i128(n)
        && factor.fract() == 0.0
        && factor < 1.0e30
    {
        let f = factor as i128;
        return f != 0 && i % f == 0;
    }
    let Some(data) = n.as_f64() else {
        return false;
    };
    let quotient = if factor < 1.0 {
        1.0 / factor * data
    } else {
        data / factor
    };
    if !quotient.is_finite() {
        return false;
    }
    let whole = quotient.trunc();
    if quotient == whole {
        return true;
    }
    let diff = (quotient - whole).abs();
    diff / (quotient.abs() + whole.abs()).min(f64::MAX) < 1e-9
}

#[cfg(test)]
mod tests {
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
            [
                r#"spec.f: Invalid value: "string": spec.f in body must be of type boolean: "string""#
            ]
        );
    }

    #[test]
    fn type_integer_accepts_integers_only_and_number_accepts_both() {
        assert!(check(json!({"type": "integer"}), json!(-3)).is_empty());
        assert!(check(json!({"type": "integer"}), json!(u64::MAX)).is_empty());
        assert_eq!(
            check(json!({"type": "integer"}), json!(1.5)),
            [
                r#"spec.f: Invalid value: "number": spec.f in body must be of type integer: "number""#
            ]
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
            [
                r#"spec.f: Unsupported value: "Foo": supported values: "RebootOnly", "AllowSoftReboot""#
            ]
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
        let s =
            json!({"type": "object", "additionalProperties": {"type": "string", "maxLength": 2}});
        assert!(check(s.clone(), json!({"a": "xy"})).is_empty());
        assert_eq!(
            check(s, json!({"app.kubernetes.io/name": "xyz"})),
            ["spec.f[app.kubernetes.io/name]: Too long: may not be longer than 2"]
        );
        let closed =
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
        assert_eq!(
            check(closed, json!({"a": 1, "b": 2})),
            [r#"spec.f: Invalid value: "b": spec.f.b in body is a forbidden property"#]
        );
    }

    #[test]
    fn list_type_set() {
        let s =
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}});
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
        let exclusive =
            json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
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
}
