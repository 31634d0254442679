//! One conversation with one registry: authentication challenges (basic, bearer
//! tokens), redirects to loopback hosts, and error messages as bootc words them.

use std::time::Duration;

use serde_json::Value;

use super::Manifest;
use super::auth::BasicAuth;
use crate::Error;
use crate::http::{self, HttpResponse};
use crate::reference::{Reference, is_sha256_digest};

/// The stand-in's requests say who they are, as containers-image's do.
fn user_agent() -> (&'static str, String) {
    ("User-Agent", "bootc-standin".to_owned())
}

/// One conversation with one registry, remembering a bearer token once it has one.
pub(super) struct Session<'a> {
    pub(super) image: &'a str,
    pub(super) authority: String,
    pub(super) creds: Option<BasicAuth>,
    pub(super) auth_header: Option<String>,
    pub(super) timeout: Duration,
}

/// Parameters of a `WWW-Authenticate` challenge.
pub(super) fn challenge_param(challenge: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=\"");
    let start = challenge.find(&pat)? + pat.len();
    let end = challenge[start..].find('"')? + start;
    Some(challenge[start..end].to_owned())
}

pub(super) fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The registry's own error text (`{"errors":[{"code","message"}]}`), if any.
fn registry_message(resp: &HttpResponse) -> String {
    serde_json::from_slice::<Value>(&resp.body)
        .ok()
        .and_then(|v| {
            let e = v.get("errors")?.get(0)?;
            let code = e.get("code").and_then(Value::as_str).unwrap_or_default();
            let msg = e.get("message").and_then(Value::as_str).unwrap_or_default();
            Some(format!("{}: {msg}", code.to_ascii_lowercase()))
        })
        .unwrap_or_default()
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

impl Session<'_> {
    pub(super) fn err(&self, message: String) -> Error {
        Error::Pull {
            image: self.image.to_owned(),
            message,
        }
    }

    fn send(&self, authority: &str, path: &str, accept: &str) -> Result<HttpResponse, Error> {
        let mut headers = vec![("Accept", accept.to_owned()), user_agent()];
        if let Some(a) = &self.auth_header {
            headers.push(("Authorization", a.clone()));
        }
        http::request("GET", authority, path, &headers, &[], self.timeout).map_err(|e| {
            self.err(format!(
                "pinging container registry {authority}: Get \"http://{authority}{path}\": {e}"
            ))
        })
    }

    /// GET `path`, answering one authentication challenge and following redirects to
    /// loopback hosts.
    pub(super) fn get(
        &mut self,
        path: &str,
        accept: &str,
        what: &str,
    ) -> Result<HttpResponse, Error> {
        let mut resp = self.send(&self.authority.clone(), path, accept)?;
        if resp.status == 401 && self.auth_header.is_none() {
            let challenge = resp
                .header("www-authenticate")
                .unwrap_or_default()
                .to_owned();
            if let Some(creds) = self.creds.clone() {
                let lower = challenge.to_ascii_lowercase();
                if lower.starts_with("basic") {
                    self.auth_header = Some(format!(
                        "Basic {}",
                        http::base64_encode(creds.user_pass.as_bytes())
                    ));
                } else if lower.starts_with("bearer") {
                    self.auth_header = Some(self.bearer(&challenge, &creds)?);
                }
                if self.auth_header.is_some() {
                    resp = self.send(&self.authority.clone(), path, accept)?;
                }
            }
        }
        let mut hops = 0;
        while matches!(resp.status, 301 | 302 | 303 | 307 | 308) && hops < 5 {
            hops += 1;
            let location = resp.header("location").unwrap_or_default().to_owned();
            if let Some(rest) = location.strip_prefix("http://") {
                let (authority, p) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let r = Reference {
                    registry: authority.to_owned(),
                    repository: "x".into(),
                    tag: None,
                    digest: None,
                };
                if !r.is_loopback() {
                    return Err(self.err(format!(
                        "{what}: redirected to {location}, which is not a loopback address"
                    )));
                }
                let p = if p.is_empty() { "/" } else { p };
                resp = self.send(authority, p, accept)?;
            } else if location.starts_with('/') {
                resp = self.send(&self.authority.clone(), &location, accept)?;
            } else {
                return Err(self.err(format!("{what}: cannot follow redirect to {location:?}")));
            }
        }
        if resp.status == 200 {
            return Ok(resp);
        }
        Err(self.err(self.refusal(&resp, what)))
    }

    /// GET manifest `reference` (a tag or digest) of `r`'s repository; also returns what was
    /// read (`reading manifest REF in REGISTRY/REPO`), for messages.
    pub(super) fn get_manifest(
        &mut self,
        r: &Reference,
        reference: &str,
    ) -> Result<(HttpResponse, String), Error> {
        let what = format!(
            "reading manifest {reference} in {}/{}",
            r.registry, r.repository
        );
        let resp = self.get(
            &format!("/v2/{}/manifests/{reference}", r.repository),
            super::ACCEPT,
            &what,
        )?;
        Ok((resp, what))
    }

    /// What a registry's answer other than 200 means, as bootc would say it.
    fn refusal(&self, resp: &HttpResponse, what: &str) -> String {
        let mut message = format!("{what}: ");
        let reg = registry_message(resp);
        if reg.is_empty() {
            message.push_str(match resp.status {
                401 => "unauthorized: authentication required",
                404 => "not found",
                429 => "toomanyrequests: too many requests",
                _ => "unexpected answer",
            });
        } else {
            message.push_str(&reg);
        }
        message.push_str(&format!(" (HTTP {} {})", resp.status, reason(resp.status)));
        if resp.status == 401 {
            match &self.creds {
                None => message.push_str(&format!(
                    "; no credentials for {} in /run/ostree/auth.json, /etc/ostree/auth.json or /usr/lib/ostree/auth.json",
                    self.authority
                )),
                Some(c) => message.push_str(&format!(
                    "; the registry refused the credentials from {}",
                    c.source.display()
                )),
            }
        }
        message
    }

    fn bearer(&self, challenge: &str, creds: &BasicAuth) -> Result<String, Error> {
        let realm = challenge_param(challenge, "realm")
            .ok_or_else(|| self.err(format!("bearer challenge without realm: {challenge}")))?;
        let rest = realm.strip_prefix("http://").ok_or_else(|| {
            self.err(format!("token realm {realm} is not plain HTTP on loopback"))
        })?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut query = Vec::new();
        for key in ["service", "scope"] {
            if let Some(v) = challenge_param(challenge, key) {
                query.push(format!("{key}={}", percent_encode(&v)));
            }
        }
        let path = if query.is_empty() {
            path.to_owned()
        } else {
            format!(
                "{}?{}",
                if path.is_empty() { "/" } else { path },
                query.join("&")
            )
        };
        let basic = format!("Basic {}", http::base64_encode(creds.user_pass.as_bytes()));
        let resp = http::request(
            "GET",
            authority,
            &path,
            &[("Authorization", basic), user_agent()],
            &[],
            self.timeout,
        )
        .map_err(|e| self.err(format!("fetching a token from {realm}: {e}")))?;
        if resp.status != 200 {
            return Err(self.err(format!(
                "fetching a token from {realm}: HTTP {} {}",
                resp.status,
                reason(resp.status)
            )));
        }
        let v: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| self.err(format!("token answer from {realm}: {e}")))?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(Value::as_str)
            .ok_or_else(|| self.err(format!("token answer from {realm} has no token")))?;
        Ok(format!("Bearer {token}"))
    }
}

impl Session<'_> {
    /// A response body as JSON; `kind` names the document in the error.
    pub(super) fn json(&self, resp: &HttpResponse, what: &str, kind: &str) -> Result<Value, Error> {
        serde_json::from_slice(&resp.body)
            .map_err(|e| self.err(format!("{what}: {kind} is not JSON: {e}")))
    }

    /// The image config `manifest` points to.
    pub(super) fn config(&mut self, r: &Reference, manifest: &Manifest) -> Result<Value, Error> {
        let config_digest = manifest
            .doc
            .get("config")
            .and_then(|c| c.get("digest"))
            .and_then(Value::as_str)
            .filter(|d| is_sha256_digest(d))
            .ok_or_else(|| self.err(format!("{}: manifest has no config digest", manifest.what)))?
            .to_owned();
        let what = format!(
            "reading blob {config_digest} in {}/{}",
            r.registry, r.repository
        );
        let resp = self.get(
            &format!("/v2/{}/blobs/{config_digest}", r.repository),
            "application/vnd.oci.image.config.v1+json, application/json, */*",
            &what,
        )?;
        self.json(&resp, &what, "image config")
    }
}
