//! The agent run as its DaemonSet says, on a node running the real bootc 1.16.9 and
//! ostree: the install applied with `kubectl apply -k` (an overlay pointing the image at
//! the one `scripts/image` built from this checkout), the DaemonSet read back from the
//! API, and its pod template run by podman the way the node's kubelet would run it.
//!
//! - The container gets what the template declares: the image and command, `NODE_NAME`
//!   from `spec.nodeName`, the service account (token, `ca.crt`, `namespace`) where a
//!   kubelet mounts it and the API service's variables, user, read-only root,
//!   capabilities, seccomp profile, memory limit, and the hostPath volumes checked by
//!   type and mounted from where this machine holds the node's directories (the node's
//!   `/run/dbus` and `/run/ostree` are bound from this machine's, see
//!   `host_sim::real::RealNode::host_path`). Its exec readiness probe runs in the
//!   container (`podman exec`) on the declared period.
//! - Like the node's kubelet, the harness starts the container once the node is up and,
//!   when the node reboots (the agent exits as the node's bus goes), starts it again in
//!   the next boot.
//! - The network is this machine's: the API emulator (TLS) and the registry listen on
//!   loopback, where a pod would reach the API's service IP.
//!
//! The agent stages v2 locked, reboots the node once on approval, and reports v2 booted,
//! with the agent's memory held to the declared limit in its cgroup.
//!
//! `capabilities_each_removed_in_turn` (ignored: four rollouts, run it with `--ignored`)
//! is the experiment behind the manifest's capabilities: the same rollout with the
//! template's `capabilities.add` replaced, printing what each variant reached.
//!
//! Fails without podman or the real-bootc archive, unless `BOOTC_SKIP_IMAGE=1` or
//! `BOOTC_SKIP_REAL=1` asks to skip (never under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod install;
mod podman;

use std::path::Path;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use deploy_check::NAMESPACE;
use host_sim::fixtures::{approve, bootc_node, create_node, idle_reason};
use host_sim::pods::daemon::{Incarnation, NodeKubelet, container_for_node};
use host_sim::pods::spec::{PodIdentity, memory_bytes};
use host_sim::pods::{service_account_files, service_env, until};
use host_sim::real::{LoggedRegistry, REPOSITORY, RealImage, RealNode, RealNodeOptions};
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;

const DAEMONSET: &str = "bootc-node-agent";
const NODE: &str = "agent-pod";
const BOOT: Duration = Duration::from_secs(180);
/// The image the pods run, built by `scripts/image` from this checkout.
const BUILT_IMAGE: &str = "localhost/bootc-pool:agent-pod-check";

/// Removes the test's tag of the image (its layers stay in the cache), also on failure.
struct Untag;

impl Drop for Untag {
    fn drop(&mut self) {
        let _ = podman::podman(&["rmi", "--ignore", BUILT_IMAGE]);
    }
}

/// How far a rollout in the pod got.
#[derive(Debug, Default)]
struct Outcome {
    /// The first boot's container passed its readiness probe.
    ready: bool,
    /// The agent reported v2 staged, locked.
    staged: bool,
    /// The node rebooted, once, on the approval.
    rebooted: bool,
    /// The agent of the new boot reported v2 booted, and its container became ready.
    idle_on_v2: bool,
    /// The declared memory limit (bytes).
    limit: Option<u64>,
    seen: Vec<Incarnation>,
}

impl Outcome {
    fn print(&self, what: &str) {
        eprintln!(
            "{what}: ready {}, staged {}, rebooted {}, idle on v2 {}",
            self.ready, self.staged, self.rebooted, self.idle_on_v2
        );
        for i in &self.seen {
            eprintln!(
                "{}: boot {}, ready {}, memory peak {} KiB of a {} KiB limit\n{}--- log\n{}",
                i.container,
                i.boot,
                i.ready,
                i.memory_peak / 1024,
                i.memory_limit / 1024,
                i.listing,
                i.log_tail()
            );
        }
    }
}

