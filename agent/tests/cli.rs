//! The binary's command line: help, refusal of bad configuration, and an honest exit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-node-agent"))
        .args(args)
        .env_remove("NODE_NAME")
        .env_remove("KUBECONFIG")
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
        "--node-name",
        "--kubeconfig",
        "--system-bus-address",
        "--host-work-dir",
        "--status-poll-interval",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}:\n{stdout}");
    }
    assert!(stdout.contains("NODE_NAME"), "{stdout}");
}

#[test]
fn node_name_is_required() {
    let (code, _, stderr) = run(&[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--node-name"), "{stderr}");
}

#[test]
fn bad_configuration_exits_2_naming_it() {
    let (code, _, stderr) = run(&["--node-name", "n1", "--status-poll-interval", "0s"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--status-poll-interval"), "{stderr}");
    let (code, _, stderr) = run(&["--node-name", "Not_A_Node"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("NODE_NAME"), "{stderr}");
}

#[test]
fn without_a_cluster_or_a_bus_it_exits_1_saying_why() {
    let (code, _, stderr) = run(&["--node-name", "worker-1"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("not in a cluster"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    let bus = format!("unix:path={}", dir.path().join("no-bus").display());
    let (code, _, stderr) = run(&[
        "--node-name",
        "worker-1",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--system-bus-address",
        &bus,
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot connect to the host's bus"),
        "{stderr}"
    );
}

/// The host-service unit in systemd/ starts the agent with flags it accepts.
#[test]
fn the_systemd_unit_starts_the_agent_with_valid_flags() {
    use clap::Parser;
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../systemd/bootc-node-agent.service"
    ))
    .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let argv: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(argv[0], "/usr/bin/bootc-node-agent");
    let args = bootc_node_agent::config::Args::try_parse_from(
        argv.iter().copied().chain(["--node-name", "worker-1"]),
    )
    .unwrap_or_else(|e| panic!("{exec}: {e}"));
    let config = bootc_node_agent::config::Config::try_from(args).unwrap();
    assert_eq!(
        config.system_bus_address,
        "unix:path=/run/dbus/system_bus_socket"
    );
    // What the unit lets the agent write is what the agent writes.
    for path in [config.host_work_dir.to_str().unwrap(), "/run/ostree"] {
        assert!(
            unit.lines()
                .any(|l| l.starts_with("ReadWritePaths=") && l.contains(path)),
            "{path} is not writable under the unit's sandbox"
        );
    }
}
