//! A real OCI registry on loopback for tests.
//!
//! [`Registry::start`] runs Debian's `docker-registry` (distribution 2.x) on
//! `127.0.0.1:<free port>` with its storage in a temporary directory;
//! [`Registry::start_with_auth`] adds htpasswd basic auth (file made with
//! `htpasswd -Bbc`). [`Registry::push`] builds a tiny image without a container engine
//! (`umoci init/new/config/insert`) and pushes it with `skopeo copy`, returning the
//! manifest digest; every push has unique content, so a new digest.
//! [`Registry::push_index`] pushes a linux/amd64 + linux/arm64 manifest list.
//! [`Registry::stop`] and [`Registry::restart`] (same port, same storage) simulate a
//! registry that goes down. Drop kills the registry (by its PID) and removes its files.
//!
//! Needs `docker-registry`, `umoci`, `skopeo` and `htpasswd` (Debian packages
//! `docker-registry`, `umoci`, `skopeo`, `apache2-utils`) on the PATH.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;

/// How long to wait for the registry to answer `/v2/`.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A command exited non-zero.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line (for the message only).
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error.
        stderr: String,
    },
    /// The registry did not come up.
    #[error("docker-registry did not answer on {host}: {reason}; log:\n{log}")]
    NotReady {
        /// `127.0.0.1:PORT`.
        host: String,
        /// What was seen.
        reason: String,
        /// The registry's log.
        log: String,
    },
    /// An HTTP exchange with the registry went wrong.
    #[error("{0}")]
    Http(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Runs `program args…` (no shell) and returns its stdout; its stderr goes into the
/// error when it fails.
fn run(program: &str, args: &[&str]) -> Result<String, Error> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(format!("running {command}")))?;
    if !out.status.success() {
        return Err(Error::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn free_port() -> Result<u16, Error> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io_err("binding 127.0.0.1:0"))?;
    let port = l
        .local_addr()
        .map_err(io_err("reading the bound port"))?
        .port();
    Ok(port)
}

/// A `docker-registry` process on loopback and its files.
#[derive(Debug)]
pub struct Registry {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    credentials: Option<(String, String)>,
}

/// What [`Registry::push_index`] pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedIndex {
    /// The manifest list's digest.
    pub index: String,
    /// The linux/amd64 manifest's digest.
    pub amd64: String,
    /// The linux/arm64 manifest's digest.
    pub arm64: String,
}

impl Registry {
    /// Starts a registry without authentication.
    pub fn start() -> Result<Registry, Error> {
        Registry::start_inner(None)
    }

    /// Starts a registry that wants HTTP basic auth as `user`/`pass` for everything.
    pub fn start_with_auth(user: &str, pass: &str) -> Result<Registry, Error> {
        Registry::start_inner(Some((user.to_owned(), pass.to_owned())))
    }

