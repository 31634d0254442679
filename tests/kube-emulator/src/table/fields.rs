//! Lenient field access for the printers: a missing or mistyped field reads as empty, zero or false.

use chrono::{DateTime, Utc};
use serde_json::Value;

pub(super) fn str_at<'v>(obj: &'v Value, path: &[&str]) -> &'v str {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

pub(super) fn text(obj: &Value, path: &[&str]) -> Value {
    Value::String(str_at(obj, path).to_string())
}

pub(super) fn int_at(obj: &Value, path: &[&str]) -> i64 {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return 0,
        }
    }
    cur.as_i64().unwrap_or(0)
}

pub(super) fn bool_at(obj: &Value, path: &[&str]) -> bool {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return false,
        }
    }
    cur.as_bool().unwrap_or(false)
}

pub(super) fn time_at(obj: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(str_at(obj, path))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

pub(super) fn len_at(obj: &Value, key: &str) -> i64 {
    match obj.get(key) {
        Some(Value::Object(m)) => m.len() as i64,
        Some(Value::Array(a)) => a.len() as i64,
        _ => 0,
    }
}

pub(super) fn list_at<'v>(obj: &'v Value, path: &[&str]) -> &'v [Value] {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return &[],
        }
    }
    cur.as_array().map(Vec::as_slice).unwrap_or(&[])
}

pub(super) fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "<none>" } else { s }.to_string()
}

pub(super) fn or_unknown(obj: &Value, path: &[&str]) -> Value {
    match str_at(obj, path) {
        "" => Value::String("<unknown>".to_string()),
        s => Value::String(s.to_string()),
    }
}

/// An IntOrString as `intstr.String()` prints it, `N/A` when unset.
pub(super) fn int_or_string(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => Value::String(n.to_string()),
        Some(Value::String(s)) => Value::String(s.clone()),
        _ => Value::String("N/A".to_string()),
    }
}
