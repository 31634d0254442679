//! `scripts/test` runs and lints every test: a test target that `cargo test` leaves out
//! (`test = false` in its package's manifest, so that the script can run it beside other
//! steps) is run and linted by name there (`cargo clippy --all-targets` leaves it out
//! too).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use deploy_check::repo_root;

/// The names of the workspace's test targets that a plain `cargo test` leaves out.
fn tests_run_only_by_name() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            let is_test = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "test");
            if is_test && target["test"] == false {
                names.push(target["name"].as_str().unwrap().to_owned());
            }
        }
    }
    names
}

/// The script's `cargo SUBCOMMAND` commands, as words: lines whose command (past variable
/// assignments and a leading `setsid`) is `cargo SUBCOMMAND`.
fn cargo_commands<'s>(script: &'s str, subcommand: &str) -> Vec<Vec<&'s str>> {
    script
        .lines()
        .map(|l| {
            l.split_whitespace()
                .skip_while(|w| w.contains('=') || *w == "setsid")
                .collect::<Vec<_>>()
        })
        .filter(|words| words.starts_with(&["cargo", subcommand]))
        .collect()
}

#[test]
fn every_test_left_out_of_a_plain_cargo_test_is_run_and_linted_by_name() {
    let names = tests_run_only_by_name();
    // The tests on the real bootc are one of them today; were none left, this test would
    // check nothing.
    assert!(names.iter().any(|n| n == "real_bootc"), "{names:?}");
    let script = std::fs::read_to_string(repo_root().join("scripts/test")).unwrap();
    for subcommand in ["test", "clippy"] {
        let commands = cargo_commands(&script, subcommand);
        for name in &names {
            assert!(
                commands
                    .iter()
                    .any(|words| words.windows(2).any(|w| w == ["--test", name.as_str()])),
                "scripts/test never runs `cargo {subcommand} … --test {name}`, so the test \
                 target {name} (test = false) would be left out: {commands:?}"
            );
        }
    }
}
