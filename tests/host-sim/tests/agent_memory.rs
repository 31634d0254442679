//! The agent's run loop against the API emulator and in-process hosts: the whole
//! Staging → Staged → approval → reboot → Idle path, one reboot per approval, cancelled
//! staging, restarts mid-stage, a kill between any two steps, pull secrets, an update
//! timer that cannot be masked, bad input, and an idle agent's API use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::{BootcNode, DesiredImageState};
use bootc_node_agent::run::{self, RunError, RunOptions};
use host_sim::fixtures::{
    DEADLINE, approve, bootc_node, condition, create_node, digest, pull_secret, wait_for,
};
use host_sim::memory::{Behaviour, Catalog, MemoryHost, NextBoot};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const REPO: &str = "registry.test/os";

async fn cluster(loosen: bool) -> (Emulator, Client) {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for plural in ["bootcnodepools", "bootcnodes"] {
        let path = format!(
            "{}/../../crds/node.bootc.dev_{plural}.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut crd: serde_json::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        if loosen && plural == "bootcnodes" {
            // A cluster whose CRD does not check desiredImage (an older or hand-edited
            // CRD): the agent must still refuse bad references itself.
            let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                ["properties"]["desiredImage"];
            let rules = spec.as_object_mut().unwrap();
            let had_rule = rules.remove("x-kubernetes-validations").is_some();
            let had_pattern = rules.remove("pattern").is_some();
            assert!(
                had_rule || had_pattern,
                "the CRD checks desiredImage's format"
            );
        }
        let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    (emulator, client)
}

/// One node's bed: the emulator with the CRDs and a client of it, the BootcNode API, and
/// a host booted on v1 behaving as `behaviour`, its catalog holding v1, v2, … with these
/// kernel labels (their pins, in order).
async fn one_node<const N: usize>(
    kernels: [Option<&str>; N],
    behaviour: Behaviour,
) -> (Emulator, Client, Api<BootcNode>, MemoryHost, [String; N]) {
    let (emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let images = catalog.push_versions(REPO, kernels);
    let host = MemoryHost::new(catalog, &images[0], behaviour).unwrap();
    let api = Api::all(client.clone());
    (emulator, client, api, host, images)
}

/// Plays the agent's supervisor: runs it, and when the host connection is lost (a
/// reboot), waits for the host to be up and starts a new one.
struct Supervised {
    stop: watch::Sender<bool>,
    task: JoinHandle<u32>,
}

impl Supervised {
    fn start(client: Client, host: MemoryHost, name: &str, poll: Duration) -> Self {
        let (stop, stopped) = watch::channel(false);
        let options = RunOptions {
            node_name: name.to_owned(),
            poll_interval: poll,
            agent_version: "test".to_owned(),
            ready_dir: None,
        };
        let task = tokio::spawn(async move {
            let mut starts = 0u32;
            loop {
                while !host.is_up() {
                    if *stopped.borrow() {
                        return starts;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                starts += 1;
                let mut stop_rx = stopped.clone();
                let shutdown = async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                };
                let result = run::run(
                    client.clone(),
                    Arc::new(host.clone()),
                    options.clone(),
                    shutdown,
                )
                .await;
                match result {
                    Ok(()) => return starts,
                    Err(RunError::HostLost) => continue,
                    Err(e) => panic!("agent stopped: {e}"),
                }
            }
        });
        Self { stop, task }
    }

    /// Kills the agent where it stands: its task is aborted, as a SIGKILL would end it
    /// (a staging command it started keeps running, like an orphaned unit).
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    async fn stop(self) -> u32 {
        self.stop.send(true).unwrap();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the agent stops on shutdown")
            .unwrap()
    }
}

async fn wait_reason(api: &Api<BootcNode>, name: &str, reason: &str) -> BootcNode {
    wait_for(&format!("{name} to report {reason}"), async || {
        let n = api.get(name).await.ok()?;
        (condition(&n, "Idle")?.1 == reason).then_some(n)
    })
    .await
}

async fn set_desired(api: &Api<BootcNode>, name: &str, image: &str) {
    let patch = json!({"spec": {"desiredImage": image}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn stages_waits_for_approval_reboots_once_and_reports_idle() {
    let (_emulator, client, api, host, [_, v2]) =
        one_node([Some("k1"), Some("k2")], Behaviour::default()).await;
    create_node(&api, &bootc_node("n1", &v2)).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));

    let staged = wait_reason(&api, "n1", "Staged").await;
    let status = staged.status.as_ref().unwrap();
    assert!(status.staged.as_ref().unwrap().download_only);
    assert_eq!(
        status.staged.as_ref().unwrap().image.image_digest,
        digest('2')
    );
    assert_eq!(
        status.booted.as_ref().unwrap().image.image_digest,
        digest('1')
    );
    assert!(
        host.state().staged.unwrap().locked,
        "the host holds a locked deployment"
    );
    assert!(host.timer_masked(), "the update timer is masked at start");
    assert_eq!(
        status.bootc_version.as_deref(),
        Some(host_sim::memory::BOOTC_VERSION),
        "bootc's version is reported from the first report"
    );
    assert_eq!(host.counters().reboots, 0, "no reboot without approval");

    let boot_before = host.boot_id();
    approve(&api, "n1", "pool-a").await;
    let idle = wait_reason(&api, "n1", "Idle").await;
    let status = idle.status.as_ref().unwrap();
    assert_eq!(
        status.booted.as_ref().unwrap().image.image_digest,
        digest('2')
    );
    assert_eq!(status.booted.as_ref().unwrap().image.image, v2);
    assert!(status.staged.is_none());
    let last = status.last_reboot.as_ref().unwrap();
    assert_eq!(last.digest, digest('2'));
    assert_eq!(last.boot_id, boot_before);
    assert_ne!(host.boot_id(), boot_before);
    // Kernels differ, so this was a full reboot; exactly one.
    let counters = host.counters();
    assert_eq!((counters.reboots, counters.soft_reboots), (1, 0));
    assert!(
        host.timer_masked(),
        "the new agent masks the timer again after the boot"
    );
    assert_eq!(condition(&idle, "Degraded").unwrap().0, "False");
    let starts = agent.stop().await;
    assert_eq!(starts, 2, "one agent before the reboot, one after");
}

#[tokio::test]
async fn soft_reboots_when_allowed_and_capable() {
    let (_emulator, client, api, host, [_, v2]) =
        one_node([Some("k1"), Some("k1")], Behaviour::default()).await;
    let mut bn = bootc_node("n1", &v2);
    bn.spec.reboot_policy = bootc_crds::pool::RebootPolicy::AllowSoftReboot;
    create_node(&api, &bn).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    let staged = wait_reason(&api, "n1", "Staged").await;
    assert!(
        staged
            .status
            .unwrap()
            .staged
            .unwrap()
            .image
            .soft_reboot_capable
    );
    let boot = host.boot_id();
    approve(&api, "n1", "pool-a").await;
    let idle = wait_reason(&api, "n1", "Idle").await;
    assert_eq!(
        idle.status.unwrap().booted.unwrap().image.image_digest,
        digest('2')
    );
    let counters = host.counters();
    assert_eq!((counters.reboots, counters.soft_reboots), (0, 1));
    assert_eq!(host.boot_id(), boot, "a soft reboot keeps the boot ID");
    agent.stop().await;
}

#[tokio::test]
async fn a_host_back_on_the_old_image_is_not_rebooted_again() {
    let (_emulator, client, _api, host, [v1, v2]) =
        one_node([None, None], Behaviour::default()).await;
    host.set_next_boot(NextBoot::OldImage);
    let api: Api<BootcNode> = Api::all(client.clone());
    create_node(&api, &bootc_node("n1", &v2)).await;
    // A short poll, so that the agent looks at the host many times after the reboot.
    let agent = Supervised::start(
        client.clone(),
        host.clone(),
        "n1",
        Duration::from_millis(200),
    );
    wait_reason(&api, "n1", "Staged").await;
    approve(&api, "n1", "pool-a").await;
    let degraded = wait_for("RebootDidNotApply", async || {
        let n = api.get("n1").await.ok()?;
        let (status, reason, message) = condition(&n, "Degraded")?;
        (status == "True" && reason == "RebootDidNotApply").then_some(message)
    })
    .await;
    assert!(
        degraded.contains(&v1) && degraded.contains(&v2),
        "{degraded}"
    );
    // The agent does nothing more for this image: no second pull, no second reboot,
    // however often it looks at the host: five more looks, counted, each checked.
    let boots = host.counters().boots;
    let looks = host.counters().status_reads;
    wait_for("five more looks at the host", async || {
        let now = host.counters();
        assert_eq!(now.reboots, 1, "rebooted twice for one approval");
        (now.status_reads >= looks + 5).then_some(())
    })
    .await;
    assert_eq!(host.counters().stages, 1);
    assert_eq!(host.counters().boots, boots);
    agent.stop().await;
}

#[tokio::test]
async fn a_new_desired_image_during_staging_restarts_staging() {
    let (_emulator, client, api, host, [_, v2, v3]) = one_node(
        [None, None, None],
        Behaviour {
            stage_hangs: true,
            ..Behaviour::default()
        },
    )
    .await;
    create_node(&api, &bootc_node("n1", &v2)).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    wait_reason(&api, "n1", "Staging").await;
    wait_for("the first pull to start", async || {
        (host.counters().stages == 1).then_some(())
    })
    .await;
    host.set_behaviour(Behaviour::default());
    set_desired(&api, "n1", &v3).await;
    let staged = wait_reason(&api, "n1", "Staged").await;
    assert_eq!(
        staged.status.unwrap().staged.unwrap().image.image_digest,
        digest('3')
    );
    let counters = host.counters();
    assert_eq!(counters.cancelled_stages, 1, "{counters:?}");
    assert_eq!(counters.stages, 2, "{counters:?}");
    agent.stop().await;
}

#[tokio::test]
async fn an_agent_killed_mid_stage_converges_when_started_again() {
    let (_emulator, client, api, host, [_, v2]) = one_node(
        [None, None],
        Behaviour {
            stage_hangs: true,
            ..Behaviour::default()
        },
    )
    .await;
    create_node(&api, &bootc_node("n1", &v2)).await;
    let options = RunOptions {
        node_name: "n1".into(),
        poll_interval: Duration::from_secs(60),
        agent_version: "test".into(),
        ready_dir: None,
    };
    let first = tokio::spawn(run::run(
        client.clone(),
        Arc::new(host.clone()),
        options.clone(),
        std::future::pending(),
    ));
    wait_for("the first pull to start", async || {
        (host.counters().stages == 1).then_some(())
    })
    .await;
    // Killed: the task is dropped; its pull (like an orphaned unit) keeps hanging.
    first.abort();
    let _ = first.await;
    host.set_behaviour(Behaviour::default());
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    let staged = wait_reason(&api, "n1", "Staged").await;
    assert_eq!(
        staged.status.unwrap().staged.unwrap().image.image_digest,
        digest('2')
    );
    assert_eq!(
        host.counters().cancelled_stages,
        1,
        "the new agent stops what the old one left running"
    );
    agent.stop().await;
}

#[tokio::test]
async fn bad_references_never_reach_the_host() {
    let (_emulator, client) = cluster(true).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    let cases = [
        ("tag", format!("{REPO}:v2"), "not a canonical pin"),
        ("flag", "--apply".to_owned(), "not a valid image reference"),
        (
            "shell",
            format!("{REPO}@{}; reboot", digest('2')),
            "not a valid image reference",
        ),
        (
            "space",
            format!("{REPO} @{}", digest('2')),
            "not a valid image reference",
        ),
    ];
    let mut agents = Vec::new();
    for (name, image, _) in &cases {
        create_node(&api, &bootc_node(name, image)).await;
        agents.push(Supervised::start(
            client.clone(),
            host.clone(),
            name,
            Duration::from_secs(60),
        ));
    }
    for (name, image, expected) in &cases {
        let message = wait_for(&format!("{name} degraded"), async || {
            let n = api.get(name).await.ok()?;
            let (status, reason, message) = condition(&n, "Degraded")?;
            (status == "True" && reason == "Error").then_some(message)
        })
        .await;
        assert!(message.contains(expected), "{name}: {message}");
        assert!(message.contains(&format!("{image:?}")), "{name}: {message}");
    }
    assert_eq!(host.counters().stages, 0, "nothing reached the host");
    assert!(host.state().staged.is_none());
    for agent in agents {
        agent.stop().await;
    }
}

#[tokio::test]
async fn pull_secrets_are_written_and_rewritten_when_their_hash_changes() {
    let (_emulator, client, api, host, [v1]) = one_node([None], Behaviour::default()).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let auth = |token: &str| {
        let json = format!(r#"{{"auths":{{"registry.test":{{"auth":"{token}"}}}}}}"#);
        ByteString(json.into_bytes())
    };
    let secret = |token: &str| pull_secret("pull", auth(token).0);
    secrets
        .create(&PostParams::default(), &secret("c2VjcmV0MQ=="))
        .await
        .unwrap();
    let mut bn = bootc_node("n1", &v1);
    bn.spec.pull_secret_ref = Some(bootc_crds::pool::SecretRef {
        name: "pull".into(),
        namespace: "default".into(),
    });
    bn.spec.pull_secret_hash = Some("h1".into());
    create_node(&api, &bn).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    wait_for("the first credentials", async || {
        (host.credentials() == Some(auth("c2VjcmV0MQ==").0)).then_some(())
    })
    .await;

    // Rotation: new content, new hash.
    secrets
        .replace("pull", &PostParams::default(), &secret("c2VjcmV0Mg=="))
        .await
        .unwrap();
    let patch = json!({"spec": {"pullSecretHash": "h2"}});
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for("the rotated credentials", async || {
        (host.credentials() == Some(auth("c2VjcmV0Mg==").0)).then_some(())
    })
    .await;

    // A Secret that is gone: Degraded, naming it, never showing its content.
    let patch = json!({"spec": {"pullSecretRef": {"name": "gone", "namespace": "default"}, "pullSecretHash": "h3"}});
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let message = wait_for("a degraded report", async || {
        let n = api.get("n1").await.ok()?;
        let (status, _, message) = condition(&n, "Degraded")?;
        (status == "True").then_some(message)
    })
    .await;
    assert!(message.contains("default/gone"), "{message}");
    assert!(!message.contains("c2VjcmV0"), "{message}");
    assert_eq!(
        host.credentials(),
        Some(auth("c2VjcmV0Mg==").0),
        "the last good credentials stay"
    );
    agent.stop().await;
}

#[tokio::test]
async fn an_idle_agent_makes_no_writes_and_keeps_one_watch() {
    let (emulator, client, api, host, [v1]) = one_node([None], Behaviour::default()).await;
    create_node(&api, &bootc_node("n1", &v1)).await;
    let handle = emulator.handle();
    handle.clear_requests();
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(5));
    wait_reason(&api, "n1", "Idle").await;
    // A minute of quiet: twelve more polls of the host, one every 5 seconds.
    let quiet = Instant::now();
    let reads = host.counters().status_reads;
    let mut polled = tokio::time::interval(Duration::from_millis(200));
    loop {
        polled.tick().await;
        if host.counters().status_reads >= reads + 12 {
            break;
        }
        assert!(
            quiet.elapsed() < Duration::from_secs(90),
            "the agent stopped polling its host: {} reads in {:?}",
            host.counters().status_reads - reads,
            quiet.elapsed()
        );
    }
    assert!(
        quiet.elapsed() >= Duration::from_secs(55),
        "{:?}",
        quiet.elapsed()
    );
    let requests = handle.requests();
    let count = |verb: &str| {
        requests
            .iter()
            .filter(|r| r.verb == verb && r.resource == "bootcnodes")
            .count()
    };
    let writes: Vec<_> = requests
        .iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete"))
        .collect();
    assert_eq!(
        writes.len(),
        1,
        "only the first report is written: {writes:?}"
    );
    assert_eq!(writes[0].subresource, "status");
    assert_eq!(count("list"), 1, "{requests:?}");
    assert_eq!(count("watch"), 1, "one watch connection: {requests:?}");
    agent.stop().await;
}

/// The host's deployments and reboots, as the invariants need them.
fn reboots(host: &MemoryHost) -> u64 {
    let counters = host.counters();
    counters.reboots + counters.soft_reboots
}

/// Whether the host will boot the staged (or rollback) deployment: it was unlocked.
fn unlocked(host: &MemoryHost) -> bool {
    let state = host.state();
    state.rollback_queued || state.staged.is_some_and(|s| !s.locked)
}

/// What a kill must never leave: a reboot without approval, an unlocked deployment or a
/// reboot without a `lastReboot` record of the approval it used.
async fn assert_safe(api: &Api<BootcNode>, host: &MemoryHost, approved: bool, at: &str) {
    let node = api.get("n1").await.unwrap();
    let record = node.status.as_ref().and_then(|s| s.last_reboot.clone());
    if unlocked(host) || reboots(host) > 0 {
        assert!(
            approved,
            "killed {at}: unlocked or rebooted without approval"
        );
        let record = record.unwrap_or_else(|| {
            panic!(
                "killed {at}: unlocked (or rebooted) with no lastReboot record: {:?}",
                host.state()
            )
        });
        assert_eq!(record.digest, digest('2'), "killed {at}");
    }
    assert!(
        reboots(host) <= 1,
        "killed {at}: two reboots for one approval"
    );
}

/// Killed between the unlock and the reboot request, the next agent cannot tell whether
/// a reboot is under way: it waits `REBOOT_REQUEST_TIMEOUT` (10 minutes) from the record
/// before asking. The test stands in for that wait by moving the record's time back.
async fn pass_the_reboot_wait(api: &Api<BootcNode>, host: &MemoryHost) -> bool {
    let node = api.get("n1").await.unwrap();
    let Some(record) = node.status.and_then(|s| s.last_reboot) else {
        return false;
    };
    if !(host.is_up() && unlocked(host) && record.boot_id == host.boot_id()) {
        return false;
    }
    let time = bootc_crds::conditions::from_time(&record.time).unwrap()
        - bootc_node_agent::machine::REBOOT_REQUEST_TIMEOUT
        - Duration::from_secs(60);
    let patch = json!({"status": {"lastReboot": {"time": time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}}});
    api.patch_status("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    true
}

/// One run of the whole path (stage, approval once `Staged`, reboot, `Idle`) with the
/// agent killed the `nth` time it reaches step `point` (see `host_sim::memory`; `None`:
/// no kill) and a new agent started on the same host. Returns where it was killed (if
/// the run got there) and the host's steps.
async fn run_killed_at(point: Option<(&str, usize)>) -> (Option<String>, Vec<String>) {
    let (_emulator, client, api, host, [_, v2]) =
        one_node([Some("k1"), Some("k2")], Behaviour::default()).await;
    if let Some((point, nth)) = point {
        host.halt_at(point, nth);
    }
    create_node(&api, &bootc_node("n1", &v2)).await;
    let poll = Duration::from_secs(60);
    let mut agent = Supervised::start(client.clone(), host.clone(), "n1", poll);
    let (mut approved, mut killed) = (false, None);
    let deadline = Instant::now() + DEADLINE;
    let node = loop {
        assert!(
            Instant::now() < deadline,
            "killed {killed:?} at point {point:?}: the node did not converge; steps {:?}, host {:?}",
            host.steps(),
            host.state()
        );
        if killed.is_none()
            && let Some(at) = host.halted()
        {
            agent.kill().await;
            assert_safe(&api, &host, approved, &at).await;
            host.resume();
            pass_the_reboot_wait(&api, &host).await;
            agent = Supervised::start(client.clone(), host.clone(), "n1", poll);
            killed = Some(at);
            continue;
        }
        let node = api.get("n1").await.unwrap();
        let reason = condition(&node, "Idle").map(|c| c.1);
        if !approved && reason.as_deref() == Some("Staged") {
            assert_eq!(reboots(&host), 0, "a reboot without approval");
            assert!(!unlocked(&host), "unlocked without approval");
            approve(&api, "n1", "pool-a").await;
            approved = true;
        }
        if reason.as_deref() == Some("Idle") {
            break node;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    agent.stop().await;
    let at = format!("{killed:?} (point {point:?})");
    let status = node.status.unwrap();
    assert_eq!(
        status.booted.unwrap().image.image_digest,
        digest('2'),
        "{at}"
    );
    assert_eq!(
        host.state().booted.unwrap().info.digest,
        digest('2'),
        "{at}"
    );
    assert_eq!(status.last_reboot.unwrap().digest, digest('2'), "{at}");
    assert!(approved, "{at}: on the new image without approval");
    assert_eq!(reboots(&host), 1, "{at}: one reboot for the one approval");
    (killed, host.steps())
}

/// The agent killed (its task aborted, as SIGKILL would) right before and right after
/// each host call of the whole update path in turn — and so on either side of each
/// status write, which happen between host calls — then started again on the same host:
/// never a reboot without approval, never an unlocked deployment without a `lastReboot`
/// record, never two reboots for one approval, and the node ends on the desired image.
#[tokio::test]
async fn a_kill_between_any_two_steps_leaves_a_safe_state() {
    let (_, path) = run_killed_at(None).await;
    let mut killed = Vec::new();
    for (i, point) in path.iter().enumerate() {
        let nth = path[..=i].iter().filter(|p| *p == point).count();
        if let (Some(at), _) = run_killed_at(Some((point, nth))).await {
            killed.push(at);
        }
    }
    // A run reaches a point as often as the run without a kill did, but for the host
    // reads of reconciles that timing adds or saves.
    assert!(
        killed.len() + 4 >= path.len(),
        "killed at {killed:?} of {path:?}"
    );
    for needed in [
        "before stage (1)",
        "after stage (1)",
        "before unlock (1)",
        "after unlock (1)",
        "before reboot (1)",
        "after reboot (1)",
    ] {
        assert!(killed.iter().any(|p| p == needed), "{needed} in {killed:?}");
    }
}

#[tokio::test]
async fn a_timer_that_cannot_be_masked_is_reported_until_it_is() {
    let (_emulator, client, api, host, [v1]) = one_node(
        [None],
        Behaviour {
            mask_error: Some("Access denied".to_owned()),
            ..Behaviour::default()
        },
    )
    .await;
    create_node(&api, &bootc_node("n1", &v1)).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    let (node, message) = wait_for("UpdateTimerNotMasked", async || {
        let n = api.get("n1").await.ok()?;
        let (status, reason, message) = condition(&n, "Degraded")?;
        (status == "True" && reason == "UpdateTimerNotMasked").then_some((n, message))
    })
    .await;
    assert!(
        message.contains("bootc-fetch-apply-updates.timer") && message.contains("Access denied"),
        "{message}"
    );
    assert_eq!(
        condition(&node, "Idle").unwrap().1,
        "Idle",
        "the rest goes on"
    );
    assert!(!host.timer_masked());
    // Fixed on the host: the next retry masks it and the condition clears.
    host.set_behaviour(Behaviour::default());
    wait_for("Degraded to clear", async || {
        let n = api.get("n1").await.ok()?;
        (condition(&n, "Degraded")?.0 == "False").then_some(())
    })
    .await;
    assert!(host.timer_masked());
    let attempts = host
        .steps()
        .iter()
        .filter(|s| *s == "before mask_update_timer")
        .count();
    assert!(attempts >= 2, "retried: {attempts}");
    agent.stop().await;
}

#[tokio::test]
async fn the_update_timer_is_handed_back_when_the_bootc_node_goes_and_masked_when_it_returns() {
    let (_emulator, client, api, host, [v1]) = one_node([None], Behaviour::default()).await;
    create_node(&api, &bootc_node("n1", &v1)).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    wait_reason(&api, "n1", "Idle").await;
    assert!(host.timer_masked(), "masked while the node is in a pool");

    // The pool lets go of the node (deleted, or the node left it): handed back.
    api.delete("n1", &DeleteParams::default()).await.unwrap();
    wait_for("the timer handed back", async || {
        (!host.timer_masked()).then_some(())
    })
    .await;
    let releases = |host: &MemoryHost| {
        host.steps()
            .iter()
            .filter(|s| *s == "after release_update_timer")
            .count()
    };
    assert_eq!(releases(&host), 1);

    // Back in a pool: masked again.
    create_node(&api, &bootc_node("n1", &v1)).await;
    wait_for("the timer masked again", async || {
        host.timer_masked().then_some(())
    })
    .await;
    wait_reason(&api, "n1", "Idle").await;
    agent.stop().await;

    // An agent that starts where the node has no BootcNode masks first (it cannot know
    // yet), then hands the timer back once it has listed none.
    api.delete("n1", &DeleteParams::default()).await.unwrap();
    assert!(host.timer_masked(), "no agent ran: nothing changed");
    let masks = |host: &MemoryHost| {
        host.steps()
            .iter()
            .filter(|s| *s == "after mask_update_timer")
            .count()
    };
    let masked_before = masks(&host);
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    wait_for("the new agent's release", async || {
        (releases(&host) == 2).then_some(())
    })
    .await;
    assert!(!host.timer_masked());
    assert_eq!(masks(&host), masked_before + 1, "masked once at start");
    agent.stop().await;
}

/// The approval's record is written before the deployment is unlocked: when that write
/// is refused, nothing is unlocked and nothing reboots; once the API answers again, the
/// agent records, unlocks and reboots, once.
#[tokio::test]
async fn a_refused_reboot_record_stops_the_unlock_and_the_reboot() {
    let behaviour = Behaviour {
        stage_time: Duration::from_secs(2),
        ..Behaviour::default()
    };
    let (emulator, client, api, host, [_v1, v2]) =
        one_node([Some("k1"), Some("k2")], behaviour).await;
    let mut approved = bootc_node("n1", &v2);
    approved.spec.desired_image_state = DesiredImageState::Booted;
    approved
        .annotations_mut()
        .insert(REBOOT_SLOT_ANNOTATION.to_owned(), "pool-a".to_owned());
    create_node(&api, &approved).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));
    wait_reason(&api, "n1", "Staging").await;
    // From now on, every write to a BootcNode fails.
    let handle = emulator.handle();
    handle.set_faults(kube_emulator::FaultConfig {
        error_rate: 1.0,
        writes_only: true,
        resource: Some("bootcnodes".to_owned()),
        ..Default::default()
    });
    let refused = || {
        handle
            .requests()
            .iter()
            .filter(|r| r.injected && r.subresource == "status")
            .count()
    };
    wait_for("the record's write to be refused", async || {
        (host.state().staged.is_some() && refused() > 0).then_some(())
    })
    .await;
    assert!(!unlocked(&host), "unlocked without a record");
    assert_eq!(reboots(&host), 0, "rebooted without a record");
    handle.clear_faults();
    let idle = wait_reason(&api, "n1", "Idle").await;
    let status = idle.status.unwrap();
    assert_eq!(status.booted.unwrap().image.image_digest, digest('2'));
    assert_eq!(status.last_reboot.unwrap().digest, digest('2'));
    assert_eq!(reboots(&host), 1);
    agent.stop().await;
}

#[tokio::test]
async fn a_staged_image_changed_right_before_the_unlock_is_neither_unlocked_nor_booted() {
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let [v1, v2, v3] = catalog.push_versions(REPO, [None, None, None]);
    let host = MemoryHost::new(catalog.clone(), &v1, Behaviour::default()).unwrap();
    // v2 staged and locked already, and the reboot into it approved: the agent's first
    // pass reads the host, decides to unlock and reboot, and records the reboot.
    let staged = catalog.get(&v2).unwrap();
    host.by_hand(|state| {
        state.switch(staged, true).unwrap();
    });
    // Right after that read, someone stages v3 by hand (locked): the agent must see it
    // when it checks again right before `upgrade --from-downloaded`.
    let other = catalog.get(&v3).unwrap();
    host.by_hand_at("after identity", 1, move |state| {
        state.switch(other, true).unwrap();
    });
    let api: Api<BootcNode> = Api::all(client.clone());
    let mut bn = bootc_node("n1", &v2);
    bn.spec.desired_image_state = DesiredImageState::Booted;
    bn.metadata.annotations =
        Some([(REBOOT_SLOT_ANNOTATION.to_owned(), "pool-a".to_owned())].into());
    create_node(&api, &bn).await;
    let agent = Supervised::start(client.clone(), host.clone(), "n1", Duration::from_secs(60));

    let message = wait_for("StagingNotLocked", async || {
        let n = api.get("n1").await.ok()?;
        let (status, reason, message) = condition(&n, "Degraded")?;
        (status == "True" && reason == "StagingNotLocked").then_some(message)
    })
    .await;
    assert!(
        message.contains(&digest('3')) && message.contains("nothing was unlocked"),
        "{message}"
    );
    let counters = host.counters();
    assert_eq!((counters.reboots, counters.soft_reboots), (0, 0));
    let state = host.state();
    let staged = state.staged.as_ref().unwrap();
    assert_eq!(
        (staged.info.digest.as_str(), staged.locked),
        (digest('3').as_str(), true),
        "v3 left as it was: locked, not unlocked"
    );
    // After the backoff the agent stages v2 again, and the approval still holds: one
    // reboot, into v2.
    let idle = wait_reason(&api, "n1", "Idle").await;
    assert_eq!(
        idle.status.unwrap().booted.unwrap().image.image_digest,
        digest('2')
    );
    let counters = host.counters();
    assert_eq!((counters.reboots, counters.soft_reboots), (1, 0));
    agent.stop().await;
}
