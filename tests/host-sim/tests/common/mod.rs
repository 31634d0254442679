//! Shared by the nspawn tests: where their files go, how a node is started and what an
//! agent run against it needs.
//!
//! These tests need root, `systemd-nspawn` and (the first time) `debootstrap` and the
//! network; without them they fail with the reason, they never skip.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use host_sim::{Node, NodeOptions};
use tempfile::TempDir;

/// How long a boot may take in a test (the machine is shared and slow).
pub const BOOT: Duration = Duration::from_secs(90);

/// The parent of the tests' temporary directories: `$BOOTC_SIM_WORK` or `/var/tmp`. Not
/// `/tmp`: a node mounts its own tmpfs there, which would hide directories shared with it
/// at the same path.
pub fn work_base() -> PathBuf {
    std::env::var_os("BOOTC_SIM_WORK")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from)
}

/// A test's temporary directory: removed when the test passes, kept (with the node's
/// console log in it) when it fails.
#[derive(Debug)]
pub struct TestDir(Option<TempDir>);

impl TestDir {
    pub fn path(&self) -> &Path {
        self.0
            .as_ref()
            .expect("the directory lives until drop")
            .path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.0.take()
        {
            let dir = dir.keep();
            eprintln!("test failed: keeping {}", dir.display());
            print_failures(&dir);
        }
    }
}

/// What systemd writes on a node's console when a unit fails (every boot also prints
/// harmless "Failed to create symlink" lines about cgroups, which these leave out).
const FAILURE_WORDS: [&str; 4] = [
    "FAILED",
    "Failed to start",
    "Failed to spawn",
    "Failed with result",
];

/// Prints what the nodes' consoles (the `*.log` files in `dir`) said failed, so that a
/// failed run shows whether a node's own units failed under it.
fn print_failures(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let failed: Vec<&str> = text
            .lines()
            .filter(|l| FAILURE_WORDS.iter().any(|w| l.contains(w)))
            .take(30)
            .collect();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        eprintln!("{name}: {} failure lines", failed.len());
        for line in failed {
            eprintln!("  {line}");
        }
    }
}

/// A fresh temporary directory for one test.
pub fn test_dir(name: &str) -> TestDir {
    TestDir(Some(
        tempfile::Builder::new()
            .prefix(&format!("host-sim-{name}-"))
            .tempdir_in(work_base())
            .expect("creating the test's directory"),
    ))
}

/// Gives the node state in `state_dir` a first booted image (not pulled from anywhere).
pub fn seed_plain(state_dir: &Path) {
    let info = bootc_standin::ImageInfo {
        image: "127.0.0.1:5000/sim/os:v0".to_owned(),
        digest: format!("sha256:{}", "0".repeat(64)),
        version: Some("v0".to_owned()),
        created: None,
        architecture: bootc_standin::resolver::host_architecture().to_owned(),
        kernel: None,
        layers: Vec::new(),
    };
    bootc_standin::seed(state_dir, info).expect("seeding the stand-in's state");
}

/// RunOptions for node `name` with its state in `dir/state` and its log in `dir/NAME.log`.
pub fn options(name: &str, dir: &Path) -> NodeOptions {
    let bootc = host_sim::standin_binary().expect("the bootc stand-in binary");
    let mut options = NodeOptions::new(name, dir.join("state"), bootc);
    options.log_file = Some(dir.join(format!("{name}.log")));
    options.boot_timeout = BOOT;
    options
}

/// Boots node `name` with a seeded state.
pub async fn boot(name: &str, dir: &Path) -> Node {
    let options = options(name, dir);
    seed_plain(&options.state_dir);
    Node::start(options).await.expect("booting the node")
}

/// An API emulator with the project's CRDs registered, and a client of it.
pub async fn emulator_with_crds() -> (kube_emulator::Emulator, kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let emulator = kube_emulator::Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    for plural in ["bootcnodepools", "bootcnodes"] {
        let path = format!(
            "{}/../../crds/node.bootc.dev_{plural}.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let crd: CustomResourceDefinition =
            serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        crds.create(&kube::api::PostParams::default(), &crd)
            .await
            .unwrap();
    }
    (emulator, client)
}

/// What a test of the agent on an nspawn node starts from: its directory, the API
/// emulator with the CRDs and a client of it, the emulator's kubeconfig for the agent
/// and where the agent's log goes (both in the directory).
pub struct AgentBed {
    pub dir: TestDir,
    pub emulator: kube_emulator::Emulator,
    pub client: kube::Client,
    pub kubeconfig: PathBuf,
    pub log: PathBuf,
}

/// Checks for root, then sets up an [`AgentBed`] in a fresh [`test_dir`] named `name`.
pub async fn agent_bed(name: &str) -> AgentBed {
    host_sim::image::require_root().unwrap();
    let dir = test_dir(name);
    let (emulator, client) = emulator_with_crds().await;
    let kubeconfig = dir.path().join("kubeconfig");
    emulator.write_kubeconfig(&kubeconfig).unwrap();
    let log = dir.path().join("agent.log");
    AgentBed {
        dir,
        emulator,
        client,
        kubeconfig,
        log,
    }
}

/// Polls `check` until it gives a value; after `deadline`, panics with the last 40
/// lines of the agent's log.
pub async fn wait_logged<T>(
    what: &str,
    log: &Path,
    deadline: Duration,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    wait_logged_with(what, log, deadline, check, async || String::new()).await
}

/// [`wait_logged`], the panic also saying what `context` finds then (the state of the
/// host, say).
pub async fn wait_logged_with<T>(
    what: &str,
    log: &Path,
    deadline: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
    context: impl AsyncFnOnce() -> String,
) -> T {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        if tokio::time::Instant::now() >= until {
            let context = context().await;
            let log = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            panic!("timed out waiting for {what}; {context}agent log:\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The real-bootc archive directory, or `None` when a developer opted out with
/// `BOOTC_SKIP_REAL=1` outside CI (the skip is reported); otherwise an absent archive
/// fails the test.
#[track_caller]
pub fn real_archive() -> Option<PathBuf> {
    let test = std::thread::current()
        .name()
        .unwrap_or("a real-bootc test")
        .to_owned();
    host_sim::real::archive_for_test(&test).unwrap_or_else(|e| panic!("{e}"))
}

/// `line` without terminal colour codes (`ESC [ … m`), as the agent's log has them.
pub fn without_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
