//! The real `bootc-node-agent` binary against the API emulator and a simulated node (real
//! systemd and logind under systemd-nspawn, the bootc stand-in, a real registry) with
//! `rebootPolicy: AllowSoftReboot`:
//!
//! 1. a new image with the booted one's kernel: the staged deployment is soft-reboot
//!    capable, and after approval the node soft-reboots (systemd's `SoftRebootsCount` up
//!    by one, the same boot ID, no full boot) and reports Idle on the new image;
//! 2. then an image with another kernel: not soft-reboot capable, so the same policy gives
//!    a full reboot (a new boot ID, one more boot), and Idle on that image.
//!
//! The harness plays the DaemonSet ([`host_sim::daemonset`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::RebootPolicy;
use bootc_standin::resolver::KERNEL_LABEL;
use bootc_standin::{HttpResolver, ImageResolver};
use host_sim::daemonset::DaemonSet;
use host_sim::fixtures::{approve, bootc_node, create_node, idle_reason};
use host_sim::{Node, NodeOptions};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use test_registry::Registry;
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(90);

async fn wait_for<T>(what: &str, log: &Path, check: impl AsyncFnMut() -> Option<T>) -> T {
    common::wait_logged(what, log, DEADLINE, check).await
}

/// Waits until the BootcNode reports `Staged` with `image` staged.
async fn staged(api: &Api<BootcNode>, name: &str, image: &str, log: &Path) -> BootcNode {
    wait_for(&format!("Staged {image}"), log, async || {
        let n = api.get(name).await.ok()?;
        let s = n.status.as_ref()?.staged.as_ref()?;
        (idle_reason(&n)? == "Staged" && s.image.image == image).then_some(n)
    })
    .await
}

/// Waits until the BootcNode reports `Idle` with `image` booted.
async fn idle_on(api: &Api<BootcNode>, name: &str, image: &str, log: &Path) -> BootcNode {
    wait_for(&format!("Idle on {image}"), log, async || {
        let n = api.get(name).await.ok()?;
        let b = n.status.as_ref()?.booted.as_ref()?;
        (idle_reason(&n)? == "Idle" && b.image.image == image).then_some(n)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_soft_reboots_when_the_kernel_is_unchanged_and_fully_reboots_otherwise() {
    let bed = common::agent_bed("agent-soft-reboot").await;
    let (client, log) = (&bed.client, &bed.log);
    let state_dir = bed.dir.path().join("state");

    // v1 and v2 share a kernel; v3 has another one.
    let registry = Registry::start().unwrap();
    let mut pins = Vec::new();
    for (tag, kernel) in [("v1", "k1"), ("v2", "k1"), ("v3", "k2")] {
        let digest = registry.push("os", tag, &[(KERNEL_LABEL, kernel)]).unwrap();
        pins.push(format!("{}/os@{digest}", registry.host()));
    }
    let [v1, v2, v3] = [&pins[0], &pins[1], &pins[2]];

    // The node starts on v1 (pulled here, as an installer would).
    let seed_root = bed.dir.path().join("seed-root");
    std::fs::create_dir_all(&seed_root).unwrap();
    let info = HttpResolver::new(&seed_root).resolve(v1).unwrap();
    assert_eq!(info.kernel.as_deref(), Some("k1"));
    bootc_standin::seed(&state_dir, info).unwrap();

    let name = format!("agent-soft-{}", std::process::id());
    let mut options = NodeOptions::new(&name, &state_dir, host_sim::standin_binary().unwrap());
    options.log_file = Some(bed.dir.path().join("node.log"));
    options.kube = Some(client.clone());
    let node = Node::start(options).await.unwrap();
    assert_eq!(node.soft_reboots().await.unwrap(), 0);

    let api: Api<BootcNode> = Api::all(client.clone());
    let mut bn = bootc_node(&name, v2);
    bn.spec.reboot_policy = RebootPolicy::AllowSoftReboot;
    create_node(&api, &bn).await;
    let agents = DaemonSet::start(&node, &bed.kubeconfig, log, &[]);

    // 1. Same kernel: staged soft-reboot capable; approval → a soft reboot.
    let n = staged(&api, &name, v2, log).await;
    let s = n.status.as_ref().unwrap().staged.as_ref().unwrap();
    assert!(s.download_only, "{s:?}");
    assert!(s.image.soft_reboot_capable, "same kernel: {s:?}");

    let boots = node.status().boots;
    let boot_id = node.boot_id().await.unwrap();
    let soft_before = node.soft_reboots().await.unwrap();
    let approved = Instant::now();
    approve(&api, &name, "pool").await;
    node.wait_soft_rebooted(soft_before, DEADLINE)
        .await
        .unwrap();
    let soft_up = approved.elapsed();
    let idle = idle_on(&api, &name, v2, log).await;
    let soft_idle = approved.elapsed();
    println!(
        "soft reboot: node up again {soft_up:?} after approval, BootcNode Idle after {soft_idle:?}"
    );
    assert_eq!(node.soft_reboots().await.unwrap(), soft_before + 1);
    assert_eq!(
        node.boot_id().await.unwrap(),
        boot_id,
        "a soft reboot keeps the boot ID"
    );
    assert_eq!(node.status().boots, boots, "no full boot");
    let status = idle.status.as_ref().unwrap();
    assert!(status.staged.is_none(), "{status:?}");
    let last = status.last_reboot.as_ref().unwrap();
    assert_eq!(last.boot_id, boot_id);
    assert_eq!(last.soft_reboots, i64::from(soft_before));
    assert!(v2.ends_with(last.digest.as_str()), "{last:?}");
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert_eq!(&host.booted.unwrap().info.image, v2);

    // 2. Another kernel: not soft-reboot capable; the same policy → a full reboot.
    let next = json!({
        "metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: null}},
        "spec": {"desiredImage": v3, "desiredImageState": "Staged"},
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&next))
        .await
        .unwrap();
    let n = staged(&api, &name, v3, log).await;
    let s = n.status.as_ref().unwrap().staged.as_ref().unwrap();
    assert!(!s.image.soft_reboot_capable, "another kernel: {s:?}");

    let boots = node.status().boots;
    let soft_before = node.soft_reboots().await.unwrap();
    let approved = Instant::now();
    approve(&api, &name, "pool").await;
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let full_up = approved.elapsed();
    let idle = idle_on(&api, &name, v3, log).await;
    let full_idle = approved.elapsed();
    println!(
        "full reboot: node up again {full_up:?} after approval, BootcNode Idle after {full_idle:?}"
    );
    assert_ne!(node.boot_id().await.unwrap(), boot_id, "a new boot");
    assert_eq!(node.status().boots, boots + 1, "exactly one full boot");
    assert_eq!(
        node.soft_reboots().await.unwrap(),
        0,
        "a full boot resets the count"
    );
    let status = idle.status.as_ref().unwrap();
    let last = status.last_reboot.as_ref().unwrap();
    assert_eq!(last.boot_id, boot_id);
    assert_eq!(last.soft_reboots, i64::from(soft_before));
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert_eq!(&host.booted.unwrap().info.image, v3);

    agents.stop().await;
    node.stop().await.unwrap();
}
