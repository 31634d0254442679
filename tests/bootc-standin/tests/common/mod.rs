//! Helpers shared by the stand-in's tests: bootc's schema, the agent's parser, a fake
//! resolver, and running the `bootc` binary as a process.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bootc_standin::{Error, ImageInfo, ImageResolver};
use serde_json::Value;

/// bootc's published status schema, kept beside the workspace.
pub fn schema_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/reference/bootc/host-v1.schema.json"
    ))
}

/// A validator for bootc's status schema, checking formats (`date-time`) too.
pub fn validator() -> jsonschema::Validator {
    let path = schema_path();
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

/// Asserts that `doc` validates against bootc's schema and parses with the agent's
/// parser; returns the parsed host.
pub fn check_status(doc: &Value) -> bootc_node_agent::bootc_status::BootcHost {
    let v = validator();
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "schema errors {errors:#?} in {doc:#}");
    // jsonschema::validator_for (the default options) must agree.
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    assert!(jsonschema::validator_for(&schema).unwrap().is_valid(doc));
    bootc_node_agent::bootc_status::parse(&serde_json::to_vec(doc).unwrap())
        .unwrap_or_else(|e| panic!("agent parser refused {doc:#}: {e}"))
}

pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// An image as a fake registry would describe it.
pub fn info(image: &str, d: char, version: &str, kernel: Option<&str>) -> ImageInfo {
    ImageInfo {
        image: image.to_owned(),
        digest: digest(d),
        version: Some(version.to_owned()),
        created: Some("2026-01-02T03:04:05.123456789Z".to_owned()),
        architecture: "amd64".to_owned(),
        kernel: kernel.map(str::to_owned),
        layers: Vec::new(),
    }
}

/// A resolver answering from a map (reference → image), counting its calls.
#[derive(Debug, Default)]
pub struct FakeResolver {
    pub images: HashMap<String, ImageInfo>,
    pub calls: Cell<usize>,
}

impl FakeResolver {
    pub fn with(mut self, i: ImageInfo) -> Self {
        self.images.insert(i.image.clone(), i);
        self
    }
}

impl ImageResolver for FakeResolver {
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error> {
        self.calls.set(self.calls.get() + 1);
        self.images.get(image).cloned().ok_or_else(|| Error::Pull {
            image: image.to_owned(),
            message: "manifest unknown (HTTP 404 Not Found)".to_owned(),
        })
    }
}

/// A state dir and a root for one simulated host, for the binary.
#[derive(Debug)]
pub struct Host {
    pub dir: tempfile::TempDir,
    /// `BOOTC_STANDIN_VERSION` for every command (`None`: unset, the stand-in's default).
    pub version: Option<&'static str>,
}

impl Host {
    /// A host whose stand-in plays bootc 1.16.10 (with `switch --download-only`).
    pub fn new() -> Host {
        Host::playing(Some("1.16.10"))
    }
    /// A host whose stand-in plays `version` (`None`: the default, 1.16.9).
    pub fn playing(version: Option<&'static str>) -> Host {
        Host {
            dir: tempfile::tempdir().unwrap(),
            version,
        }
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    /// Writes `body` to `rel` under the root.
    pub fn write_root_file(&self, rel: &str, body: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bootc"));
        c.args(args)
            .env("BOOTC_STANDIN_STATE_DIR", self.state_dir())
            .env("BOOTC_STANDIN_ROOT", self.root())
            .env("BOOTC_STANDIN_ALLOW_CONTAINER", "1")
            .env_remove("container")
            .env_remove("BOOTC_STANDIN_VERSION")
            .stdin(Stdio::null());
        if let Some(v) = self.version {
            c.env("BOOTC_STANDIN_VERSION", v);
        }
        c
    }
    /// Runs the binary and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
    /// Runs the binary, asserting exit 0; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "bootc {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
    /// Runs the binary, asserting exit 1 and an `error: ` line; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "bootc {args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        stderr
    }
    /// `bootc status --format=json --format-version=1`, checked against the schema and
    /// the agent's parser.
    pub fn status(&self) -> (Value, bootc_node_agent::bootc_status::BootcHost) {
        let text = self.ok(&["status", "--format=json", "--format-version=1"]);
        let doc: Value = serde_json::from_str(&text).unwrap();
        let host = check_status(&doc);
        (doc, host)
    }
    pub fn marker(&self) -> PathBuf {
        self.root().join("ostree/bootc")
    }
}

/// Kills (by PID) and reaps a child on drop.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls until `f` is true or `timeout` passes; returns whether it became true.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}
