//! The agent's run loop against the API emulator and in-process hosts: the whole
//! Staging → Staged → approval → reboot → Idle path, one reboot per approval, cancelled
//! staging, restarts mid-stage, pull secrets, bad input, and an idle agent's API use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::{BootcNode, BootcNodeSpec, DesiredImageState};
use bootc_node_agent::run::{self, RunError, RunOptions};
use host_sim::memory::{Behaviour, Catalog, MemoryHost, NextBoot};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const REPO: &str = "registry.test/os";
const DEADLINE: Duration = Duration::from_secs(30);

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

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
            spec.as_object_mut().unwrap().remove("pattern");
        }
        let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    (emulator, client)
}

fn node(name: &str, image: &str) -> BootcNode {
    BootcNode::new(
        name,
        BootcNodeSpec {
            desired_image: image.to_owned(),
            desired_image_state: DesiredImageState::Staged,
            reboot_policy: Default::default(),
            pull_secret_ref: None,
            pull_secret_hash: None,
        },
    )
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

    async fn stop(self) -> u32 {
        self.stop.send(true).unwrap();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the agent stops on shutdown")
            .unwrap()
    }
}

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn condition(node: &BootcNode, type_: &str) -> Option<(String, String, String)> {
    node.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_reason(api: &Api<BootcNode>, name: &str, reason: &str) -> BootcNode {
    wait_for(&format!("{name} to report {reason}"), async || {
        let n = api.get(name).await.ok()?;
        (condition(&n, "Idle")?.1 == reason).then_some(n)
    })
    .await
}

async fn approve(api: &Api<BootcNode>, name: &str) {
    let patch = json!({
        "metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: "pool-a"}},
        "spec": {"desiredImageState": "Booted"},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn set_desired(api: &Api<BootcNode>, name: &str, image: &str) {
    let patch = json!({"spec": {"desiredImage": image}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn stages_waits_for_approval_reboots_once_and_reports_idle() {
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), Some("k1"));
    let v2 = catalog.push(REPO, "v2", &digest('2'), Some("k2"));
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    api.create(&PostParams::default(), &node("n1", &v2))
        .await
        .unwrap();
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
    approve(&api, "n1").await;
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
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), Some("k1"));
    let v2 = catalog.push(REPO, "v2", &digest('2'), Some("k1"));
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    let mut bn = node("n1", &v2);
    bn.spec.reboot_policy = bootc_crds::pool::RebootPolicy::AllowSoftReboot;
    api.create(&PostParams::default(), &bn).await.unwrap();
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
    approve(&api, "n1").await;
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
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let v2 = catalog.push(REPO, "v2", &digest('2'), None);
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    host.set_next_boot(NextBoot::OldImage);
    let api: Api<BootcNode> = Api::all(client.clone());
    api.create(&PostParams::default(), &node("n1", &v2))
        .await
        .unwrap();
    // A short poll, so that the agent looks at the host many times after the reboot.
    let agent = Supervised::start(
        client.clone(),
        host.clone(),
        "n1",
        Duration::from_millis(200),
    );
    wait_reason(&api, "n1", "Staged").await;
    approve(&api, "n1").await;
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
    // however often it looks at the host.
    let boots = host.counters().boots;
    let polls = Instant::now() + Duration::from_secs(2);
    while Instant::now() < polls {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            host.counters().reboots,
            1,
            "rebooted twice for one approval"
        );
    }
    assert_eq!(host.counters().stages, 1);
    assert_eq!(host.counters().boots, boots);
    agent.stop().await;
}

#[tokio::test]
async fn a_new_desired_image_during_staging_restarts_staging() {
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let v2 = catalog.push(REPO, "v2", &digest('2'), None);
    let v3 = catalog.push(REPO, "v3", &digest('3'), None);
    let host = MemoryHost::new(
        catalog,
        &v1,
        Behaviour {
            stage_hangs: true,
            ..Behaviour::default()
        },
    )
    .unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    api.create(&PostParams::default(), &node("n1", &v2))
        .await
        .unwrap();
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
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let v2 = catalog.push(REPO, "v2", &digest('2'), None);
    let host = MemoryHost::new(
        catalog,
        &v1,
        Behaviour {
            stage_hangs: true,
            ..Behaviour::default()
        },
    )
    .unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    api.create(&PostParams::default(), &node("n1", &v2))
        .await
        .unwrap();
    let options = RunOptions {
        node_name: "n1".into(),
        poll_interval: Duration::from_secs(60),
        agent_version: "test".into(),
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
        api.create(&PostParams::default(), &node(name, image))
            .await
            .unwrap();
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
    let (_emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let auth = |token: &str| {
        let json = format!(r#"{{"auths":{{"registry.test":{{"auth":"{token}"}}}}}}"#);
        ByteString(json.into_bytes())
    };
    let secret = |token: &str| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("pull".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some([(".dockerconfigjson".to_owned(), auth(token))].into()),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret("c2VjcmV0MQ=="))
        .await
        .unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    let mut bn = node("n1", &v1);
    bn.spec.pull_secret_ref = Some(bootc_crds::pool::SecretRef {
        name: "pull".into(),
        namespace: "default".into(),
    });
    bn.spec.pull_secret_hash = Some("h1".into());
    api.create(&PostParams::default(), &bn).await.unwrap();
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
    let (emulator, client) = cluster(false).await;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let host = MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap();
    let api: Api<BootcNode> = Api::all(client.clone());
    api.create(&PostParams::default(), &node("n1", &v1))
        .await
        .unwrap();
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
