//! The agent's host access against the real bootc 1.16.9 and ostree 2026.4: nodes whose
//! sysroot bootc deployed itself, booted by the harness from the highest-version boot
//! entry, with the real `ostree-finalize-staged` at shutdown (see `host_sim::real`).
//!
//! Skipped, with a message, only when the archive directory is absent
//! (`$BOOTC_REAL_ARCHIVE_DIR`, default `shared/tools/real-bootc` beside the checkout).
//! The tests run one at a time (each boots a node on a 2-core machine); the node image is
//! built once per process and cached across runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bootc_crds::ImageRef;
use bootc_crds::node::{BootcNode, BootcNodeSpec};
use bootc_crds::pool::SignaturePolicy;
use bootc_node_agent::bootc_status::BootcHost as Status;
use bootc_node_agent::host::{DbusHost, Host, HostError};
use bootc_node_agent::machine::Unlock;
use host_sim::daemonset::{AgentOptions, DaemonSet, Isolation};
use host_sim::fixtures::{
    approve, bootc_node, booted_digest, condition, create_namespace, create_node, digest_of, pin,
    pull_secret, rollback_digest, run_in_node, spec_image, stage_locked, staged, staged_spec,
};
use host_sim::real::{LoggedRegistry, REPOSITORY, RealImage, RealNode, RealNodeOptions, Request};

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
const BOOT: Duration = Duration::from_secs(120);
/// The agent's host directory, as the node sees it.
const WORK_DIR: &str = "/var/lib/bootc-node-agent";

/// One real node at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A real node booted on v1, with v1 and v2 in a registry of its own. Fields drop in
/// order: node (container, then sysroot) before registry before the directory.
struct Fixture {
    node: RealNode,
    registry: LoggedRegistry,
    dir: common::TestDir,
    /// `HOST/node@sha256:…` of v1 and v2.
    v1: String,
    v2: String,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Fixture {
    /// Boots node `name` with v1 deployed by tag (`by_tag`) or by digest.
    async fn new(name: &str, by_tag: bool, kube: Option<kube::Client>) -> Option<Fixture> {
        Fixture::with_etc(name, by_tag, kube, Vec::new()).await
    }

    /// [`Fixture::new`], with `etc` written under the node's `/etc` before its first
    /// boot (paths relative to `/etc`).
    async fn with_etc(
        name: &str,
        by_tag: bool,
        kube: Option<kube::Client>,
        etc: Vec<(String, Vec<u8>)>,
    ) -> Option<Fixture> {
        let archive = common::real_archive()?;
        let serial = SERIAL.lock().await;
        host_sim::image::require_root().unwrap();
        let started = Instant::now();
        let image = RealImage::shared(&archive)
            .await
            .expect("the real-bootc node image");
        eprintln!(
            "{name}: node image {} ready in {:?}",
            image.key(),
            started.elapsed()
        );
        let dir = common::test_dir(name);
        let registry = LoggedRegistry::start(dir.path()).unwrap();
        let started = Instant::now();
        let (v1, v2) = registry.push_v1_v2(&image.layout(), REPOSITORY).unwrap();
        eprintln!("{name}: v1 and v2 pushed in {:?}", started.elapsed());
        let first = if by_tag {
            format!("{}/{REPOSITORY}:v1", registry.host())
        } else {
            v1.clone()
        };
        let options = RealNodeOptions {
            name: name.to_owned(),
            dir: dir.path().join("node"),
            image: first,
            boot_timeout: BOOT,
            kube,
            etc,
        };
        let node = RealNode::start(&image, options)
            .await
            .expect("the real node");
        let t = node.timings();
        eprintln!(
            "{name}: deployed v1 in {:?}, first boot in {:?}, sysroot {} KiB",
            t.deploy,
            t.first_boot,
            node.sysroot().disk_usage_kib().unwrap_or_default()
        );
        Some(Fixture {
            node,
            registry,
            dir,
            v1,
            v2,
            _serial: serial,
        })
    }

    /// What a test of the agent binary on a real node starts from: the emulator with the CRDs,
    /// a client of it, the node ([`Fixture::with_etc`], by digest, known to the emulator),
    /// the agent's kubeconfig and log, and the BootcNode API. `None` where the real-bootc
    /// tests are skipped.
    async fn for_agent(
        name: &str,
        etc: Vec<(String, Vec<u8>)>,
    ) -> Option<(
        kube_emulator::Emulator,
        kube::Client,
        Fixture,
        PathBuf,
        PathBuf,
        kube::Api<BootcNode>,
    )> {
        let (emulator, client) = common::emulator_with_crds().await;
        let f = Fixture::with_etc(name, false, Some(client.clone()), etc).await?;
        let (kubeconfig, log) = f.agent_files(&emulator);
        let api = kube::Api::all(client.clone());
        Some((emulator, client, f, kubeconfig, log, api))
    }

    async fn host(&self) -> DbusHost {
        DbusHost::connect(&self.node.bus_address().unwrap(), WORK_DIR, COMMAND_TIMEOUT)
            .await
            .expect("connecting DbusHost to the node's bus")
            .with_host_root(self.node.root_path().unwrap())
    }

    /// The emulator's kubeconfig and the agent's log, in the test's directory.
    fn agent_files(&self, emulator: &kube_emulator::Emulator) -> (PathBuf, PathBuf) {
        let kubeconfig = self.dir.path().join("kubeconfig");
        emulator.write_kubeconfig(&kubeconfig).unwrap();
        (kubeconfig, self.dir.path().join("agent.log"))
    }

    /// v2 plus a layer of 48 MiB of random bytes, pushed as v3, and the proxy (about
    /// 6 MB/s) it is pulled through: `HOST/node@DIGEST` at the proxy. Keep the proxy.
    async fn slow_v3(&self) -> (String, host_sim::throttle::Throttle) {
        let image = RealImage::shared(&common::real_archive().unwrap())
            .await
            .unwrap();
        let layout = layout_with_big_layer(&image.layout(), &self.dir.path().join("v3"), 48 << 20);
        let d3 = self
            .registry
            .push_layout(&layout, "v3", REPOSITORY)
            .unwrap();
        let target: std::net::SocketAddr = self.registry.host().parse().unwrap();
        let slow = host_sim::throttle::Throttle::start(target, 6_000_000)
            .await
            .unwrap();
        (format!("{}/{REPOSITORY}@{d3}", slow.host()), slow)
    }

    fn log(&self) -> String {
        format!("node log: {}", self.node.log_file().display())
    }

    /// Reboots through the node's logind (as an unasked reboot would) and waits for the
    /// next boot.
    async fn reboot(&self) {
        let boots = self.node.status().boots;
        self.node.reboot(false).await.unwrap();
        self.node.wait_booted(boots, BOOT).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_by_digest_on_a_node_deployed_by_tag_is_locked_and_an_unasked_reboot_drops_it() {
    let Some(f) = Fixture::new("real-tag", true, None).await else {
        return;
    };
    let host = f.host().await;
    assert_eq!(host.bootc_version().await.unwrap(), "1.16.9");
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(f.node.version_id().unwrap(), "1");

    let started = Instant::now();
    let status = stage_locked(&host, &f.v2).await;
    eprintln!("real-tag: stage v1 → v2 took {:?}", started.elapsed());
    assert_eq!(spec_image(&status), Some(f.v2.as_str()));
    assert!(f.node.run_ostree_has("staged-deployment-locked"));

    // (b) An unasked reboot: the locked deployment is dropped, v1 boots again.
    f.reboot().await;
    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(staged(&status), None, "{status:#?}");
    assert_eq!(f.node.version_id().unwrap(), "1");

    // The agent stages again, locked again.
    stage_locked(&host, &f.v2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_downloaded_boots_the_target_once_and_rollback_fetches_nothing() {
    let Some(f) = Fixture::new("real-apply", false, None).await else {
        return;
    };
    let host = f.host().await;
    host.stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap();

    // (c) Approval: `upgrade --from-downloaded`, then exactly one reboot.
    host.unlock(Unlock::FromDownloaded).await.unwrap();
    let status = host.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(false))),
        "unlocked: {status:#?}"
    );
    assert!(!f.node.run_ostree_has("staged-deployment-locked"));
    let boots = f.node.status().boots;
    let before = host.identity().await.unwrap();
    let started = Instant::now();
    host.reboot(false).await.unwrap();
    f.node.wait_booted(boots, BOOT).await.unwrap();
    eprintln!("real-apply: reboot into v2 took {:?}", started.elapsed());
    assert_eq!(f.node.status().boots, boots + 1, "exactly one reboot");
    let host = f.host().await;
    assert_ne!(host.identity().await.unwrap().boot_id, before.boot_id);
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v2), "{}", f.log());
    assert_eq!(staged(&status), None);
    assert_eq!(
        f.node.version_id().unwrap(),
        "2",
        "the running tree is v2's"
    );
    assert_eq!(rollback_digest(&status).as_deref(), Some(digest_of(&f.v1)));