    fn start_inner(credentials: Option<(String, String)>) -> Result<Registry, Error> {
        let dir = tempfile::Builder::new()
            .prefix("test-registry-")
            .tempdir()
            .map_err(io_err("creating the registry's temporary directory"))?;
        if let Some((user, pass)) = &credentials {
            let htpasswd = dir.path().join("htpasswd");
            let path = htpasswd.to_string_lossy();
            run("htpasswd", &["-Bbc", &path, user, pass])?;
        }
        let mut reg = Registry {
            child: None,
            port: 0,
            dir,
            credentials,
        };
        let mut last = None;
        for _ in 0..5 {
            reg.port = free_port()?;
            match reg.spawn_and_wait() {
                Ok(()) => return Ok(reg),
                Err(e) => {
                    reg.kill();
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Http("registry did not start".into())))
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.yml")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }

    fn write_config(&self) -> Result<(), Error> {
        let storage = self.dir.path().join("storage");
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{}\n",
            storage.display(),
            self.port
        );
        if self.credentials.is_some() {
            cfg.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: test-registry\n    path: {}\n",
                self.dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(self.config_path(), cfg).map_err(io_err("writing the registry config"))
    }

    fn spawn_and_wait(&mut self) -> Result<(), Error> {
        self.write_config()?;
        let log = std::fs::File::create(self.log_path()).map_err(io_err("creating the log"))?;
        let log2 = log.try_clone().map_err(io_err("cloning the log handle"))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(self.config_path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(io_err("starting docker-registry"))?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        let not_ready = |reg: &Registry, reason: String| Error::NotReady {
            host: reg.host(),
            reason,
            log: std::fs::read_to_string(reg.log_path()).unwrap_or_default(),
        };
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(not_ready(self, format!("it exited ({status})")));
            }
            if let Ok(resp) = http(&self.host(), "GET", "/v2/", &[], None)
                && (resp.status == 200 || resp.status == 401)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(not_ready(
                    self,
                    format!("no answer within {START_TIMEOUT:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
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

    /// The port it listens on (kept across [`Registry::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `HOST/REPO:TAG`.
    pub fn image(&self, repo: &str, tag: &str) -> String {
        format!("{}/{repo}:{tag}", self.host())
    }

    /// The user and password it wants, if it wants any.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// A containers `auth.json` document with this registry's credentials (empty
    /// `auths` when it has none).
    pub fn auth_json(&self) -> String {
        match self.credentials() {
            Some((u, p)) => format!(
                "{{\"auths\":{{\"{}\":{{\"auth\":\"{}\"}}}}}}",
                self.host(),
                base64(format!("{u}:{p}").as_bytes())
            ),
            None => "{\"auths\":{}}".to_owned(),
        }
    }

    /// True while the registry process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops the registry (kills its process and waits for it); the storage is kept.
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts the registry again on the same port with the same storage, and waits until
    /// it answers.
    pub fn restart(&mut self) -> Result<(), Error> {
        self.kill();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    fn creds_arg(&self) -> Option<String> {
        self.credentials().map(|(u, p)| format!("{u}:{p}"))
    }

    /// Builds a one-layer image in a new OCI layout under `work` (architecture `arch`,
    /// the given labels, a file with unique content) and returns the layout path.
    fn build(
        &self,
        work: &Path,
        tag: &str,
        arch: &str,
        labels: &[(&str, &str)],
    ) -> Result<String, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let layout = work.join("layout");
        let layout_s = layout.to_string_lossy().into_owned();
        if !layout.exists() {
            run("umoci", &["init", "--layout", &layout_s])?;
        }
        let image = format!("{layout_s}:{tag}");
        run("umoci", &["new", "--image", &image])?;
        let mut args: Vec<String> = vec![
            "config".into(),
            "--image".into(),
            image.clone(),
            "--architecture".into(),
            arch.into(),
            "--os".into(),
            "linux".into(),
        ];
        for (k, v) in labels {
            args.push("--config.label".into());
            args.push(format!("{k}={v}"));
        }
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        run("umoci", &args_ref)?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let unique = format!(
            "{} {} {} {nanos}\n",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            self.port
        );
        let src = work.join(format!("unique-{tag}"));
        std::fs::write(&src, unique).map_err(io_err("writing the unique file"))?;
        run(
            "umoci",
            &[
                "insert",
                "--rootless",
                "--image",
                &image,
                &src.to_string_lossy(),
                "/etc/test-registry-unique",
            ],
        )?;
        Ok(image)
    }

    fn copy(&self, oci_image: &str, dest: &str, work: &Path) -> Result<String, Error> {
        let digestfile = work.join("digest");
        let digestfile_s = digestfile.to_string_lossy().into_owned();
        let oci = format!("oci:{oci_image}");
        let docker = format!("docker://{dest}");
        let mut args = vec![
            "--insecure-policy",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            "--digestfile",
            &digestfile_s,
        ];
        let creds = self.creds_arg();
        if let Some(c) = &creds {
            args.push("--dest-creds");
            args.push(c);
        }
        args.push(&oci);
        args.push(&docker);
        run("skopeo", &args)?;
        let digest =
            std::fs::read_to_string(&digestfile).map_err(io_err("reading the digest file"))?;
        Ok(digest.trim().to_owned())
    }

    /// Builds an image for this machine's architecture with `labels` and unique content,
    /// pushes it as `REPO:TAG`, and returns its manifest digest (`sha256:<hex>`).
    pub fn push(&self, repo: &str, tag: &str, labels: &[(&str, &str)]) -> Result<String, Error> {
        let work = tempfile::tempdir().map_err(io_err("creating a build directory"))?;
        let image = self.build(work.path(), tag, host_architecture(), labels)?;
        self.copy(
            &image,
            &format!("{}/{repo}:{tag}", self.host()),
            work.path(),
        )
    }

    /// Pushes a linux/amd64 and a linux/arm64 image (both with `labels`) and an OCI image
    /// index over them as `REPO:TAG`; returns the three digests.
    pub fn push_index(
        &self,
        repo: &str,
        tag: &str,
        labels: &[(&str, &str)],
    ) -> Result<PushedIndex, Error> {
        let work = tempfile::tempdir().map_err(io_err("creating a build directory"))?;
        let mut pushed = Vec::new();
        for arch in ["amd64", "arm64"] {
            let t = format!("{tag}-{arch}");
            let image = self.build(work.path(), &t, arch, labels)?;
            let digest = self.copy(&image, &format!("{}/{repo}:{t}", self.host()), work.path())?;
            // The size of the manifest, as the registry serves it.
            let resp = http(
                &self.host(),
                "GET",
                &format!("/v2/{repo}/manifests/{digest}"),
                &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
                self.credentials(),
            )
            .map_err(|e| Error::Http(format!("reading manifest {digest}: {e}")))?;
            if resp.status != 200 {
                return Err(Error::Http(format!(
                    "reading manifest {digest}: HTTP {}",
                    resp.status
                )));
            }
            pushed.push((arch, digest, resp.body.len()));
        }
        let entries: Vec<String> = pushed
            .iter()
            .map(|(arch, digest, size)| {
                format!(
                    "{{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"{digest}\",\"size\":{size},\"platform\":{{\"architecture\":\"{arch}\",\"os\":\"linux\"}}}}"
                )
            })
            .collect();
        let index = format!(
            "{{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{}]}}",
            entries.join(",")
        );
        let resp = http_with_body(
            &self.host(),
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
            self.credentials(),
            index.as_bytes(),
        )
        .map_err(|e| Error::Http(format!("putting the index: {e}")))?;
        if resp.status != 201 {
            return Err(Error::Http(format!(
                "putting the index: HTTP {}: {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            )));
        }
        let index = resp
            .header("docker-content-digest")
            .ok_or_else(|| Error::Http("no Docker-Content-Digest for the index".into()))?
            .to_owned();
        let digest_of = |a: &str| {
            pushed
                .iter()
                .find(|(arch, _, _)| *arch == a)
                .map(|(_, d, _)| d.clone())
                .unwrap_or_default()
        };
        Ok(PushedIndex {
            index,
            amd64: digest_of("amd64"),
            arm64: digest_of("arm64"),
        })
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The architecture name the OCI image spec uses for this machine.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Standard base64 with padding.
pub fn base64(input: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A response of [`http`].
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header names (lowercased) and values.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` or until close; not de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 request to `host` (`127.0.0.1:PORT`) with optional basic auth,
/// for tests that talk to the registry directly.
pub fn http(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> io::Result<Response> {
    http_with_body(host, method, path, headers, basic, &[])
}

/// Like [`http`], with a request body.
pub fn http_with_body(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    basic: Option<(&str, &str)>,
    body: &[u8],
) -> io::Result<Response> {
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some((u, p)) = basic {
        req.push_str(&format!(
            "Authorization: Basic {}\r\n",
            base64(format!("{u}:{p}").as_bytes())
        ));
    }
    if !body.is_empty() || method == "PUT" || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no HTTP head"))?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if let Some(len) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}
