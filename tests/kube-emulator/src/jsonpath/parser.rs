//! The JSONPath parser: a transcription of client-go's parser.go, iterative where client-go recurses.

#[derive(Debug, Clone, PartialEq)]
pub(super) enum PathNode {
    List(Vec<PathNode>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<PathNode>,
        right: Vec<PathNode>,
        op: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<PathNode>>),
    Identifier(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Param {
    pub(super) value: i128,
    pub(super) known: bool,
    pub(super) derived: bool,
}

struct PathParser {
    input: Vec<char>,
    pos: usize,
    start: usize,
    width: usize,
}

const EOF: char = '\u{FFFF}';

/// Parses a template into its top-level nodes (text and action lists).
pub(super) fn parse_template(text: &str) -> Result<Vec<PathNode>, String> {
    let mut p = PathParser {
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
                    root.push(PathNode::Text(p.consume()));
                }
                return Ok(root);
            }
        }
        if p.pos > p.start {
            root.push(PathNode::Text(p.consume()));
        }
        // parseLeftDelim
        p.pos += 1;
        p.consume();
        let mut list = Vec::new();
        p.parse_inside_action(&mut list)?;
        root.push(PathNode::List(list));
    }
}

/// client-go's parseAction: parses `{text}` and returns the nodes of its first action.
fn parse_action(text: &str) -> Result<Vec<PathNode>, String> {
    let root = parse_template(&format!("{{{text}}}"))?;
    match root.into_iter().next() {
        Some(PathNode::List(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

impl PathParser {
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
    fn parse_inside_action(&mut self, cur: &mut Vec<PathNode>) -> Result<(), String> {
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
                if matches!(cur.last(), Some(PathNode::Recursive)) {
                    return Err("invalid multiple recursive descent".to_string());
                }
                self.pos += 2;
                self.consume();
                cur.push(PathNode::Recursive);
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

    fn parse_identifier(&mut self, cur: &mut Vec<PathNode>) {
        loop {
            let r = self.next();
            if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        match value.as_str() {
            "true" => cur.push(PathNode::Bool(true)),
            "false" => cur.push(PathNode::Bool(false)),
            _ => cur.push(PathNode::Identifier(value)),
        }
    }

    fn parse_number(&mut self, cur: &mut Vec<PathNode>) -> Result<(), String> {
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
            cur.push(PathNode::Int(i));
            return Ok(());
        }
        if value
            .chars()
            .all(|c| c.is_ascii_digit() || "+-.".contains(c))
            && value.chars().any(|c| c.is_ascii_digit())
            && let Ok(f) = value.parse::<f64>()
        {
            cur.push(PathNode::Float(f));
            return Ok(());
        }
        Err(format!("cannot parse number {value}"))
    }

    fn parse_array(&mut self, cur: &mut Vec<PathNode>) -> Result<(), String> {
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
            cur.push(PathNode::Union(union));
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
        cur.push(PathNode::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<PathNode>) -> Result<(), String> {
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
                cur.push(PathNode::Filter {
                    left,
                    right: Vec::new(),
                    op: "exists".to_string(),
                });
            }
            Some((left, op, right)) => {
                let left = parse_action(&left)?;
                let right = parse_action(&right)?;
                cur.push(PathNode::Filter { left, right, op });
            }
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<PathNode>, end: char) -> Result<(), String> {
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
        cur.push(PathNode::Text(s));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<PathNode>) {
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
            cur.push(PathNode::Wildcard);
        } else {
            cur.push(PathNode::Field(value.replace('\\', "")));
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
