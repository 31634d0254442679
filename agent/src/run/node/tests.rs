//! Versions of the BootcNode, compared for equality only.

use bootc_crds::node::BootcNode;

use super::Versions;

/// BootcNode `n1` at resourceVersion `rv`, its spec defaulted around a desired image.
fn at(rv: &str) -> BootcNode {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": "n1", "resourceVersion": rv},
        "spec": {"desiredImage": "registry.test/os@sha256:1"},
    }))
    .unwrap()
}

#[test]
fn what_the_watch_delivers_before_our_write_comes_back_is_older() {
    let mut v = Versions::default();
    v.delivered(&at("k"), false);
    // "b" would sort before "k": an order would call our own write the older one.
    v.wrote(&at("b"));
    assert!(v.is_older_than_our_write(&at("k")));
    assert!(v.is_older_than_our_write(&at("zzz")));
    assert!(!v.is_older_than_our_write(&at("b")));
    v.delivered(&at("b"), false);
    // From here on the watch delivers what came after.
    assert!(!v.is_older_than_our_write(&at("a")));
}

#[test]
fn a_write_the_watch_delivered_before_its_response_waits_for_nothing() {
    let mut v = Versions::default();
    v.delivered(&at("7"), false);
    v.delivered(&at("8"), false);
    v.wrote(&at("7"));
    assert!(!v.is_older_than_our_write(&at("8")));
}

#[test]
fn a_relist_ends_the_wait() {
    let mut v = Versions::default();
    v.wrote(&at("w"));
    v.delivered(&at("x"), true);
    assert!(!v.is_older_than_our_write(&at("x")));
}
