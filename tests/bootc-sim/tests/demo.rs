//! The README's first command, as CI can run it: `bootc-sim demo` is what `scripts/demo`
//! runs once it has installed the packages and built the binaries. Ten simulated nodes
//! (real systemd under systemd-nspawn, real agents and the real controller binary) go
//! from v1 to v2 following `:stable`; the run must end with exit 0, every node updated,
//! the history of both images printed, and everything it started stopped.
//!
//! Then the same on three nodes running the real bootc 1.16.9 and ostree
//! (`--real-bootc`), installed as the install guide says and run from the image
//! (`--kubelet --install`): a tag push rolled out with maxUnavailable 1, a reboot nobody
//! approved on the way, and a rollback by reference that fetches no blob.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Instant;

/// One demo at a time: each boots its nodes on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `bootc-sim demo ARGS` (one at a time), requires exit 0 and shows the lines
/// `shown` picks; its standard output.
fn run_demo(args: &[&str], shown: impl Fn(&str) -> bool) -> String {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-sim"))
        .arg("demo")
        .args(args)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bootc-sim demo {args:?} failed ({}) after {took:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    eprintln!("bootc-sim demo {args:?}: exit 0 after {took:?}");
    for line in stdout.lines().filter(|l| shown(l)) {
        eprintln!("  {line}");
    }
    stdout
}

/// Whether the real-bootc archive is there. Absent, the test fails, unless a developer
/// opted out with `BOOTC_SKIP_REAL=1` outside CI (then the skip is reported).
fn real_archive() -> bool {
    let test = std::thread::current()
        .name()
        .unwrap_or("a real-bootc demo")
        .to_owned();
    host_sim::real::archive_for_test(&test)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_some()
}

#[test]
fn the_demo_rolls_v2_out_to_ten_nodes_and_exits_zero() {
    let stdout = run_demo(&["--phase-timeout-s", "150"], |l| {
        l.contains("] rolled out")
            || l.contains("updatedCount")
            || l.contains("most reboot slots")
            || l.starts_with("torn down")
    });

    // Not a terminal: plain lines, no cursor movement.
    assert!(!stdout.contains('\u{1b}'), "escape codes on a pipe");
    assert!(
        stdout.contains("rolled out v2 to 10 nodes"),
        "stdout:\n{stdout}"
    );
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::trim))
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}"))
    };
    assert_eq!(field("nodeCount"), "10");
    assert_eq!(field("updatedCount"), "10");
    assert_eq!(field("degradedCount"), "0");
    assert!(
        stdout.contains("no node or pool reported Degraded"),
        "the demo checks every stored BootcNode and pool version for Degraded"
    );
    let slots: u32 = field("most reboot slots held at once:").parse().unwrap();
    assert!(
        (1..=3).contains(&slots),
        "{slots} slots against maxUnavailable 3"
    );
    // deployHistory: an entry for each image, ten nodes each (newest first; the order
    // itself is the history's own tests' business).
    let history: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("deployHistory:"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("stopping"))
        .collect();
    assert_eq!(history.len(), 2, "{history:#?}");
    for version in ["2.0", "1.0"] {
        let row = history
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|c| c.get(1) == Some(&version))
            .unwrap_or_else(|| panic!("no {version} in {history:#?}"));
        assert_eq!(row.get(2), Some(&"10"), "{row:?}");
    }
    assert!(stdout.contains("torn down after"), "stdout:\n{stdout}");
}

/// The real-bootc demo as the README gives it: installed as docs/install.md says (the
/// image built and pushed by scripts/image, the guide's overlay, kubectl apply -k, the
/// rollout check), both components run from that image by the demo's kubelets.
#[test]
fn the_real_bootc_demo_from_the_install_rolls_out_survives_an_unapproved_reboot_and_rolls_back() {
    if !real_archive() || !podman_for_test() {
        return;
    }
    let args = [
        "--real-bootc",
        "--kubelet",
        "--install",
        "--unapproved-reboot",
        "--rollback",
    ];
    let stdout = run_demo(&[&args[..], &["--phase-timeout-s", "300"]].concat(), |l| {
        l.contains(" deployed in ")
            || l.contains("rollout status")
            || l.contains("kubelet:")
            || l.contains("leads")
            || l.contains("] rolled")
            || l.contains("by hand")
            || l.contains("exactly one reboot")
            || l.contains("fetched no blob")
            || l.contains("bootc-node-agent-")
            || l.contains("bootc-pool-controller-")
            || l.starts_with("torn down")
    });
    for expected in [
        "pushed 127.0.0.1:",
        "deployment.apps/bootc-pool-controller created",
        "daemonset.apps/bootc-node-agent created",
        "deployment \"bootc-pool-controller\" successfully rolled out",
        "kubelet: the agent's pod runs on",
        "leads",
        "maxUnavailable 1",
        "rolled out v2 to 3 nodes",
        "unapproved (it must come back on the old image)",
        "after the unapproved reboot, exactly one reboot (the approved one)",
        "rolled back to v1",
        "the rollback fetched no blob from the registry (bootc rollback)",
        "torn down after",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
    // The budget held: never more than one slot.
    for line in stdout.lines().filter(|l| l.contains("most reboot slots")) {
        assert!(line.trim_end().ends_with(": 1"), "{line}");
    }
    // Both summaries: every node updated, none degraded.
    let values = |name: &str| -> Vec<&str> {
        stdout
            .lines()
            .filter_map(|l| l.trim().strip_prefix(name).map(str::trim))
            .collect()
    };
    assert_eq!(values("updatedCount"), ["3", "3"], "{stdout}");
    assert_eq!(values("degradedCount"), ["0", "0"], "{stdout}");
    // Neither component ran from target/: no agent process, no controller child.
    assert!(stdout.contains("stopping 0 agents and 3 nodes"), "{stdout}");
    assert!(!stdout.contains("controller (pid"), "{stdout}");
    // The container list once the pool was done: the controller's two replicas and an
    // agent per node, all from the pushed image.
    let listing: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("the containers (podman ps)"))
        .skip(1)
        .take_while(|l| l.contains("bootc-"))
        .collect();
    let controllers = listing
        .iter()
        .filter(|l| l.starts_with("bootc-pool-controller-"));
    let agents = listing
        .iter()
        .filter(|l| l.starts_with("bootc-node-agent-"));
    assert_eq!(controllers.count(), 2, "{listing:?}");
    assert_eq!(agents.count(), 3, "{listing:?}");
    assert!(
        listing.iter().all(|l| l.contains("/bootc-pool@sha256:")),
        "{listing:?}"
    );
}

#[test]
fn the_agent_as_a_host_service_takes_a_real_bootc_node_from_v1_to_v2() {
    if !real_archive() {
        return;
    }
    let args = ["--real-bootc", "--host-service", "--nodes", "1"];
    let stdout = run_demo(&[&args[..], &["--phase-timeout-s", "240"]].concat(), |l| {
        l.contains("] rolled") || l.starts_with("torn down")
    });
    for expected in [
        "added to v1 and v2 as a host service",
        "the agents are the nodes' own host services",
        "rolled out v2 to 1 nodes",
        "torn down after",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
    // No DaemonSet ran: the one agent that updated the node is the node's own.
    assert!(stdout.contains("stopping 0 agents and 1 nodes"), "{stdout}");
}

/// Whether podman is here (see `host_sim::pods::podman_for_test`).
fn podman_for_test() -> bool {
    let test = std::thread::current()
        .name()
        .unwrap_or("a demo from the image")
        .to_owned();
    host_sim::pods::podman_for_test(&test).is_some()
}
