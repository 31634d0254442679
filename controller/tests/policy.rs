//! Rollout policy against the API emulator and simulated nodes: maintenance windows with
//! an injectable clock, maxStaging checked on every event, soak time, and stall and reboot
//! timeout conditions that come and go.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::Dependencies;
use chrono::{DateTime, TimeZone, Utc};
use common::*;
use host_sim::cluster::SimCluster;
use host_sim::memory::{Behaviour, NextBoot};
use kube::{Api, Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::time::Instant;

struct Env {
    emulator: Emulator,
    client: Client,
    cluster: SimCluster,
    v2: String,
}

async fn env(nodes: &[&str], behaviour: Behaviour) -> Env {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (cluster, _, v2) = workers_cluster(&emulator, nodes, behaviour).await;
    Env {
        emulator,
        client,
        cluster,
        v2,
    }
}

/// The controller with the test's clock (or the real one), and its metrics.
fn start_with(emulator: &Emulator, clock: Option<TestClock>) -> (Running, Metrics) {
    let mut options = Dependencies::default();
    if let Some(clock) = clock {
        options.clock = Arc::new(move || *clock.0.lock().unwrap());
    }
    let metrics = options.metrics.clone();
    (start(emulator, options), metrics)
}

/// A clock the test moves.
#[derive(Clone)]
struct TestClock(Arc<Mutex<DateTime<Utc>>>);

impl TestClock {
    fn new(t: DateTime<Utc>) -> Self {
        TestClock(Arc::new(Mutex::new(t)))
    }
    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap() = t;
    }
    fn advance(&self, d: chrono::Duration) {
        *self.0.lock().unwrap() += d;
    }
}

