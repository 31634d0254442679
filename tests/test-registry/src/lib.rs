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
//!
//! The modules:
//!
//! - this file: the [`Registry`] process (start, stop, restart, credentials), [`Error`];
//! - `push`: building images with umoci and pushing them with skopeo ([`Registry::push`],
//!   [`Registry::push_index`]);
//! - [`http_client`]: the test infrastructure's one HTTP client: [`http`] and
//!   [`http_with_body`] for tests that talk to the registry directly, `request` for the
//!   bootc stand-in.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tempfile::TempDir;

pub mod http_client;
mod push;

pub use http_client::{Response, http, http_with_body};
pub use push::PushedIndex;

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

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Runs `program args…` (no shell) and returns its stdout; its stderr goes into the
/// error when it fails.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, Error> {
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

/// How to start a [`Registry`].
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// HTTP basic auth as this user and password for everything (htpasswd).
    pub credentials: Option<(String, String)>,
    /// Where its directory (storage, configuration, log) is made; default the system's
    /// temporary directory.
    pub parent: Option<PathBuf>,
    /// Log every request (the combined log format) to [`Registry::log_path`].
    pub access_log: bool,
}

/// A `docker-registry` process on loopback and its files.
#[derive(Debug)]
pub struct Registry {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    credentials: Option<(String, String)>,
    access_log: bool,
}

impl Registry {
    /// Starts a registry without authentication.
    pub fn start() -> Result<Registry, Error> {
        Registry::start_with(RegistryOptions::default())
    }

    /// Starts a registry that wants HTTP basic auth as `user`/`pass` for everything.
    pub fn start_with_auth(user: &str, pass: &str) -> Result<Registry, Error> {
        Registry::start_with(RegistryOptions {
            credentials: Some((user.to_owned(), pass.to_owned())),
            ..RegistryOptions::default()
        })
    }

    /// Starts a registry as `options` say, on a free port (tried again on another when
    /// the port was taken in between).
    pub fn start_with(options: RegistryOptions) -> Result<Registry, Error> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("test-registry-");
        let dir = match &options.parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .map_err(io_err("creating the registry's directory"))?;
        if let Some((user, pass)) = &options.credentials {
            let htpasswd = dir.path().join("htpasswd");
            let path = htpasswd.to_string_lossy();
            run("htpasswd", &["-Bbc", &path, user, pass])?;
        }
        let mut reg = Registry {
            child: None,
            port: 0,
            dir,
            credentials: options.credentials,
            access_log: options.access_log,
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

    /// Its log (with [`RegistryOptions::access_log`], every request).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("registry.log")
    }

    /// Its directory (storage, configuration, log), removed when it is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn write_config(&self) -> Result<(), Error> {
        let storage = self.dir.path().join("storage");
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: {}\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{}\n",
            !self.access_log,
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
    STANDARD.encode(input)
}
