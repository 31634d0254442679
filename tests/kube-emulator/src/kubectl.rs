//! Running the real kubectl against an emulator, as tests do: with a HOME and a cache of
//! its own and never the caller's `KUBECONFIG`.
//!
//! These are the tests' own steps: an error fails the test that called them.

#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// `kubectl --kubeconfig KUBECONFIG --cache-dir DIR/cache`, with `HOME` at `dir` and no
/// `KUBECONFIG` from this process; the caller adds the arguments.
pub fn command(dir: &Path, kubeconfig: &Path) -> Command {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .env_remove("KUBECONFIG")
        .env("HOME", dir);
    command
}

/// Runs `command` without blocking the runtime (killing it when dropped); panics when
/// kubectl is missing or takes more than a minute.
pub async fn output(command: Command) -> Output {
    let out = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("kubectl finishes within a minute")
        .expect("kubectl is on the PATH (.ci/run installs it where it is missing)")
}

/// The standard output of `kubectl ARGS`; panics with both outputs when it failed.
pub fn succeeded(args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
