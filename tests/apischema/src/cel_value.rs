//! JSON values as the CEL values kube-apiserver's CEL environment sees, guided by the schema.

use base64::Engine as _;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map as CelMap};
use serde_json::Value;

use crate::schema::{self, Additional, MAX_DEPTH};

/// CEL keywords that property names are escaped around (`__in__`).
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The apiserver's `cel.Escape`: the CEL field name of property `name`, or
/// `None` if it cannot be one (such properties are invisible to rules).
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// Converts `value`, typed by `schema`, into the CEL value rules see as
/// `self`:
///
/// * integers are `int` (`uint` beyond `i64`), other numbers `double`;
/// * strings with `format: date-time` are timestamps, `duration` durations,
///   `byte` bytes (falling back to strings when they do not parse);
///   `x-kubernetes-int-or-string` values stay `int` or `string`;
/// * properties are keyed by their escaped names (`__dash__`, ...), map
///   entries (`additionalProperties`) by their keys as they are;
/// * an `x-kubernetes-embedded-resource` object has `apiVersion`, `kind` and
///   `metadata` even when unset; at the resource root `metadata` only shows
///   `name` and `generateName`.
pub(crate) fn to_cel(value: &Value, schema: Option<&Value>, root: bool) -> CelValue {
    convert(value, schema, root, 0)
}

fn convert(value: &Value, schema: Option<&Value>, root: bool, depth: usize) -> CelValue {
    if depth > MAX_DEPTH {
        return CelValue::Null;
    }
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                CelValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                CelValue::UInt(u)
            } else {
                CelValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => string(s, schema),
        Value::Array(list) => {
            let items = schema.and_then(schema::items);
            CelValue::List(Arc::new(
                list.iter()
                    .map(|v| convert(v, items, false, depth + 1))
                    .collect(),
            ))
        }
        Value::Object(obj) => {
            let (is_map, additional) = match schema.map(schema::additional) {
                Some(Additional::Schema(a)) => (true, Some(a)),
                Some(Additional::Any) => (true, None),
                Some(Additional::No) | None => (false, None),
            };
            let props = schema.and_then(schema::properties);
            let mut map = HashMap::with_capacity(obj.len());
            for (k, v) in obj {
                let child = if root && k == "metadata" {
                    root_metadata(v)
                } else {
                    let child_schema = props.and_then(|p| p.get(k)).or(additional);
                    convert(v, child_schema, false, depth + 1)
                };
                let key = if is_map && props.is_none_or(|p| !p.contains_key(k)) {
                    Some(k.clone())
                } else {
                    escape(k)
                };
                if let Some(key) = key {
                    map.insert(Key::String(Arc::new(key)), child);
                }
            }
            if !root && schema.is_some_and(schema::embedded) {
                for (k, empty) in [
                    ("apiVersion", CelValue::String(Arc::new(String::new()))),
                    ("kind", CelValue::String(Arc::new(String::new()))),
                    ("metadata", empty_map()),
                ] {
                    map.entry(Key::String(Arc::new(k.to_owned())))
                        .or_insert(empty);
                }
            }
            CelValue::Map(CelMap { map: Arc::new(map) })
        }
    }
}

fn empty_map() -> CelValue {
    CelValue::Map(CelMap {
        map: Arc::new(HashMap::new()),
    })
}

/// The root `metadata` as CEL sees it: only `name` and `generateName`.
fn root_metadata(metadata: &Value) -> CelValue {
    let mut map = HashMap::new();
    if let Value::Object(m) = metadata {
        for k in ["name", "generateName"] {
            if let Some(Value::String(s)) = m.get(k) {
                map.insert(
                    Key::String(Arc::new(k.to_owned())),
                    CelValue::String(Arc::new(s.clone())),
                );
            }
        }
    }
    CelValue::Map(CelMap { map: Arc::new(map) })
}

fn string(s: &str, schema: Option<&Value>) -> CelValue {
    let plain = || CelValue::String(Arc::new(s.to_owned()));
    let Some(schema) = schema else {
        return plain();
    };
    if schema::flag(schema, "x-kubernetes-int-or-string") {
        return plain();
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("date-time" | "datetime") => {
            kube_cel::cel::functions::timestamp(Arc::new(s.to_owned())).unwrap_or_else(|_| plain())
        }
        Some("duration") => {
            kube_cel::cel::functions::duration(Arc::new(s.to_owned())).unwrap_or_else(|_| plain())
        }
        Some("byte") => base64(s).map_or_else(plain, |b| CelValue::Bytes(Arc::new(b))),
        _ => plain(),
    }
}

