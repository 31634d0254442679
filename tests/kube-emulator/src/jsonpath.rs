//! Kubernetes JSONPath (k8s.io/client-go/util/jsonpath) as kube-apiserver evaluates it for printer columns.
//!
//! The parser and evaluator follow client-go's, quirks included, with missing keys allowed (as the apiserver's
//! table convertor and kubectl set): a missing field yields no result, while a malformed path, an index out of
//! range, filtering something that is not a list or comparing values of different types is an error.
//! Notable client-go behaviours kept: `['a.b']` means `.a.b` (escape the dot, `['a\.b']` or `.a\.b`, to address a key
//! containing one); `[]` means `[0]`; `..` includes non-empty strings; a filter skips elements whose left or right
//! side is missing.

use std::borrow::Cow;

use serde_json::Value;

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

// ---------------------------------------------------------------------------------------------------------------------
// Parser (a transcription of client-go's parser.go, iterative where client-go recurses).

#[derive(Debug, Clone, PartialEq)]
enum Node {
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Param {
    value: i128,
    known: bool,
    derived: bool,
}

struct Parser {
    input: Vec<char>,
    pos: usize,
    start: usize,
    width: usize,
}

const EOF: char = '\u{FFFF}';

/// Parses a template into its top-level nodes (text and action lists).
fn parse_template(text: &str) -> Result<Vec<Node>, String> {
    let mut p = Parser {
        input: text.chars().collect(),
        pos: 0,
        start: 0,
        width: 0,
    };
    let mut root = Vec::new();
    loop {
        // parseText: scan to the next '{'.
        loop {
            if p.peek() == '{' {
                break;
            }
            if p.next() == EOF {
                if p.pos > p.start {
                    root.push(Node::Text(p.consume()));
                }
                return Ok(root);
            }
        }
        if p.pos > p.start {
            root.push(Node::Text(p.consume()));
        }
        // parseLeftDelim
        p.pos += 1;
        p.consume();
        let mut list = Vec::new();
        p.parse_inside_action(&mut list)?;
        root.push(Node::List(list));
    }
}

/// client-go's parseAction: parses `{text}` and returns the nodes of its first action.
fn parse_action(text: &str) -> Result<Vec<Node>, String> {
    let root = parse_template(&format!("{{{text}}}"))?;
    match root.into_iter().next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

impl Parser {
    fn next(&mut self) -> char {
        match self.input.get(self.pos) {
            Some(c) => {
                self.width = 1;
                self.pos += 1;
                *c
            }
            None => {
                // Like client-go: width 0 at EOF, so a following backup stays put.
                self.width = 0;
                EOF
            }
        }
    }

    fn backup(&mut self) {
        self.pos = self.pos.saturating_sub(self.width);
    }

    fn peek(&self) -> char {
        self.input.get(self.pos).copied().unwrap_or(EOF)
    }

    fn starts_with(&self, prefix: &str) -> bool {
        let rest = self.input.get(self.pos..).unwrap_or(&[]);
        let prefix: Vec<char> = prefix.chars().collect();
        rest.starts_with(&prefix)
    }

    fn consume(&mut self) -> String {
        let end = self.pos.min(self.input.len());
        let start = self.start.min(end);
        let value: String = self.input.get(start..end).unwrap_or(&[]).iter().collect();
        self.start = end;
        self.pos = end;
        value
    }

    fn char_at(&self, index: usize) -> char {
        self.input.get(index).copied().unwrap_or(EOF)
    }

    /// Parses the inside of an action up to and including its closing brace.
    fn parse_inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            if self.starts_with("}") {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if self.starts_with("[?(") {
                self.parse_filter(cur)?;
                continue;
            }
            if self.starts_with("..") {
                if matches!(cur.last(), Some(Node::Recursive)) {
                    return Err("invalid multiple recursive descent".to_string());
                }
                self.pos += 2;
                self.consume();
                cur.push(Node::Recursive);
                if is_alphanumeric(self.peek()) {
                    self.parse_field(cur);
                }
                continue;
            }
            let r = self.next();
            match r {
                EOF | '\r' | '\n' => return Err("unclosed action".to_string()),
                ' ' | '@' | '$' => {
                    self.consume();
                }
                '[' => self.parse_array(cur)?,
                '"' | '\'' => self.parse_quote(cur, r)?,
                '.' => self.parse_field(cur),
                _ if r == '+' || r == '-' || is_digit(r) => {
                    self.backup();
                    self.parse_number(cur)?;
                }
                _ if is_alphanumeric(r) => {
                    self.backup();
                    self.parse_identifier(cur);
                }
                _ => {
                    return Err(format!(
                        "unrecognized character in action: U+{:04X} '{r}'",
                        u32::from(r)
                    ));
                }
            }
        }
    }

    fn parse_identifier(&mut self, cur: &mut Vec<Node>) {
        loop {
            let r = self.next();
            if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        match value.as_str() {
            "true" => cur.push(Node::Bool(true)),
            "false" => cur.push(Node::Bool(false)),
            _ => cur.push(Node::Identifier(value)),
        }
    }

    fn parse_number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        let r = self.peek();
        if r == '+' || r == '-' {
            self.next();
        }
        loop {
            let r = self.next();
            if r != '.' && !is_digit(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
            return Ok(());
        }
        if value
            .chars()
            .all(|c| c.is_ascii_digit() || "+-.".contains(c))
            && value.chars().any(|c| c.is_ascii_digit())
            && let Ok(f) = value.parse::<f64>()
        {
            cur.push(Node::Float(f));
            return Ok(());
        }
        Err(format!("cannot parse number {value}"))
    }

    fn parse_array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                EOF | '\n' => return Err("unterminated array".to_string()),
                ']' => break,
                _ => {}
            }
        }
        let text = self.consume();
        let chars: Vec<char> = text.chars().collect();
        let inner: String = chars
            .get(1..chars.len().saturating_sub(1))
            .unwrap_or(&[])
            .iter()
            .collect();
        let inner = if inner == "*" { ":".to_string() } else { inner };

