//! Label and field selectors parsed, validated and matched the way kube-apiserver (apimachinery `labels` and `fields`) does.
//!
//! Known differences from kube-apiserver:
//! - Field values are looked up by walking the dotted path in the JSON object instead of through
//!   each kind's hand-written field set; the server must still refuse fields a kind does not
//!   support (see [`FieldSelector::fields`]). A missing field reads as `""`, except
//!   `spec.unschedulable` and `spec.hostNetwork`, which read as `"false"` like the typed field sets.
//!   Booleans and numbers compare by their JSON text; objects and arrays read as `""`.
//! - The string form of [`LabelSelector::nothing`] is empty (as in apimachinery), the same as
//!   [`LabelSelector::everything`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

/// The operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOperator {
    /// `key in (a,b)`: the label is present with one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key=v`.
    Equals,
    /// `key==v` (same meaning as `=`).
    DoubleEquals,
    /// `key!=v`: the label is absent or has another value.
    NotEquals,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present and is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present and is an integer less than `n`.
    LessThan,
}

/// One requirement of a label selector: a key, an operator and (sorted, unique) values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: LabelOperator,
    values: Vec<String>,
}

/// A label selector: the conjunction of its requirements (or the selector that matches nothing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

// ---------------------------------------------------------------------------------------------
// apimachinery validation helpers (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------------

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain_syntax(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    (f.is_ascii_lowercase() || f.is_ascii_digit())
                        && (l.is_ascii_lowercase() || l.is_ascii_digit())
                        && b.iter()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                }
                _ => false,
            }
        })
}

