use super::read::{decode_continue, encode_continue};
use super::*;

#[test]
fn continue_tokens_round_trip() {
    let token = encode_continue(42, "ns", "a.b-c");
    assert_eq!(
        decode_continue(&token),
        Some((42, "ns".into(), "a.b-c".into()))
    );
    assert_eq!(decode_continue("zz"), None);
    assert_eq!(decode_continue("abc"), None);
}

#[test]
fn routes() {
    let inner = Inner::new(100, 16);
    let r = |p: &str| match parse_route(&inner, p) {
        Route::Resource(rp) => format!(
            "{}|{}|{}|{}",
            rp.resource.plural,
            rp.namespace.unwrap_or_default(),
            rp.name.unwrap_or_default(),
            rp.subresource.unwrap_or_default()
        ),
        other => format!("{other:?}"),
    };
    assert_eq!(r("/api/v1/nodes"), "nodes|||");
    assert_eq!(r("/api/v1/nodes/n1/status"), "nodes||n1|status");
    assert_eq!(
        r("/api/v1/namespaces/default/pods/p/eviction"),
        "pods|default|p|eviction"
    );
    assert_eq!(r("/api/v1/pods"), "pods|||");
    assert_eq!(
        r("/api/v1/namespaces/kube-system"),
        "namespaces||kube-system|"
    );
    assert_eq!(r("/api/v1/namespaces/x/status"), "namespaces||x|status");
    assert_eq!(
        r("/apis/coordination.k8s.io/v1/namespaces/x/leases/l"),
        "leases|x|l|"
    );
    assert_eq!(
        r("/api/v1/pods/p"),
        "NotFound",
        "namespaced object without namespace"
    );
    assert_eq!(
        r("/api/v1/namespaces/x/nodes"),
        "NotFound",
        "cluster-scoped type in a namespace"
    );
    assert_eq!(r("/api/v1/secrets/s/status"), "NotFound");
    assert_eq!(r("/apis/nope/v1/things"), "NotFound");
    assert_eq!(r("/apis"), "Groups");
    assert_eq!(
        r("/openapi/v3/apis/policy/v1"),
        "OpenApiV3(\"policy\", \"v1\")"
    );
}
