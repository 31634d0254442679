//! Kubernetes JSONPath (k8s.io/client-go/util/jsonpath) as kube-apiserver evaluates it for printer columns.
//!
//! The parser and evaluator follow client-go's, quirks included, with missing keys allowed (as the apiserver's
//! table convertor and kubectl set): a missing field yields no result, while a malformed path, an index out of
//! range, filtering something that is not a list or comparing values of different types is an error.
//! Notable client-go behaviours kept: `['a.b']` means `.a.b` (escape the dot, `['a\.b']` or `.a\.b`, to address a key
//! containing one); `[]` means `[0]`; `..` includes non-empty strings; a filter skips elements whose left or right
//! side is missing.
//!
//! Map: `parser` turns a path into nodes (a transcription of client-go's parser.go), `eval` walks
//! them over a JSON value (client-go's jsonpath.go); printing results as Go does is here.

mod eval;
mod parser;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use serde_json::Value;

use eval::find_in_nodes;
use parser::parse_template;

/// Evaluates `path` against `obj` and returns every result, flattened in order.
///
/// `path` may be a bare expression (`.status.phase`), wrapped in braces (`{.status.phase}`), or a template mixing
/// literal text and `{…}` actions (text outside braces comes back as string results).
pub fn eval(path: &str, obj: &Value) -> Result<Vec<Value>, String> {
    Ok(find_results(path, obj)?.into_iter().flatten().collect())
}

/// Evaluates `path` against `obj` like client-go's `JSONPath.FindResults`: one result list per top-level node of
/// the template (literal text or `{…}` action).
///
/// The apiserver's table convertor uses the first value of the first list, and shows nothing when that list is empty.
pub fn find_results(path: &str, obj: &Value) -> Result<Vec<Vec<Value>>, String> {
    let root = parse_template(&normalize(path))?;
    let mut out = Vec::new();
    find_in_nodes(&root, obj, &mut out)?;
    Ok(out
        .into_iter()
        .map(|set| set.into_iter().map(Cow::into_owned).collect())
        .collect())
}

/// Checks that `path` parses, without evaluating it.
pub fn validate(path: &str) -> Result<(), String> {
    parse_template(&normalize(path)).map(|_| ())
}

/// Formats a value as client-go's JSONPath printer (`fmt.Fprint`) does: strings as they are, numbers and booleans in
/// Go's `%v` form, maps as `map[k:v …]` with sorted keys, lists as `[a b]`, and a JSON null as `<no value>` (what
/// `reflect.ValueOf(nil)` prints) at the top level or `<nil>` when nested.
pub fn go_text(value: &Value) -> String {
    match value {
        Value::Null => "<no value>".to_string(),
        other => {
            let mut s = String::new();
            go_fmt(other, &mut s);
            s
        }
    }
}

/// Formats a float as Go's `fmt.Sprint(float64)` does (`%g` with the shortest representation: `1.5`, `100000`,
/// `1e+06`, `1e-05`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like Go's strconv with precision -1.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{exp_sign}{:02}", exp.unsigned_abs());
    }
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        let zeros = "0".repeat(point - digits.len());
        format!("{sign}{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at(point);
        format!("{sign}{int}.{frac}")
    }
}

fn go_fmt(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_fmt(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(v) = map.get(key) {
                    go_fmt(v, out);
                }
            }
            out.push(']');
        }
    }
}

fn number_text(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        // Out of int64 range: the apiserver's JSON decoding makes it a float64.
        go_float(u as f64)
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Wraps a bare expression in braces, as the apiserver does with a CRD column's jsonPath.
fn normalize(path: &str) -> String {
    if path.trim_start().starts_with('{') {
        path.to_string()
    } else {
        format!("{{{path}}}")
    }
}