/// `validation.IsQualifiedName`: the list of problems (empty when valid).
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_dns1123_subdomain_syntax(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`: the list of problems (empty when valid).
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%q` of a string (close enough: Rust's debug escaping of a `str`).
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// Go's `%#v` of a `[]string`.
fn go_string_slice(values: &[String]) -> String {
    let inner: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", inner.join(", "))
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// `field.ErrorList.ToAggregate().Error()`.
fn aggregate(errs: Vec<String>) -> Result<(), String> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.into_iter().next().unwrap_or_default()),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

fn parse_go_int(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

// ---------------------------------------------------------------------------------------------
// Requirement
// ---------------------------------------------------------------------------------------------

impl Requirement {
    /// Builds a requirement, validating it like `labels.NewRequirement`: the key must be a
    /// qualified name, each value a label value, and the number of values must suit the operator.
    /// Values are sorted and de-duplicated.
    pub fn new(key: &str, operator: LabelOperator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(key);
        if !key_errs.is_empty() {
            errs.push(invalid("key", &go_quote(key), &key_errs.join("; ")));
        }
        match operator {
            LabelOperator::In | LabelOperator::NotIn => {
                if values.is_empty() {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::NotEquals => {
                if values.len() != 1 {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(invalid(
                            &format!("values[{i}]"),
                            &go_quote(v),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    &go_quote(v),
                    &value_errs.join("; "),
                ));
            }
        }
        aggregate(errs)?;
        let values: BTreeSet<String> = values.into_iter().collect();
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values: values.into_iter().collect(),
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The values (sorted, unique; empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let got = labels.get(&self.key);
        match self.operator {
            LabelOperator::In | LabelOperator::Equals | LabelOperator::DoubleEquals => {
                got.is_some_and(|v| self.values.contains(v))
            }
            LabelOperator::NotIn | LabelOperator::NotEquals => {
                got.is_none_or(|v| !self.values.contains(v))
            }
            LabelOperator::Exists => got.is_some(),
            LabelOperator::DoesNotExist => got.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let Some(have) = got.and_then(|v| parse_go_int(v)) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = parse_go_int(want) else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = self.values.first().map(String::as_str).unwrap_or("");
        match self.operator {
            LabelOperator::In => write!(f, "{} in ({})", self.key, self.values.join(",")),
            LabelOperator::NotIn => write!(f, "{} notin ({})", self.key, self.values.join(",")),
            LabelOperator::Equals => write!(f, "{}={one}", self.key),
            LabelOperator::DoubleEquals => write!(f, "{}=={one}", self.key),
            LabelOperator::NotEquals => write!(f, "{}!={one}", self.key),
            LabelOperator::Exists => write!(f, "{}", self.key),
            LabelOperator::DoesNotExist => write!(f, "!{}", self.key),
            LabelOperator::GreaterThan => write!(f, "{}>{one}", self.key),
            LabelOperator::LessThan => write!(f, "{}<{one}", self.key),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Label selector string parser (k8s.io/apimachinery/pkg/labels/selector.go)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the selector into tokens exactly like apimachinery's `Lexer` (byte-wise; special
/// symbols are scanned greedily; a NUL byte ends the input).
fn lex(input: &str) -> Vec<(Tok, String)> {
    let s = match input.find('\0') {
        Some(i) => &input[..i],
        None => input,
    };
    let b = s.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < b.len() && is_whitespace(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Tok::EndOfString, String::new()));
            return out;
        }
        if is_special(b[pos]) {
            let start = pos;
            let mut last: Option<(Tok, usize)> = None;
            while pos < b.len() && is_special(b[pos]) {
                pos += 1;
                if let Some(t) = keyword(&s[start..pos]) {
                    last = Some((t, pos));
                } else if last.is_some() {
                    pos -= 1;
                    break;
                }
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, s[start..end].to_string()));
                }
                None => out.push((
                    Tok::Error,
                    format!("error expected: keyword found '{}'", &s[start..pos]),
                )),
            }
        } else {
            let start = pos;
            while pos < b.len() && !is_special(b[pos]) && !is_whitespace(b[pos]) {
                pos += 1;
            }
            let word = &s[start..pos];
            let tok = match keyword(word) {
                Some(t) => t,
                None => Tok::Identifier,
            };
            out.push((tok, word.to_string()));
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    fn peek_raw(&self) -> (Tok, String) {
        self.items
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::EndOfString, String::new()))
    }

    fn lookahead(&self, ctx: Ctx) -> (Tok, String) {
        let (mut tok, lit) = self.peek_raw();
        if ctx == Ctx::Values && matches!(tok, Tok::In | Tok::NotIn) {
            tok = Tok::Identifier;
        }
        (tok, lit)
    }

    fn consume(&mut self, ctx: Ctx) -> (Tok, String) {
        let out = self.lookahead(ctx);
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        out
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Tok::EndOfString => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Tok::EndOfString => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (LabelOperator::Exists | LabelOperator::DoesNotExist)) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            LabelOperator::In | LabelOperator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values.into_iter().collect())
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<LabelOperator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(LabelOperator::DoesNotExist);
            (tok, lit) = self.consume(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key_errs = qualified_name_errors(&lit);
        if !key_errs.is_empty() {
            return Err(invalid("<nil>", &go_quote(&lit), &key_errs.join("; ")));
        }
        let (next, _) = self.lookahead(Ctx::Values);
        if matches!(next, Tok::EndOfString | Tok::Comma) && op.is_none() {
            op = Some(LabelOperator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOperator, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => LabelOperator::In,
            Tok::Equals => LabelOperator::Equals,
            Tok::DoubleEquals => LabelOperator::DoubleEquals,
            Tok::GreaterThan => LabelOperator::GreaterThan,
            Tok::LessThan => LabelOperator::LessThan,
            Tok::NotIn => LabelOperator::NotIn,
            Tok::NotEquals => LabelOperator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Ctx::Values);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut s = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Tok::Identifier => {
                    s.insert(lit);
                    let (t2, l2) = self.lookahead(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (t2, _) = self.lookahead(Ctx::Values);
                    if t2 == Tok::ClosedPar {
                        s.insert(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.consume(Ctx::Values);
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if matches!(tok, Tok::EndOfString | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Tok::Identifier {
            Ok(BTreeSet::from([lit]))
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// Parses the string form of a label selector (`?labelSelector=`), e.g.
/// `app=web,tier!=db,env in (prod,staging),!canary,release`.
///
/// Accepts `=`, `==`, `!=`, `in (...)`, `notin (...)`, bare `key` (exists), `!key` (does not
/// exist), `key>n` and `key<n`, comma-separated, with optional whitespace. Keys must be
/// qualified names and values label values (at most 63 characters). Errors read like
/// kube-apiserver's (`unable to parse requirement: ...`). The empty string selects everything.
pub fn parse_label_selector(s: &str) -> Result<LabelSelector, String> {
    let mut p = Parser {
        items: lex(s),
        pos: 0,
    };
    let mut requirements = p.parse()?;
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(LabelSelector {
        requirements,
        nothing: false,
    })
}

fn expect_string_list(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("{what}: expected a string, got {other}")),
            })
            .collect(),
        Some(other) => Err(format!("{what}: expected a list of strings, got {other}")),
    }
}

impl LabelSelector {
    /// The selector that matches every label set.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches nothing (`labels.Nothing()`, what apimachinery's
    /// `LabelSelectorAsSelector` returns for a nil selector, e.g. a `null` PDB selector in
    /// policy/v1).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object
    /// (`{matchLabels: {k: v}, matchExpressions: [{key, operator: In|NotIn|Exists|DoesNotExist, values}]}`).
    ///
    /// `null`, an absent selector and `{}` select everything (in policy/v1 an empty PDB selector
    /// selects every pod of the namespace; callers that want apimachinery's "nil selects nothing"
    /// use [`LabelSelector::nothing`] themselves). Keys and values are validated like the
    /// apiserver does.
    pub fn from_label_selector_json(sel: &Value) -> Result<Self, String> {
        let obj = match sel {
            Value::Null => return Ok(Self::everything()),
            Value::Object(o) => o,
            other => return Err(format!("a label selector must be an object, got {other}")),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let Value::String(v) = v else {
                        return Err(format!("matchLabels[{k}]: expected a string, got {v}"));
                    };
                    requirements.push(Requirement::new(k, LabelOperator::Equals, vec![v.clone()])?);
                }
            }
            Some(other) => return Err(format!("matchLabels: expected an object, got {other}")),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, expr) in exprs.iter().enumerate() {
                    let Value::Object(expr) = expr else {
                        return Err(format!(
                            "matchExpressions[{i}]: expected an object, got {expr}"
                        ));
                    };
                    let key = match expr.get("key") {
                        Some(Value::String(k)) => k.as_str(),
                        None | Some(Value::Null) => "",
                        Some(other) => {
                            return Err(format!(
                                "matchExpressions[{i}].key: expected a string, got {other}"
                            ));
                        }
                    };
                    let op_name = match expr.get("operator") {
                        Some(Value::String(o)) => o.as_str(),
                        None | Some(Value::Null) => "",
                        Some(other) => {
                            return Err(format!(
                                "matchExpressions[{i}].operator: expected a string, got {other}"
                            ));
                        }
                    };
                    let op = match op_name {
                        "In" => LabelOperator::In,
                        "NotIn" => LabelOperator::NotIn,
                        "Exists" => LabelOperator::Exists,
                        "DoesNotExist" => LabelOperator::DoesNotExist,
                        other => {
                            return Err(format!(
                                "{} is not a valid label selector operator",
                                go_quote(other)
                            ));
                        }
                    };
                    let values = expect_string_list(
                        expr.get("values"),
                        &format!("matchExpressions[{i}].values"),
                    )?;
                    requirements.push(Requirement::new(key, op, values)?);
                }
            }
            Some(other) => {
                return Err(format!("matchExpressions: expected a list, got {other}"));
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Whether the label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the object's `metadata.labels` satisfy the selector (non-string label values are
    /// ignored).
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.nothing {
            return false;
        }
        if self.requirements.is_empty() {
            return true;
        }
        let labels: BTreeMap<String, String> = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches(&labels)
    }

    /// Whether the selector has no requirements (and so matches everything).
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is the selector that matches nothing.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical string form (requirements sorted by key, comma-separated).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Field selectors (k8s.io/apimachinery/pkg/fields/selector.go)
// ---------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests;
