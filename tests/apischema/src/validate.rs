//! OpenAPI v3 value validation of a structural schema, as kube-apiserver runs it on custom resources.
//!
//! The walk and the `type`/`nullable`/`enum` checks are here; the keywords of
//! each kind of value are in [`scalars`] (strings, numbers) and [`collections`]
//! (arrays, objects, list types, embedded resources), `allOf`/`anyOf`/`oneOf`/
//! `not` in [`junctors`], and reading keywords (reporting malformed ones) in
//! [`keywords`].

mod collections;
mod junctors;
mod keywords;
mod scalars;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::error::{ErrorKind, SchemaError};
use crate::gofmt;
use crate::schema::MAX_DEPTH;
use scalars::compare_numbers;

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
    walker.node(schema, value, "", 0, WalkMode::Root);
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
enum WalkMode {
    /// The resource root: `metadata` is skipped.
    Root,
    /// The structural spine: Kubernetes extensions apply.
    Structural,
    /// Inside `allOf`/`anyOf`/`oneOf`/`not`: value validations only.
    Junctor,
}

impl WalkMode {
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
    fn node(&mut self, schema: &Value, value: &Value, path: &str, depth: usize, mode: WalkMode) {
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
            mode != WalkMode::Junctor && self.kw_bool(s, "x-kubernetes-int-or-string", path);
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
