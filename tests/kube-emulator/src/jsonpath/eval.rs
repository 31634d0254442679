//! The JSONPath evaluator: client-go's jsonpath.go over JSON values, with `AllowMissingKeys(true)`.

use std::borrow::Cow;

use serde_json::Value;

use super::go_text;
use super::parser::{Param, PathNode};

pub(super) type Item<'a> = Cow<'a, Value>;

/// Evaluates top-level nodes, handling `{range …}`/`{end}` blocks like client-go's FindResults.
pub(super) fn find_in_nodes<'a>(
    nodes: &[PathNode],
    data: &'a Value,
    out: &mut Vec<Vec<Item<'a>>>,
) -> Result<(), String> {
    let mut i = 0;
    while i < nodes.len() {
        let node = &nodes[i];
        if let PathNode::List(list) = node {
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

fn list_has_identifier(list: &[PathNode], name: &str) -> bool {
    list.iter()
        .any(|n| matches!(n, PathNode::Identifier(id) if id == name))
}

/// Index of the top-level node closing the range opened just before `from`.
fn matching_end(nodes: &[PathNode], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, node) in nodes.iter().enumerate().skip(from) {
        if let PathNode::List(list) = node {
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

fn walk<'a>(input: Vec<Item<'a>>, node: &PathNode) -> Result<Vec<Item<'a>>, String> {
    match node {
        PathNode::List(nodes) => eval_list(input, nodes),
        PathNode::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
        PathNode::Field(name) => Ok(eval_field(input, name)),
        PathNode::Array(params) => eval_array(input, params),
        PathNode::Filter { left, right, op } => eval_filter(input, left, right, op),
        PathNode::Int(i) => Ok(input.iter().map(|_| Cow::Owned(Value::from(*i))).collect()),
        PathNode::Float(f) => Ok(input
            .iter()
            .map(|_| {
                Cow::Owned(
                    serde_json::Number::from_f64(*f)
                        .map(Value::Number)
                        .unwrap_or(Value::Null),
                )
            })
            .collect()),
        PathNode::Bool(b) => Ok(input.iter().map(|_| Cow::Owned(Value::Bool(*b))).collect()),
        PathNode::Wildcard => Ok(eval_wildcard(input)),
        PathNode::Recursive => Ok(eval_recursive(input)),
        PathNode::Union(lists) => {
            let mut result = Vec::new();
            for list in lists {
                result.extend(eval_list(input.clone(), list)?);
            }
            Ok(result)
        }
        PathNode::Identifier(name) => match name.as_str() {
            // Handled by find_in_nodes; inside an expression, range passes its input through.
            "range" => Ok(input),
            "end" => Ok(Vec::new()),
            _ => Err(format!("unrecognized identifier {name}")),
        },
    }
}

fn eval_list<'a>(input: Vec<Item<'a>>, nodes: &[PathNode]) -> Result<Vec<Item<'a>>, String> {
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
    left: &[PathNode],
    right: &[PathNode],
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
