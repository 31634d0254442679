#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::cache::backoff;
use super::registry::version_label;
use super::*;

#[test]
fn backoff_grows_and_is_capped_by_the_interval() {
    let hour = Duration::from_secs(3600);
    assert_eq!(backoff(hour, 1), Duration::from_secs(30));
    assert_eq!(backoff(hour, 2), Duration::from_secs(60));
    assert_eq!(backoff(hour, 3), Duration::from_secs(120));
    assert_eq!(backoff(hour, 40), hour);
    assert_eq!(
        backoff(Duration::from_secs(300), 5),
        Duration::from_secs(300)
    );
    assert_eq!(
        backoff(Duration::from_millis(10), 1),
        Duration::from_secs(1)
    );
    // The doubling stops at 30 s · 2^16, however long the interval.
    let year = Duration::from_secs(365 * 86400);
    assert_eq!(backoff(year, 17), Duration::from_secs(30 << 16));
    assert_eq!(backoff(year, 40), Duration::from_secs(30 << 16));
}

#[test]
fn unauthorized_messages() {
    let e = ResolveError::Unauthorized {
        registry: "quay.io".into(),
        repository: "quay.io/a/b".into(),
        with_credentials: true,
        secret: Some("ns/pull".into()),
    };
    assert_eq!(
        e.to_string(),
        "registry quay.io refused the credentials of pull secret ns/pull for quay.io/a/b"
    );
    let e = ResolveError::Unauthorized {
        registry: "quay.io".into(),
        repository: "quay.io/a/b".into(),
        with_credentials: false,
        secret: None,
    };
    assert!(e.to_string().contains("set spec.pullSecretRef"));
}

#[test]
fn version_label_from_config() {
    let cfg = r#"{"architecture":"amd64","config":{"Labels":{"org.opencontainers.image.version":"42.1"}}}"#;
    assert_eq!(version_label(cfg).as_deref(), Some("42.1"));
    assert_eq!(version_label(r#"{"config":{}}"#), None);
}

#[test]
fn pull_secrets_name_docker_hub_as_image_references_do() {
    assert_eq!(
        bootc_pool_common::pull_secret::DOCKER_HUB,
        bootc_crds::image_ref::DEFAULT_REGISTRY
    );
    let json = br#"{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}"#;
    let creds = parse_pull_secret(json).unwrap();
    assert!(
        creds
            .for_registry(bootc_crds::image_ref::DEFAULT_REGISTRY)
            .is_some()
    );
    assert!(secret_hash(json).starts_with("sha256:"));
}
