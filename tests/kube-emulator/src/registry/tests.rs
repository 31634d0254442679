use serde_json::json;

use super::*;
use crate::test_support::names_in;

#[test]
fn builtins_are_discoverable() {
    let r = ResourceRegistry::default();
    let core = r.api_resource_list("", "v1").unwrap();
    let names = names_in(&core["resources"]);
    for want in [
        "nodes",
        "nodes/status",
        "pods",
        "pods/status",
        "pods/eviction",
        "namespaces",
        "secrets",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}");
    }
    let groups = r.api_group_list();
    let gs = names_in(&groups["groups"]);
    assert!(gs.contains(&"coordination.k8s.io") && gs.contains(&"policy") && !gs.contains(&""));
    assert!(
        r.find("policy", "v1", "poddisruptionbudgets")
            .unwrap()
            .status_subresource
    );
}

#[test]
fn crds_register_and_unregister() {
    let mut r = ResourceRegistry::default();
    let crd = json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}}}]}
    });
    r.register_crd(&crd).unwrap();
    let t = r.find("example.com", "v1", "widgets").unwrap();
    assert!(!t.namespaced && t.status_subresource && t.schema().is_some());
    assert_eq!(t.qualified(), "widgets.example.com");
    assert!(r.api_group("example.com").is_some());
    r.unregister_crd("widgets.example.com");
    assert!(r.find("example.com", "v1", "widgets").is_none());
    let mut bad = crd.clone();
    bad["metadata"]["name"] = json!("wrong");
    assert!(
        r.register_crd(&bad)
            .unwrap_err()
            .starts_with("metadata.name")
    );
}
