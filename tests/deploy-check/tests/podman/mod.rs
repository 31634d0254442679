//! podman for the tests that run the image: found (or the test fails, bar an explicit,
//! reported opt-out), and run with the storage and configuration `scripts/image` builds
//! with, so the image it built is there.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use deploy_check::repo_root;

/// Set to `1` to skip the test on purpose on a machine without podman.
const SKIP_ENV: &str = "BOOTC_SKIP_IMAGE";

/// Whether podman is here to run the test: `Some` when it is; `None` (reported) when it is
/// absent and `BOOTC_SKIP_IMAGE=1`; otherwise, and always under `CI=true`, a panic.
pub fn podman_for_test(test: &str) -> Option<()> {
    let found = Command::new("podman")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    match (found, env("CI") == "true", env(SKIP_ENV) == "1") {
        (true, _, _) => Some(()),
        (false, true, _) => panic!("podman is missing, and under CI=true {test} fails"),
        (false, false, true) => {
            let line = format!("SKIPPED {test}: podman is missing and {SKIP_ENV}=1\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
        (false, false, false) => panic!(
            "podman is missing (scripts/install-packages installs it); to skip {test} on \
             purpose, set {SKIP_ENV}=1"
        ),
    }
}

/// `PROGRAM ARGS…` run from the checkout.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

/// `scripts/image podman ARGS…`: podman with the storage and configuration the script
/// builds with.
pub fn podman(args: &[&str]) -> Output {
    let command = podman_command();
    Command::new(&command[0])
        .args(&command[1..])
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running scripts/image podman: {e}"))
}

/// `scripts/image podman` as a program and its first argument, for a runtime that adds
/// its own arguments.
pub fn podman_command() -> Vec<String> {
    vec![
        repo_root().join("scripts/image").display().to_string(),
        "podman".to_owned(),
    ]
}
