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

#[test]
fn prints_an_image_timestamp_as_bootc_does() {
    let cases = [
        // Go (umoci, skopeo) trims trailing zeros; bootc prints nine digits.
        (
            "2026-11-28T06:21:16.99393043Z",
            "2026-11-28T06:21:16.993930430Z",
        ),
        ("2023-10-14T19:22:15.42Z", "2023-10-14T19:22:15.420Z"),
        ("2023-10-14T19:22:15.1234Z", "2023-10-14T19:22:15.123400Z"),
        ("2023-09-30T19:22:16Z", "2023-09-30T19:22:16Z"),
        ("2023-09-30T19:22:16.000Z", "2023-09-30T19:22:16Z"),
        ("2023-10-14T21:22:15+02:00", "2023-10-14T19:22:15Z"),
    ];
    for (created, printed) in cases {
        assert_eq!(
            bootc_timestamp(created).as_deref(),
            Some(printed),
            "{created}"
        );
    }
    assert_eq!(bootc_timestamp("yesterday"), None);
    assert_eq!(bootc_timestamp(""), None);
}