        // union operator
        let parts: Vec<&str> = inner.split(',').collect();
        if parts.len() > 1 {
            let mut union = Vec::new();
            for part in parts {
                union.push(parse_action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            cur.push(Node::Union(union));
            return Ok(());
        }

        // dict key: ^'([^']*)'$
        if inner.len() >= 2 && inner.starts_with('\'') && inner.ends_with('\'') {
            let key = &inner[1..inner.len() - 1];
            if !key.contains('\'') {
                cur.extend(parse_action(&format!(".{key}"))?);
                return Ok(());
            }
        }

        // slice operator: ^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$
        let groups = slice_groups(&inner).ok_or_else(|| format!("invalid array index {inner}"))?;
        let mut params = [Param::default(); 3];
        for i in 0..3 {
            let group = groups[i].as_str();
            if !group.is_empty() {
                let group = if i > 0 { &group[1..] } else { group };
                if i > 0 && group.is_empty() {
                    params[i].known = false;
                } else {
                    params[i].known = true;
                    params[i].value = group
                        .parse::<i64>()
                        .map_err(|_| format!("array index {group} is not a number"))?
                        .into();
                }
            } else if i == 1 {
                params[i].known = true;
                params[i].value = params[0].value + 1;
                params[i].derived = true;
            }
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let mut begin = false;
        let mut end = false;
        let mut pair = EOF;
        loop {
            let r = self.next();
            match r {
                EOF | '\n' => return Err("unterminated filter".to_string()),
                '"' | '\'' => {
                    if !begin {
                        begin = true;
                        pair = r;
                        continue;
                    }
                    if self.char_at(self.pos.saturating_sub(2)) != '\\' && r == pair {
                        end = true;
                    }
                }
                ')' if begin == end => break,
                _ => {}
            }
        }
        if self.next() != ']' {
            return Err("unclosed array expect ]".to_string());
        }
        let text = self.consume();
        let chars: Vec<char> = text.chars().collect();
        let text: String = chars
            .get(..chars.len().saturating_sub(2))
            .unwrap_or(&[])
            .iter()
            .collect();
        match split_filter(&text) {
            None => {
                let left = parse_action(&text)?;
                cur.push(Node::Filter {
                    left,
                    right: Vec::new(),
                    op: "exists".to_string(),
                });
            }
            Some((left, op, right)) => {
                let left = parse_action(&left)?;
                let right = parse_action(&right)?;
                cur.push(Node::Filter { left, right, op });
            }
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            let r = self.next();
            if r == EOF || r == '\n' {
                return Err("unterminated quoted string".to_string());
            }
            if r == end && self.char_at(self.pos.saturating_sub(2)) != '\\' {
                break;
            }
        }
        let value = self.consume();
        let s = unquote_extend(&value).map_err(|e| format!("unquote string {value} error {e}"))?;
        cur.push(Node::Text(s));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let r = self.next();
            if r == '\\' {
                self.next();
            } else if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        if value == "*" {
            cur.push(Node::Wildcard);
        } else {
            cur.push(Node::Field(value.replace('\\', "")));
        }
    }
}

/// Matches `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$` and returns the three groups ("" when unmatched).
fn slice_groups(text: &str) -> Option<[String; 3]> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut groups: [String; 3] = Default::default();
    for (g, group) in groups.iter_mut().enumerate() {
        let begin = i;
        if g > 0 {
            if chars.get(i) != Some(&':') {
                continue;
            }
            i += 1;
        }
        if chars.get(i) == Some(&'-') {
            i += 1;
        }
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        *group = chars.get(begin..i).unwrap_or(&[]).iter().collect();
    }
    (i == chars.len()).then_some(groups)
}

/// Matches a filter body against `^([^!<>=]+)([!<>=]+)(.+?)$`.
fn split_filter(text: &str) -> Option<(String, String, String)> {
    let is_op = |c: char| "!<>=".contains(c);
    let chars: Vec<char> = text.chars().collect();
    let left_end = chars.iter().position(|c| is_op(*c))?;
    if left_end == 0 {
        return None;
    }
    let mut op_end = left_end;
    while op_end < chars.len() && is_op(chars[op_end]) {
        op_end += 1;
    }
    if op_end == chars.len() {
        // The right side needs at least one character: give it the last operator character.
        op_end -= 1;
        if op_end == left_end {
            return None;
        }
    }
    let right = &chars[op_end..];
    if right.is_empty() || right.contains(&'\n') {
        return None;
    }
    Some((
        chars[..left_end].iter().collect(),
        chars[left_end..op_end].iter().collect(),
        right.iter().collect(),
    ))
}

fn is_terminator(r: char) -> bool {
    matches!(
        r,
        ' ' | '\t' | '\r' | '\n' | EOF | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

fn is_digit(r: char) -> bool {
    r != EOF && r.is_numeric()
}

fn is_alphanumeric(r: char) -> bool {
    r != EOF && (r == '_' || r.is_alphabetic() || r.is_numeric())
}

/// client-go's UnquoteExtend: strconv.Unquote that also accepts single-quoted strings.
fn unquote_extend(s: &str) -> Result<String, String> {
    const SYNTAX: &str = "invalid syntax";
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 2 {
        return Err(SYNTAX.to_string());
    }
    let quote = chars[0];
    if quote != chars[chars.len() - 1] || (quote != '"' && quote != '\'') {
        return Err(SYNTAX.to_string());
    }
    let body = &chars[1..chars.len() - 1];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == quote {
            return Err(SYNTAX.to_string());
        }
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *body.get(i + 1).ok_or(SYNTAX)?;
        i += 2;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' | '"' => {
                if e != quote {
                    return Err(SYNTAX.to_string());
                }
                out.push(e);
            }
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = body.get(i..i + n).ok_or(SYNTAX)?.iter().collect();
                let v = u32::from_str_radix(&hex, 16).map_err(|_| SYNTAX.to_string())?;
                i += n;
                if e == 'x' {
                    // A byte; only ASCII keeps the string valid UTF-8.
                    out.push(char::from_u32(v).filter(char::is_ascii).ok_or(SYNTAX)?);
                } else {
                    out.push(char::from_u32(v).ok_or(SYNTAX)?);
                }
            }
            '0'..='7' => {
                let oct: String = body.get(i - 1..i + 2).ok_or(SYNTAX)?.iter().collect();
                let v = u32::from_str_radix(&oct, 8).map_err(|_| SYNTAX.to_string())?;
                if v > 255 {
                    return Err(SYNTAX.to_string());
                }
                i += 2;
                out.push(char::from_u32(v).filter(char::is_ascii).ok_or(SYNTAX)?);
            }
            _ => return Err(SYNTAX.to_string()),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------------------
// Evaluator (client-go's jsonpath.go over JSON values, with AllowMissingKeys(true)).

type Item<'a> = Cow<'a, Value>;

/// Evaluates top-level nodes, handling `{range …}`/`{end}` blocks like client-go's FindResults.
fn find_in_nodes<'a>(
    nodes: &[Node],
    data: &'a Value,
    out: &mut Vec<Vec<Item<'a>>>,
) -> Result<(), String> {
    let mut i = 0;
    while i < nodes.len() {
        let node = &nodes[i];
        if let Node::List(list) = node {
            if list_has_identifier(list, "end") {
                return Err("not in range, nothing to end".to_string());
            }
            if list_has_identifier(list, "range") {
                let items = eval_list(vec![Cow::Borrowed(data)], list)?;
                let end = matching_end(nodes, i + 1);
                let body = &nodes[i + 1..end.unwrap_or(nodes.len())];
                if items.is_empty() {
                    // client-go stops the whole template after an empty range.
                    return Ok(());
                }
                for item in &items {
                    let mut nested = Vec::new();
                    find_in_nodes(body, item.as_ref(), &mut nested)?;
                    out.extend(nested.into_iter().map(|set| {
                        set.into_iter()
                            .map(|v| Cow::Owned(v.into_owned()))
                            .collect()
                    }));
                }
                match end {
                    Some(end) => {
                        // client-go emits the (empty) result of the {end} node, then goes on with the outer scope.
                        out.push(Vec::new());
                        i = end + 1;
                        continue;
                    }
                    None => return Ok(()),
                }
            }
        }
        let results = walk(vec![Cow::Borrowed(data)], node)?;
        out.push(results);
        i += 1;
    }
    Ok(())
}

fn list_has_identifier(list: &[Node], name: &str) -> bool {
    list.iter()
        .any(|n| matches!(n, Node::Identifier(id) if id == name))
}

/// Index of the top-level node closing the range opened just before `from`.
fn matching_end(nodes: &[Node], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, node) in nodes.iter().enumerate().skip(from) {
        if let Node::List(list) = node {
            if list_has_identifier(list, "range") {
                depth += 1;
            } else if list_has_identifier(list, "end") {
                if depth == 0 {
                    return Some(offset);
                }
                depth -= 1;
            }
        }
    }
    None
}