    // (e) Rollback: no pull, the next boot runs v1.
    let seen = f.registry.request_count();
    host.unlock(Unlock::Rollback).await.unwrap();
    let status = host.status().await.unwrap();
    assert!(status.status.rollback_queued, "{status:#?}");
    f.reboot().await;
    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(f.node.version_id().unwrap(), "1");
    let after: Vec<_> = f.registry.requests().into_iter().skip(seen).collect();
    eprintln!("real-apply: registry requests during the rollback: {after:?}");
    assert!(
        !after.iter().any(|r| r.is_blob_fetch()),
        "a rollback fetched blobs: {after:?}"
    );
    assert!(
        f.registry.requests().iter().any(|r| r.is_blob_fetch()),
        "the access log does show the earlier pulls"
    );
}

/// Polls the node's `/run/ostree` while `stage` runs: how long a staged deployment was
/// there without the lock (the unlocked window between `switch` and `upgrade
/// --download-only`), and whether `reboot_inside` asked for a reboot in it.
async fn watch_window(
    f: &Fixture,
    host: DbusHost,
    pin: ImageRef,
    reboot_inside: bool,
) -> (Option<Duration>, Result<(), HostError>) {
    let stage = tokio::spawn(async move { host.stage(&pin, SignaturePolicy::Default).await });
    let mut opened: Option<Instant> = None;
    let mut window = None;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    while !stage.is_finished() && Instant::now() < deadline {
        let staged = f.node.run_ostree_has("staged-deployment");
        let locked = f.node.run_ostree_has("staged-deployment-locked");
        match (opened, staged && !locked) {
            (None, true) => {
                opened = Some(Instant::now());
                if reboot_inside {
                    f.node.reboot(false).await.unwrap();
                }
            }
            (Some(at), false) if window.is_none() => window = Some(at.elapsed()),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let result = stage.await.unwrap();
    (window, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unlocked_window_of_switch_then_download_only_and_a_reboot_inside_it() {
    let Some(f) = Fixture::new("real-window", false, None).await else {
        return;
    };
    // (d) Measured: the window the fallback leaves with bootc 1.16.9.
    let (window, result) = watch_window(&f, f.host().await, pin(&f.v2), false).await;
    result.unwrap();
    let window = window.expect("a staged deployment without the lock was seen");
    eprintln!(
        "real-window: unlocked window between `switch` and `upgrade --download-only`: {window:?}"
    );
    let status = f.host().await.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(true)))
    );

    // Dropped by an unasked reboot, then staged again with a reboot asked inside the window.
    f.reboot().await;
    let boots = f.node.status().boots;
    let (_, result) = watch_window(&f, f.host().await, pin(&f.v2), true).await;
    eprintln!("real-window: stage with a reboot inside the window: {result:?}");
    f.node.wait_booted(boots, BOOT).await.unwrap();
    let host = f.host().await;
    let status = host.status().await.unwrap();
    eprintln!(
        "real-window: after that reboot: booted {} (v1 {}, v2 {}), VERSION_ID {}",
        booted_digest(&status),
        digest_of(&f.v1),
        digest_of(&f.v2),
        f.node.version_id().unwrap()
    );
    assert!(
        result.is_err(),
        "the stage cut short by the reboot is not reported staged"
    );
    // The staging unit is stopped before `ostree-finalize-staged` at shutdown, and its
    // ExecStopPost locks the half-staged deployment: the reboot does not apply it.
    assert_eq!(
        booted_digest(&status),
        digest_of(&f.v1),
        "a reboot inside the window applied the unapproved image: {}",
        f.log()
    );
    assert_eq!(f.node.version_id().unwrap(), "1");
    assert_eq!(staged(&status), None, "{status:#?}");
    let journal = std::fs::read_to_string(f.node.log_file()).unwrap_or_default();
    eprintln!(
        "real-window: finalize-staged said: {:?}",
        journal
            .lines()
            .filter(|l| l.contains("finaliz") || l.contains("Not finalizing"))
            .collect::<Vec<_>>()
    );

    // And the agent stages again, locked, after that boot.
    stage_locked(&host, &f.v2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_failing_bootc_reads_as_such() {
    let Some(f) = Fixture::new("real-fail", false, None).await else {
        return;
    };
    // (f) Missing: systemd cannot execute it (203/EXEC).
    let host = f.host().await.with_bootc_path("/usr/bin/bootc-absent");
    let err = host.status().await.unwrap_err();
    let message = err.to_string();
    eprintln!("real-fail: missing: {message}");
    assert!(matches!(err, HostError::NotFound { .. }), "{err:?}");
    assert!(message.contains("bootc not found"), "{message}");
    assert!(!message.contains("exit status 203"), "{message}");

    // Failing: bootc's own `error:` line.
    let host = f.host().await;
    let absent = format!(
        "{}/{REPOSITORY}@sha256:{}",
        f.registry.host(),
        "0".repeat(64)
    );
    let err = host
        .stage(&pin(&absent), SignaturePolicy::Default)
        .await
        .unwrap_err();
    eprintln!("real-fail: failing: {err}");
    match &err {
        HostError::CommandFailed {
            exit_status,
            stderr,
            ..
        } => {
            assert_ne!(*exit_status, 0);
            assert!(
                stderr.lines().any(|l| l.starts_with("error:")),
                "bootc's error line: {stderr:?}"
            );
        }
        other => panic!("expected CommandFailed, got {other:?}"),
    }
    let status = host.status().await.unwrap();
    assert_eq!(staged(&status), None);
    assert_eq!(booted_digest(&status), digest_of(&f.v1));
}

/// The Kubernetes Node's `Ready` condition status.
async fn node_ready(client: &kube::Client, name: &str) -> Option<String> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let node = nodes.get(name).await.ok()?;
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_binary_stages_locked_reports_it_and_reboots_once_on_approval() {
    let name = "real-agent";
    let Some((emulator, client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    create_node(&api, &bootc_node(name, &f.v2)).await;
    // Every stored version of the BootcNode, to find any `Staged` report of an unlocked
    // deployment however briefly it stood.
    let mut events = emulator.handle().events();
    let agents = DaemonSet::start(&f.node, &kubeconfig, &log, &[]);
    let reason_is = |reason: &'static str| {
        let api = api.clone();
        async move || {
            let n = api.get(name).await.ok()?;
            (condition(&n, "Idle")?.1 == reason).then_some(n)
        }
    };
    let started = Instant::now();
    // With 1.16.9's fallback, `switch` first leaves an unlocked deployment, which the
    // status-updated signal makes the agent read while its `upgrade --download-only`
    // still runs: that is still `Staging`. `Staged` comes only once it is locked.
    let premature = AtomicBool::new(false);
    let staged = common::wait_logged("Staged v2, locked", &log, BOOT, async || {
        let n = reason_is("Staged")().await?;
        let locked = n.status.as_ref()?.staged.as_ref()?.download_only;
        if !locked {
            premature.store(true, Ordering::Relaxed);
        }
        locked.then_some(n)
    })
    .await;
    eprintln!(
        "real-agent: Staged (locked) reported {:?} after the agent started; reported \
         Staged while unlocked first: {}",
        started.elapsed(),
        premature.load(Ordering::Relaxed)
    );
    let mut versions = 0;
    while let Ok(event) = events.try_recv() {
        if event.key.plural != "bootcnodes" || event.object["metadata"]["name"] != name {
            continue;
        }
        versions += 1;
        let status = &event.object["status"];
        let staged_reason = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
            .is_some_and(|c| c["reason"] == "Staged");
        if staged_reason && status["staged"]["downloadOnly"] != true {
            premature.store(true, Ordering::Relaxed);
        }
    }
    eprintln!("real-agent: {versions} stored versions of the BootcNode checked");
    assert!(
        !premature.load(Ordering::Relaxed),
        "the agent reported Staged while the deployment was unlocked"
    );
    let status = staged.status.as_ref().unwrap();
    let s = status.staged.as_ref().unwrap();
    assert!(s.download_only, "locked: {status:?}");
    assert_eq!(s.image.image, f.v2);
    assert_eq!(status.bootc_version.as_deref(), Some("1.16.9"));
    assert_eq!(
        status.booted.as_ref().map(|b| b.image.image.as_str()),
        Some(f.v1.as_str()),
        "{status:?}"
    );
    assert_eq!(node_ready(&client, name).await.as_deref(), Some("True"));
    assert!(f.node.run_ostree_has("staged-deployment-locked"));
    assert_timer_masked(&f, &log).await;

    // Approval → from-downloaded → exactly one reboot → Idle on v2.
    let boots = f.node.status().boots;
    approve(&api, name, "pool").await;
    f.node.wait_booted(boots, BOOT).await.unwrap();
    let idle = common::wait_logged("Idle on v2", &log, BOOT, reason_is("Idle")).await;
    let status = idle.status.as_ref().unwrap();
    assert_eq!(status.booted.as_ref().unwrap().image.image, f.v2);
    assert_eq!(f.node.version_id().unwrap(), "2");
    common::wait_logged("Ready again", &log, BOOT, async || {
        (node_ready(&client, name).await.as_deref() == Some("True")).then_some(())
    })
    .await;
    // The mask is a runtime one (gone with the boot, so that removing the agent gives
    // the host its timer back): the agent of the new boot masks it again.
    assert_timer_masked(&f, &log).await;
    // A few polls later (every 2 s), still one reboot.
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            f.node.status().boots,
            boots + 1,
            "one reboot for one approval"
        );
    }
    agents.stop().await;
}

/// Waits until the node's update timer is masked at runtime and not active.
async fn assert_timer_masked(f: &Fixture, log: &std::path::Path) {
    let timer = "bootc-fetch-apply-updates.timer";
    let state = common::wait_logged("the update timer masked", log, BOOT, async || {
        let state = f.node.unit_state(timer).await.ok()?;
        (state.unit_file_state == "masked-runtime").then_some(state)
    })
    .await;
    assert_ne!(state.active_state, "active", "{timer}: {state:?}");
}

/// The agent's transient units on the node (`/run/systemd/transient`): name and unit
/// file text.
fn transient_units(f: &Fixture) -> Vec<(String, String)> {
    let dir = f.node.root_path().unwrap().join("run/systemd/transient");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.starts_with("bootc-node-agent-")
                .then(|| Some((name, std::fs::read_to_string(e.path()).ok()?)))?
        })
        .collect()
}

