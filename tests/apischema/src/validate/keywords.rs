//! Reading schema keywords, and reporting malformed ones as internal errors.

use serde_json::{Map, Value};

use super::Walker;
use crate::error::{ErrorKind, SchemaError};
use crate::{gofmt, path};

impl Walker {
    pub(super) fn bad_schema(&mut self, path: &str, detail: String) {
        self.openapi.push(SchemaError::internal(
            path,
            format!("invalid schema: {detail}"),
        ));
    }

    pub(super) fn type_error(&mut self, path: &str, expected: &str, value: &Value) {
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

    pub(super) fn kw_bool(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> bool {
        match s.get(key) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.bad_schema(path, format!("{key} must be a boolean, got {other}"));
                false
            }
        }
    }

    pub(super) fn kw_str<'s>(
        &mut self,
        s: &'s Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<&'s str> {
        match s.get(key) {
            None => None,
            Some(Value::String(v)) => Some(v),
            Some(other) => {
                self.bad_schema(path, format!("{key} must be a string, got {other}"));
                None
            }
        }
    }

    pub(super) fn kw_uint(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
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

    pub(super) fn kw_num(&mut self, s: &Map<String, Value>, key: &str, path: &str) -> Option<f64> {
        let v = s.get(key)?;
        let n = v.as_f64();
        if n.is_none() {
            self.bad_schema(path, format!("{key} must be a number, got {v}"));
        }
        n
    }

    pub(super) fn kw_type<'s>(&mut self, s: &'s Map<String, Value>, path: &str) -> Option<&'s str> {
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

    pub(super) fn kw_schemas<'s>(
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