fn walk<'a>(input: Vec<Item<'a>>, node: &Node) -> Result<Vec<Item<'a>>, String> {
    match node {
        Node::List(nodes) => eval_list(input, nodes),
        Node::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
        Node::Field(name) => Ok(eval_field(input, name)),
        Node::Array(params) => eval_array(input, params),
        Node::Filter { left, right, op } => eval_filter(input, left, right, op),
        Node::Int(i) => Ok(input.iter().map(|_| Cow::Owned(Value::from(*i))).collect()),
        Node::Float(f) => Ok(input
            .iter()
            .map(|_| {
                Cow::Owned(
                    serde_json::Number::from_f64(*f)
                        .map(Value::Number)
                        .unwrap_or(Value::Null),
                )
            })
            .collect()),
        Node::Bool(b) => Ok(input.iter().map(|_| Cow::Owned(Value::Bool(*b))).collect()),
        Node::Wildcard => Ok(eval_wildcard(input)),
        Node::Recursive => Ok(eval_recursive(input)),
        Node::Union(lists) => {
            let mut result = Vec::new();
            for list in lists {
                result.extend(eval_list(input.clone(), list)?);
            }
            Ok(result)
        }
        Node::Identifier(name) => match name.as_str() {
            // Handled by find_in_nodes; inside an expression, range passes its input through.
            "range" => Ok(input),
            "end" => Ok(Vec::new()),
            _ => Err(format!("unrecognized identifier {name}")),
        },
    }
}

