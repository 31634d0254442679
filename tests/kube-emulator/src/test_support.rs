//! What the crate's unit tests share.

use serde_json::Value;

/// The `name` of every object in the JSON array `list` (a discovery document's resources
/// or groups, an operation's parameters), in order.
pub(crate) fn names_in(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}
