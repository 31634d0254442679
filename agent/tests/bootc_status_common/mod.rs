//! Helpers shared by the bootc status tests: bootc's fixtures and schemas, read where they are kept.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;

use serde_json::{Map, Value};

/// bootc's reference data, kept beside the workspace (read-only).
pub fn reference_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/reference/bootc"
    ))
}

/// Every file in `fixtures/`, sorted; listed from the directory so that a new fixture is
/// tested as soon as it is added.
pub fn fixture_names() -> Vec<String> {
    let dir = reference_dir().join("fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(
        names.len() >= 16,
        "expected bootc's fixtures in {}, found {names:?}",
        dir.display()
    );
    names
}

/// Reads one of the schemas (`host-v1.schema.json`, `host-v1.schema.2025-03.json`).
pub fn schema(name: &str) -> Value {
    let path = reference_dir().join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The current schema.
pub const SCHEMA: &str = "host-v1.schema.json";
/// The schema of March 2025.
pub const SCHEMA_2025_03: &str = "host-v1.schema.2025-03.json";

/// A validator for one schema, checking `format` (date-time) too.
pub fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema(name))
        .unwrap_or_else(|e| panic!("compile {name}: {e}"))
}

/// The validation errors of `doc`, one line each (empty when valid).
pub fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A fixture as the JSON bootc would print, and the paths where a YAML scalar had to be
/// read as the string the schema asks for (see [`coerce_to_schema`]).
pub fn fixture_json(name: &str) -> (Value, Vec<String>) {
    let path = reference_dir().join("fixtures").join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut value = if name.ends_with(".json") {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    } else {
        yaml_to_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let coerced = coerce_to_schema(&mut value, &schema(SCHEMA));
    (value, coerced)
}

/// The fixture as bytes of JSON, ready for `parse`.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    serde_json::to_vec(&fixture_json(name).0).unwrap()
}

/// Converts YAML to JSON the way serde represents enums: a tagged node `!tag value`
/// (bootc's fixtures write `signature: !ostreeRemote "fedora"`) becomes `{"tag": value}`,
/// which is what bootc prints in JSON.
pub fn yaml_to_json(text: &str) -> Result<Value, String> {
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    convert(yaml)
}

fn convert(y: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(&n).map_err(|e| e.to_string())?,
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            Value::Array(items.into_iter().map(convert).collect::<Result<_, _>>()?)
        }
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let Y::String(k) = k else {
                    return Err(format!("non-string key {k:?}"));
                };
                out.insert(k, convert(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            let tag = t.tag.to_string();
            let tag = tag.trim_start_matches('!').to_string();
            let mut out = Map::new();
            out.insert(tag, convert(t.value)?);
            Value::Object(out)
        }
    })
}

/// Reads YAML scalars as their destination type says, as bootc's own tests do when they
/// load these fixtures into bootc's structs with serde_yaml: a plain scalar such as
/// `version: 20231230.1` resolves to a YAML number, but the schema (and bootc's
/// `Option<String>`) makes it the string `"20231230.1"`. Where the schema allows a string
/// and no number, a number is turned into its decimal text. Returns the paths changed.
pub fn coerce_to_schema(doc: &mut Value, schema: &Value) -> Vec<String> {
    let mut changed = Vec::new();
    walk(doc, schema, schema, String::new(), &mut changed);
    changed
}

fn walk(v: &mut Value, node: &Value, root: &Value, path: String, changed: &mut Vec<String>) {
    let leaves = leaves(node, root, 0);
    match v {
        Value::Number(n) => {
            let allows = |t: &str| {
                leaves.iter().any(|l| match l.get("type") {
                    Some(Value::String(s)) => s == t,
                    Some(Value::Array(ts)) => ts.iter().any(|x| x == t),
                    _ => false,
                })
            };
            if allows("string") && !allows("number") && !allows("integer") {
                *v = Value::String(n.to_string());
                changed.push(path);
            }
        }
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let sub = leaves
                    .iter()
                    .find_map(|l| l.get("properties").and_then(|p| p.get(k)));
                if let Some(sub) = sub {
                    walk(child, sub, root, format!("{path}/{k}"), changed);
                }
            }
        }
        Value::Array(items) => {
            let sub = leaves.iter().find_map(|l| l.get("items"));
            if let Some(sub) = sub {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, sub, root, format!("{path}/{i}"), changed);
                }
            }
        }
        _ => {}
    }
}

/// The schema objects a value is checked against at `node`: `$ref`, `allOf`, `anyOf` and
/// `oneOf` followed (draft-07 `definitions` and 2020-12 `$defs` alike).
fn leaves<'s>(node: &'s Value, root: &'s Value, depth: usize) -> Vec<&'s Value> {
    assert!(depth < 32, "schema nests too deep");
    let mut out = vec![node];
    if let Some(Value::String(r)) = node.get("$ref") {
        let target = root
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("unresolved $ref {r}"));
        out.extend(leaves(target, root, depth + 1));
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            for b in branches {
                out.extend(leaves(b, root, depth + 1));
            }
        }
    }
    out
}

/// Every JSON pointer in `doc` except the root, in document order.
pub fn pointers(doc: &Value) -> Vec<String> {
    fn go(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.push(p.clone());
                    go(c, p, out);
                }
            }
            Value::Array(items) => {
                for (i, c) in items.iter().enumerate() {
                    let p = format!("{at}/{i}");
                    out.push(p.clone());
                    go(c, p, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(doc, String::new(), &mut out);
    out
}

/// A copy of `doc` with the node at `pointer` removed.
pub fn without(doc: &Value, pointer: &str) -> Value {
    let mut doc = doc.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let key = key.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent).unwrap() {
        Value::Object(m) => {
            m.remove(&key);
        }
        Value::Array(items) => {
            items.remove(key.parse::<usize>().unwrap());
        }
        _ => unreachable!(),
    }
    doc
}

/// A copy of `doc` with the node at `pointer` replaced by `with`.
pub fn replaced(doc: &Value, pointer: &str, with: Value) -> Value {
    let mut doc = doc.clone();
    *doc.pointer_mut(pointer).unwrap() = with;
    doc
}

/// True when every step of `pointer` is a property (or array item) that `schema` declares;
/// false when the path enters a key the schema does not know, where any value validates.
pub fn schema_declares(schema: &Value, pointer: &str) -> bool {
    let mut node = schema;
    for step in pointer.split('/').skip(1) {
        let step = step.replace("~1", "/").replace("~0", "~");
        let next = leaves(node, schema, 0).into_iter().find_map(|l| {
            l.get("properties")
                .and_then(|p| p.get(&step))
                .or_else(|| step.parse::<usize>().ok().and_then(|_| l.get("items")))
        });
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    true
}

/// A copy of `v` without the object entries, at any depth, that `drop(key, value)` picks.
pub fn pruned(v: &Value, drop: &dyn Fn(&str, &Value) -> bool) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !drop(k, v))
                .map(|(k, v)| (k.clone(), pruned(v, drop)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| pruned(i, drop)).collect()),
        other => other.clone(),
    }
}