/// The processes of the node's unit `unit` (found by their cgroup).
fn unit_pids(unit: &str) -> Vec<i32> {
    let suffix = format!("/{unit}");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.lines().any(|l| l.ends_with(&suffix)))
        })
        .collect()
}

/// Sends `signal` to every process of the node's unit `unit` until no new one appears
/// (a process forked meanwhile gets it too); how many were signalled.
fn signal_unit(unit: &str, signal: nix::sys::signal::Signal) -> usize {
    let mut done = std::collections::BTreeSet::new();
    loop {
        let new: Vec<i32> = unit_pids(unit)
            .into_iter()
            .filter(|p| !done.contains(p))
            .collect();
        if new.is_empty() {
            return done.len();
        }
        for pid in new {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
            done.insert(pid);
        }
    }
}

/// Runs `bootc ARGS` inside the node, as an admin on it would (all of its namespaces).
fn bootc_on_node(f: &Fixture, args: &[&str]) {
    on_node(f, "/usr/bin/bootc", args);
}

/// Runs `program` inside the node, asserting success; its standard output.
fn on_node(f: &Fixture, program: &str, args: &[&str]) -> String {
    run_in_node(&f.node, program, args, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_in_its_pod_keeps_its_running_pull_across_a_restart_and_sees_hand_made_changes() {
    let name = "real-pod";
    let Some((emulator, _client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    // v2 shares all but 324 bytes with v1, which the node has, and stages in about a
    // second: the target is v2 plus a 48 MiB layer, pulled through a proxy sending about
    // 6 MB/s, so the pull is surely still running when the test holds it.
    let (v2, _slow) = f.slow_v3().await;
    create_node(&api, &bootc_node(name, &v2)).await;
    // A poll interval far beyond the test: only bootc's status-updated signal (and the
    // agent's own commands) make the agent read the host again.
    let options = AgentOptions {
        isolation: Isolation::Pod,
        poll_interval: "1h".to_owned(),
        extra_args: Vec::new(),
    };
    let agents = DaemonSet::start_with(&f.node, &kubeconfig, &log, options);

    // The first agent's staging command, running.
    let (unit, _) = common::wait_logged("the staging unit running", &log, BOOT, async || {
        transient_units(&f)
            .into_iter()
            .find(|(_, text)| text.contains("switch") && text.contains("--download-only"))
    })
    .await;
    // Held still (SIGSTOP) while the agent is killed and started again, so that the
    // second agent surely finds it running; then let go. The unit may be listed before
    // its process is in it: wait for one to stop.
    use nix::sys::signal::Signal;
    common::wait_logged(
        "a process in the staging unit, stopped",
        &log,
        BOOT,
        async || (signal_unit(&unit, Signal::SIGSTOP) > 0).then_some(()),
    )
    .await;
    let (outer, inner) = agents.agent_pids().expect("the agent runs");
    assert_eq!(inner, 1, "PID 1 in its pod");
    agents.kill();
    let (_, inner2) = common::wait_logged("the agent again", &log, BOOT, async || {
        agents.agent_pids().filter(|&(o, _)| o != outer)
    })
    .await;
    assert_eq!(inner2, 1, "the same PID in every incarnation");
    common::wait_logged("the second agent waiting", &log, BOOT, async || {
        let text = std::fs::read_to_string(&log).ok()?;
        text.contains("commands a previous agent started are still running")
            .then_some(())
    })
    .await;
    assert!(!unit_pids(&unit).is_empty(), "{unit} ended while held");
    signal_unit(&unit, Signal::SIGCONT);
    let staged = common::wait_logged("Staged v2, locked", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        let s = n.status.as_ref()?;
        (condition(&n, "Idle")?.1 == "Staged" && s.staged.as_ref()?.download_only).then_some(n)
    })
    .await;
    let status = staged.status.as_ref().unwrap();
    assert_eq!(status.staged.as_ref().unwrap().image.image, v2);
    let text = std::fs::read_to_string(&log).unwrap();
    let restart = text
        .find("commands a previous agent started are still running")
        .unwrap_or_else(|| panic!("the second agent did not wait for `{unit}`:\n{text}"));
    let after = &text[restart..];
    assert!(after.contains(&unit), "{after}");
    assert!(
        !after.contains("\"staging\"") && !after.contains(" staging "),
        "the second agent staged again instead of keeping the first one's pull:\n{after}"
    );
    // No unit of the second agent ran `switch`: the first one's pull was kept.
    let switches = transient_units(&f)
        .into_iter()
        .filter(|(n, t)| n != &unit && t.contains("switch"))
        .count();
    assert_eq!(switches, 0, "{:?}", transient_units(&f));

    // A change made by hand on the node reaches the BootcNode through bootc's
    // status-updated signal (the agent's poll is an hour away).
    let mut events = emulator.handle().events();
    let by_tag = format!("{}/{}:v1", f.registry.host(), host_sim::real::REPOSITORY);
    let started = Instant::now();
    bootc_on_node(&f, &["switch", &by_tag]);
    let switched = started.elapsed();
    let mut statuses = Vec::new();
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            };
            if event.key.plural != "bootcnodes" || event.object["metadata"]["name"] != name {
                continue;
            }
            let staged = event.object["status"]["staged"].to_string();
            let shows_v1 = staged.contains(&by_tag) || staged.contains(digest_of(&f.v1));
            statuses.push(staged);
            if shows_v1 {
                return Some(started.elapsed());
            }
        }
    })
    .await;
    let seen = seen.ok().flatten().unwrap_or_else(|| {
        panic!(
            "the hand-made switch never reached the BootcNode; staged as reported: \
             {statuses:#?}; {}",
            f.log()
        )
    });
    eprintln!(
        "real-pod: hand-made `bootc switch` took {switched:?}; the BootcNode showed it \
         {:?} after it ended",
        seen.saturating_sub(switched)
    );
    // Then the agent puts its own target back, locked.
    common::wait_logged("Staged v2 again", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        let s = n.status.as_ref()?.staged.as_ref()?;
        (s.image.image == v2 && s.download_only).then_some(())
    })
    .await;
    agents.stop().await;
}

