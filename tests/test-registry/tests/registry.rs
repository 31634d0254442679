//! The test registry: pushes give new digests, auth is enforced, stop/restart, indexes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use test_registry::{Registry, Response, http};

const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// `GET` of a manifest path, accepting every manifest and index type, with `basic` auth.
fn get_manifest(host: &str, path: &str, basic: Option<(&str, &str)>) -> Response {
    http(host, "GET", path, &[("Accept", MANIFEST_ACCEPT)], basic).unwrap()
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn push_twice_gives_two_digests_and_the_tag_moves() {
    let reg = Registry::start().unwrap();
    let d1 = reg
        .push(
            "os/node",
            "stable",
            &[("org.opencontainers.image.version", "1")],
        )
        .unwrap();
    let d2 = reg
        .push(
            "os/node",
            "stable",
            &[("org.opencontainers.image.version", "1")],
        )
        .unwrap();
    assert!(is_digest(&d1) && is_digest(&d2), "{d1} {d2}");
    assert_ne!(d1, d2);
    let resp = get_manifest(&reg.host(), "/v2/os/node/manifests/stable", None);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("docker-content-digest"), Some(d2.as_str()));
    // The old digest is still there.
    let resp = get_manifest(&reg.host(), &format!("/v2/os/node/manifests/{d1}"), None);
    assert_eq!(resp.status, 200);
}

#[test]
fn auth_registry_refuses_anonymous_and_accepts_basic_auth() {
    let reg = Registry::start_with_auth("puller", "s3cret").unwrap();
    let digest = reg.push("os/node", "v1", &[]).unwrap();
    let path = format!("/v2/os/node/manifests/{digest}");
    let anon = get_manifest(&reg.host(), &path, None);
    assert_eq!(anon.status, 401);
    assert!(
        anon.header("www-authenticate")
            .is_some_and(|h| h.starts_with("Basic")),
        "{:?}",
        anon.headers
    );
    let wrong = get_manifest(&reg.host(), &path, Some(("puller", "nope")));
    assert_eq!(wrong.status, 401);
    let ok = get_manifest(&reg.host(), &path, reg.credentials());
    assert_eq!(ok.status, 200);
    assert!(reg.auth_json().contains(&reg.host()));
}

#[test]
fn stop_and_restart_keep_port_and_content() {
    let mut reg = Registry::start().unwrap();
    let digest = reg.push("r", "t", &[]).unwrap();
    let host = reg.host();
    reg.stop();
    assert!(!reg.is_running());
    assert!(http(&host, "GET", "/v2/", &[], None).is_err());
    reg.restart().unwrap();
    assert!(reg.is_running());
    assert_eq!(reg.host(), host);
    let resp = get_manifest(&host, &format!("/v2/r/manifests/{digest}"), None);
    assert_eq!(resp.status, 200);
}

#[test]
fn push_index_lists_both_architectures() {
    let reg = Registry::start().unwrap();
    let pushed = reg.push_index("multi", "v1", &[("k", "v")]).unwrap();
    assert!(is_digest(&pushed.index));
    assert_ne!(pushed.amd64, pushed.arm64);
    let resp = get_manifest(&reg.host(), "/v2/multi/manifests/v1", None);
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("docker-content-digest"),
        Some(pushed.index.as_str())
    );
    let body = String::from_utf8(resp.body).unwrap();
    assert!(
        body.contains(&pushed.amd64) && body.contains(&pushed.arm64),
        "{body}"
    );
}

#[test]
fn drop_kills_the_registry() {
    let reg = Registry::start().unwrap();
    let host = reg.host();
    drop(reg);
    assert!(http(&host, "GET", "/v2/", &[], None).is_err());
}