fn eval_list<'a>(input: Vec<Item<'a>>, nodes: &[Node]) -> Result<Vec<Item<'a>>, String> {
    let mut cur = input;
    for node in nodes {
        cur = walk(cur, node)?;
    }
    Ok(cur)
}

/// Looks up `key` in `item` (a map), keeping borrowed data borrowed.
fn child<'a>(item: &Item<'a>, key: &str) -> Option<Item<'a>> {
    match item {
        Cow::Borrowed(v) => v.as_object()?.get(key).map(Cow::Borrowed),
        Cow::Owned(v) => v.as_object()?.get(key).cloned().map(Cow::Owned),
    }
}

/// The children of a map (values) or list (elements).
fn children<'a>(item: &Item<'a>) -> Vec<Item<'a>> {
    match item {
        Cow::Borrowed(Value::Object(map)) => map.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(map)) => map.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(items)) => items.iter().cloned().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

fn eval_field<'a>(input: Vec<Item<'a>>, name: &str) -> Vec<Item<'a>> {
    input.iter().filter_map(|item| child(item, name)).collect()
}

fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn eval_array<'a>(input: Vec<Item<'a>>, params: &[Param; 3]) -> Result<Vec<Item<'a>>, String> {
    let mut result = Vec::new();
    for item in &input {
        if item.is_null() {
            continue;
        }
        let len = match item.as_ref() {
            Value::Array(items) => items.len() as i128,
            other => return Err(format!("{} is not array or slice", go_type(other))),
        };
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value += len;
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value += len;
        }
        if p[1].value != p[0].value {
            if p[0].value >= len || p[0].value < 0 {
                return Err(format!(
                    "array index out of bounds: index {}, length {len}",
                    p[0].value
                ));
            }
            if p[1].value > len || p[1].value < 0 {
                return Err(format!(
                    "array index out of bounds: index {}, length {len}",
                    p[1].value - 1
                ));
            }
            if p[0].value > p[1].value {
                return Err(format!(
                    "starting index {} is greater than ending index {}",
                    p[0].value, p[1].value
                ));
            }
        } else {
            return Ok(result);
        }
        let step = if p[2].known {
            if p[2].value <= 0 {
                return Err("step must be > 0".to_string());
            }
            p[2].value
        } else {
            1
        };
        let elements = children(item);
        let (from, to) = (p[0].value as usize, p[1].value as usize);
        let step = usize::try_from(step).unwrap_or(usize::MAX);
        result.extend(
            elements
                .into_iter()
                .skip(from)
                .take(to - from)
                .step_by(step),
        );
    }
    Ok(result)
}

