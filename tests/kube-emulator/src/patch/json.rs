//! The two JSON patch formats: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

use serde_json::Value;

use super::{MAX_JSON_PATCH_OPERATIONS, MAX_OBJECT_DEPTH, PatchError, go_json_type};

pub(super) fn merge_patch(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::InvalidBody(format!("Invalid JSON Patch: {e}")))?;
    if !patch.is_object() {
        return Err(PatchError::InvalidBody(format!(
            "Invalid JSON Patch: a merge patch must be a JSON object, got {}",
            go_json_type(&patch)
        )));
    }
    let mut doc = live.clone();
    json_patch::merge(&mut doc, &patch);
    Ok(doc)
}

pub(super) fn json_patch_doc(live: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let parsed: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::InvalidBody(e.to_string()))?;
    let Value::Array(ops) = parsed else {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            go_json_type(&parsed)
        )));
    };
    if let Some(bad) = ops.iter().find(|op| !op.is_object()) {
        return Err(PatchError::InvalidBody(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_json_type(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_JSON_PATCH_OPERATIONS,
            got: ops.len(),
        });
    }
    let mut doc = live.clone();
    for (index, op) in ops.iter().enumerate() {
        let kind = match op.get("op") {
            Some(Value::String(s)) => s.as_str(),
            _ => "unknown",
        };
        let fail = |message: String| PatchError::OperationFailed {
            index,
            op: kind.to_string(),
            message,
        };
        let path = match op.get("path") {
            Some(Value::String(p)) => p.as_str(),
            _ => {
                return Err(fail(
                    "operation missing path field: missing value".to_string(),
                ));
            }
        };
        match kind {
            "test" => {
                let expected = op.get("value").unwrap_or(&Value::Null);
                match doc.pointer(path) {
                    Some(found) if found == expected => {}
                    None if expected.is_null() => {}
                    _ => {
                        return Err(fail(format!("testing value {path} failed: test failed")));
                    }
                }
            }
            "add" | "remove" | "replace" | "move" | "copy" => {
                let parsed: json_patch::PatchOperation = serde_json::from_value(op.clone())
                    .map_err(|e| fail(format!("invalid operation: {e}")))?;
                let from = match op.get("from") {
                    Some(Value::String(f)) => f.as_str(),
                    _ => "",
                };
                let added_depth = match kind {
                    "add" | "replace" => op.get("value").map_or(0, value_depth),
                    "move" | "copy" => doc.pointer(from).map_or(0, value_depth),
                    _ => 0,
                };
                if path.matches('/').count() + added_depth > MAX_OBJECT_DEPTH {
                    return Err(fail(format!(
                        "the patched object would be nested more than {MAX_OBJECT_DEPTH} levels deep"
                    )));
                }
                json_patch::patch_unsafe(&mut doc, std::slice::from_ref(&parsed))
                    .map_err(|e| fail(json_patch_message(kind, path, from, &e.kind)))?;
            }
            other => return Err(fail(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

/// Nesting depth of a value (scalars 0, `[]`/`{}` 1), computed without recursion.
pub(super) fn value_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Object(m) => {
                max = max.max(level + 1);
                stack.extend(m.values().map(|c| (c, level + 1)));
            }
            Value::Array(a) => {
                max = max.max(level + 1);
                stack.extend(a.iter().map(|c| (c, level + 1)));
            }
            _ => {}
        }
    }
    max
}

fn json_patch_message(
    kind: &str,
    path: &str,
    from: &str,
    err: &json_patch::PatchErrorKind,
) -> String {
    use json_patch::PatchErrorKind as K;
    match (kind, err) {
        (_, K::CannotMoveInsideItself) => {
            format!("move operation does not apply: cannot move {from} into its own child {path}")
        }
        ("move" | "copy", K::InvalidFromPointer) => {
            format!(
                "{kind} operation does not apply: doc is missing from path: {from}: missing value"
            )
        }
        ("move" | "copy", _) => format!(
            "{kind} operation does not apply: doc is missing destination path: {path}: missing value"
        ),
        ("replace", _) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        _ => format!(
            "{kind} operation does not apply: doc is missing path: \"{path}\": missing value"
        ),
    }
}
