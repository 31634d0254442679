//! The agent's `DbusHost` against real systemd and logind in a node, with the bootc
//! stand-in installed and a real registry holding two images.
//!
//! The agent runs here, outside the node: `DbusHost::with_host_root` points it at the
//! node's root as this machine sees it (`/proc/PID/root`), so it reads the command output
//! files that the node's systemd writes to the host work directory
//! (`/var/lib/bootc-node-agent` in the node) and writes `/run/ostree/auth.json` there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bootc_crds::pool::SignaturePolicy;
use bootc_node_agent::host::{DbusHost, Host, HostError};
use bootc_node_agent::machine::Unlock;
use host_sim::Node;
use host_sim::fixtures::{
    booted_digest, digest_of, pin, rollback_digest, spec_image, stage_locked, staged, wait_for,
};
use test_registry::Registry;

const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The agent's host directory, as the node sees it.
const WORK_DIR: &str = "/var/lib/bootc-node-agent";

/// A node booted on `v1`, with `v2` in the registry. Fields drop in order: node before
/// registry before the directory.
struct Fixture {
    node: Node,
    registry: Registry,
    dir: common::TestDir,
    v1: String,
    v2: String,
}

impl Fixture {
    async fn new(name: &str) -> Fixture {
        Self::with_registry(name, Registry::start().expect("starting the registry")).await
    }

    async fn with_registry(name: &str, registry: Registry) -> Fixture {
        let dir = common::test_dir(name);
        let d1 = registry
            .push(
                "sim/os",
                "v1",
                &[("org.opencontainers.image.version", "v1")],
            )
            .expect("pushing v1");
        let d2 = registry
            .push(
                "sim/os",
                "v2",
                &[("org.opencontainers.image.version", "v2")],
            )
            .expect("pushing v2");
        let v1 = format!("{}/sim/os@{d1}", registry.host());
        let v2 = format!("{}/sim/os@{d2}", registry.host());
        let options = common::options(name, dir.path());
        bootc_standin::seed(
            &options.state_dir,
            bootc_standin::ImageInfo {
                image: v1.clone(),
                digest: d1,
                version: Some("v1".to_owned()),
                created: None,
                architecture: bootc_standin::resolver::host_architecture().to_owned(),
                kernel: None,
                layers: Vec::new(),
            },
        )
        .expect("seeding the node");
        let node = Node::start(options).await.expect("booting the node");
        Fixture {
            node,
            registry,
            dir,
            v1,
            v2,
        }
    }

    async fn host(&self) -> DbusHost {
        self.host_with_timeout(COMMAND_TIMEOUT).await
    }

    async fn host_with_timeout(&self, timeout: Duration) -> DbusHost {
        DbusHost::connect(&self.node.bus_address().unwrap(), WORK_DIR, timeout)
            .await
            .expect("connecting DbusHost to the node's bus")
            .with_host_root(self.node.root_path().unwrap())
    }

    /// The host work directory as this machine sees it.
    fn work(&self) -> PathBuf {
        self.node
            .root_path()
            .unwrap()
            .join(WORK_DIR.trim_start_matches('/'))
    }

    fn faults(&self, json: &str) {
        std::fs::write(self.node.state_dir().join("faults.json"), json).unwrap();
    }

    fn log(&self) -> String {
        format!("node log: {}", self.node.log_file().display())
    }
}

