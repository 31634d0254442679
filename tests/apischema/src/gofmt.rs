//! Rendering of JSON values the way kube-apiserver's Go code prints them in messages.

use serde_json::{Number, Value};

/// A bad value as `field.Error` prints it: strings `%q`-quoted, numbers and
/// booleans bare, `null` as `"null"`, objects and arrays as compact JSON.
pub(crate) fn bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => {
            serde_json::to_string(value).unwrap_or_else(|_| "<unprintable>".to_owned())
        }
    }
}

/// A JSON number as Go's `%v` prints the `int64`/`float64` it decodes to.
pub(crate) fn number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        n.to_string()
    } else {
        n.as_f64().map_or_else(|| n.to_string(), float)
    }
}

/// The OpenAPI type name of a JSON value (go-openapi's `schemaInfoForType`).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `strconv.Quote`: a double-quoted string with Go escapes.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                if (c as u32) < 0x1_0000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a `float64`: the shortest round-trip digits, in exponent form
/// when the decimal exponent is below -4 or at least 6 (`1e+06`, `1.5`).
pub(crate) fn float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_owned()
        } else if f > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::from(sign);
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let exp_sign = if exp < 0 { '-' } else { '+' };
        out.push_str(&format!("e{exp_sign}{:02}", exp.unsigned_abs()));
    } else if exp >= 0 {
        let int_len = usize::try_from(exp).unwrap_or(0) + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            out.push_str(&"0".repeat(int_len - digits.len()));
        } else {
            let (int_part, frac) = digits.split_at(int_len);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat(usize::try_from(-exp - 1).unwrap_or(0)));
        out.push_str(&digits);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_like_go() {
        assert_eq!(float(1.0), "1");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(-2.25), "-2.25");
        assert_eq!(float(100_000.0), "100000");
        assert_eq!(float(1_000_000.0), "1e+06");
        assert_eq!(float(123_456_789.0), "1.23456789e+08");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(0.5), "0.5");
        assert_eq!(float(0.0), "0");
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("x\ny\u{1}"), r#""x\ny\x01""#);
        assert_eq!(quote("héllo"), "\"héllo\"");
    }

    #[test]
    fn bad_values() {
        assert_eq!(bad_value(&json!(null)), r#""null""#);
        assert_eq!(bad_value(&json!(7)), "7");
        assert_eq!(bad_value(&json!(7.5)), "7.5");
        assert_eq!(bad_value(&json!(true)), "true");
        assert_eq!(bad_value(&json!("s")), r#""s""#);
        assert_eq!(bad_value(&json!({"a": [1]})), r#"{"a":[1]}"#);
    }

    #[test]
    fn type_names() {
        assert_eq!(type_name(&json!(1)), "integer");
        assert_eq!(type_name(&json!(1.0)), "number");
        assert_eq!(type_name(&json!([])), "array");
        assert_eq!(type_name(&json!(null)), "null");
    }
}