fn eval_wildcard<'a>(input: Vec<Item<'a>>) -> Vec<Item<'a>> {
    let mut result = Vec::new();
    for item in &input {
        match item.as_ref() {
            Value::String(s) => result.extend(s.bytes().map(|b| Cow::Owned(Value::from(b)))),
            _ => result.extend(children(item)),
        }
    }
    result
}

fn eval_recursive<'a>(input: Vec<Item<'a>>) -> Vec<Item<'a>> {
    let mut result = Vec::new();
    for item in input {
        match item.as_ref() {
            Value::String(s) if !s.is_empty() => result.push(item),
            Value::Object(m) if !m.is_empty() => {
                let kids = children(&item);
                result.push(item);
                result.extend(eval_recursive(kids));
            }
            Value::Array(a) if !a.is_empty() => {
                let kids = children(&item);
                result.push(item);
                result.extend(eval_recursive(kids));
            }
            _ => {}
        }
    }
    result
}

fn eval_filter<'a>(
    input: Vec<Item<'a>>,
    left: &[Node],
    right: &[Node],
    op: &str,
) -> Result<Vec<Item<'a>>, String> {
    let mut results = Vec::new();
    for item in &input {
        let elements = match item.as_ref() {
            Value::Array(_) => children(item),
            other => {
                return Err(format!(
                    "{} is not array or slice and cannot be filtered",
                    go_text(other)
                ));
            }
        };
        for element in elements {
            let lefts = eval_list(vec![element.clone()], left);
            if op == "exists" {
                if lefts.is_ok_and(|l| !l.is_empty()) {
                    results.push(element);
                }
                continue;
            }
            let lefts = lefts?;
            let l = match lefts.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return Err("can only compare one element at a time".to_string()),
            };
            let rights = eval_list(vec![element.clone()], right)?;
            let r = match rights.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return Err("can only compare one element at a time".to_string()),
            };
            let pass = match op {
                "<" => less(&l, &r)?,
                ">" => !(less(&l, &r)? || equal(&l, &r)?),
                "==" => equal(&l, &r)?,
                "!=" => !equal(&l, &r)?,
                "<=" => less(&l, &r)? || equal(&l, &r)?,
                ">=" => !less(&l, &r)?,
                _ => return Err(format!("unrecognized filter operator {op}")),
            };
            if pass {
                results.push(element);
            }
        }
    }
    Ok(results)
}

