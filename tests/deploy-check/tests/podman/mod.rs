//! podman for the tests that run the image: found (or the test fails, bar an explicit,
//! reported opt-out), and run with the storage and configuration `scripts/image` builds
//! with, so the image it built is there.

use std::process::{Command, Output, Stdio};

use deploy_check::repo_root;

pub use host_sim::pods::{podman_command, podman_for_test};

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
