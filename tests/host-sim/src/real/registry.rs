//! A loopback `docker-registry` (Debian's distribution 2.x) that keeps its access log, for
//! real-bootc nodes: images are pushed into it from the cached OCI layout with `skopeo`,
//! and a test can read which manifests and blobs were fetched ([`LoggedRegistry::requests`]).
//!
//! Drop kills the registry (its [`Child`], never a name) and removes its storage.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::error::{Result, SimError};

/// How long the registry has to answer `/v2/`.
const START_TIMEOUT: Duration = Duration::from_secs(20);

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

/// A registry on `127.0.0.1:<free port>` with its access log.
#[derive(Debug)]
pub struct LoggedRegistry {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    /// User and password of its htpasswd basic auth, when it has one.
    credentials: Option<(String, String)>,
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
        let dir = tempfile::Builder::new()
            .prefix("real-registry-")
            .tempdir_in(parent)
            .map_err(|e| SimError::io("creating the registry's directory", parent, e))?;
        if let Some((user, password)) = &credentials {
            crate::image::require_tool("htpasswd", "apache2-utils")?;
            let file = dir.path().join("htpasswd");
            let out = Command::new("htpasswd")
                .arg("-Bbc")
                .arg(&file)
                .args([user, password])
                .output()
                .map_err(|e| SimError::io("running htpasswd", &file, e))?;
            if !out.status.success() {
                return Err(SimError::Command {
                    command: "htpasswd -Bbc".to_owned(),
                    status: out.status.to_string(),
                    details: format!(": {}", String::from_utf8_lossy(&out.stderr).trim()),
                });
            }
        }
        let mut registry = LoggedRegistry {
            child: None,
            port: 0,
            dir,
            credentials,
        };
        let mut last = None;
        for _ in 0..5 {
            match registry.spawn_and_wait() {
                Ok(()) => return Ok(registry),
                Err(e) => {
                    registry.kill();
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| SimError::InvalidOptions("registry did not start".into())))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| SimError::io("finding a free port", self.dir.path(), e))?;
        self.port = listener
            .local_addr()
            .map_err(|e| SimError::io("finding a free port", self.dir.path(), e))?
            .port();
        drop(listener);
        let config = self.dir.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\nstorage:\n  \
             filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: \
             127.0.0.1:{}\n",
            self.dir.path().join("storage").display(),
            self.port
        );
        if self.credentials.is_some() {
            text.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: host-sim\n    path: {}\n",
                self.dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(&config, text)
            .map_err(|e| SimError::io("writing the registry's config", &config, e))?;
        let log = self.log_path();
        let out = std::fs::File::create(&log)
            .map_err(|e| SimError::io("creating the registry's log", &log, e))?;
        let err = out
            .try_clone()
            .map_err(|e| SimError::io("creating the registry's log", &log, e))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| SimError::io("starting docker-registry", &config, e))?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(self.not_ready(&format!("it exited ({status})")));
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("no answer"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn not_ready(&self, why: &str) -> SimError {
        SimError::Command {
            command: format!("docker-registry serve (port {})", self.port),
            status: why.to_owned(),
            details: format!("; see {}", self.log_path().display()),
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Copies `oci:<layout>:<tag>` to `<host>/<repo>:<tag>`; the manifest digest.
    pub fn push_layout(&self, layout: &Path, tag: &str, repo: &str) -> Result<String> {
        self.push_layout_as(layout, tag, repo, tag)
    }

    /// Copies `oci:<layout>:<tag>` to `<host>/<repo>:<dest_tag>`; the manifest digest.
    pub fn push_layout_as(
        &self,
        layout: &Path,
        tag: &str,
        repo: &str,
        dest_tag: &str,
    ) -> Result<String> {
        let digestfile = self.dir.path().join(format!("digest-{tag}-{dest_tag}"));
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
                self.credentials
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
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        log.lines().filter_map(parse_access_line).collect()
    }

    /// How many requests the access log holds (to look at those after a point).
    pub fn request_count(&self) -> usize {
        self.requests().len()
    }
}

impl Drop for LoggedRegistry {
    fn drop(&mut self) {
        self.kill();
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
