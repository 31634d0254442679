//! Health units on real systemd: a node whose `/usr/local/lib/systemd/system` is a
//! directory of the test's (bound at boot) with a oneshot that succeeds, one that fails
//! (`ExecStart=/bin/false`), both pulled in by `multi-user.target`, and one that nothing
//! starts until the test does (it sleeps 3 s, then stays active).
//!
//! - `DbusHost::unit_states` reads them, a missing unit, a target, a runtime-masked
//!   timer and `boot-complete.target` (which nothing pulls in on this Debian node);
//! - the agent binary, run as the DaemonSet runs it with a poll interval of 5 minutes,
//!   reports them in `status.health` on its BootcNode in the API emulator: a unit the
//!   test starts is seen active within seconds (the agent reads settling units every
//!   2 s), the list follows the spec, and after a reboot the report is the new boot's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use bootc_crds::node::{BootcNode, NodeHealth};
use bootc_node_agent::host::{DbusHost, Host, HostError};
use host_sim::Node;
use host_sim::daemonset::{AgentOptions, DaemonSet};
use host_sim::fixtures::{create_node, digest, staged_spec, unit_states};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

/// Where the node finds the test's units.
const UNIT_DIR: &str = "/usr/local/lib/systemd/system";
/// The agent's host directory, as the node sees it.
const WORK_DIR: &str = "/var/lib/bootc-node-agent";
const DEADLINE: Duration = Duration::from_secs(90);

/// The units, and which of them `multi-user.target` wants.
const UNITS: [(&str, &str, bool); 3] = [
    (
        "health-ok.service",
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n",
        true,
    ),
    (
        "health-fail.service",
        "[Service]\nType=oneshot\nExecStart=/bin/false\n",
        true,
    ),
    (
        "health-late.service",
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sleep 3\n",
        false,
    ),
];

/// Boots node `name` with the test's units.
async fn boot_with_units(name: &str, dir: &Path, kube: Option<kube::Client>) -> Node {
    let units = dir.join("units");
    let wants = units.join("multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    for (unit, text, wanted) in UNITS {
        std::fs::write(units.join(unit), text).unwrap();
        if wanted {
            std::os::unix::fs::symlink(format!("../{unit}"), wants.join(unit)).unwrap();
        }
    }
    let mut options = common::options(name, dir);
    options.binds.push((units, UNIT_DIR.into()));
    options.kube = kube;
    common::seed_plain(&options.state_dir);
    Node::start(options).await.expect("booting the node")
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

/// Starts `unit` on the node without waiting for its job.
async fn start_unit(node: &Node, unit: &str) {
    let conn = node.connect().await.unwrap();
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        "StartUnit",
        &(unit, "replace"),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbus_host_reads_active_failed_missing_and_masked_units() {
    let dir = common::test_dir("health-dbus");
    let node = boot_with_units("health-dbus", dir.path(), None).await;
    let host = DbusHost::connect(
        &node.bus_address().unwrap(),
        WORK_DIR,
        Duration::from_secs(60),
    )
    .await
    .unwrap()
    .with_host_root(node.root_path().unwrap());
    let log = format!("node log: {}", node.log_file().display());
    // health-ok is started again here and awaited: on a loaded machine its start at boot
    // was once seen failing, which the console log does not explain. What this test
    // checks is how the states are read, not the boot.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ok = node.unit_state("health-ok.service").await.unwrap();
        if ok.active_state == "active" {
            break;
        }
        if ok.active_state != "activating" {
            start_unit(&node, "health-ok.service").await;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "health-ok.service is {ok:?}; {log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let list = names(&[
        "health-ok.service",
        "health-fail.service",
        "health-missing.service",
        "health-late.service",
        "multi-user.target",
    ]);
    let units = host.unit_states(&list).await.unwrap();
    assert_eq!(
        unit_states(&units),
        [
            ("health-ok.service", "active", "exited"),
            ("health-fail.service", "failed", "failed"),
            ("health-missing.service", "not-found", "dead"),
            ("health-late.service", "inactive", "dead"),
            ("multi-user.target", "active", "active"),
        ],
        "{log}"
    );
    // Read, not started: the unit nothing pulled in is still inactive.
    let late = node.unit_state("health-late.service").await.unwrap();
    assert_eq!(late.active_state, "inactive");

    // What boot-complete.target is on a node that nothing told to pull it in.
    let complete = host
        .unit_states(&names(&["boot-complete.target"]))
        .await
        .unwrap();
    println!(
        "boot-complete.target on a Debian node: {:?}, {:?}",
        unit_states(&complete),
        node.unit_state("boot-complete.target").await.unwrap()
    );
    assert_eq!(
        unit_states(&complete),
        [("boot-complete.target", "inactive", "dead")],
        "{log}"
    );

    // A masked unit says so.
    host.mask_update_timer().await.unwrap();
    let timer = host
        .unit_states(&names(&["bootc-fetch-apply-updates.timer"]))
        .await
        .unwrap();
    assert_eq!(timer[0].active_state, "masked", "{timer:?}");

    // Names that are no unit names never reach the bus.
    let err = host
        .unit_states(&names(&["health-ok.service", "health-ok"]))
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::BadUnitName { .. }), "{err:?}");
    node.stop().await.unwrap();
}

