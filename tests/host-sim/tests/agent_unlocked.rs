//! bootc issue #2425 on stand-in nodes, in both of the stand-in's modes: the desired
//! image staged unlocked by a hand-made `bootc switch`, with nothing approving a reboot.
//! bootc 1.16.10 and later answer `switch --download-only` of that image with "Image
//! specification is unchanged", exit 0, and leave it unlocked; the agent must lock it
//! (`upgrade --download-only`) with its first command, report `Staged` only once it is
//! locked, and an unplanned reboot must then boot the old image. The same node then goes
//! the whole way: staged again, approved, one reboot, `Idle` on the new image.
//!
//! The agent's poll interval is an hour: only its first pass, its own commands' ends and
//! bootc's status-updated signal make it read the host, so a lock that takes more than
//! one try shows in its log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_standin::{ImageResolver, Version};
use host_sim::Node;
use host_sim::daemonset::{AgentOptions, DaemonSet};
use host_sim::fixtures::{approve, bootc_node, create_node, idle_reason, run_in_node};
use kube::Api;
use serde_json::Value;
use test_registry::Registry;

const DEADLINE: Duration = Duration::from_secs(90);

/// Runs `bootc ARGS` inside the node as an admin on it would (its namespaces, not a
/// unit of the agent's); asserts success and returns its standard output.
fn bootc_on_node(node: &Node, args: &[&str]) -> String {
    run_in_node(
        node,
        "/usr/bin/bootc",
        args,
        &["container", "BOOTC_STANDIN_VERSION"],
    )
}

/// Whether a stored version of the BootcNode reports `Staged` while its staged
/// deployment is not locked.
fn staged_unlocked(object: &Value) -> bool {
    let status = &object["status"];
    let staged = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
        .is_some_and(|c| c["reason"] == "Staged");
    staged && status["staged"]["downloadOnly"] != true
}

/// The agent log's lines that start a staging or locking command on the host
/// (`staging image=… work=Stage(…)` or `work=Lock`).
fn commands_started(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(common::without_ansi)
        .filter(|l| l.contains(": staging image="))
        .collect()
}

async fn unlocked_by_hand_is_locked_then_an_unplanned_reboot_keeps_the_old_image(
    version: Version,
    name: &str,
) {
    let common::AgentBed {
        dir,
        emulator,
        client,
        kubeconfig,
        log,
    } = common::agent_bed(name).await;
    let registry = Registry::start().unwrap();
    let mut pins = Vec::new();
    for tag in ["v1", "v2"] {
        let digest = registry
            .push("os", tag, &[("org.opencontainers.image.version", tag)])
            .unwrap();
        pins.push((format!("{}/os@{digest}", registry.host()), digest));
    }
    let [(v1, d1), (v2, d2)] = [&pins[0], &pins[1]];

    let mut options = common::options(name, dir.path());
    options.kube = Some(client.clone());
    options.bootc_version = Some(version);
    let info = tokio::task::spawn_blocking({
        let v1 = v1.clone();
        move || bootc_standin::HttpResolver::new("/").resolve(&v1).unwrap()
    })
    .await
    .unwrap();
    bootc_standin::seed(&options.state_dir, info).unwrap();
    let state_dir = options.state_dir.clone();
    let node = Node::start(options).await.unwrap();
    let shown = bootc_on_node(&node, &["--version"]);
    assert_eq!(shown.trim(), format!("bootc {}", version.shown()));

    // By hand: v2 staged unlocked. On 1.16.10 `switch --download-only v2` then changes
    // nothing (bootc #2425), which is what a re-staging agent would run.
    bootc_on_node(&node, &["switch", v2]);
    if version == Version::V1_16_10 {
        let out = bootc_on_node(&node, &["switch", "--download-only", v2]);
        assert!(out.contains("Image specification is unchanged"), "{out}");
    }
    let host = bootc_standin::State::load(&state_dir).unwrap();
    let staged = host.staged.as_ref().unwrap();
    assert_eq!((&staged.info.digest, staged.locked), (d2, false));

    let api: Api<BootcNode> = Api::all(client.clone());
    create_node(&api, &bootc_node(name, v2)).await;
    let mut events = emulator.handle().events();
    let options = AgentOptions {
        poll_interval: "1h".to_owned(),
        ..AgentOptions::default()
    };
    let agents = DaemonSet::start_with(&node, &kubeconfig, &log, options);
    let staged = common::wait_logged("Staged v2, locked", &log, DEADLINE, async || {
        let n = api.get(name).await.ok()?;
        let locked = n.status.as_ref()?.staged.as_ref()?.download_only;
        (idle_reason(&n)? == "Staged" && locked).then_some(n)
    })
    .await;
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert!(host.staged.as_ref().unwrap().locked, "{host:?}");
    // One command, a lock: no staging, no second try.
    let commands = commands_started(&log);
    assert_eq!(commands.len(), 1, "{commands:#?}");
    assert!(commands[0].contains("work=Lock"), "{commands:#?}");
    let status = staged.status.as_ref().unwrap();
    assert_eq!(status.bootc_version.as_deref(), Some(version.shown()));
    // No stored version of the BootcNode ever said Staged of an unlocked deployment.
    while let Ok(event) = events.try_recv() {
        if event.key.plural == "bootcnodes" && event.object["metadata"]["name"] == name {
            assert!(
                !staged_unlocked(&event.object),
                "Staged reported while unlocked: {}",
                event.object["status"]
            );
        }
    }

    // An unplanned reboot (no approval): the old image boots, the locked one is dropped.
    let boots = node.status().boots;
    node.reboot(false).await.unwrap();
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert_eq!(&host.booted.as_ref().unwrap().info.digest, d1, "{host:?}");

    // The whole way: staged again by the restarted agent, approved, one reboot, Idle.
    common::wait_logged("Staged v2 again", &log, DEADLINE, async || {
        let n = api.get(name).await.ok()?;
        let locked = n.status.as_ref()?.staged.as_ref()?.download_only;
        (idle_reason(&n)? == "Staged" && locked).then_some(())
    })
    .await;
    let boots = node.status().boots;
    approve(&api, name, "pool").await;
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let idle = common::wait_logged("Idle on v2", &log, DEADLINE, async || {
        let n = api.get(name).await.ok()?;
        (idle_reason(&n)? == "Idle").then_some(n)
    })
    .await;
    let status = idle.status.as_ref().unwrap();
    assert_eq!(&status.booted.as_ref().unwrap().image.image, v2);
    assert_eq!(
        node.status().boots,
        boots + 1,
        "one reboot for one approval"
    );
    agents.stop().await;
    node.stop().await.unwrap();
    let _ = v1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_bootc_1_16_10_a_hand_staged_unlocked_image_is_locked_not_staged_again() {
    unlocked_by_hand_is_locked_then_an_unplanned_reboot_keeps_the_old_image(
        Version::V1_16_10,
        "unlocked-1-16-10",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_bootc_1_16_9_a_hand_staged_unlocked_image_is_locked_not_staged_again() {
    unlocked_by_hand_is_locked_then_an_unplanned_reboot_keeps_the_old_image(
        Version::V1_16_9,
        "unlocked-1-16-9",
    )
    .await;
}
