//! A loopback `docker-registry` (Debian's distribution 2.x) that keeps its access log, for
//! real-bootc nodes: images are pushed into it from the cached OCI layout with `skopeo`,
//! and a test can read which manifests and blobs were fetched ([`LoggedRegistry::requests`]).
//!
//! Drop kills the registry (its process, never a name) and removes its storage.

use std::path::Path;
use std::process::Command;

use test_registry::{Registry, RegistryOptions};

use crate::error::{Result, SimError};

/// One request in the access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, `PUT`, …
    pub method: String,
    /// The path (`/v2/node/blobs/sha256:…`).
    pub path: String,
    /// The HTTP status.
    pub status: u16,
}

impl Request {
    /// A blob downloaded (`GET …/blobs/…` answered 200).
    pub fn is_blob_fetch(&self) -> bool {
        self.method == "GET" && self.path.contains("/blobs/") && self.status == 200
    }
}

/// A registry on `127.0.0.1:<free port>` with its access log (a
/// [`test_registry::Registry`] started with one).
#[derive(Debug)]
pub struct LoggedRegistry {
    registry: Registry,
}

impl LoggedRegistry {
    /// Starts a registry (storage and log in a new directory under `parent`).
    pub fn start(parent: &Path) -> Result<LoggedRegistry> {
        LoggedRegistry::start_inner(parent, None)
    }

    /// [`LoggedRegistry::start`], with htpasswd basic auth for `user`/`password` on every
    /// request (the file made with `htpasswd -Bbc`, Debian's `apache2-utils`).
    pub fn start_with_auth(parent: &Path, user: &str, password: &str) -> Result<LoggedRegistry> {
        LoggedRegistry::start_inner(parent, Some((user.to_owned(), password.to_owned())))
    }

    fn start_inner(parent: &Path, credentials: Option<(String, String)>) -> Result<LoggedRegistry> {
        crate::image::require_tool("docker-registry", "docker-registry")?;
        if credentials.is_some() {
            crate::image::require_tool("htpasswd", "apache2-utils")?;
        }
        let registry = Registry::start_with(RegistryOptions {
            credentials,
            parent: Some(parent.to_path_buf()),
            access_log: true,
        })
        .map_err(|e| SimError::Command {
            command: "docker-registry serve".to_owned(),
            status: "not started".to_owned(),
            details: format!(": {e}"),
        })?;
        Ok(LoggedRegistry { registry })
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        self.registry.host()
    }

    /// Copies `oci:<layout>:<tag>` to `<host>/<repo>:<tag>`; the manifest digest.
    pub fn push_layout(&self, layout: &Path, tag: &str, repo: &str) -> Result<String> {
        self.push_layout_as(layout, tag, repo, tag)
    }

    /// Copies `oci:<layout>:<tag>` to `<host>/<repo>:<tag>`; the image by digest,
    /// `<host>/<repo>@<digest>`.
    pub fn push_pinned(&self, layout: &Path, tag: &str, repo: &str) -> Result<String> {
        let digest = self.push_layout(layout, tag, repo)?;
        Ok(format!("{}/{repo}@{digest}", self.host()))
    }

    /// [`LoggedRegistry::push_pinned`] of `v1`, then of `v2`: the two versions the tests
    /// roll between.
    pub fn push_v1_v2(&self, layout: &Path, repo: &str) -> Result<(String, String)> {
        let v1 = self.push_pinned(layout, "v1", repo)?;
        Ok((v1, self.push_pinned(layout, "v2", repo)?))
    }

    /// Copies `oci:<layout>:<tag>` to `<host>/<repo>:<dest_tag>`; the manifest digest.
    pub fn push_layout_as(
        &self,
        layout: &Path,
        tag: &str,
        repo: &str,
        dest_tag: &str,
    ) -> Result<String> {
        let digestfile = self.registry.dir().join(format!("digest-{tag}-{dest_tag}"));
        let source = format!("oci:{}:{tag}", layout.display());
        let dest = format!("docker://{}/{repo}:{dest_tag}", self.host());
        let out = Command::new("skopeo")
            .args([
                "--insecure-policy",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
            ])
            .arg("--digestfile")
            .arg(&digestfile)
            .args(
                self.registry
                    .credentials()
                    .iter()
                    .flat_map(|(u, p)| ["--dest-creds".to_owned(), format!("{u}:{p}")]),
            )
            .args([&source, &dest])
            .output()
            .map_err(|e| SimError::io("running skopeo copy", layout, e))?;
        if !out.status.success() {
            return Err(SimError::Command {
                command: format!("skopeo copy {source} {dest}"),
                status: out.status.to_string(),
                details: format!(": {}", String::from_utf8_lossy(&out.stderr).trim()),
            });
        }
        let digest = std::fs::read_to_string(&digestfile)
            .map_err(|e| SimError::io("reading skopeo's digest file", &digestfile, e))?;
        Ok(digest.trim().to_owned())
    }

    /// A containers `auth.json` (a `.dockerconfigjson`) with `user`/`password` for this
    /// registry.
    pub fn auth_json_for(&self, user: &str, password: &str) -> String {
        let auth = test_registry::base64(format!("{user}:{password}").as_bytes());
        format!(
            "{{\"auths\":{{\"{}\":{{\"auth\":\"{auth}\"}}}}}}",
            self.host()
        )
    }

    /// Every request in the access log so far.
    pub fn requests(&self) -> Vec<Request> {
        let log = std::fs::read_to_string(self.registry.log_path()).unwrap_or_default();
        log.lines().filter_map(parse_access_line).collect()
    }

    /// How many requests the access log holds (to look at those after a point).
    pub fn request_count(&self) -> usize {
        self.requests().len()
    }
}

/// One combined-log-format line: `… "GET /v2/… HTTP/1.1" 200 …`.
fn parse_access_line(line: &str) -> Option<Request> {
    let (_, rest) = line.split_once('"')?;
    let (request, after) = rest.split_once('"')?;
    let mut parts = request.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    if !path.starts_with("/v2") {
        return None;
    }
    let status = after.split_whitespace().next()?.parse().ok()?;
    Some(Request {
        method,
        path,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_access_log_line() {
        let line = r#"127.0.0.1 - - [24/Nov/2026:09:06:55 +0000] "GET /v2/node/blobs/sha256:ab HTTP/1.1" 200 1234 "" "skopeo/1.9.3""#;
        let r = parse_access_line(line).unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/v2/node/blobs/sha256:ab");
        assert_eq!(r.status, 200);
        assert!(r.is_blob_fetch());
        assert!(parse_access_line("time=… level=warning msg=x").is_none());
    }
}
