//! What the manifest tests share: kubectl, run with its own HOME and cache.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use deploy_check::repo_root;

/// A `kubectl` with its own HOME and cache, and a kubeconfig when `dir` has one.
pub async fn kubectl(dir: &Path, args: &[&str]) -> Output {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .current_dir(repo_root())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("kubectl finishes within a minute")
        .expect("kubectl is on the PATH (.ci/run installs it where it is missing)")
}

pub async fn ok(dir: &Path, args: &[&str]) -> String {
    let out = kubectl(dir, args).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