/// A comparable scalar, as Go's text/template basicKind sees JSON values.
#[derive(Debug)]
enum Scalar<'v> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

fn scalar(value: &Value) -> Result<Scalar<'_>, String> {
    match value {
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(Scalar::Int(i)),
            None => Ok(Scalar::Float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Ok(Scalar::Str(s)),
        _ => Err("invalid type for comparison".to_string()),
    }
}

fn equal(a: &Value, b: &Value) -> Result<bool, String> {
    match (scalar(a)?, scalar(b)?) {
        (Scalar::Bool(x), Scalar::Bool(y)) => Ok(x == y),
        (Scalar::Int(x), Scalar::Int(y)) => Ok(x == y),
        (Scalar::Float(x), Scalar::Float(y)) => Ok(x == y),
        (Scalar::Str(x), Scalar::Str(y)) => Ok(x == y),
        _ => Err("incompatible types for comparison".to_string()),
    }
}

fn less(a: &Value, b: &Value) -> Result<bool, String> {
    match (scalar(a)?, scalar(b)?) {
        (Scalar::Bool(_), Scalar::Bool(_)) => Err("invalid type for comparison".to_string()),
        (Scalar::Int(x), Scalar::Int(y)) => Ok(x < y),
        (Scalar::Float(x), Scalar::Float(y)) => Ok(x < y),
        (Scalar::Str(x), Scalar::Str(y)) => Ok(x < y),
        _ => Err("incompatible types for comparison".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn pool() -> Value {
        json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {
                "name": "workers",
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "labels": {"kubernetes.io/os": "linux", "a.b": "dotted", "plain": "p"},
            },
            "spec": {"image": {"ref": "quay.io/example/os:latest"}, "rollout": {"maxUnavailable": 1}},
            "status": {
                "targetShortDigest": "abc123",
                "nodeCount": 3,
                "updatedCount": 2,
                "updatingCount": 1,
                "degradedCount": 0,
                "ratio": 0.5,
                "nothing": null,
                "conditions": [
                    {"type": "UpToDate", "status": "False", "reason": "Rolling"},
                    {"type": "Degraded", "status": "False", "reason": "AsExpected"},
                    {"type": "Idle", "status": "True", "reason": "Idle", "count": 2},
                ],
            },
        })
    }

    #[test]
    fn eval_table() {
        let obj = pool();
        let cases: Vec<(&str, Result<Vec<Value>, ()>)> = vec![
            // printer-column paths of our CRDs
            (".status.targetShortDigest", Ok(vec![json!("abc123")])),
            (".status.nodeCount", Ok(vec![json!(3)])),
            (".status.updatedCount", Ok(vec![json!(2)])),
            (".status.updatingCount", Ok(vec![json!(1)])),
            (".status.degradedCount", Ok(vec![json!(0)])),
            (
                r#".status.conditions[?(@.type=="UpToDate")].status"#,
                Ok(vec![json!("False")]),
            ),
            (
                ".metadata.creationTimestamp",
                Ok(vec![json!("2025-01-01T00:00:00Z")]),
            ),
            (".spec.desiredImage", Ok(vec![])),
            (".status.booted.image", Ok(vec![])),
            (
                r#".status.conditions[?(@.type=="Idle")].reason"#,
                Ok(vec![json!("Idle")]),
            ),
            (
                r#".status.conditions[?(@.type=="Missing")].status"#,
                Ok(vec![]),
            ),
            // braces
            ("{.metadata.name}", Ok(vec![json!("workers")])),
            (
                "{.metadata.name}/{.status.nodeCount}",
                Ok(vec![json!("workers"), json!("/"), json!(3)]),
            ),
            // bracket keys: client-go splits dots unless escaped
            ("['metadata']['name']", Ok(vec![json!("workers")])),
            (".metadata.labels['a.b']", Ok(vec![])),
            (r".metadata.labels['a\.b']", Ok(vec![json!("dotted")])),
            (r".metadata.labels.a\.b", Ok(vec![json!("dotted")])),
            (
                r".metadata.labels.kubernetes\.io/os",
                Ok(vec![json!("linux")]),
            ),
            (".metadata.labels['plain']", Ok(vec![json!("p")])),
            // indexes and slices
            (".status.conditions[0].type", Ok(vec![json!("UpToDate")])),
            (".status.conditions[-1].type", Ok(vec![json!("Idle")])),
            (
                ".status.conditions[*].type",
                Ok(vec![json!("UpToDate"), json!("Degraded"), json!("Idle")]),
            ),
            (
                ".status.conditions[0:2].type",
                Ok(vec![json!("UpToDate"), json!("Degraded")]),
            ),
            (
                ".status.conditions[::2].type",
                Ok(vec![json!("UpToDate"), json!("Idle")]),
            ),
            (
                ".status.conditions[1:].type",
                Ok(vec![json!("Degraded"), json!("Idle")]),
            ),
            (
                ".status.conditions[0,2].type",
                Ok(vec![json!("UpToDate"), json!("Idle")]),
            ),
            (".status.conditions[].type", Ok(vec![json!("UpToDate")])),
            (".status.conditions[5].type", Err(())),
            (".status.conditions[0:0].type", Ok(vec![])),
            (".status.conditions.type", Ok(vec![])),
            (".metadata[0]", Err(())),
            // wildcard and recursive descent
            (
                ".spec.image.*",
                Ok(vec![json!("quay.io/example/os:latest")]),
            ),
            ("..maxUnavailable", Ok(vec![json!(1)])),
            ("..ref", Ok(vec![json!("quay.io/example/os:latest")])),
            // filters
            (
                r#".status.conditions[?(@.type!="UpToDate")].type"#,
                Ok(vec![json!("Degraded"), json!("Idle")]),
            ),
            (
                ".status.conditions[?(@.count)].type",
                Ok(vec![json!("Idle")]),
            ),
            (
                ".status.conditions[?(@.count>1)].type",
                Ok(vec![json!("Idle")]),
            ),
            (".status.conditions[?(@.count<2)].type", Ok(vec![])),
            (
                ".status.conditions[?(@.count>=2)].type",
                Ok(vec![json!("Idle")]),
            ),
            (".status.conditions[?(@.count==2.0)].type", Err(())),
            (
                r#".status.conditions[?(@.type=='Degraded')].reason"#,
                Ok(vec![json!("AsExpected")]),
            ),
            (r#".status.conditions[?(@.reason=="a)b")].type"#, Ok(vec![])),
            (
                r#".status.conditions[?(@.type>"E")].type"#,
                Ok(vec![json!("UpToDate"), json!("Idle")]),
            ),
            (r#".status[?(@.type=="x")]"#, Err(())),
            // nulls and missing parents
            (".status.nothing", Ok(vec![Value::Null])),
            (".status.nothing.deeper", Ok(vec![])),
            (".missing.deeper[0]", Ok(vec![])),
            (".missing[?(@.a)]", Ok(vec![])),
            ("{@}", Ok(vec![obj.clone()])),
            // malformed
            (".status.conditions[", Err(())),
            (".status.conditions[?(@.type==\"x\"]", Err(())),
            ("{.a", Err(())),
            (".a{", Err(())),
            (".a b", Err(())),
            ("..a..b", Ok(vec![])),
            ("....a", Err(())),
            (".a[x]", Err(())),
            (".a[1:2:3:4]", Err(())),
            ("#", Err(())),
            (r#"{"unterminated}"#, Err(())),
            // range
            (
                "{range .status.conditions[*]}{.type},{end}",
                Ok(vec![
                    json!("UpToDate"),
                    json!(","),
                    json!("Degraded"),
                    json!(","),
                    json!("Idle"),
                    json!(","),
                ]),
            ),
            ("{end}", Err(())),
        ];
        for (path, want) in cases {
            let got = eval(path, &obj);
            match want {
                Ok(values) => assert_eq!(got, Ok(values), "path {path}"),
                Err(()) => assert!(got.is_err(), "path {path} should fail, got {got:?}"),
            }
        }
    }

    #[test]
    fn find_results_keeps_sets() {
        let obj = pool();
        assert_eq!(
            find_results("{.metadata.name}{.missing}", &obj),
            Ok(vec![vec![json!("workers")], vec![]])
        );
        assert_eq!(find_results(".missing", &obj), Ok(vec![vec![]]));
        assert!(validate(".status.conditions[?(@.type==\"UpToDate\")].status").is_ok());
        assert!(validate(".status[").is_err());
    }

    #[test]
    fn go_text_table() {
        let cases = vec![
            (json!("s"), "s"),
            (json!(5), "5"),
            (json!(-5), "-5"),
            (json!(1.5), "1.5"),
            (json!(100000.0), "100000"),
            (json!(1000000.0), "1e+06"),
            (json!(1234567.0), "1.234567e+06"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(5.0), "5"),
            (json!(true), "true"),
            (Value::Null, "<no value>"),
            (
                json!({"b": 1, "a": [1, "x", null]}),
                "map[a:[1 x <nil>] b:1]",
            ),
            (json!([]), "[]"),
            (json!(u64::MAX), "1.8446744073709552e+19"),
        ];
        for (value, want) in cases {
            assert_eq!(go_text(&value), want, "value {value}");
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[a-z.]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_path() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            Just(".".to_string()),
            Just("..".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just("[*]".to_string()),
            Just("[-1]".to_string()),
            Just("[0:2]".to_string()),
            Just("[?(@.a==\"x\")]".to_string()),
            Just("[?(@.a)]".to_string()),
            Just("[?(@.a<1)]".to_string()),
            Just("{".to_string()),
            Just("}".to_string()),
            Just("'".to_string()),
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("{range .a[*]}".to_string()),
            Just("{end}".to_string()),
            "[a-z]{1,3}".prop_map(|s| s),
            "-?[0-9]{1,20}".prop_map(|s| s),
            any::<char>().prop_map(|c| c.to_string()),
        ];
        prop::collection::vec(token, 0..12).prop_map(|t| t.concat())
    }

    proptest! {
        #[test]
        fn eval_never_panics(path in arb_path(), obj in arb_json()) {
            let _ = eval(&path, &obj);
        }

        #[test]
        fn eval_never_panics_on_any_string(path in ".{0,40}", obj in arb_json()) {
            let _ = eval(&path, &obj);
        }
    }
}
