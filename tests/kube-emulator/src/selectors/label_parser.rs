//! The string form of label selectors, lexed and parsed like apimachinery's
//! (k8s.io/apimachinery/pkg/labels/selector.go).

use std::collections::BTreeSet;

use super::label::{LabelOperator, LabelSelector, Requirement};
use super::validation::{go_quote, invalid, qualified_name_errors};

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
enum ParseContext {
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

    fn lookahead(&self, ctx: ParseContext) -> (Tok, String) {
        let (mut tok, lit) = self.peek_raw();
        if ctx == ParseContext::Values && matches!(tok, Tok::In | Tok::NotIn) {
            tok = Tok::Identifier;
        }
        (tok, lit)
    }

    fn consume(&mut self, ctx: ParseContext) -> (Tok, String) {
        let out = self.lookahead(ctx);
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        out
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(ParseContext::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(ParseContext::Values);
                    match t {
                        Tok::EndOfString => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(ParseContext::Values);
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
        let (mut tok, mut lit) = self.consume(ParseContext::Values);
        if tok == Tok::DoesNotExist {
            op = Some(LabelOperator::DoesNotExist);
            (tok, lit) = self.consume(ParseContext::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key_errs = qualified_name_errors(&lit);
        if !key_errs.is_empty() {
            return Err(invalid("<nil>", &go_quote(&lit), &key_errs.join("; ")));
        }
        let (next, _) = self.lookahead(ParseContext::Values);
        if matches!(next, Tok::EndOfString | Tok::Comma) && op.is_none() {
            op = Some(LabelOperator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOperator, String> {
        let (tok, lit) = self.consume(ParseContext::KeyAndOperator);
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
        let (tok, lit) = self.consume(ParseContext::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(ParseContext::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, _) = self.consume(ParseContext::Values);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(ParseContext::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut s = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(ParseContext::Values);
            match tok {
                Tok::Identifier => {
                    s.insert(lit);
                    let (t2, l2) = self.lookahead(ParseContext::Values);
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
                    let (t2, _) = self.lookahead(ParseContext::Values);
                    if t2 == Tok::ClosedPar {
                        s.insert(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.consume(ParseContext::Values);
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, _) = self.lookahead(ParseContext::Values);
        if matches!(tok, Tok::EndOfString | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(ParseContext::Values);
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