/// The image built, podman and the real-bootc archive here (`None`: skipped, reported).
fn image_and_archive_for_test(test: &str) -> Option<std::path::PathBuf> {
    podman::podman_for_test(test)?;
    let archive = host_sim::real::archive_for_test(test).unwrap()?;
    host_sim::image::require_root().unwrap();
    let out = podman::run("scripts/image", &["--tag", BUILT_IMAGE]);
    assert!(
        out.status.success(),
        "scripts/image --tag {BUILT_IMAGE}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(archive)
}

/// A real node on v1, the install applied, a BootcNode asking for v2 staged, and the
/// DaemonSet's pod run on the node (its `capabilities.add` replaced by `cap_add` when
/// given); then the approval once the pod is ready. Each phase waits at most `phase`.
async fn rollout_in_pod(archive: &Path, cap_add: Option<&[&str]>, phase: Duration) -> Outcome {
    let (emulator, dir) = install::tls_emulator().await;
    let client = install::apply(&emulator, dir.path(), BUILT_IMAGE).await;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let daemonset = daemonsets.get(DAEMONSET).await.unwrap();

    let image = RealImage::shared(archive).await.unwrap();
    let registry = LoggedRegistry::start(dir.path()).unwrap();
    let (v1, v2) = registry.push_v1_v2(&image.layout(), REPOSITORY).unwrap();
    let node = RealNode::start(
        &image,
        RealNodeOptions {
            name: NODE.to_owned(),
            dir: dir.path().join("node"),
            image: v1.clone(),
            boot_timeout: BOOT,
            kube: Some(client.clone()),
            etc: Vec::new(),
        },
    )
    .await
    .unwrap();

    let api: Api<BootcNode> = Api::all(client.clone());
    create_node(&api, &bootc_node(NODE, &v2)).await;

    let pod = PodIdentity {
        name: format!("{DAEMONSET}-x7k2q"),
        namespace: NAMESPACE.to_owned(),
        service_account: DAEMONSET.to_owned(),
        node_name: Some(NODE.to_owned()),
    };
    let service = service_env(&emulator);
    let mut run = container_for_node(&daemonset, &pod, &service, &node.shared_dirs()).unwrap();
    if let Some(caps) = cap_add {
        run.cap_add = caps.iter().map(|c| (*c).to_owned()).collect();
    }
    let files = service_account_files(&emulator, NAMESPACE, DAEMONSET);
    let mut outcome = Outcome {
        limit: run.memory_limit.as_deref().and_then(memory_bytes),
        ..Outcome::default()
    };
    let kubelet = NodeKubelet::start(
        node.subscribe(),
        &pod.name,
        podman::podman_command(),
        run,
        files,
    );
    let boots = node.status().boots;
    let ready_in = |boot: u64| {
        let kubelet = &kubelet;
        move || async move {
            kubelet
                .seen()
                .iter()
                .any(|i| i.boot == boot && i.ready)
                .then_some(())
        }
    };
    let reason_is = |reason: &'static str| {
        let api = api.clone();
        move || {
            let api = api.clone();
            async move {
                let n = api.get(NODE).await.ok()?;
                (idle_reason(&n) == Some(reason)).then_some(n)
            }
        }
    };
    outcome.ready = until(phase, ready_in(boots)).await.is_some();
    let staged = until(phase, reason_is("Staged")).await;
    outcome.staged = staged
        .as_ref()
        .and_then(|n| n.status.as_ref()?.staged.as_ref())
        .is_some_and(|s| s.download_only && s.image.image == v2);
    if outcome.ready && outcome.staged {
        approve(&api, NODE, "pool").await;
        outcome.rebooted = node.wait_booted(boots, phase).await.is_ok();
    }
    if outcome.rebooted {
        let idle = until(phase, reason_is("Idle")).await;
        let booted = idle
            .as_ref()
            .and_then(|n| Some(n.status.as_ref()?.booted.as_ref()?.image.image.clone()));
        let ready = until(phase, ready_in(boots + 1)).await.is_some();
        outcome.idle_on_v2 =
            booted.as_deref() == Some(v2.as_str()) && ready && node.version_id().unwrap() == "2";
        outcome.rebooted = node.status().boots == boots + 1;
    }
    outcome.seen = kubelet.stop().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemonsets_pod_from_the_image_stages_reboots_once_and_reports_on_a_real_node() {
    let test = "the_daemonsets_pod_from_the_image_stages_reboots_once_and_reports_on_a_real_node";
    let _untag = Untag;
    let Some(archive) = image_and_archive_for_test(test) else {
        return;
    };
    let outcome = rollout_in_pod(&archive, None, BOOT).await;
    outcome.print("as declared");
    assert!(outcome.ready && outcome.staged, "{outcome:?}");
    assert!(outcome.rebooted, "one reboot on the approval: {outcome:?}");
    assert!(outcome.idle_on_v2, "{outcome:?}");
    let first = &outcome.seen[0];
    assert_eq!(
        Some(first.memory_limit),
        outcome.limit,
        "the declared limit is the cgroup's"
    );
    for i in &outcome.seen {
        assert!(
            i.memory_peak > 0 && i.memory_peak <= i.memory_limit,
            "{i:?}"
        );
    }
    assert!(first.listing.contains(BUILT_IMAGE), "{}", first.listing);
    assert_eq!(outcome.seen.len(), 2, "one container per boot: {outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "an experiment of four rollouts: run with --ignored"]
async fn capabilities_each_removed_in_turn() {
    let test = "capabilities_each_removed_in_turn";
    let _untag = Untag;
    let Some(archive) = image_and_archive_for_test(test) else {
        return;
    };
    let variants: [(&str, &[&str]); 4] = [
        ("SYS_ADMIN and SYS_BOOT", &["SYS_ADMIN", "SYS_BOOT"]),
        ("without SYS_ADMIN", &["SYS_BOOT"]),
        ("without SYS_BOOT", &["SYS_ADMIN"]),
        ("none", &[]),
    ];
    let mut table = Vec::new();
    for (what, caps) in variants {
        let outcome = rollout_in_pod(&archive, Some(caps), Duration::from_secs(90)).await;
        outcome.print(what);
        table.push(format!(
            "{what}: ready {}, staged {}, rebooted {}, idle on v2 {}",
            outcome.ready, outcome.staged, outcome.rebooted, outcome.idle_on_v2
        ));
    }
    eprintln!(
        "capabilities added → how far the rollout got:\n{}",
        table.join("\n")
    );
    assert!(table[0].ends_with("idle on v2 true"), "{table:?}");
}
