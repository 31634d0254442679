//! The binary's command line: help, refusal of bad configuration, and an honest exit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-pool-controller"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("BOOTC_INSECURE_REGISTRIES")
        .output()
        .expect("run the binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_the_configuration() {
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--kubeconfig",
        "--metrics-addr",
        "--insecure-registry",
        "--lease-name",
        "--lease-namespace",
        "--log-format",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}:\n{stdout}");
    }
}

#[test]
fn bad_configuration_exits_2_naming_it() {
    let (code, _, stderr) = run(&["--insecure-registry", "x; reboot"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--insecure-registry"), "{stderr}");
}

#[test]
fn without_a_cluster_it_exits_1_saying_why() {
    let (code, _, stderr) = run(&["--insecure-registry", "127.0.0.1:5000"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("not in a cluster"), "{stderr}");
}