/// Standard base64 (padding optional), as Go decodes `format: byte` strings.
fn base64(s: &str) -> Option<Vec<u8>> {
    crate::format::BYTE_LENIENT.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn get<'a>(v: &'a CelValue, key: &str) -> Option<&'a CelValue> {
        match v {
            CelValue::Map(m) => m.map.get(&Key::String(Arc::new(key.to_owned()))),
            _ => None,
        }
    }

    #[test]
    fn escapes_like_the_apiserver() {
        assert_eq!(escape("foo").as_deref(), Some("foo"));
        assert_eq!(escape("foo_bar").as_deref(), Some("foo_bar"));
        assert_eq!(escape("foo__bar").as_deref(), Some("foo__underscores__bar"));
        assert_eq!(
            escape("a.b-c/d").as_deref(),
            Some("a__dot__b__dash__c__slash__d")
        );
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape(""), None);
    }

    #[test]
    fn numbers_strings_and_formats() {
        assert_eq!(to_cel(&json!(3), None, false), CelValue::Int(3));
        assert_eq!(
            to_cel(&json!(u64::MAX), None, false),
            CelValue::UInt(u64::MAX)
        );
        assert_eq!(to_cel(&json!(1.5), None, false), CelValue::Float(1.5));
        let ts = to_cel(
            &json!("2024-01-01T00:00:00Z"),
            Some(&json!({"type": "string", "format": "date-time"})),
            false,
        );
        assert_eq!(ts.type_of().to_string(), "timestamp");
        let bad_ts = to_cel(
            &json!("soon"),
            Some(&json!({"type": "string", "format": "date-time"})),
            false,
        );
        assert_eq!(bad_ts, CelValue::String(Arc::new("soon".to_owned())));
        let d = to_cel(
            &json!("90s"),
            Some(&json!({"type": "string", "format": "duration"})),
            false,
        );
        assert_eq!(d.type_of().to_string(), "duration");
        let b = to_cel(
            &json!("aGk="),
            Some(&json!({"type": "string", "format": "byte"})),
            false,
        );
        assert_eq!(b, CelValue::Bytes(Arc::new(b"hi".to_vec())));
        let ios = to_cel(
            &json!("5%"),
            Some(&json!({"x-kubernetes-int-or-string": true, "format": "date-time"})),
            false,
        );
        assert_eq!(ios, CelValue::String(Arc::new("5%".to_owned())));
    }

    #[test]
    fn property_names_are_escaped_map_keys_are_not() {
        let schema = json!({"type": "object", "properties": {
            "foo-bar": {"type": "string"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}
        }});
        let v = to_cel(
            &json!({"foo-bar": "x", "m": {"a.b/c": "y"}, "9lives": 1}),
            Some(&schema),
            false,
        );
        assert!(get(&v, "foo__dash__bar").is_some());
        assert!(get(&v, "9lives").is_none());
        assert!(get(get(&v, "m").unwrap_or(&CelValue::Null), "a.b/c").is_some());
    }

    #[test]
    fn root_metadata_and_embedded_resources() {
        let schema = json!({"type": "object", "properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true}}});
        let v = to_cel(
            &json!({"metadata": {"name": "n", "labels": {"a": "b"}}, "t": {}}),
            Some(&schema),
            true,
        );
        let meta = get(&v, "metadata").cloned().unwrap_or(CelValue::Null);
        assert!(get(&meta, "name").is_some());
        assert!(get(&meta, "labels").is_none());
        let t = get(&v, "t").cloned().unwrap_or(CelValue::Null);
        assert_eq!(
            get(&t, "kind"),
            Some(&CelValue::String(Arc::new(String::new())))
        );
    }

    #[test]
    fn base64_decoding() {
        assert_eq!(base64("aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(base64("aGVsbG8"), Some(b"hello".to_vec()));
        assert_eq!(base64(""), Some(vec![]));
        assert_eq!(base64("a"), None);
        assert_eq!(base64("a*=="), None);
    }
}
