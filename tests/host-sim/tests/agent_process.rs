//! The real `bootc-node-agent` binary against the API emulator and a simulated node (real
//! systemd and logind under systemd-nspawn, the bootc stand-in, a real registry with
//! basic auth): stage, approve, reboot, Idle; a new desired image during staging; an
//! agent killed mid-stage; a node that comes back on the old image; the idle agent's
//! resident size.
//!
//! The harness plays the DaemonSet ([`host_sim::daemonset`]): it starts the agent when the
//! node is up, starts it again when it exits (the agent exits when the host's bus goes away
//! at a reboot), and can kill it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::SecretRef;
use bootc_standin::{HttpResolver, ImageResolver, Version};
use host_sim::daemonset::DaemonSet;
use host_sim::fixtures::{
    approve, bootc_node, condition, create_namespace, create_node, pull_secret,
};
use host_sim::{Node, NodeOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use test_registry::Registry;

const DEADLINE: Duration = Duration::from_secs(90);

async fn wait_for<T>(what: &str, log: &Path, check: impl AsyncFnMut() -> Option<T>) -> T {
    common::wait_logged(what, log, DEADLINE, check).await
}

fn write_faults(state_dir: &Path, faults: serde_json::Value) {
    std::fs::write(state_dir.join("faults.json"), faults.to_string()).unwrap();
}

fn clear_faults(state_dir: &Path) {
    let _ = std::fs::remove_file(state_dir.join("faults.json"));
}

/// The agent's transient units still starting or running on the node.
async fn agent_units(node: &Node) -> Result<Vec<String>, String> {
    let units = node
        .list_units(
            &["activating", "active", "deactivating"],
            &["bootc-node-agent-*.service"],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(units.into_iter().map(|u| u.name).collect())
}

/// The idle agent's resident set must stay under this (twice the measured 19 MiB).
const IDLE_AGENT_RSS_CEILING_KIB: u64 = 40 * 1024;

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_drives_a_simulated_node_through_a_rollout() {
    drive_a_rollout(Version::V1_16_10).await;
}

/// The same on a bootc without `switch --download-only` (1.16.9, the stand-in's default):
/// the agent stages with its fallback, `switch` then `upgrade --download-only`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_drives_a_simulated_node_of_bootc_1_16_9_through_a_rollout() {
    drive_a_rollout(Version::V1_16_9).await;
}

async fn drive_a_rollout(version: Version) {
    let common::AgentBed {
        dir: work,
        emulator: _emulator,
        client,
        kubeconfig,
        log,
    } = common::agent_bed("agent-process").await;
    let state_dir = work.path().join("state");

    // A registry that wants credentials; the node gets them only through the pull Secret.
    let registry = Registry::start_with_auth("puller", "s3cret").unwrap();
    let mut pins = Vec::new();
    for (tag, kernel) in [("v1", "k1"), ("v2", "k2"), ("v3", "k3"), ("v4", "k4")] {
        let digest = registry
            .push("os", tag, &[("dev.bootc-pool.sim.kernel", kernel)])
            .unwrap();
        pins.push(format!("{}/os@{digest}", registry.host()));
    }
    let [v1, v2, v3, v4] = [&pins[0], &pins[1], &pins[2], &pins[3]];

    // The node starts on v1 (pulled here with the credentials, as an installer would).
    let seed_root = work.path().join("seed-root");
    std::fs::create_dir_all(seed_root.join("etc/ostree")).unwrap();
    std::fs::write(seed_root.join("etc/ostree/auth.json"), registry.auth_json()).unwrap();
    let info = HttpResolver::new(&seed_root).resolve(v1).unwrap();
    bootc_standin::seed(&state_dir, info).unwrap();

    let name = format!("agent-e2e-{}-{}", version.number(), std::process::id()).replace('.', "-");
    let mut options = NodeOptions::new(&name, &state_dir, host_sim::standin_binary().unwrap());
    options.kube = Some(client.clone());
    options.bootc_version = Some(version);
    let node = Node::start(options).await.unwrap();

    // Agents read Secrets in the install's namespace only (the controller's copies).
    create_namespace(&client, "bootc-system").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "bootc-system");
    secrets
        .create(
            &PostParams::default(),
            &pull_secret("pull", registry.auth_json()),
        )
        .await
        .unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    let mut bn = bootc_node(&name, v2);
    bn.spec.pull_secret_ref = Some(SecretRef {
        name: "pull".into(),
        namespace: "bootc-system".into(),
    });
    bn.spec.pull_secret_hash = Some("h1".into());
    create_node(&api, &bn).await;

    let agents = DaemonSet::start(&node, &kubeconfig, &log, &[]);
    let get = async || api.get(&name).await.ok();
    let reason_is = |reason: &'static str| {
        let api = api.clone();
        let name = name.clone();
        async move || {
            let n = api.get(&name).await.ok()?;
            (condition(&n, "Idle")?.1 == reason).then_some(n)
        }
    };

    // 1. Staging → Staged: a locked deployment on the host, pulled with the Secret's
    //    credentials; the host's update timer masked.
    let staged = wait_for("Staged v2", &log, reason_is("Staged")).await;
    let status = staged.status.as_ref().unwrap();
    let s = status.staged.as_ref().unwrap();
    assert!(s.download_only, "{status:?}");
    // What the stand-in's `bootc --version` says, read through a transient unit.
    assert_eq!(
        status.bootc_version.as_deref(),
        Some(version.shown()),
        "{status:?}"
    );
    assert_eq!(&s.image.image, v2);
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert!(host.staged.as_ref().unwrap().locked);
    // The DaemonSet's readiness probe: ready, the first status being reported.
    let probe = check_ready(&node);
    assert!(probe.0, "not ready after reporting Staged: {}", probe.1);
    let timer = node
        .unit_state("bootc-fetch-apply-updates.timer")
        .await
        .unwrap();
    assert_eq!(
        (timer.unit_file_state.as_str(), timer.active_state.as_str()),
        ("masked-runtime", "inactive"),
        "{timer:?}"
    );
    let auth = std::fs::metadata(node.root_path().unwrap().join("run/ostree/auth.json")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&auth.permissions()) & 0o777,
        0o600
    );

    // 2. Approval → reboot → Idle on v2, one reboot.
    let boots = node.status().boots;
    let boot_id = node.boot_id().await.unwrap();
    approve(&api, &name, "pool").await;
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let idle = wait_for("Idle on v2", &log, reason_is("Idle")).await;
    let status = idle.status.as_ref().unwrap();
    assert_eq!(&status.booted.as_ref().unwrap().image.image, v2);
    let last = status.last_reboot.as_ref().unwrap();
    assert_eq!(last.boot_id, boot_id);
    assert_ne!(node.boot_id().await.unwrap(), boot_id, "a new boot");
    assert_eq!(node.status().boots, boots + 1, "exactly one reboot");
    // The runtime mask went with the reboot; the restarted agent applied it again.
    wait_for("the timer masked again", &log, async || {
        let t = node
            .unit_state("bootc-fetch-apply-updates.timer")
            .await
            .ok()?;
        (t.unit_file_state == "masked-runtime").then_some(())
    })
    .await;

    // The idle agent's resident size (about 19 MiB for the debug build, see
    // docs/testing.md) stays under a ceiling that catches a doubling.
    let pid = agents.pid().expect("the agent runs");
    let rss = rss_kib(pid).expect("the agent's VmRSS");
    println!(
        "idle agent resident set size: {rss} KiB ({:.1} MiB)",
        rss as f64 / 1024.0
    );
    assert!(
        rss < IDLE_AGENT_RSS_CEILING_KIB,
        "idle agent resident set size {rss} KiB, over {IDLE_AGENT_RSS_CEILING_KIB} KiB"
    );

    // 3. A new desired image during staging restarts staging: the first pull hangs.
    // The pull is a `switch` on every version (`switch --download-only`, or the
    // fallback's `switch` before `upgrade --download-only`).
    write_faults(&state_dir, json!({"hang": ["switch"]}));
    let back_to_staged = json!({
        "metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: null}},
        "spec": {"desiredImage": v3, "desiredImageState": "Staged"},
    });
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&back_to_staged),
    )
    .await
    .unwrap();
    wait_for("Staging v3", &log, reason_is("Staging")).await;
    let hanging = wait_for("the hanging pull to run", &log, async || {
        let units = agent_units(&node).await.ok()?;
        (!units.is_empty()).then_some(units)
    })
    .await;
    // 4. Killed mid-stage: the new agent stops the orphaned pull and converges.
    let starts = agents.starts();
    agents.kill();
    wait_for("the agent restarted", &log, async || {
        (agents.starts() > starts && agents.pid().is_some()).then_some(())
    })
    .await;
    clear_faults(&state_dir);
    let patch = json!({"spec": {"desiredImage": v4}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let staged = wait_for("Staged v4", &log, async || {
        let n = get().await?;
        let s = n.status.as_ref()?.staged.as_ref()?;
        (condition(&n, "Idle")?.1 == "Staged" && &s.image.image == v4).then_some(n)
    })
    .await;
    assert!(staged.status.unwrap().staged.unwrap().download_only);
    // The killed agent's pull is gone (the new agent may be running a command of its
    // own, such as a status read, at any moment).
    let left = agent_units(&node).await.unwrap();
    let orphaned: Vec<&String> = left.iter().filter(|u| hanging.contains(u)).collect();
    assert!(
        orphaned.is_empty(),
        "no orphaned pull left running: {left:?}"
    );

    // 5. The node comes back on the old image: RebootDidNotApply, no second reboot.
    node.fail_next_boot_to_old_image();
    let boots = node.status().boots;
    approve(&api, &name, "pool").await;
    node.wait_booted(boots, DEADLINE).await.unwrap();
    let message = wait_for("RebootDidNotApply", &log, async || {
        let n = get().await?;
        let (status, reason, message) = condition(&n, "Degraded")?;
        (status == "True" && reason == "RebootDidNotApply").then_some(message)
    })
    .await;
    assert!(message.contains(v4.as_str()), "{message}");
    // Several passes later, still no second reboot. The agent reads `bootc status` once
    // a pass (every 2 s here, or sooner when woken), which the stand-in counts; the wait
    // ends early should the node go down or come up again meanwhile.
    const PASSES: u64 = 4;
    let seen = node.status();
    let calls = node.standin_calls("status").unwrap();
    let after = wait_for("four more agent passes", &log, async || {
        let now = node.status();
        let done = node.standin_calls("status").ok()? >= calls + PASSES;
        (done || now.ups != seen.ups || now.phase != seen.phase).then_some(now)
    })
    .await;
    assert_eq!(
        (after.phase, after.ups, after.boots),
        (host_sim::NodePhase::Up, seen.ups, boots + 1),
        "rebooted again for one approval (after {PASSES} passes)"
    );
    assert_eq!(after.boot_id, seen.boot_id, "the same boot");
    let host = bootc_standin::State::load(&state_dir).unwrap();
    assert_eq!(&host.booted.unwrap().info.image, v2);

    agents.stop().await;
    // The marker names a process that is gone: not ready.
    let probe = check_ready(&node);
    assert!(!probe.0, "ready with no agent running");
    assert!(probe.1.contains("gone"), "{}", probe.1);
    node.stop().await.unwrap();
    let _ = v1;
}

/// Runs `bootc-node-agent --check-ready` against the node's root; (passed, stderr).
fn check_ready(node: &Node) -> (bool, String) {
    let out = std::process::Command::new(host_sim::daemonset::agent_binary().unwrap())
        .arg("--check-ready")
        .arg("--host-root")
        .arg(node.root_path().unwrap())
        .env_remove("NODE_NAME")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
