use super::auth::credentials;
use super::session::{challenge_param, percent_encode};
use super::*;

#[test]
fn reads_auth_files_in_bootc_order() {
    let root = tempfile::tempdir().unwrap();
    assert!(
        credentials(root.path(), "127.0.0.1:5000", "x")
            .unwrap()
            .is_none()
    );
    let write = |rel: &str, body: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    write(
        "usr/lib/ostree/auth.json",
        r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#,
    );
    let c = credentials(root.path(), "127.0.0.1:5000", "x")
        .unwrap()
        .unwrap();
    assert_eq!(c.user_pass, "u1:p1");
    write(
        "run/ostree/auth.json",
        r#"{"auths":{"http://127.0.0.1:5000":{"username":"u2","password":"p2"}}}"#,
    );
    let c = credentials(root.path(), "127.0.0.1:5000", "x")
        .unwrap()
        .unwrap();
    assert_eq!(c.user_pass, "u2:p2");
    assert!(
        credentials(root.path(), "127.0.0.1:5001", "x")
            .unwrap()
            .is_none()
    );
    write("run/ostree/auth.json", "{not json");
    assert!(credentials(root.path(), "127.0.0.1:5000", "x").is_err());
}

#[test]
fn refuses_non_loopback_registries() {
    let err = HttpResolver::new("/nonexistent")
        .resolve("quay.io/example/os:1")
        .unwrap_err();
    assert!(err.to_string().contains("not on loopback"), "{err}");
}

#[test]
fn challenge_params() {
    let c = r#"Bearer realm="http://127.0.0.1:1/token",service="reg",scope="repository:a/b:pull""#;
    assert_eq!(
        challenge_param(c, "realm").unwrap(),
        "http://127.0.0.1:1/token"
    );
    assert_eq!(challenge_param(c, "scope").unwrap(), "repository:a/b:pull");
    assert_eq!(
        percent_encode("repository:a/b:pull"),
        "repository%3Aa%2Fb%3Apull"
    );
}