/// The `Degraded` condition's reason and message, when it is `True`.
fn degraded(node: &BootcNode) -> Option<(String, String)> {
    let (status, reason, message) = condition(node, "Degraded")?;
    (status == "True").then_some((reason, message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_secret_reaches_real_bootc_and_wrong_credentials_read_as_such() {
    use k8s_openapi::api::core::v1::Secret;
    let name = "real-auth";
    let Some((_emulator, client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    let private = LoggedRegistry::start_with_auth(f.dir.path(), "puller", "right").unwrap();
    let layout = RealImage::shared(&common::real_archive().unwrap())
        .await
        .unwrap()
        .layout();
    let digest = private.push_layout(&layout, "v2", REPOSITORY).unwrap();
    let target = format!("{}/{REPOSITORY}@{digest}", private.host());

    let secret = |password: &str| pull_secret("pull", private.auth_json_for("puller", password));
    // Agents read Secrets in the install's namespace only (the controller's copies).
    create_namespace(&client, "bootc-system").await;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), "bootc-system");
    secrets
        .create(&PostParams::default(), &secret("wrong"))
        .await
        .unwrap();
    let spec = BootcNodeSpec {
        pull_secret_ref: Some(bootc_crds::pool::SecretRef {
            name: "pull".into(),
            namespace: "bootc-system".into(),
        }),
        pull_secret_hash: Some("first".into()),
        health_units: Vec::new(),
        ..staged_spec(&target)
    };
    api.create(&PostParams::default(), &BootcNode::new(name, spec))
        .await
        .unwrap();
    let options = AgentOptions {
        isolation: Isolation::Pod,
        ..AgentOptions::default()
    };
    let agents = DaemonSet::start_with(&f.node, &kubeconfig, &log, options);

    // Wrong credentials: the reason says so, in words.
    let (reason, message) =
        common::wait_logged("Degraded for the credentials", &log, BOOT, async || {
            degraded(&api.get(name).await.ok()?)
        })
        .await;
    eprintln!("real-auth: wrong credentials read as {reason}: {message}");
    assert_eq!(reason, "RegistryAuthFailed", "{message}");
    assert!(!message.contains("exit status"), "{message}");
    assert!(message.contains(&private.host()), "{message}");
    // The secret reached the node as bootc reads it.
    let auth = f.node.root_path().unwrap().join("run/ostree/auth.json");
    let meta = std::fs::metadata(&auth).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        private.auth_json_for("puller", "wrong")
    );
    assert!(
        private.requests().iter().any(|r| r.status == 401),
        "{:?}",
        private.requests()
    );

    // The right ones: real bootc pulls with them.
    secrets
        .replace("pull", &PostParams::default(), &secret("right"))
        .await
        .unwrap();
    let fix = json!({"spec": {"pullSecretHash": "second"}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .unwrap();
    let staged = common::wait_logged(
        "Staged with the right credentials",
        &log,
        BOOT,
        async || {
            let n = api.get(name).await.ok()?;
            let s = n.status.as_ref()?.staged.as_ref()?;
            (s.image.image == target && s.download_only).then_some(n)
        },
    )
    .await;
    assert!(degraded(&staged).is_none(), "{:?}", staged.status);
    assert!(
        private.requests().iter().any(Request::is_blob_fetch),
        "{:?}",
        private.requests()
    );
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        private.auth_json_for("puller", "right")
    );
    agents.stop().await;
}

/// `status.progress` of a stored BootcNode version, with when it was stored.
#[derive(Debug, Clone)]
struct ProgressSeen {
    at: Duration,
    done: u64,
    total: u64,
    summary: String,
    idle_reason: String,
    /// The rest of the status, to tell a progress-only write from others.
    rest: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reports_the_real_bootcs_staging_progress_every_few_seconds() {
    let name = "real-progress";
    let Some((emulator, _client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    // v2 shares all but 324 bytes with v1, which the node has: v3 is v2 plus a layer of
    // 48 MiB of random bytes, pulled through a proxy that sends about 6 MB/s, so the
    // pull lasts long enough for several progress writes (at most one per 5 s).
    let (v2, slow) = f.slow_v3().await;
    let d3 = digest_of(&v2).to_owned();
    create_node(&api, &bootc_node(name, &v2)).await;
    let mut events = emulator.handle().events();
    let started = Instant::now();
    let agents = DaemonSet::start(&f.node, &kubeconfig, &log, &[]);
    let mut seen: Vec<ProgressSeen> = Vec::new();
    let deadline = tokio::time::Instant::now() + BOOT;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no Staged report; progress seen {seen:#?}; agent log {}",
                    log.display()
                )
            })
            .unwrap();
        if event.key.plural != "bootcnodes" || event.object["metadata"]["name"] != name {
            continue;
        }
        let status = &event.object["status"];
        let idle_reason = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
            .and_then(|c| c["reason"].as_str())
            .unwrap_or_default()
            .to_owned();
        if idle_reason == "Staged" {
            assert!(
                status["progress"].is_null(),
                "progress dropped once staged: {status}"
            );
            break;
        }
        let p = &status["progress"];
        if p.is_object() {
            assert_eq!(p["imageDigest"], d3.as_str());
            seen.push(ProgressSeen {
                at: started.elapsed(),
                done: p["bytesDone"].as_u64().unwrap(),
                total: p["bytesTotal"].as_u64().unwrap(),
                summary: p["summary"].as_str().unwrap_or_default().to_owned(),
                idle_reason,
                rest: {
                    let mut rest = status.clone();
                    rest.as_object_mut().unwrap().remove("progress");
                    rest.to_string()
                },
            });
        }
    }
    eprintln!(
        "real-progress: Staged after {:?}; progress versions:",
        started.elapsed()
    );
    for s in &seen {
        eprintln!(
            "  {:>6.1} s  {:>10} / {:>10} bytes  {:<24} ({})",
            s.at.as_secs_f64(),
            s.done,
            s.total,
            s.summary,
            s.idle_reason
        );
    }
    let moving: Vec<&ProgressSeen> = seen
        .iter()
        .filter(|s| s.total > 0 && s.done > 0 && s.done < s.total)
        .collect();
    assert!(
        !moving.is_empty(),
        "a report part-way through the pull: {seen:#?}"
    );
    let mut done: Vec<u64> = seen.iter().map(|s| s.done).collect();
    done.dedup();
    assert!(done.len() >= 2, "the bytes moved between writes: {seen:#?}");
    assert!(
        done.windows(2).all(|w| w[0] <= w[1]),
        "never backwards: {seen:#?}"
    );
    // A write of the progress alone comes at least 5 s after the previous progress
    // change; writes with other news carry the latest report at once.
    let mut progress_only = 0;
    for pair in seen.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.rest == b.rest && (a.done, &a.summary) != (b.done, &b.summary) {
            progress_only += 1;
            let gap = b.at.saturating_sub(a.at);
            assert!(
                gap >= Duration::from_millis(4500),
                "two progress writes {gap:?} apart: {seen:#?}"
            );
        }
    }
    assert!(
        progress_only >= 1,
        "a write of the progress alone: {seen:#?}"
    );
    agents.stop().await;
    drop(slow);
}

/// Runs `program` on this machine, asserting success; its standard output.
fn run_here(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stores `path` as a blob of `layout`; its digest and size.
fn add_blob(layout: &std::path::Path, path: &std::path::Path) -> (String, u64) {
    let sum = run_here("sha256sum", &[path.to_str().unwrap()]);
    let hex = sum.split_whitespace().next().unwrap().to_owned();
    let size = path.metadata().unwrap().len();
    std::fs::rename(path, layout.join("blobs/sha256").join(&hex)).unwrap();
    (format!("sha256:{hex}"), size)
}

/// Stores `doc` as a blob of `layout`; its digest and size.
fn add_json(layout: &std::path::Path, doc: &serde_json::Value) -> (String, u64) {
    let path = layout.join("new.json");
    std::fs::write(&path, serde_json::to_vec(doc).unwrap()).unwrap();
    add_blob(layout, &path)
}

/// A copy of `layout` (hard links: nothing in it is written in place) with `v3`: `v2`
/// plus an uncompressed layer holding `/usr/share/host-sim-big.bin`, `size` random
/// bytes.
fn layout_with_big_layer(layout: &std::path::Path, dir: &std::path::Path, size: u64) -> PathBuf {
    let copy = dir.join("oci");
    std::fs::create_dir_all(dir).unwrap();
    run_here(
        "cp",
        &["-al", layout.to_str().unwrap(), copy.to_str().unwrap()],
    );
    let tree = dir.join("tree/usr/share");
    std::fs::create_dir_all(&tree).unwrap();
    let count = format!("count={}", size >> 20);
    let of = format!("of={}", tree.join("host-sim-big.bin").display());
    run_here(
        "dd",
        &["if=/dev/urandom", &of, "bs=1M", &count, "status=none"],
    );
    let tar = dir.join("layer.tar");
    let root = dir.join("tree");
    run_here(
        "tar",
        &[
            "--owner=0",
            "--group=0",
            "-C",
            root.to_str().unwrap(),
            "-cf",
            tar.to_str().unwrap(),
            "usr",
        ],
    );
    let (layer, layer_size) = add_blob(&copy, &tar);
    let blob = |d: &str| {
        copy.join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let read = |d: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(blob(d)).unwrap()).unwrap()
    };
    let index_path = copy.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let v2 = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == "v2")
        .unwrap()
        .clone();
    let mut manifest = read(v2["digest"].as_str().unwrap());
    let mut config = read(manifest["config"]["digest"].as_str().unwrap());
    config["rootfs"]["diff_ids"]
        .as_array_mut()
        .unwrap()
        .push(json!(layer));
    if let Some(history) = config["history"].as_array_mut() {
        history.push(json!({"created_by": "host-sim: a big layer for progress tests"}));
    }
    let (config_digest, config_size) = add_json(&copy, &config);
    manifest["config"]["digest"] = json!(config_digest);
    manifest["config"]["size"] = json!(config_size);
    manifest["layers"].as_array_mut().unwrap().push(json!({
        "mediaType": "application/vnd.oci.image.layer.v1.tar",
        "digest": layer,
        "size": layer_size,
    }));
    let (manifest_digest, manifest_size) = add_json(&copy, &manifest);
    let mut v3 = v2.clone();
    v3["digest"] = json!(manifest_digest);
    v3["size"] = json!(manifest_size);
    v3["annotations"]["org.opencontainers.image.ref.name"] = json!("v3");
    index["manifests"].as_array_mut().unwrap().push(v3);
    // index.json is a hard link into the cached layout: replace it, never write it.
    std::fs::remove_file(&index_path).unwrap();
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    copy
}

/// A container signature policy that accepts anything by default (Debian's own
/// `/etc/containers/policy.json`): under `--enforce-container-sigpolicy` bootc refuses
/// it, and so refuses to stage. The node's skopeo (bookworm's 1.9.3) evaluates no
/// policy in its image proxy (skopeo 1.14 added that), so with this bootc the policy's
/// `reject` and `signedBy` requirements are not applied; bootc's own refusal of an
/// accept-anything default is.
const ACCEPT_ANYTHING: &str = r#"{"default": [{"type": "insecureAcceptAnything"}]}"#;

/// The staged deployment's image reference `signature`, as bootc shows it.
fn staged_signature(status: &Status) -> Option<String> {
    let image = status.status.staged.as_ref()?.image.as_ref()?;
    Some(image.image.signature.as_ref()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_enforce_the_nodes_signature_policy_decides_and_a_rejected_image_is_not_staged() {
    let name = "real-sigpolicy";
    let etc = vec![(
        "containers/policy.json".to_owned(),
        ACCEPT_ANYTHING.as_bytes().to_vec(),
    )];
    let Some((_emulator, _client, f, kubeconfig, log, api)) = Fixture::for_agent(name, etc).await
    else {
        return;
    };
    let spec = BootcNodeSpec {
        signature_policy: SignaturePolicy::Enforce,
        ..staged_spec(&f.v2)
    };
    api.create(&PostParams::default(), &BootcNode::new(name, spec))
        .await
        .unwrap();
    let agents = DaemonSet::start(&f.node, &kubeconfig, &log, &[]);

    // Enforce, a policy that accepts anything by default: bootc refuses it, Degraded
    // in bootc's words, nothing staged. (Waiting for either outcome, so that an agent
    // that stages anyway fails here at once rather than by a timeout.)
    let node = common::wait_logged("Degraded or Staged", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        (degraded(&n).is_some() || condition(&n, "Idle")?.1 == "Staged").then_some(n)
    })
    .await;
    let status = node.status.as_ref().unwrap();
    let (reason, message) = degraded(&node)
        .unwrap_or_else(|| panic!("staged although the policy rejects the image: {status:?}"));
    eprintln!("real-sigpolicy: Enforce, accept-anything policy: Degraded {reason}: {message}");
    assert_eq!(reason, "SignaturePolicyRejected", "{message}");
    assert!(
        message.contains(
            "error: Switching: Switching (ostree): Preparing import: Fetching manifest: \
             containers-policy.json specifies a default of `insecureAcceptAnything`; \
             refusing usage"
        ),
        "bootc's own words: {message}"
    );
    assert!(message.contains(&f.v2), "names the image: {message}");
    assert_eq!(condition(&node, "Idle").unwrap().1, "Staging");
    assert!(status.staged.is_none(), "{status:?}");
    let host = f.host().await;
    let seen = host.status().await.unwrap();
    assert_eq!(staged(&seen), None, "bootc shows nothing staged: {seen:#?}");
    assert_eq!(booted_digest(&seen), digest_of(&f.v1));
    assert!(!f.node.run_ostree_has("staged-deployment"));
    assert!(
        message.contains("bootc switch --enforce-container-sigpolicy"),
        "the command as run carries the flag: {message}"
    );

    // The same node and policy without Enforce: bootc does not consult the policy, and
    // the image is staged (so the refusal above was the flag's doing).
    let default = json!({"spec": {"signaturePolicy": "Default"}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&default))
        .await
        .unwrap();
    let node = common::wait_logged("Staged v2 without Enforce", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        let s = n.status.as_ref()?.staged.as_ref()?;
        (s.image.image == f.v2 && s.download_only && degraded(&n).is_none()).then_some(n)
    })
    .await;
    assert_eq!(condition(&node, "Idle").unwrap().1, "Staged");
    let seen = host.status().await.unwrap();
    assert_eq!(
        staged(&seen),
        Some((digest_of(&f.v2).to_owned(), Some(true)))
    );
    assert_eq!(staged_signature(&seen), None, "unverified: {seen:#?}");
    eprintln!("real-sigpolicy: Default, same policy: staged v2, locked");

    // Enforce again, with a policy that admits the test registry: what was staged
    // without the check is staged again under it (`signature: containerPolicy`), and
    // locked again by the fallback's `upgrade --download-only`.
    let mut scopes = serde_json::Map::new();
    scopes.insert(
        f.registry.host(),
        json!([{"type": "insecureAcceptAnything"}]),
    );
    let admit = json!({"default": [{"type": "reject"}], "transports": {"docker": scopes}});
    let policy = f
        .node
        .root_path()
        .unwrap()
        .join("etc/containers/policy.json");
    std::fs::write(&policy, serde_json::to_vec(&admit).unwrap()).unwrap();
    let enforce = json!({"spec": {"signaturePolicy": "Enforce"}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&enforce))
        .await
        .unwrap();
    let seen = common::wait_logged("v2 staged again under the policy", &log, BOOT, async || {
        let seen = host.status().await.ok()?;
        let checked = staged_signature(&seen).as_deref() == Some("containerPolicy");
        let locked = staged(&seen)? == (digest_of(&f.v2).to_owned(), Some(true));
        (checked && locked).then_some(seen)
    })
    .await;
    eprintln!(
        "real-sigpolicy: Enforce, policy admits the registry: staged v2 again, signature {:?}",
        staged_signature(&seen)
    );
    common::wait_logged("Staged, not Degraded", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        (condition(&n, "Idle")?.1 == "Staged" && degraded(&n).is_none()).then_some(())
    })
    .await;
    agents.stop().await;
}