/// Waits until the agent reports a health that passes `check`; on timeout, says what
/// it reported last and what the node's systemd says of the units.
async fn wait_health(
    what: &str,
    (api, name): (&Api<BootcNode>, &str),
    (node, log): (&Node, &Path),
    check: impl Fn(&NodeHealth) -> bool,
) -> NodeHealth {
    let last = std::sync::Mutex::new(None);
    let context = async || {
        let mut units = Vec::new();
        for (unit, _, _) in UNITS {
            units.push(format!("{unit}: {:?}", node.unit_state(unit).await));
        }
        let last = last.lock().unwrap().clone();
        format!("health reported last: {last:?}; the node's units: {units:?}; ")
    };
    common::wait_logged_with(
        what,
        log,
        DEADLINE,
        async || {
            let health = api.get(name).await.ok()?.status?.health?;
            let passes = check(&health);
            *last.lock().unwrap() = Some(health.clone());
            passes.then_some(health)
        },
        context,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reports_the_units_in_status_health() {
    let common::AgentBed {
        dir,
        emulator: _emulator,
        client,
        kubeconfig,
        log,
    } = common::agent_bed("health-agent").await;
    let name = format!("health-agent-{}", std::process::id());
    let node = boot_with_units(&name, dir.path(), Some(client.clone())).await;

    // The node runs the seeded image: the agent has nothing to stage.
    let api: Api<BootcNode> = Api::all(client.clone());
    let mut spec = staged_spec(&format!("127.0.0.1:5000/sim/os@{}", digest('0')));
    spec.health_units = names(&["health-ok.service", "health-late.service"]);
    let bn = BootcNode::new(&name, spec);
    create_node(&api, &bn).await;
    let options = AgentOptions {
        poll_interval: "300s".to_owned(),
        ..AgentOptions::default()
    };
    let agents = DaemonSet::start_with(&node, &kubeconfig, &log, options);

    let boot_id = node.boot_id().await.unwrap();
    let first = wait_health("health", (&api, &name), (&node, &log), |h| {
        h.boot_id == boot_id
    })
    .await;
    assert!(!first.healthy);
    assert_eq!(
        unit_states(&first.units),
        [
            ("health-ok.service", "active", "exited"),
            ("health-late.service", "inactive", "dead"),
        ]
    );

    // Started now: activating for 3 s, then active; seen without waiting for a poll.
    let started = Instant::now();
    start_unit(&node, "health-late.service").await;
    let healthy = wait_health("health-late active", (&api, &name), (&node, &log), |h| {
        h.healthy
    })
    .await;
    let took = started.elapsed();
    println!("health-late.service started; healthy reported after {took:?}");
    assert!(took < Duration::from_secs(20), "seen after {took:?}");
    assert_eq!(healthy.boot_id, boot_id);

    // The spec's list changes: read at once.
    let patch = json!({"spec": {"healthUnits": [
        "health-ok.service", "health-fail.service", "health-missing.service",
    ]}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let failed = wait_health("the new list", (&api, &name), (&node, &log), |h| {
        h.units.len() == 3
    })
    .await;
    assert!(!failed.healthy);
    assert_eq!(
        unit_states(&failed.units),
        [
            ("health-ok.service", "active", "exited"),
            ("health-fail.service", "failed", "failed"),
            ("health-missing.service", "not-found", "dead"),
        ]
    );

    // A reboot: the new boot's agent reports the new boot.
    let boots = node.status().boots;
    node.reboot(false).await.unwrap();
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let new_boot = node.boot_id().await.unwrap();
    assert_ne!(new_boot, boot_id);
    let after = wait_health("the new boot's health", (&api, &name), (&node, &log), |h| {
        h.boot_id == new_boot
    })
    .await;
    assert_eq!(unit_states(&after.units), unit_states(&failed.units));

    agents.stop().await;
    node.stop().await.unwrap();
}