async fn approvals(client: &Client) -> usize {
    let bootc: Api<BootcNode> = Api::all(client.clone());
    bootc
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .filter(|b| {
            b.annotations()
                .contains_key(bootc_crds::REBOOT_SLOT_ANNOTATION)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_approval_outside_the_window_and_approvals_at_its_start() {
    let env = env(&["n1", "n2"], Behaviour::default()).await;
    // Sunday 2026-11-22 12:00 UTC; the window opens Monday 02:00 Europe/Berlin (01:00 UTC).
    let clock = TestClock::new(Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap());
    let (controller, metrics) = start_with(&env.emulator, Some(clock.clone()));
    create_pool(
        &env.client,
        &workers_pool(
            &env.v2,
            json!({
                "maxUnavailable": 2,
                "maintenanceWindows": [{"days": ["Mon"], "start": "02:00", "duration": "1h", "timeZone": "Europe/Berlin"}],
            }),
        ),
    )
    .await;
    // Staging is never windowed: both stage; nothing is approved.
    let p = wait_pool(
        &env.client,
        "workers",
        "both staged outside the window",
        |p| {
            p.status.as_ref().is_some_and(|s| s.staged_count == 2)
                && condition(p, "UpToDate").is_some_and(|c| c.1 == "OutsideMaintenanceWindow")
        },
    )
    .await;
    let message = condition(&p, "UpToDate").unwrap().2;
    assert!(message.contains("2026-11-23T01:00:00Z"), "{message}");
    // An hour later (still outside), still nothing.
    clock.advance(chrono::Duration::hours(1));
    never_over_reconciles(
        &env.client,
        &metrics,
        ("workers", 3),
        "approved outside the window",
        async || {
            let n = approvals(&env.client).await;
            (n != 0).then(|| format!("{n} approvals"))
        },
    )
    .await;
    // The window opens.
    clock.set(Utc.with_ymd_and_hms(2026, 11, 23, 1, 0, 1).unwrap());
    nudge(&env.client, "workers", 2).await;
    wait_pool(&env.client, "workers", "updated inside the window", |p| {
        all_updated(p, 2)
    })
    .await;
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_staging_two_of_six_is_never_exceeded() {
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let env = env(
        &names,
        Behaviour {
            stage_time: Duration::from_millis(300),
            ..Behaviour::default()
        },
    )
    .await;
    // Follow every change: a node is staging when its desiredImage is the target and its
    // agent has neither staged nor booted it.
    let mut events = env.emulator.handle().events();
    let target = env.v2.clone();
    let max_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let max = Arc::clone(&max_seen);
    let watcher = tokio::spawn(async move {
        let mut pulling: BTreeMap<String, bool> = BTreeMap::new();
        while let Ok(event) = events.recv().await {
            if event.key.plural != "bootcnodes" {
                continue;
            }
            let o = &event.object;
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let desired = o["spec"]["desiredImage"].as_str() == Some(target.as_str());
            let has = |slot: &str| {
                o["status"][slot]["imageDigest"].as_str() == Some(digest('2').as_str())
            };
            let deleted = event.kind == kube_emulator::EventType::Deleted;
            pulling.insert(
                name,
                !deleted && desired && !has("staged") && !has("booted"),
            );
            let now = pulling.values().filter(|p| **p).count();
            max.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let (controller, _) = start_with(&env.emulator, None);
    create_pool(
        &env.client,
        &workers_pool(
            &env.v2,
            json!({"maxUnavailable": 1, "maxStaging": 2, "paused": true}),
        ),
    )
    .await;
    wait_pool(
        &env.client,
        "workers",
        "all six staged, two at a time",
        |p| p.status.as_ref().is_some_and(|s| s.staged_count == 6),
    )
    .await;
    controller.stop().await;
    watcher.abort();
    let max = max_seen.load(std::sync::atomic::Ordering::SeqCst);
    assert!(max >= 1, "the checker saw the pulls");
    assert!(max <= 2, "{max} nodes were staging at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_approval_waits_the_soak_time_after_a_node_returns() {
    let env = env(&["n1", "n2"], Behaviour::default()).await;
    let mut events = env.emulator.handle().events();
    let recorder = tokio::spawn(async move {
        // The first node approved (whichever staged first: their BootcNodes are created
        // side by side), when it came back on the target, and the other's approval.
        let mut first: Option<String> = None;
        let mut first_back: Option<Instant> = None;
        while let Ok(event) = events.recv().await {
            let o = &event.object;
            if event.key.plural != "bootcnodes" {
                continue;
            }
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let approved = o["spec"]["desiredImageState"] == "Booted";
            match &first {
                None if approved => first = Some(name),
                Some(f)
                    if *f == name
                        && first_back.is_none()
                        && o["status"]["booted"]["imageDigest"].as_str()
                            == Some(digest('2').as_str()) =>
                {
                    first_back = Some(Instant::now());
                }
                Some(f) if *f == name => {}
                Some(_) if approved => return (first_back, Some(Instant::now())),
                _ => {}
            }
        }
        (first_back, None)
    });
    let (controller, _) = start_with(&env.emulator, None);
    create_pool(
        &env.client,
        &workers_pool(
            &env.v2,
            json!({"maxUnavailable": 1, "postRebootDelaySeconds": 3}),
        ),
    )
    .await;
    wait_pool(&env.client, "workers", "both updated", |p| {
        all_updated(p, 2)
    })
    .await;
    let (back, approved) = recorder.await.unwrap();
    let gap = approved.unwrap() - back.unwrap();
    assert!(
        gap >= Duration::from_millis(2900),
        "n2 was approved {gap:?} after n1 came back, before the 3 s soak"
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_timeout_and_stall_are_reported_and_clear() {
    let env = env(&["n1", "n2"], Behaviour::default()).await;
    env.cluster
        .host("n1")
        .unwrap()
        .set_next_boot(NextBoot::Never);
    let clock = TestClock::new(Utc::now());
    let (controller, metrics) = start_with(&env.emulator, Some(clock.clone()));
    let pools: Api<BootcNodePool> = Api::all(env.client.clone());
    create_pool(
        &env.client,
        &workers_pool(
            &env.v2,
            json!({"maxUnavailable": 1, "rebootTimeoutSeconds": 600, "haltAfterUnhealthy": 1, "paused": true}),
        ),
    )
    .await;
    resume_when_staged(&env.client, 2).await;
    // n1 gets the slot, reboots and never comes back. Down in the reboot it was
    // approved for, it is not unhealthy: rebootTimeoutSeconds bounds that.
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    wait_for("n1 rebooted and NotReady", async || {
        let recorded = bootc.get("n1").await.ok()?.status?.last_reboot.is_some();
        let ready = nodes
            .get("n1")
            .await
            .ok()?
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status);
        (recorded && ready.as_deref() != Some("True")).then_some(())
    })
    .await;
    // Before the fix this halted within a reconcile of the Node going NotReady.
    never_over_reconciles(
        &env.client,
        &metrics,
        ("workers", 3),
        "halted while n1 is in its own reboot",
        async || {
            let p = pools.get("workers").await.ok()?;
            condition(&p, "Degraded")
                .filter(|c| c.1 == "RolloutHalted")
                .map(|c| c.2)
        },
    )
    .await;
    let p = pools.get("workers").await.unwrap();
    assert_eq!(condition(&p, "Progressing").unwrap().1, "Advancing");

    // Eleven minutes later: past the reboot timeout (unhealthy: halted), and no node has
    // advanced: a stall.
    clock.advance(chrono::Duration::minutes(11));
    nudge(&env.client, "workers", 2).await;
    let p = wait_pool(&env.client, "workers", "RebootTimeout and Stalled", |p| {
        condition(p, "Degraded")
            .is_some_and(|c| c.1 == "RolloutHalted" && c.2.contains("RebootTimeout"))
            && condition(p, "Progressing").is_some_and(|c| c.1 == "Stalled")
    })
    .await;
    let stalled = condition(&p, "Progressing").unwrap();
    assert_eq!(stalled.0, "False");
    assert!(stalled.2.contains("n1"), "{}", stalled.2);

    // The node comes back: both clear and the rollout finishes.
    env.cluster.host("n1").unwrap().power_on();
    let p = wait_pool(&env.client, "workers", "all updated", |p| all_updated(p, 2)).await;
    assert_eq!(condition(&p, "Degraded").unwrap().1, "Healthy");
    let progressing = condition(&p, "Progressing").unwrap();
    assert_eq!(
        (progressing.0.as_str(), progressing.1.as_str()),
        ("True", "Complete")
    );
    controller.stop().await;
}
