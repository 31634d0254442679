//! The alert gate's credentials (`spec.health.alerts.credentialsSecretRef`), read from a
//! Secret's data: `username` and `password` for HTTP basic authentication, or `token` for
//! a bearer token. Nothing here ever prints a value: errors name keys only, and the
//! `Debug` form says which kind it is and nothing more.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use sha2::{Digest as _, Sha256};

/// How the gate authenticates to its URL.
#[derive(Clone)]
pub struct Credentials {
    kind: Kind,
    /// A hash of the kind and values, which keeps answers asked with different
    /// credentials apart without keeping the values as a key.
    pub(super) id: String,
}

#[derive(Clone)]
enum Kind {
    Basic { username: String, password: String },
    Bearer(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Basic { .. } => f.write_str("Credentials(basic, redacted)"),
            Kind::Bearer(_) => f.write_str("Credentials(bearer, redacted)"),
        }
    }
}

/// A key's value as text: UTF-8, white space around it dropped, not empty.
fn text<'a>(data: &'a BTreeMap<String, ByteString>, key: &str) -> Result<Option<&'a str>, String> {
    let Some(value) = data.get(key) else {
        return Ok(None);
    };
    let value = std::str::from_utf8(&value.0)
        .map_err(|_| format!("key {key:?} is not UTF-8 text"))?
        .trim();
    if value.is_empty() {
        return Err(format!("key {key:?} is empty"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("key {key:?} holds control characters"));
    }
    Ok(Some(value))
}

impl Credentials {
    /// The credentials in a Secret's `data`; the error names the keys, never a value.
    pub fn from_data(data: &BTreeMap<String, ByteString>) -> Result<Credentials, String> {
        let token = text(data, "token")?;
        let username = text(data, "username")?;
        let password = text(data, "password")?;
        let kind = match (token, username, password) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(
                    "holds both a token and a username or password: keep one kind".to_owned(),
                );
            }
            (Some(token), None, None) => Kind::Bearer(token.to_owned()),
            (None, Some(username), Some(password)) => {
                if username.contains(':') {
                    return Err(
                        "key \"username\" holds a ':', which basic authentication cannot carry"
                            .to_owned(),
                    );
                }
                Kind::Basic {
                    username: username.to_owned(),
                    password: password.to_owned(),
                }
            }
            (None, Some(_), None) => {
                return Err("has a username but no key \"password\"".to_owned());
            }
            (None, None, Some(_)) => {
                return Err("has a password but no key \"username\"".to_owned());
            }
            (None, None, None) => {
                return Err(
                    "has neither a key \"token\" nor keys \"username\" and \"password\"".to_owned(),
                );
            }
        };
        let mut hash = Sha256::new();
        match &kind {
            Kind::Basic { username, password } => {
                hash.update(b"basic\0");
                hash.update(username.as_bytes());
                hash.update(b"\0");
                hash.update(password.as_bytes());
            }
            Kind::Bearer(token) => {
                hash.update(b"bearer\0");
                hash.update(token.as_bytes());
            }
        }
        let id = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Credentials { kind, id })
    }

    /// `request` with the credentials (as a header marked sensitive).
    pub(super) fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.kind {
            Kind::Basic { username, password } => request.basic_auth(username, Some(password)),
            Kind::Bearer(token) => request.bearer_auth(token),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn basic_or_bearer_and_clear_errors_without_values() {
        let basic =
            Credentials::from_data(&data(&[("username", "alice"), ("password", "s3cret\n")]))
                .unwrap();
        let bearer = Credentials::from_data(&data(&[("token", "t0ken")])).unwrap();
        assert_ne!(basic.id, bearer.id);
        for shown in [format!("{basic:?}"), format!("{bearer:?}")] {
            for secret in ["alice", "s3cret", "t0ken"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&[], "neither"),
            (&[("username", "alice")], "no key \"password\""),
            (&[("password", "s3cret")], "no key \"username\""),
            (&[("token", "t0ken"), ("password", "s3cret")], "both"),
            (&[("token", "  ")], "\"token\" is empty"),
            (&[("username", "al:ice"), ("password", "s3cret")], "':'"),
        ];
        for (pairs, expected) in cases {
            let error = Credentials::from_data(&data(pairs)).unwrap_err();
            assert!(error.contains(expected), "{pairs:?}: {error}");
            for secret in ["alice", "s3cret", "t0ken", "al:ice"] {
                assert!(!error.contains(secret), "{error}");
            }
        }
    }
}
