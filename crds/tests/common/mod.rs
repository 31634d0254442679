//! Helpers shared by the crate's integration tests: the committed CRDs and samples.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;

pub const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A YAML file of the crate, as JSON.
pub fn load_yaml(relative: &str) -> Value {
    let path = crate_dir().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The openAPIV3Schema of a committed CRD ("bootcnodepools" or "bootcnodes").
pub fn committed_schema(plural: &str) -> Value {
    let crd = load_yaml(&format!("node.bootc.dev_{plural}.yaml"));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// What kube-apiserver would store for `object` under the committed CRD, or the field
/// errors it would answer with (as "path: message" lines).
pub fn admit(plural: &str, object: &Value) -> Result<Value, Vec<String>> {
    apischema::admit(&committed_schema(plural), object, None)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

/// Fields of `object` the committed CRD would prune (unknown to the schema).
pub fn pruned(plural: &str, object: &Value) -> Vec<String> {
    apischema::prune(&committed_schema(plural), object).1
}

/// Sets `value` at a dotted path (creating objects on the way).
pub fn set(object: &mut Value, path: &str, value: Value) {
    let mut here = object;
    let parts: Vec<&str> = path.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        here = here
            .as_object_mut()
            .expect("object on the path")
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    here[parts[parts.len() - 1]] = value;
}

/// Removes the field at a dotted path.
pub fn remove(object: &mut Value, path: &str) {
    let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut here = object;
    for part in parent.split('.').filter(|p| !p.is_empty()) {
        here = &mut here[part];
    }
    here.as_object_mut().expect("object").remove(last);
}
