//! Field selectors (k8s.io/apimachinery/pkg/fields/selector.go): parsed, printed and matched
//! against objects (see the parent module for how field values are read).

use std::fmt;

use serde_json::Value;

/// The operator of one field selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOperator {
    /// `field=value`.
    Equals,
    /// `field==value` (same meaning as `=`).
    DoubleEquals,
    /// `field!=value`.
    NotEquals,
}

/// One term of a field selector: `field op value` (value unescaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    field: String,
    operator: FieldOperator,
    value: String,
}

impl FieldRequirement {
    /// The dotted field path, e.g. `spec.nodeName`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The operator.
    pub fn operator(&self) -> FieldOperator {
        self.operator
    }

    /// The (unescaped) value.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// A field selector: the conjunction of its terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldRequirement>,
}

/// Splits on unescaped commas, keeping escapes (`fields.splitTerms`).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator (`!=`, `==`, `=`, tried in that order at each position).
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::DoubleEquals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, rhs));
            }
        }
    }
    None
}

/// `fields.UnescapeValue`.
fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    ));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                // Go prints the rune with %v, i.e. its code point.
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                ));
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// `fields.EscapeValue`.
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Parses the string form of a field selector (`?fieldSelector=`), e.g.
/// `metadata.name=x`, `spec.nodeName==n1`, `status.phase!=Running`, comma-separated.
///
/// Values may escape `\,`, `\=` and `\\`; unescaped `,`/`=` in a value and unknown escapes are
/// errors. As in apimachinery, no whitespace is trimmed and empty terms are skipped.
pub fn parse_field_selector(s: &str) -> Result<FieldSelector, String> {
    let mut terms = Vec::new();
    for part in split_terms(s) {
        if part.is_empty() {
            continue;
        }
        let Some((lhs, operator, rhs)) = split_term(part) else {
            return Err(format!(
                "invalid selector: '{s}'; can't understand '{part}'"
            ));
        };
        let value = unescape_value(rhs)?;
        terms.push(FieldRequirement {
            field: lhs.to_string(),
            operator,
            value,
        });
    }
    terms.sort_by(|a, b| a.field.cmp(&b.field));
    Ok(FieldSelector { terms })
}

/// Fields whose typed field set reads `false` when the field is absent.
const BOOLEAN_FIELDS: &[&str] = &["spec.unschedulable", "spec.hostNetwork"];

/// The field's value as a field set would expose it.
fn field_value(obj: &Value, field: &str) -> String {
    let mut cur = Some(obj);
    for seg in field.split('.') {
        cur = cur.and_then(|c| c.get(seg));
    }
    match cur {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) if BOOLEAN_FIELDS.contains(&field) => "false".to_string(),
        _ => String::new(),
    }
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// The field paths the selector uses (so the server can refuse fields a kind does not support).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// The terms, sorted by field.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.terms
    }

    /// Whether the object satisfies every term (see the module doc for how values are read).
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let have = field_value(obj, &t.field);
            match t.operator {
                FieldOperator::Equals | FieldOperator::DoubleEquals => have == t.value,
                FieldOperator::NotEquals => have != t.value,
            }
        })
    }

    /// `Some(name)` when the selector is exactly `metadata.name=NAME` (or `==`): a watch or list
    /// of one object.
    pub fn single_name(&self) -> Option<&str> {
        match self.terms.as_slice() {
            [t] if t.field == "metadata.name" && t.operator != FieldOperator::NotEquals => {
                Some(&t.value)
            }
            _ => None,
        }
    }

    /// Whether the selector has no terms.
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }
}

impl fmt::Display for FieldSelector {
    /// The canonical string form (terms sorted by field, values escaped).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.operator {
                FieldOperator::Equals => "=",
                FieldOperator::DoubleEquals => "==",
                FieldOperator::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}
