//! `xtask check` as the test run builds it: the committed generated files (the CRDs,
//! `deploy/install.yaml`, the kustomize files, the PrometheusRule, `docs/reference.md`)
//! are current, every source keeps to the size limits, `rust-version` is right and no
//! test holds a hollow assertion. `scripts/test` also runs this binary before the tests,
//! so that a stale file fails the run early.

use std::process::Command;

#[test]
fn the_checkout_passes_its_own_checks() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check")
        .output()
        .expect("xtask runs");
    assert!(
        out.status.success(),
        "`xtask check` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_unknown_command_is_refused_with_the_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("chekc")
        .output()
        .expect("xtask runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("usage: cargo xtask"), "{stderr}");
}
