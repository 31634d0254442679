//! Field paths in kube-apiserver's notation: `spec.items[2].name`, `spec.labels[key]`.

/// The path of property `name` under `base`.
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else {
        format!("{base}.{name}")
    }
}

/// The path of item `index` of the list at `base`.
pub(crate) fn index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

/// The path of entry `key` of the map (`additionalProperties`) at `base`.
pub(crate) fn key(base: &str, key: &str) -> String {
    format!("{base}[{key}]")
}

/// How OpenAPI messages name the field: `spec.x in body`, or `in body` at the root.
pub(crate) fn in_body(path: &str) -> String {
    if path.is_empty() {
        "in body".to_owned()
    } else {
        format!("{path} in body")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_apiserver_paths() {
        let spec = child("", "spec");
        let item = index(&child(&spec, "items"), 2);
        assert_eq!(child(&item, "name"), "spec.items[2].name");
        assert_eq!(key(&child(&spec, "labels"), "app"), "spec.labels[app]");
        assert_eq!(index("", 0), "[0]");
        assert_eq!(in_body(""), "in body");
        assert_eq!(in_body("spec.a"), "spec.a in body");
    }
}