/// bootc issue #2425 on the real 1.16.9 (which has no `switch --download-only`): the
/// desired image staged unlocked by a hand-made `bootc switch`, nothing approving a
/// reboot. The agent locks it with one command (`upgrade --download-only`), reports
/// `Staged` only once it is locked, and an unplanned reboot then boots the old image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_staged_unlocked_image_is_locked_and_an_unplanned_reboot_keeps_the_old_one() {
    let name = "real-unlocked";
    let Some((emulator, _client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    bootc_on_node(&f, &["switch", &f.v2]);
    let status = f.host().await.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(false))),
        "staged unlocked by hand: {status:#?}"
    );
    create_node(&api, &bootc_node(name, &f.v2)).await;
    let mut events = emulator.handle().events();
    // An hour's poll: only the agent's first pass, its commands' ends and bootc's
    // status-updated signal make it read the host.
    let options = AgentOptions {
        poll_interval: "1h".to_owned(),
        ..AgentOptions::default()
    };
    let agents = DaemonSet::start_with(&f.node, &kubeconfig, &log, options);
    let staged_node = common::wait_logged("Staged v2, locked", &log, BOOT, async || {
        let n = api.get(name).await.ok()?;
        let locked = n.status.as_ref()?.staged.as_ref()?.download_only;
        (condition(&n, "Idle")?.1 == "Staged" && locked).then_some(n)
    })
    .await;
    assert!(f.node.run_ostree_has("staged-deployment-locked"));
    let status = staged_node.status.as_ref().unwrap();
    assert_eq!(status.staged.as_ref().unwrap().image.image, f.v2);
    // One command, a lock: no staging, no second try.
    let text = std::fs::read_to_string(&log).unwrap();
    let commands: Vec<String> = text
        .lines()
        .map(common::without_ansi)
        .filter(|l| l.contains(": staging image="))
        .collect();
    assert_eq!(commands.len(), 1, "{commands:#?}");
    assert!(commands[0].contains("work=Lock"), "{commands:#?}");
    while let Ok(event) = events.try_recv() {
        if event.key.plural != "bootcnodes" || event.object["metadata"]["name"] != name {
            continue;
        }
        let status = &event.object["status"];
        let staged_reason = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
            .is_some_and(|c| c["reason"] == "Staged");
        assert!(
            !staged_reason || status["staged"]["downloadOnly"] == true,
            "Staged reported while unlocked: {status}"
        );
    }
    // An unplanned reboot: the real ostree-finalize-staged leaves the locked
    // deployment, v1 boots again. The agent is stopped first: an agent starting in the
    // new boot stops every bootc command it did not start itself, this test's status
    // read included.
    agents.stop().await;
    f.reboot().await;
    let status = f.host().await.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(f.node.version_id().unwrap(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_refused_for_lack_of_space_reads_as_insufficient_space_and_stages_nothing() {
    let name = "real-space";
    let Some((_emulator, _client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    // The node's ostree keeps a free-space floor far above what its disk has: every
    // write to the repository is refused, as on a full disk.
    on_node(
        &f,
        "/usr/bin/ostree",
        &[
            "config",
            "--repo",
            "/sysroot/ostree/repo",
            "set",
            "core.min-free-space-size",
            "1000000GB",
        ],
    );
    create_node(&api, &bootc_node(name, &f.v2)).await;
    let agents = DaemonSet::start(&f.node, &kubeconfig, &log, &[]);
    let (reason, message) =
        common::wait_logged("Degraded for lack of space", &log, BOOT, async || {
            degraded(&api.get(name).await.ok()?)
        })
        .await;
    eprintln!("{name}: a full disk reads as {reason}: {message}");
    assert_eq!(reason, "InsufficientSpace", "{message}");
    // bootc's own check before it pulls, counting ostree's floor (bootc's words).
    assert!(
        message.contains("error: Switching: Switching (ostree): Insufficient free space for"),
        "{message}"
    );
    assert!(!message.contains("exit status"), "{message}");
    let node = api.get(name).await.unwrap();
    let status = node.status.as_ref().unwrap();
    assert!(status.staged.is_none(), "{status:?}");
    agents.stop().await;
    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(staged(&status), None, "nothing staged: {status:#?}");
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usr_overlay_reads_as_drift_and_clears_after_the_reboot() {
    let name = "real-drift";
    let Some((_emulator, _client, f, kubeconfig, log, api)) =
        Fixture::for_agent(name, Vec::new()).await
    else {
        return;
    };
    create_node(&api, &bootc_node(name, &f.v1)).await;
    let agents = DaemonSet::start(&f.node, &kubeconfig, &log, &[]);
    let drift = |want: &'static str| {
        let api = api.clone();
        async move || {
            let n = api.get(name).await.ok()?;
            let (_, reason, message) = condition(&n, "Drifted")?;
            (reason == want).then_some((n, message))
        }
    };
    let (clean, _) = common::wait_logged("Drifted/InSync", &log, BOOT, drift("InSync")).await;
    show_drift(name, "before `bootc usr-overlay`", &clean);
    let host = clean.status.as_ref().unwrap().host.clone().unwrap();
    assert_eq!(host.backend.as_deref(), Some("ostree"), "{host:?}");
    assert_eq!(host.usr_overlay, None, "{host:?}");
    assert_eq!(host.update_timer_masked, Some(true), "{host:?}");

    // An admin makes /usr writable on the node.
    bootc_on_node(&f, &["usr-overlay"]);
    let (drifted, message) =
        common::wait_logged("Drifted/UsrOverlay", &log, BOOT, drift("UsrOverlay")).await;
    eprintln!("{name}: after `bootc usr-overlay`: {message}");
    show_drift(name, "after `bootc usr-overlay`", &drifted);
    let host = drifted.status.as_ref().unwrap().host.clone().unwrap();
    assert_eq!(
        host.usr_overlay.as_deref(),
        Some("readWrite/transient"),
        "{host:?}"
    );
    assert_eq!(
        condition(&drifted, "Drifted").map(|c| c.0),
        Some("True".to_owned())
    );

    // The transient overlay is gone after a reboot: in sync again.
    f.reboot().await;
    let (clean, _) = common::wait_logged(
        "Drifted/InSync after the reboot",
        &log,
        BOOT,
        drift("InSync"),
    )
    .await;
    show_drift(name, "after the reboot", &clean);
    assert_eq!(
        clean
            .status
            .as_ref()
            .unwrap()
            .host
            .as_ref()
            .unwrap()
            .usr_overlay,
        None
    );
    agents.stop().await;
}

/// Prints what `kubectl get bootcnode NAME -o yaml` shows of drift: `status.host` and the
/// `Drifted` condition.
fn show_drift(name: &str, when: &str, node: &BootcNode) {
    let status = node.status.as_ref();
    let host = status.and_then(|s| s.host.as_ref());
    let drifted = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Drifted"));
    eprintln!(
        "{name}: {when}: status.host: {}; Drifted: {}",
        serde_json::to_string(&host).unwrap_or_default(),
        serde_json::to_string(&drifted).unwrap_or_default()
    );
}
