#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE};

use super::*;

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

#[test]
fn base64_round_trips() {
    for s in ["", "a", "ab", "abc", "abcd", "user:p@ss:w0rd", "ünïcode:x"] {
        assert_eq!(decode_base64(&b64(s)).unwrap(), s.as_bytes(), "{s}");
        assert_eq!(
            decode_base64(b64(s).trim_end_matches('=')).unwrap(),
            s.as_bytes()
        );
    }
    assert!(decode_base64("a").is_none());
    assert!(decode_base64("ab!d").is_none());
}

#[test]
fn base64_is_lenient_as_auth_fields_need() {
    // The URL-safe alphabet, padded or not, and surrounding white space.
    let bytes = [0xfb_u8, 0xff, 0xbf, b':', b'x'];
    let url = URL_SAFE.encode(bytes);
    assert!(url.contains('-') && url.contains('_'), "{url}");
    assert_eq!(decode_base64(&url).unwrap(), bytes);
    assert_eq!(decode_base64(url.trim_end_matches('=')).unwrap(), bytes);
    assert_eq!(
        decode_base64(&format!(" {} \n", b64("u:p"))).unwrap(),
        b"u:p"
    );
    // Unused bits set in the last character are ignored.
    assert_eq!(decode_base64("YR").unwrap(), b"a");
    // Padding only at the end.
    assert!(decode_base64("YQ==YQ==").is_none());
}

#[test]
fn parses_auth_and_username_password() {
    let json = format!(
        r#"{{"auths":{{"quay.io":{{"auth":"{}"}},"127.0.0.1:5000":{{"username":"bob","password":"pw:with:colons"}}}}}}"#,
        b64("alice:s3cr3t:x")
    );
    let creds = parse_pull_secret(json.as_bytes()).unwrap();
    let q = creds.for_registry("quay.io").unwrap();
    assert_eq!((q.username(), q.password()), ("alice", "s3cr3t:x"));
    let l = creds.for_registry("127.0.0.1:5000").unwrap();
    assert_eq!((l.username(), l.password()), ("bob", "pw:with:colons"));
    assert!(creds.for_registry("ghcr.io").is_none());
    assert!(creds.for_registry("127.0.0.1:5001").is_none());
}

#[test]
fn docker_hub_aliases() {
    for key in [
        "index.docker.io",
        "https://index.docker.io/v1/",
        "registry-1.docker.io",
        "docker.io",
    ] {
        let json = format!(r#"{{"auths":{{"{key}":{{"auth":"{}"}}}}}}"#, b64("u:p"));
        let creds = parse_pull_secret(json.as_bytes()).unwrap();
        let c = creds.for_registry("docker.io").expect(key);
        assert_eq!(c.username(), "u");
        assert!(creds.for_registry("index.docker.io").is_some(), "{key}");
    }
    let json = format!(
        r#"{{"auths":{{"https://myreg.example:8443/some/path":{{"auth":"{}"}}}}}}"#,
        b64("u:p")
    );
    let creds = parse_pull_secret(json.as_bytes()).unwrap();
    assert!(creds.for_registry("myreg.example:8443").is_some());
}

#[test]
fn errors_are_clear_and_never_contain_credentials() {
    let e = parse_pull_secret(b"{\"auths\": {\"x\": {\"auth\": \"hunter2").unwrap_err();
    assert!(matches!(e, SecretError::NotJson(_)));
    assert!(
        e.to_string().starts_with(".dockerconfigjson is not JSON"),
        "{e}"
    );
    assert!(!e.to_string().contains("hunter2"), "{e}");

    let e = parse_pull_secret(br#"{"credHelpers":{}}"#).unwrap_err();
    assert_eq!(e.to_string(), ".dockerconfigjson has no auths object");

    // Valid base64 without a colon: the decoded secret must not leak.
    let json = format!(
        r#"{{"auths":{{"quay.io":{{"auth":"{}"}}}}}}"#,
        b64("topsecretnocolon")
    );
    let e = parse_pull_secret(json.as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), "auth for quay.io is not base64 user:pass");
    assert!(!format!("{e:?}").contains("topsecret"));

    let e = parse_pull_secret(br#"{"auths":{"quay.io":{"auth":"not*base64!"}}}"#).unwrap_err();
    assert_eq!(e.to_string(), "auth for quay.io is not base64 user:pass");
    assert!(!format!("{e:?}").contains("base64!"));

    let e = parse_pull_secret(br#"{"auths":{"quay.io":{"identitytoken":"tok"}}}"#).unwrap_err();
    assert!(matches!(e, SecretError::NoCredentials { .. }), "{e}");
    assert!(!e.to_string().contains("tok\""));

    let e = parse_pull_secret(br#"{"auths":{"quay.io":"u:p"}}"#).unwrap_err();
    assert!(matches!(e, SecretError::EntryNotObject { .. }));
}

#[test]
fn debug_redacts_passwords() {
    let json = format!(
        r#"{{"auths":{{"quay.io":{{"auth":"{}"}}}}}}"#,
        b64("alice:VERYSECRET")
    );
    let creds = parse_pull_secret(json.as_bytes())
        .unwrap()
        .with_source("ns", "pull");
    let dbg = format!("{creds:?}");
    assert!(!dbg.contains("VERYSECRET"), "{dbg}");
    assert!(dbg.contains("<redacted>"), "{dbg}");
    let one = creds.for_registry("quay.io").unwrap();
    assert_eq!(one.source(), Some("ns/pull"));
    let dbg = format!("{one:?} {one:#?}");
    assert!(!dbg.contains("VERYSECRET"), "{dbg}");
}

#[test]
fn secret_hash_is_prefixed_sha256() {
    let h = secret_hash(b"abc");
    assert_eq!(
        h,
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(h.len() <= 128);
    assert_ne!(secret_hash(b"abc"), secret_hash(b"abd"));
}

#[test]
fn fingerprints_tell_credentials_apart_without_showing_them() {
    let a = Credentials::new("u", "secret");
    assert_eq!(
        a.fingerprint(),
        Credentials::new("u", "secret").fingerprint()
    );
    assert_ne!(
        a.fingerprint(),
        Credentials::new("u", "other").fingerprint()
    );
    // The separator keeps user "ab" with password "c" apart from "a" with "bc".
    assert_ne!(
        Credentials::new("ab", "c").fingerprint(),
        Credentials::new("a", "bc").fingerprint()
    );
    assert!(!a.fingerprint().contains("secret"));
    assert_eq!(a.fingerprint().len(), 64);
}
