//! Alertmanager's label matchers, as `spec.health.alerts.matchers` holds them:
//! `name="value"`, `name!="value"`, `name=~"regex"` and `name!~"regex"`.
//!
//! The syntax is Alertmanager's classic one (what `amtool` and silences accept, and what
//! Alertmanager falls back to): spaces around the name, the operator and the value are
//! ignored; a value in double quotes may hold `\"`, `\\` and `\n`, any other backslash
//! being literal; an unquoted value is the rest of the text, the same escapes applying,
//! and must hold no double quote. Label names are Prometheus's
//! (`[a-zA-Z_][a-zA-Z0-9_]*`). Regexes are anchored at both ends (`^(?:re)$`), as
//! Alertmanager anchors them, and a label an alert lacks matches as the empty string.

use std::collections::BTreeMap;
use std::fmt;

use regex::{Regex, RegexBuilder};

use crate::pool::MATCHER_MAX_LEN;

/// The most memory a matcher's compiled regex may take, so that a regex such as
/// `(a{1000}){1000}` is refused rather than compiled.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// How a matcher compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// `=`: the value is equal.
    Equal,
    /// `!=`: the value differs.
    NotEqual,
    /// `=~`: the whole value matches the regex.
    Regex,
    /// `!~`: the whole value does not match the regex.
    NotRegex,
}

impl MatchOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }
}

/// One parsed matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The label's name.
    pub name: String,
    /// The comparison.
    pub op: MatchOp,
    /// The value, unescaped, or the regex as written (before anchoring).
    pub value: String,
    /// The anchored regex, for `=~` and `!~`.
    regex: Option<Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, self.op, &self.value) == (&other.name, other.op, &other.value)
    }
}

impl Eq for Matcher {}

impl fmt::Display for Matcher {
    /// The canonical form: `name<op>"value"`, with `"`, `\` and newlines escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut value = String::with_capacity(self.value.len());
        for c in self.value.chars() {
            match c {
                '"' => value.push_str("\\\""),
                '\\' => value.push_str("\\\\"),
                '\n' => value.push_str("\\n"),
                c => value.push(c),
            }
        }
        write!(f, "{}{}\"{value}\"", self.name, self.op.as_str())
    }
}

impl Matcher {
    /// Parses one matcher; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Matcher, String> {
        if text.len() > MATCHER_MAX_LEN {
            return Err(format!(
                "has {} characters, more than the limit of {MATCHER_MAX_LEN}",
                text.len()
            ));
        }
        let trimmed = text.trim_start();
        let name_len = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(trimmed.len());
        let (name, rest) = trimmed.split_at(name_len);
        if name.is_empty() {
            return Err(format!(
                "{text:?} is not a matcher: it must start with a label name, as in severity=\"critical\""
            ));
        }
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "label name {name:?} must start with a letter or '_' ([a-zA-Z_][a-zA-Z0-9_]*)"
            ));
        }
        let rest = rest.trim_start();
        let (op, raw) = if let Some(r) = rest.strip_prefix("=~") {
            (MatchOp::Regex, r)
        } else if let Some(r) = rest.strip_prefix("!~") {
            (MatchOp::NotRegex, r)
        } else if let Some(r) = rest.strip_prefix("!=") {
            (MatchOp::NotEqual, r)
        } else if let Some(r) = rest.strip_prefix('=') {
            (MatchOp::Equal, r)
        } else if rest.is_empty() {
            return Err(format!(
                "{text:?} has no operator after label {name:?}: one of =, !=, =~ or !~ and a value must follow"
            ));
        } else {
            return Err(format!(
                "{text:?}: after label {name:?} comes {:?}, not one of =, !=, =~ or !~ (label names are [a-zA-Z_][a-zA-Z0-9_]*)",
                rest.chars().next().unwrap_or(' ')
            ));
        };
        let value =
            unescape(raw.trim()).map_err(|problem| format!("the value of {text:?} {problem}"))?;
        let regex = match op {
            MatchOp::Regex | MatchOp::NotRegex => Some(compile(&value)?),
            MatchOp::Equal | MatchOp::NotEqual => None,
        };
        Ok(Matcher {
            name: name.to_owned(),
            op,
            value,
            regex,
        })
    }

    /// Whether `labels` satisfy the matcher; a missing label counts as the empty string.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.name).map_or("", String::as_str);
        match (self.op, &self.regex) {
            (MatchOp::Equal, _) => value == self.value,
            (MatchOp::NotEqual, _) => value != self.value,
            (MatchOp::Regex, Some(re)) => re.is_match(value),
            (MatchOp::NotRegex, Some(re)) => !re.is_match(value),
            // Never built: parse compiles a regex for both regex operators.
            (MatchOp::Regex | MatchOp::NotRegex, None) => false,
        }
    }
}

/// Parses every matcher; the first error, with the matcher's index.
pub fn parse_all(texts: &[String]) -> Result<Vec<Matcher>, String> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Matcher::parse(t).map_err(|e| format!("matcher {i}: {e}")))
        .collect()
}

/// Whether `labels` satisfy every matcher (all of none: yes).
pub fn matches_all(matchers: &[Matcher], labels: &BTreeMap<String, String>) -> bool {
    matchers.iter().all(|m| m.matches(labels))
}

/// The value with its quotes removed and its escapes applied, as Alertmanager does it.
fn unescape(raw: &str) -> Result<String, String> {
    let (body, quoted) = match raw.strip_prefix('"') {
        Some(body) => (body, true),
        None => (raw, false),
    };
    let mut value = String::with_capacity(body.len());
    let mut closed = false;
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if closed {
            return Err("has text after its closing double quote".into());
        }
        match c {
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some(e @ ('"' | '\\')) => value.push(e),
                // A spurious escape: the backslash is literal.
                Some(other) => {
                    value.push('\\');
                    value.push(other);
                }
                None => value.push('\\'),
            },
            '"' if quoted => closed = true,
            '"' => return Err("has a double quote that is not escaped (write \\\")".into()),
            c => value.push(c),
        }
    }
    if quoted && !closed {
        return Err("opens a double quote and does not close it".into());
    }
    Ok(value)
}

/// The regex anchored at both ends, or why it does not compile.
fn compile(re: &str) -> Result<Regex, String> {
    RegexBuilder::new(&format!("^(?:{re})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => {
                format!("regex {re:?} is too large once compiled")
            }
            other => {
                let detail = other.to_string();
                let last = detail.lines().rev().find(|l| !l.trim().is_empty());
                format!(
                    "regex {re:?} is not valid: {}",
                    last.unwrap_or("syntax error").trim()
                )
            }
        })
}

#[cfg(test)]
mod tests;
