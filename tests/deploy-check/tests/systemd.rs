//! The host-service units in `systemd/`: `systemd-analyze verify` (Debian's `systemd`
//! package, which `.ci/run` installs with systemd-container) accepts them without a
//! single warning, in a scratch root holding the distribution's units and the binaries
//! the units start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use deploy_check::repo_root;

fn units() -> Vec<PathBuf> {
    let mut units: Vec<PathBuf> = std::fs::read_dir(repo_root().join("systemd"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| matches!(e.to_str(), Some("service" | "timer" | "path")))
        })
        .collect();
    units.sort();
    assert!(!units.is_empty(), "no units in systemd/");
    units
}

fn exec_binaries(unit: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| {
            [
                "ExecStart=",
                "ExecStartPre=",
                "ExecStartPost=",
                "ExecStop=",
                "ExecReload=",
            ]
            .iter()
            .find_map(|k| l.strip_prefix(k))
        })
        .filter_map(|cmd| {
            cmd.trim_start_matches(['-', '@', ':', '+', '!'])
                .split_whitespace()
                .next()
        })
        .map(str::to_string)
        .collect()
}

/// A root for `systemd-analyze verify --root`: the host's unit files (regular files only:
/// absolute symlinks would resolve inside the scratch root), our units in
/// /etc/systemd/system, and an executable at every path our units start.
fn scratch_root(dir: &Path) -> Vec<PathBuf> {
    let system = dir.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&system).unwrap();
    for entry in std::fs::read_dir("/usr/lib/systemd/system").unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), system.join(entry.file_name())).unwrap();
        }
    }
    let etc = dir.join("etc/systemd/system");
    std::fs::create_dir_all(&etc).unwrap();
    let mut installed = Vec::new();
    for unit in units() {
        let text = std::fs::read_to_string(&unit).unwrap();
        for binary in exec_binaries(&text) {
            assert!(
                binary.starts_with('/'),
                "{}: {binary} is not absolute",
                unit.display()
            );
            let stub = dir.join(binary.trim_start_matches('/'));
            std::fs::create_dir_all(stub.parent().unwrap()).unwrap();
            std::fs::write(&stub, "#!/bin/sh\nexit 0\n").unwrap();
            std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let target = etc.join(unit.file_name().unwrap());
        std::fs::write(&target, text).unwrap();
        installed.push(target);
    }
    installed
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    let analyze = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        analyze.as_ref().is_ok_and(|o| o.status.success()),
        "systemd-analyze is needed (Debian's systemd package, installed by .ci/run): {analyze:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let units = scratch_root(dir.path());
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", dir.path().display()))
        .arg("--man=no")
        .args(&units)
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stderr.trim().is_empty() && stdout.trim().is_empty(),
        "systemd-analyze verify: {}\n{stdout}{stderr}",
        out.status
    );
}

/// The check above is not vacuous: a unit with an unknown key or a bad value fails it.
#[test]
fn systemd_analyze_verify_reports_a_broken_unit() {
    let dir = tempfile::tempdir().unwrap();
    let units = scratch_root(dir.path());
    let unit = &units[0];
    let text = std::fs::read_to_string(unit).unwrap();
    std::fs::write(
        unit,
        text.replace("[Service]\n", "[Service]\nRestartSecs=5s\n"),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", dir.path().display()))
        .arg("--man=no")
        .arg(unit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Unknown key 'RestartSecs'"), "{stderr}");
}

/// The agent's unit starts the binary the image and the host-image guide install, with
/// its kubeconfig, and writes only where the agent writes.
#[test]
fn the_agent_unit_uses_a_kubeconfig_and_the_shipped_binary() {
    let unit =
        std::fs::read_to_string(repo_root().join("systemd/bootc-node-agent.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert!(exec.starts_with("/usr/bin/bootc-node-agent "), "{exec}");
    assert!(
        exec.contains("--kubeconfig /etc/bootc-node-agent/kubeconfig"),
        "{exec}"
    );
    let guide = std::fs::read_to_string(repo_root().join("docs/building-host-images.md")).unwrap();
    for needle in [
        "/usr/bin/bootc-node-agent",
        "/etc/bootc-node-agent/kubeconfig",
        "systemd/bootc-node-agent.service",
    ] {
        assert!(
            guide.contains(needle),
            "docs/building-host-images.md lacks {needle}"
        );
    }
}
