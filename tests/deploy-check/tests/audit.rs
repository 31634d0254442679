//! `rbac-audit` as `scripts/test` runs it: it passes what the roles allow, and fails on
//! a request outside them and on a directory without requests of both components.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use kube_emulator::RequestRecord;

const CONTROLLER: &str = concat!("bootc-pool-controller/", env!("CARGO_PKG_VERSION"));
const AGENT: &str = concat!("bootc-node-agent/", env!("CARGO_PKG_VERSION"));

fn record(user_agent: &str, verb: &str, resource: &str, subresource: &str) -> RequestRecord {
    RequestRecord {
        seq: 0,
        verb: verb.into(),
        group: "node.bootc.dev".into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: String::new(),
        name: "n1".into(),
        user_agent: user_agent.into(),
        code: 200,
        injected: false,
        dry_run: false,
        path: String::new(),
    }
}

fn audit(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rbac-audit"))
        .arg(dir)
        .output()
        .unwrap()
}

fn allowed() -> Vec<RequestRecord> {
    vec![
        record(CONTROLLER, "update", "bootcnodes", ""),
        record(CONTROLLER, "patch", "bootcnodepools", "status"),
        record(AGENT, "patch", "bootcnodes", "status"),
        record(AGENT, "watch", "bootcnodes", ""),
        // Not ours: never checked.
        record("kubectl/v1.32.0", "delete", "bootcnodes", ""),
    ]
}

#[test]
fn requests_within_the_roles_pass() {
    let dir = tempfile::tempdir().unwrap();
    kube_emulator::audit::write(dir.path(), &allowed()).unwrap();
    let out = audit(dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("no request outside the roles"), "{stdout}");
    assert!(stdout.contains("bootc-node-agent: 2 requests"), "{stdout}");
}

#[test]
fn a_request_outside_the_roles_fails_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = allowed();
    // The agent deleting a BootcNode, and writing a pool's status: neither is its to do.
    records.push(record(AGENT, "delete", "bootcnodes", ""));
    records.push(record(AGENT, "patch", "bootcnodepools", "status"));
    // Spread over two files, as two test processes would leave them.
    kube_emulator::audit::write(dir.path(), &records[..3]).unwrap();
    kube_emulator::audit::write(dir.path(), &records[3..]).unwrap();
    let out = audit(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("denied: bootc-node-agent: delete node.bootc.dev/bootcnodes named n1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("denied: bootc-node-agent: patch node.bootc.dev/bootcnodepools/status"),
        "{stderr}"
    );
}

#[test]
fn no_request_of_a_component_fails_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    let out = audit(dir.path());
    assert_eq!(out.status.code(), Some(1));
    let only_agent: Vec<_> = allowed()
        .into_iter()
        .filter(|r| r.user_agent != CONTROLLER)
        .collect();
    kube_emulator::audit::write(dir.path(), &only_agent).unwrap();
    let out = audit(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no request of bootc-pool-controller"),
        "{stderr}"
    );
    // A missing directory is an error too, not an empty pass.
    let out = audit(&dir.path().join("missing"));
    assert_eq!(out.status.code(), Some(1));
}