async fn stage_and_unlock(f: &Fixture, host: &DbusHost) {
    let mut changes = host.changes();
    let seen = *changes.borrow_and_update();
    host.stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap();
    // The stand-in touched /ostree/bootc; bootc-status-updated.path started
    // bootc-status-updated.target; the agent saw it on the bus.
    tokio::time::timeout(Duration::from_secs(10), changes.wait_for(|n| *n > seen))
        .await
        .expect("a status change signal after stage")
        .expect("the change channel is open");
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(true))),
        "stage() leaves a locked (download-only) deployment"
    );
    host.unlock(Unlock::FromDownloaded).await.unwrap();
    let status = host.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(false))),
        "unlock(FromDownloaded) unlocks it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_unlock_and_full_reboot_boot_the_new_image() {
    let f = Fixture::new("agent-reboot").await;
    let host = f.host().await;
    let before = host.identity().await.unwrap();
    assert_eq!(Some(&before.boot_id), f.node.status().boot_id.as_ref());
    assert!(before.can_soft_reboot);
    assert_eq!(before.soft_reboots, 0);

    stage_and_unlock(&f, &host).await;

    let boots = f.node.status().boots;
    let started = Instant::now();
    let answer = host.reboot(false).await;
    f.node.wait_booted(boots, common::BOOT).await.unwrap();
    eprintln!(
        "agent-reboot: reboot({answer:?}) and back in {:?}",
        started.elapsed()
    );
    answer.expect("RebootWithFlags(0) answers before the node goes down");

    // The agent's connection died with the node; a new one (new init, new address).
    let host = f.host().await;
    let after = host.identity().await.unwrap();
    assert_ne!(after.boot_id, before.boot_id);
    assert_eq!(after.soft_reboots, 0);
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v2), "{}", f.log());
    assert_eq!(staged(&status), None);
    assert_eq!(rollback_digest(&status).as_deref(), Some(digest_of(&f.v1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_reboot_keeps_the_boot_id_and_boots_the_new_image() {
    let f = Fixture::new("agent-soft").await;
    let host = f.host().await;
    let before = host.identity().await.unwrap();
    stage_and_unlock(&f, &host).await;

    let started = Instant::now();
    let answer = host.reboot(true).await;
    f.node
        .wait_soft_rebooted(before.soft_reboots as u32, common::BOOT)
        .await
        .unwrap();
    eprintln!(
        "agent-soft: reboot(true) ({answer:?}) and back in {:?}",
        started.elapsed()
    );
    answer.expect("RebootWithFlags(4) answers before the node goes down");

    // The old connection is gone with the node's D-Bus daemon.
    let stale = host.identity().await;
    eprintln!("agent-soft: the pre-soft-reboot connection: {stale:?}");
    assert!(
        stale.is_err(),
        "a connection made before the soft reboot still works?"
    );

    let host = f.host().await;
    let after = host.identity().await.unwrap();
    assert_eq!(after.boot_id, before.boot_id);
    assert_eq!(after.soft_reboots, before.soft_reboots + 1);
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v2), "{}", f.log());
    assert_eq!(staged(&status), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_deployment_is_discarded_by_an_unasked_reboot() {
    let f = Fixture::new("agent-locked").await;
    let host = f.host().await;
    host.stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap();
    let boots = f.node.status().boots;
    f.node.reboot(false).await.unwrap();
    f.node.wait_booted(boots, common::BOOT).await.unwrap();

    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(
        staged(&status),
        None,
        "the locked deployment was discarded; node status {:?}; {}",
        f.node.status(),
        f.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_failing_its_boot_comes_back_on_the_old_image() {
    let f = Fixture::new("agent-oldimage").await;
    let host = f.host().await;
    stage_and_unlock(&f, &host).await;
    f.node.fail_next_boot_to_old_image();
    let boots = f.node.status().boots;
    host.reboot(false).await.unwrap();
    let after = f.node.wait_booted(boots, common::BOOT).await.unwrap();
    assert_eq!(after.error, None);

    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(staged(&status), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mask_update_timer_masks_at_runtime_until_the_next_boot() {
    let f = Fixture::new("agent-mask").await;
    const TIMER: &str = "bootc-fetch-apply-updates.timer";
    let timer = f.node.unit_state(TIMER).await.unwrap();
    assert_eq!(
        (timer.active_state.as_str(), timer.unit_file_state.as_str()),
        ("active", "enabled")
    );

    let host = f.host().await;
    let before = f.node.system_state().await.unwrap();
    host.mask_update_timer().await.unwrap();
    assert_masked(&f.node, TIMER, &before).await;
    assert!(
        f.node
            .root_path()
            .unwrap()
            .join("run/systemd/system")
            .join(TIMER)
            .exists(),
        "a runtime mask lives in /run"
    );
    // Masking again is harmless.
    host.mask_update_timer().await.unwrap();

    let boots = f.node.status().boots;
    f.node.reboot(false).await.unwrap();
    f.node.wait_booted(boots, common::BOOT).await.unwrap();
    // `running` can come a moment before the timer is started on a busy machine: wait
    // for it (it must come, enabled, within the deadline).
    let until = tokio::time::Instant::now() + common::BOOT;
    let timer = loop {
        let timer = f.node.unit_state(TIMER).await.unwrap();
        if timer.active_state == "active" || tokio::time::Instant::now() >= until {
            break timer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (timer.active_state.as_str(), timer.unit_file_state.as_str()),
        ("active", "enabled"),
        "the runtime mask is gone after a full reboot"
    );

    let host = f.host().await;
    let before = f.node.system_state().await.unwrap();
    host.mask_update_timer().await.unwrap();
    assert_masked(&f.node, TIMER, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_update_timer_hands_the_timer_back_as_the_host_had_it() {
    let f = Fixture::new("agent-release").await;
    const TIMER: &str = "bootc-fetch-apply-updates.timer";
    // The host had it running: enabled, and started at boot.
    let timer = wait_for("the timer running on the booted node", async || {
        let timer = f.node.unit_state(TIMER).await.unwrap();
        (timer.active_state != "inactive").then_some(timer)
    })
    .await;
    assert_eq!(
        (timer.active_state.as_str(), timer.unit_file_state.as_str()),
        ("active", "enabled"),
        "{timer:?}"
    );
    let host = f.host().await;
    let before = f.node.system_state().await.unwrap();
    host.mask_update_timer().await.unwrap();
    assert_masked(&f.node, TIMER, &before).await;

    // Enabled before the mask: running again, with no mask left in /run. The start is a
    // job systemd carries out after the call returns: wait for it.
    host.release_update_timer().await.unwrap();
    let timer = wait_for("the timer to run again", async || {
        let timer = f.node.unit_state(TIMER).await.unwrap();
        (!matches!(timer.active_state.as_str(), "inactive" | "activating")).then_some(timer)
    })
    .await;
    assert_eq!(
        (timer.active_state.as_str(), timer.unit_file_state.as_str()),
        ("active", "enabled"),
        "{timer:?}"
    );
    let runtime_mask = f
        .node
        .root_path()
        .unwrap()
        .join("run/systemd/system")
        .join(TIMER);
    assert!(!runtime_mask.exists(), "the runtime mask is gone");

    // The host owner's own mask (in /etc) is theirs: it stays, and the timer stays off.
    let own_mask = f
        .node
        .root_path()
        .unwrap()
        .join("etc/systemd/system")
        .join(TIMER);
    std::os::unix::fs::symlink("/dev/null", &own_mask).unwrap();
    host.mask_update_timer().await.unwrap();
    host.release_update_timer().await.unwrap();
    let timer = f.node.unit_state(TIMER).await.unwrap();
    assert_eq!(
        (timer.active_state.as_str(), timer.unit_file_state.as_str()),
        ("inactive", "masked"),
        "{timer:?}"
    );
    assert!(own_mask.is_symlink(), "the owner's mask is left in place");
}

/// The unit is masked at runtime as systemd sees it (loaded as masked, so it cannot be
/// started), not running, and did not change the system's state (`before`): a system
/// `running` before still is. (Under load a boot unit of a simulated node can fail to
/// spawn on its own, see docs/testing.md: a node already `degraded` stays so.)
async fn assert_masked(node: &Node, unit: &str, before: &str) {
    let state = node.unit_state(unit).await.unwrap();
    assert_eq!(state.unit_file_state, "masked-runtime", "{state:?}");
    assert_eq!(state.load_state, "masked", "systemd reloaded: {state:?}");
    assert_eq!(state.active_state, "inactive", "{state:?}");
    // Either way the mask changed nothing: a running system is still running, one
    // already degraded by a boot unit is as it was.
    assert_eq!(
        node.system_state().await.unwrap(),
        before,
        "the mask changed the system's state"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_surfaces_its_stderr() {
    let f = Fixture::new("agent-fail").await;
    f.faults(r#"{"fail": {"switch": "injected: the registry is on fire"}}"#);
    let host = f.host().await;
    let err = host
        .stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap_err();
    eprintln!("agent-fail: {err}");
    match &err {
        HostError::CommandFailed {
            command,
            exit_status,
            stderr,
            ..
        } => {
            assert!(command.contains("switch"), "{command}");
            assert_eq!(*exit_status, 1);
            assert!(
                stderr.contains("injected: the registry is on fire"),
                "stderr: {stderr:?}"
            );
            assert!(stderr.starts_with("error:"), "bootc's form: {stderr:?}");
        }
        other => panic!("expected CommandFailed, got {other:?}"),
    }
    // Nothing staged, no unit left behind, no output files left behind.
    let status = host.status().await.unwrap();
    assert_eq!(staged(&status), None);
    assert_no_agent_units(&f.node, Duration::from_secs(10)).await;
    assert_eq!(std::fs::read_dir(f.work()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_command_times_out_and_its_unit_is_stopped() {
    let f = Fixture::new("agent-hang").await;
    f.faults(r#"{"hang": ["switch"]}"#);
    let timeout = Duration::from_secs(3);
    let host = f.host_with_timeout(timeout).await;
    let started = Instant::now();
    let err = host
        .stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap_err();
    let took = started.elapsed();
    eprintln!("agent-hang: {err} after {took:?}");
    assert!(matches!(err, HostError::Timeout { .. }), "{err:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_no_agent_units(&f.node, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_switch_download_only_stage_falls_back_and_ends_locked() {
    let f = Fixture::new("agent-fallback").await;
    f.faults(r#"{"switchHelpWithoutDownloadOnly": true}"#);
    let host = f.host().await;
    // switch + upgrade --download-only ends locked.
    let status = stage_locked(&host, &f.v2).await;
    assert_eq!(booted_digest(&status), digest_of(&f.v1));
    assert_eq!(spec_image(&status), Some(f.v2.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_with_the_credentials_in_run_ostree_auth_json() {
    let registry = Registry::start_with_auth("pool", "s3cret").unwrap();
    let f = Fixture::with_registry("agent-auth", registry).await;
    let host = f.host().await;
    // Without credentials the registry says 401 and stage fails with bootc's error.
    let err = host
        .stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::CommandFailed { .. }), "{err:?}");
    // The pull secret goes to the node's /run/ostree/auth.json, mode 0600.
    host.write_credentials(Some(f.registry.auth_json().as_bytes()))
        .await
        .unwrap();
    let auth = f.node.root_path().unwrap().join("run/ostree/auth.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(&auth.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    stage_locked(&host, &f.v2).await;
    let _ = &f.dir;
}

/// Waits until no `bootc-node-agent-*` unit is active or activating in the node.
async fn assert_no_agent_units(node: &Node, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let units = node.list_units(&[], &["bootc-node-agent-*"]).await.unwrap();
        let busy: Vec<_> = units
            .iter()
            .filter(|u| u.active_state != "inactive" && u.active_state != "failed")
            .map(|u| format!("{} {} {}", u.name, u.active_state, u.sub_state))
            .collect();
        if busy.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "agent units still running after {timeout:?}: {busy:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Collects every progress value the host publishes, as the agent's loop would see them.
fn collect_progress(
    host: &DbusHost,
) -> std::sync::Arc<std::sync::Mutex<Vec<bootc_node_agent::host::StageProgress>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut rx = host.progress();
    let sink = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            if let Some(p) = rx.borrow_and_update().clone() {
                sink.lock().unwrap().push(p);
            }
        }
    });
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_reports_bootcs_progress_through_a_fifo_and_leaves_nothing_behind() {
    let f = Fixture::new("agent-progress").await;
    let host = f.host().await;
    let seen = collect_progress(&host);
    host.stage(&pin(&f.v2), SignaturePolicy::Default)
        .await
        .unwrap();
    // The reader publishes before stage() returns; give the collector a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    let last = loop {
        let last = seen.lock().unwrap().last().cloned();
        if let Some(p) = last.filter(|p| p.task == "staging" && p.steps_done == 3) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no final report: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(last.digest, digest_of(&f.v2));
    assert!(last.bytes_total > 0, "{last:?}");
    assert_eq!(last.bytes_done, last.bytes_total, "{last:?}");
    assert_eq!(last.percent(), Some(100));
    assert_no_agent_units(&f.node, Duration::from_secs(10)).await;
    let fifos: Vec<_> = std::fs::read_dir(f.work())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".progress"))
        .collect();
    assert!(fifos.is_empty(), "FIFOs left: {fifos:?}");

    // The two-command staging (no `switch --download-only`) reports through the same pipe.
    f.faults(r#"{"switchHelpWithoutDownloadOnly": true}"#);
    let host = f.host().await;
    let seen = collect_progress(&host);
    host.stage(&pin(&f.v1), SignaturePolicy::Default)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|p| p.digest == digest_of(&f.v1) && p.task == "staging")
    {
        assert!(Instant::now() < deadline, "{:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_no_agent_units(&f.node, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_staging_runs_bootc_once_and_leaves_no_socket_behind() {
    let f = Fixture::new("agent-progress-fail").await;
    // A digest the registry does not have: bootc writes its Start report, then the pull
    // fails. A socket whose service failed starts it again for any line left unread in
    // its FIFO; the service may start only once, and the socket goes first.
    let missing = format!("{}/sim/os@sha256:{}", f.registry.host(), "0".repeat(64));
    let host = f.host().await;
    let err = host
        .stage(&pin(&missing), SignaturePolicy::Default)
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::CommandFailed { .. }), "{err:?}");
    assert_no_agent_units(&f.node, Duration::from_secs(10)).await;
    let pid = f.node.init_pid().unwrap().to_string();
    let journal = std::process::Command::new("nsenter")
        .args(["-t", &pid, "-a", "journalctl", "--no-pager", "-o", "cat"])
        .output()
        .unwrap();
    let journal = String::from_utf8_lossy(&journal.stdout);
    let starts = journal
        .lines()
        .filter(|l| l.starts_with("Starting bootc-node-agent-") && l.contains(&missing))
        .count();
    assert_eq!(starts, 1, "bootc ran once:\n{journal}");
    assert!(
        journal.contains("Closed bootc-node-agent-") && journal.contains(".socket"),
        "the progress socket was closed:\n{journal}"
    );
    let status = host.status().await.unwrap();
    assert_eq!(staged(&status), None, "{}", f.log());
}
