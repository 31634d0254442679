//! What the manifest tests share: kubectl, run with its own HOME and cache.

use std::path::Path;
use std::process::Output;

use deploy_check::repo_root;

/// A `kubectl` with its own HOME and cache, and a kubeconfig when `dir` has one.
pub async fn kubectl(dir: &Path, args: &[&str]) -> Output {
    let mut command = kube_emulator::kubectl::command(dir, &dir.join("kubeconfig"));
    command.args(args).current_dir(repo_root());
    kube_emulator::kubectl::output(command).await
}

pub async fn ok(dir: &Path, args: &[&str]) -> String {
    kube_emulator::kubectl::succeeded(args, &kubectl(dir, args).await)
}
