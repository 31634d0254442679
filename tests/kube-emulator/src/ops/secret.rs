//! Secrets as kube-apiserver keeps them: `stringData` is write-only, each of its values
//! stored base64-encoded under `data` (over a value of the same key there), and never
//! returned.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::patch::go_json_type;
use crate::registry::ResourceType;

use super::ApiError;

/// Moves a core/v1 Secret's `stringData` into `data`; a value that is not a string is
/// refused as kube-apiserver refuses it (a bad request: it cannot be decoded).
pub(super) fn merge_string_data(t: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    if !(t.group.is_empty() && t.plural == "secrets") {
        return Ok(());
    }
    let Some(map) = object.as_object_mut() else {
        return Ok(());
    };
    let Some(strings) = map.remove("stringData") else {
        return Ok(());
    };
    let strings = match strings {
        Value::Null => return Ok(()),
        Value::Object(s) => s,
        other => {
            return Err(ApiError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal {} into Go struct field Secret.stringData of type map[string]string",
                go_json_type(&other)
            )));
        }
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if data.is_null() {
        *data = Value::Object(Map::new());
    }
    let Some(data) = data.as_object_mut() else {
        return Ok(());
    };
    for (key, value) in strings {
        let Value::String(text) = value else {
            return Err(ApiError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal {} into Go struct field Secret.stringData of type string",
                go_json_type(&value)
            )));
        };
        data.insert(key, Value::String(STANDARD.encode(text.as_bytes())));
    }
    Ok(())
}
