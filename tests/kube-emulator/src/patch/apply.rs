//! Server-side apply, approximated (see the parent module): the applied configuration merged
//! into the live object, lists by their [`ListKind`].

use serde_json::{Map, Value};

use super::lists::{ListKind, ListSemantics};
use super::strategic::{Merger, keys_match};
use super::{PatchError, go_json_type, remove_key};

pub(super) fn server_side_apply(
    live: &Value,
    body: &[u8],
    lists: &dyn ListSemantics,
) -> Result<Value, PatchError> {
    let applied: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => serde_yaml_ng::from_slice(body)
            .map_err(|e| PatchError::InvalidBody(format!("error decoding YAML: {e}")))?,
    };
    if !applied.is_object() {
        return Err(PatchError::InvalidBody(format!(
            "error decoding YAML: the applied configuration must be an object, got {}",
            go_json_type(&applied)
        )));
    }
    let managed = applied.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null() && m.as_array().is_none_or(|a| !a.is_empty())) {
        return Err(PatchError::InvalidApply(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    for (field, what) in [("apiVersion", "version"), ("kind", "kind")] {
        let Some(expected) = live.get(field).and_then(Value::as_str) else {
            continue;
        };
        if expected.is_empty() {
            continue;
        }
        let specified = applied.get(field).and_then(Value::as_str).unwrap_or("");
        if specified != expected {
            return Err(PatchError::InvalidApply(format!(
                "Incorrect {what} specified in apply patch. Specified patch {what}: {specified}, expected: {expected}"
            )));
        }
    }
    let mut merger = Merger {
        lists,
        path: Vec::new(),
    };
    let base = if live.is_object() {
        live.clone()
    } else {
        Value::Object(Map::new())
    };
    merger.apply_value(Some(base), &applied)
}

impl Merger<'_> {
    fn apply_value(&mut self, live: Option<Value>, applied: &Value) -> Result<Value, PatchError> {
        match (live, applied) {
            (Some(Value::Object(mut lm)), Value::Object(am)) => {
                for (k, av) in am {
                    if av.is_null() {
                        remove_key(&mut lm, k);
                        continue;
                    }
                    let current = lm.get_mut(k.as_str()).map(Value::take);
                    let merged = self.with_field(k, |m| m.apply_value(current, av))?;
                    lm.insert(k.clone(), merged);
                }
                Ok(Value::Object(lm))
            }
            (_, Value::Object(_)) => self.apply_value(Some(Value::Object(Map::new())), applied),
            (Some(Value::Array(la)), Value::Array(aa)) => self.apply_list(la, aa),
            (_, Value::Array(aa)) => {
                let mut out = Vec::with_capacity(aa.len());
                for e in aa {
                    out.push(self.apply_value(None, e)?);
                }
                Ok(Value::Array(out))
            }
            (_, other) => Ok(other.clone()),
        }
    }

    fn apply_list(&mut self, live: Vec<Value>, applied: &[Value]) -> Result<Value, PatchError> {
        match self.list_kind() {
            ListKind::Atomic => self.apply_value(None, &Value::Array(applied.to_vec())),
            ListKind::Set => {
                let mut out = live;
                for e in applied {
                    if !out.contains(e) {
                        out.push(e.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            ListKind::Map(keys) => {
                let mut out = live;
                for e in applied {
                    if !e.is_object() {
                        return Err(PatchError::CannotApply(format!(
                            "{}: element {e} of an associative list is not an object",
                            self.path.join(".")
                        )));
                    }
                    match out.iter().position(|o| keys_match(o, e, &keys)) {
                        Some(i) => {
                            let current = out[i].take();
                            out[i] = self.apply_value(Some(current), e)?;
                        }
                        None => out.push(self.apply_value(None, e)?),
                    }
                }
                Ok(Value::Array(out))
            }
        }
    }
}
