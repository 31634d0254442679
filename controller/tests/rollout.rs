//! The controller against the API emulator and simulated nodes (in-process hosts with the
//! real agent run loop): rollouts under a budget checked on every event, percent budgets,
//! pause, rollback, drains blocked by a disruption budget, halts, nodes leaving and
//! joining, pools in conflict, and a controller killed mid-rollout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_crds::{MANAGED_LABEL, REBOOT_SLOT_ANNOTATION};
use bootc_pool_controller::reconcile::{self, Dependencies};
use common::*;
use host_sim::cluster::{Invariants, PodOwner, SimCluster, SimOptions};
use host_sim::memory::{Catalog, NextBoot};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::{Value, json};
use tokio::time::Instant;

const REPO: &str = "registry.test/os";
struct Env {
    emulator: Emulator,
    client: Client,
    cluster: SimCluster,
    v1: String,
    v2: String,
}

fn worker_labels(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([("role".to_owned(), "worker".to_owned())]);
    for (k, v) in extra {
        labels.insert((*k).to_owned(), (*v).to_owned());
    }
    labels
}

async fn env(nodes: &[&str]) -> Env {
    logs();
    env_on(Emulator::start().await.unwrap(), nodes).await
}

/// The cluster of [`env`] on `emulator` (CRDs it already serves are kept).
async fn env_on(emulator: Emulator, nodes: &[&str]) -> Env {
    let client = emulator.client().unwrap();
    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions(REPO, [Some("k1"), Some("k2")]);
    let cluster = SimCluster::start(emulator.config(), Arc::clone(&catalog))
        .await
        .unwrap();
    let options = SimOptions {
        node_labels: worker_labels(&[]),
        ..SimOptions::default()
    };
    for name in nodes {
        cluster.add_node(name, &v1, &options).await.unwrap();
    }
    Env {
        emulator,
        client,
        cluster,
        v1,
        v2,
    }
}

impl Env {
    /// Creates the pool `workers` targeting v2 on the `role: worker` nodes with
    /// `rollout`; the pools' API for what the test does next.
    async fn apply_workers(&self, rollout: Value) -> Api<BootcNodePool> {
        let pools: Api<BootcNodePool> = Api::all(self.client.clone());
        pools
            .create(
                &PostParams::default(),
                &pool("workers", &self.v2, rollout, workers()),
            )
            .await
            .unwrap();
        pools
    }
}

/// A pool named `name` targeting `image` on the nodes `selector` picks.
fn pool(name: &str, image: &str, rollout: Value, selector: Value) -> BootcNodePool {
    serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": selector,
            "image": {"ref": image},
            "rollout": rollout,
        }
    }))
    .unwrap()
}

fn workers() -> Value {
    json!({"matchLabels": {"role": "worker"}})
}

fn booted(env: &Env, node: &str) -> String {
    common::booted(&env.cluster, node)
}

async fn unschedulable(client: &Client, node: &str) -> bool {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .get(node)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

async fn no_slots_left(client: &Client) {
    let bootc: Api<BootcNode> = Api::all(client.clone());
    for b in bootc.list(&Default::default()).await.unwrap() {
        assert!(
            !b.annotations().contains_key(REBOOT_SLOT_ANNOTATION),
            "{} still holds a slot",
            b.name_any()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_roll_two_at_a_time_and_an_admin_cordon_stays() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let env = env(&names).await;
    set_unschedulable(&env.client, "n3", true).await;
    let handle = env.emulator.handle();
    let invariants = Invariants::follow(handle.clone(), 2, BTreeSet::from(["n3".to_owned()]));
    let before = handle.requests().len();
    let controller = start(&env.emulator, Dependencies::default());
    // Told to update nodes someone else cordoned too (respectCordon: false).
    let mut workers = pool("workers", &env.v2, json!({"maxUnavailable": 2}), workers());
    workers.spec.disruption.respect_cordon = false;
    let pools: Api<BootcNodePool> = Api::all(env.client.clone());
    pools
        .create(&PostParams::default(), &workers)
        .await
        .unwrap();
    let done = wait_pool(&env.client, "workers", "all five updated", |p| {
        all_updated(p, 5)
    })
    .await;
    for n in names {
        assert_eq!(booted(&env, n), digest('2'), "{n}");
        assert_eq!(env.cluster.host(n).unwrap().counters().reboots, 1, "{n}");
    }
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(
        report.max_unavailable_seen, 2,
        "the budget was used, never exceeded"
    );
    assert!(
        report.left_cordoned.is_empty(),
        "{:?}",
        report.left_cordoned
    );
    for n in names {
        assert_eq!(report.reboots.get(n), Some(&1), "{n}: {:?}", report.reboots);
    }
    assert!(
        unschedulable(&env.client, "n3").await,
        "the admin's cordon stays"
    );
    for n in ["n1", "n2", "n4", "n5"] {
        assert!(!unschedulable(&env.client, n).await, "{n} uncordoned");
    }
    no_slots_left(&env.client).await;
    let status = done.status.unwrap();
    assert_eq!(status.target_image.as_deref(), Some(env.v2.as_str()));
    // Every approval is told, not a count on the first one's: each node is named in an
    // approval (one event per plan names all that plan approved), and only once. They
    // are sent in the background, in order: the last may follow the status by a moment.
    let approvals = |seen: &[(String, String)]| -> Vec<String> {
        seen.iter()
            .filter(|(reason, _)| reason == "RebootApproved")
            .flat_map(|(_, note)| named_nodes(note))
            .collect()
    };
    wait_events(&env.client, "every approval told", |seen| {
        approvals(seen).len() >= names.len()
    })
    .await;
    let seen = recorded_events(&env.client, Some("BootcNodePool")).await;
    let approved = approvals(&seen);
    let mut sorted = approved.clone();
    sorted.sort();
    assert_eq!(sorted, names, "approvals told: {seen:#?}");
    // And on each Node, as `kubectl describe node` shows them (sent in the background,
    // so the last may follow the status by a moment).
    for n in names {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let on_node = node_events(&env.client, n).await;
            let has = |reason: &str| on_node.iter().any(|r| r == reason);
            if has("RebootApproved") && has("NodeUpdated") {
                break;
            }
            assert!(Instant::now() < deadline, "{n}: {on_node:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The controller's API requests for this update cycle, for the record.
    let ours: Vec<_> = handle
        .requests()
        .into_iter()
        .skip(before)
        .filter(|r| r.user_agent == reconcile::USER_AGENT)
        .collect();
    let counters = kube_emulator::RequestCounts::of(&ours);
    let writes: u64 = ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| counters.by_verb.get(*v).copied().unwrap_or(0))
        .sum();
    assert!(counters.total > 0, "the controller's requests are counted");
    println!(
        "controller API requests for one update cycle of 5 nodes: {} ({:.1} per node), writes {writes} ({:.1} per node); {:?}",
        counters.total,
        counters.total as f64 / 5.0,
        writes as f64 / 5.0,
        counters.by_verb_resource
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_percent_of_five_is_two_and_pause_holds_approvals() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let env = env(&names).await;
    let invariants = Invariants::follow(env.emulator.handle(), 2, BTreeSet::new());
    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": "40%", "paused": true}))
        .await;
    // Paused: every node stages, none is approved.
    let paused = wait_pool(&env.client, "workers", "all staged while paused", |p| {
        p.status.as_ref().is_some_and(|s| s.staged_count == 5)
            && condition(p, "UpToDate").is_some_and(|c| c.1 == "Paused")
    })
    .await;
    assert_eq!(paused.status.unwrap().updating_count, 0);
    no_slots_left(&env.client).await;
    for n in names {
        assert_eq!(env.cluster.host(n).unwrap().counters().reboots, 0);
    }
    patch_pool(
        &env.client,
        "workers",
        json!({"spec": {"rollout": {"paused": false}}}),
    )
    .await;
    wait_pool(&env.client, "workers", "all updated after resume", |p| {
        all_updated(p, 5)
    })
    .await;
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    assert_eq!(report.max_unavailable_seen, 2, "40% of 5 is 2");
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_ref_back_mid_rollout_brings_updated_nodes_back() {
    let names = ["n1", "n2", "n3", "n4"];
    let env = env(&names).await;
    let invariants = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 1})).await;
    wait_for("n1 on v2", async || {
        (booted(&env, "n1") == digest('2')).then_some(())
    })
    .await;
    patch_pool(
        &env.client,
        "workers",
        json!({"spec": {"image": {"ref": env.v1}}}),
    )
    .await;
    wait_pool(&env.client, "workers", "all back on v1", |p| {
        all_updated(p, 4)
            && p.status.as_ref().unwrap().target_digest.as_deref() == Some(digest('1').as_str())
    })
    .await;
    for n in names {
        assert_eq!(booted(&env, n), digest('1'), "{n}");
    }
    // n1 went to v2 and back: two reboots; the rest at most one (an approval may have
    // been in flight when the ref changed) and none of them is left on v2.
    assert_eq!(env.cluster.host("n1").unwrap().counters().reboots, 2);
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    no_slots_left(&env.client).await;
    controller.stop().await;
}

async fn blocking_pdb(client: &Client, name: &str, app: &str) {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_disruption_budget_times_the_drain_out_and_frees_the_slot() {
    let env = env(&["n1", "n2"]).await;
    web_pod_held_by_a_budget(&env, "n1").await;
    let invariants = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 1, "drainTimeoutSeconds": 2}))
        .await;
    let p = wait_pool(&env.client, "workers", "n2 updated, n1 degraded", |p| {
        let s = p.status.as_ref();
        s.is_some_and(|s| s.updated_count == 1 && s.degraded_count == 1)
    })
    .await;
    let (status, reason, message) = condition(&p, "Degraded").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "NodeDegraded"));
    assert!(
        message.contains("n1") && message.contains("DrainTimeout"),
        "{message}"
    );
    assert_eq!(booted(&env, "n1"), digest('1'), "n1 was never rebooted");
    assert_eq!(env.cluster.host("n1").unwrap().counters().reboots, 0);
    assert_eq!(booted(&env, "n2"), digest('2'));
    assert!(!unschedulable(&env.client, "n1").await, "n1 uncordoned");
    no_slots_left(&env.client).await;
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unhealthy_slot_holders_halt_and_healing_one_resumes() {
    let names = ["n1", "n2", "n3", "n4"];
    let env = env(&names).await;
    for n in ["n1", "n2"] {
        env.cluster.host(n).unwrap().set_next_boot(NextBoot::Never);
    }
    // The controller's clock stands still until the test moves it past the reboot
    // timeout.
    let clock = Arc::new(std::sync::Mutex::new(chrono::Utc::now()));
    let mut options = Dependencies::default();
    let now = Arc::clone(&clock);
    options.clock = Arc::new(move || *now.lock().unwrap());
    let metrics = options.metrics.clone();
    let controller = start(&env.emulator, options);
    env.apply_workers(json!({"maxUnavailable": 3, "haltAfterUnhealthy": 2, "paused": true}))
        .await;
    // Everything staged first, so that slots go in name order: n1, n2 and n3; n1 and n2
    // never come back.
    resume_when_staged(&env.client, 4).await;
    // Slots go to n1, n2 and n3; then no new approvals while the test looks.
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    wait_for("n1, n2 and n3 approved", async || {
        for n in ["n1", "n2", "n3"] {
            let b = bootc.get(n).await.ok()?;
            b.annotations()
                .contains_key(REBOOT_SLOT_ANNOTATION)
                .then_some(())?;
        }
        Some(())
    })
    .await;
    let pause = |paused: bool| json!({"spec": {"rollout": {"paused": paused}}});
    patch_pool(&env.client, "workers", pause(true)).await;
    // n3 finishes. n1 and n2 are down in the reboots they were approved for: not yet
    // unhealthy (rebootTimeoutSeconds bounds that), so no halt.
    let p = wait_pool(&env.client, "workers", "n3 updated and released", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 1)
    })
    .await;
    assert_eq!(booted(&env, "n3"), digest('2'));
    assert_ne!(
        condition(&p, "Degraded").unwrap().1,
        "RolloutHalted",
        "{p:?}"
    );

    // Past the reboot timeout (default 1800 s) both are unhealthy: halted, and n4 gets
    // no slot although one is free.
    *clock.lock().unwrap() += chrono::Duration::minutes(31);
    patch_pool(&env.client, "workers", pause(false)).await;
    let halted = wait_pool(&env.client, "workers", "RolloutHalted", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "RolloutHalted")
    })
    .await;
    let message = condition(&halted, "Degraded").unwrap().2;
    assert!(
        message.contains("n1: RebootTimeout") && message.contains("n2: RebootTimeout"),
        "{message}"
    );
    never_over_reconciles(
        &env.client,
        &metrics,
        ("workers", 3),
        "n4 approved while halted",
        async || {
            let n4 = bootc.get("n4").await.ok()?;
            n4.annotations()
                .contains_key(REBOOT_SLOT_ANNOTATION)
                .then(|| "n4 holds the reboot slot".to_owned())
        },
    )
    .await;
    // Healing n1 lifts the halt: n4 updates.
    env.cluster.host("n1").unwrap().power_on();
    wait_for("n4 on v2", async || {
        (booted(&env, "n4") == digest('2')).then_some(())
    })
    .await;
    // n4's host runs v2 a moment before the controller has seen it back and released
    // it: wait for the pool to count it.
    wait_pool(
        &env.client,
        "workers",
        "halt lifted, n1, n3 and n4 updated",
        |p| {
            condition(p, "Degraded").is_some_and(|c| c.1 != "RolloutHalted")
                && p.status.as_ref().is_some_and(|s| s.updated_count == 3)
        },
    )
    .await;
    assert_eq!(booted(&env, "n1"), digest('2'));
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_leaving_mid_drain_is_let_go_and_a_joining_node_is_rolled() {
    let env = env(&["n1", "n2"]).await;
    web_pod_held_by_a_budget(&env, "n1").await;
    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 1})).await;
    // n1 holds the slot, cordoned, its drain blocked forever (no timeout).
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    wait_for("n1 cordoned with a slot", async || {
        let b = bootc.get("n1").await.ok()?;
        (b.annotations().contains_key(REBOOT_SLOT_ANNOTATION)
            && unschedulable(&env.client, "n1").await)
            .then_some(())
    })
    .await;
    // A node joins mid-rollout.
    let options = SimOptions {
        node_labels: worker_labels(&[]),
        ..SimOptions::default()
    };
    env.cluster.add_node("n9", &env.v1, &options).await.unwrap();
    // n1 leaves the pool.
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": "db"}}})),
        )
        .await
        .unwrap();
    wait_for("n1 let go", async || {
        let gone = bootc.get_opt("n1").await.ok()?.is_none();
        let node = nodes.get("n1").await.ok()?;
        let unlabelled = !node.labels().contains_key(MANAGED_LABEL);
        let uncordoned = !node.spec.and_then(|s| s.unschedulable).unwrap_or(false);
        (gone && unlabelled && uncordoned).then_some(())
    })
    .await;
    wait_pool(&env.client, "workers", "n2 and n9 updated", |p| {
        all_updated(p, 2)
    })
    .await;
    assert_eq!(booted(&env, "n9"), digest('2'));
    assert_eq!(booted(&env, "n1"), digest('1'));
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pools_selecting_one_node_both_report_it_and_the_rest_rolls() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions(REPO, [None, None]);
    let cluster = SimCluster::start(emulator.config(), catalog).await.unwrap();
    for (name, labels) in [
        ("a1", worker_labels(&[])),
        ("both", worker_labels(&[("gpu", "yes")])),
        ("b1", BTreeMap::from([("gpu".to_owned(), "yes".to_owned())])),
    ] {
        let options = SimOptions {
            node_labels: labels,
            ..SimOptions::default()
        };
        cluster.add_node(name, &v1, &options).await.unwrap();
    }
    let controller = start(&emulator, Dependencies::default());
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    for (name, selector) in [
        ("workers", workers()),
        ("gpus", json!({"matchLabels": {"gpu": "yes"}})),
    ] {
        pools
            .create(
                &PostParams::default(),
                &pool(name, &v2, json!({"maxUnavailable": 1}), selector),
            )
            .await
            .unwrap();
    }
    for name in ["workers", "gpus"] {
        let p = wait_pool(&client, name, "a NodeConflict and one node updated", |p| {
            condition(p, "Degraded").is_some_and(|c| c.1 == "NodeConflict")
                && p.status.as_ref().is_some_and(|s| s.updated_count == 1)
        })
        .await;
        let message = condition(&p, "Degraded").unwrap().2;
        assert!(
            message.contains("both") && message.contains("gpus and workers"),
            "{message}"
        );
    }
    for (name, want) in [("a1", '2'), ("b1", '2'), ("both", '1')] {
        let host = cluster.host(name).unwrap();
        assert_eq!(
            host.state().booted.unwrap().info.digest,
            digest(want),
            "{name}"
        );
    }
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_rollout_finishes_it_without_double_reboots() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let env = env(&names).await;
    // A pod whose budget blocks n1's drain until the test relaxes it.
    web_pod_held_by_a_budget(&env, "n1").await;
    let handle = env.emulator.handle();
    let invariants = Invariants::follow(handle.clone(), 2, BTreeSet::new());
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    let mut controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 2})).await;

    // 1. Killed right after a cordon.
    wait_for("a cordon", async || {
        for n in names {
            if unschedulable(&env.client, n).await {
                return Some(());
            }
        }
        None
    })
    .await;
    controller.kill().await;
    controller = start(&env.emulator, Dependencies::default());
    // Killed again at once, before its caches have filled.
    controller.kill().await;
    controller = start(&env.emulator, Dependencies::default());

    // 2. Killed during n1's drain (blocked by its budget).
    wait_for("n1 draining", async || {
        let b = bootc.get("n1").await.ok()?;
        (b.annotations().contains_key(REBOOT_SLOT_ANNOTATION)
            && unschedulable(&env.client, "n1").await)
            .then_some(())
    })
    .await;
    controller.kill().await;
    controller = start(&env.emulator, Dependencies::default());

    // 3. Killed right after an approval.
    wait_for("an approval", async || {
        let list = bootc.list(&Default::default()).await.ok()?;
        list.iter()
            .any(|b| b.spec.desired_image_state == bootc_crds::node::DesiredImageState::Booted)
            .then_some(())
    })
    .await;
    controller.kill().await;
    controller = start(&env.emulator, Dependencies::default());

    // Let n1's drain through.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), "default");
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"maxUnavailable": 1}})),
    )
    .await
    .unwrap();
    wait_pool(&env.client, "workers", "all updated", |p| all_updated(p, 5)).await;
    for n in names {
        assert_eq!(booted(&env, n), digest('2'), "{n}");
        assert_eq!(
            env.cluster.host(n).unwrap().counters().reboots,
            1,
            "{n} rebooted more than once"
        );
    }
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    no_slots_left(&env.client).await;
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_of_one_three_and_thirty_percent_are_never_exceeded() {
    let names = [
        "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10",
    ];
    for (budget, resolved) in [(json!(1), 1), (json!(3), 3), (json!("30%"), 3)] {
        let env = env(&names).await;
        let invariants = Invariants::follow(env.emulator.handle(), resolved, BTreeSet::new());
        let controller = start(&env.emulator, Dependencies::default());
        env.apply_workers(json!({"maxUnavailable": budget})).await;
        wait_pool(&env.client, "workers", "all ten updated", |p| {
            all_updated(p, 10)
        })
        .await;
        let report = invariants.settled(Duration::from_secs(10)).await;
        assert!(report.is_clean_rollout(), "{budget}: {report:?}");
        assert_eq!(
            report.max_unavailable_seen, resolved,
            "{budget}: the budget is used"
        );
        assert!(
            report.reboots.values().all(|r| *r == 1),
            "{budget}: {:?}",
            report.reboots
        );
        controller.stop().await;
        env.cluster.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_failing_to_stage_and_one_back_on_the_wrong_image_do_not_stop_the_rest() {
    let names = ["n1", "n2", "n3", "n4"];
    let env = env(&names).await;
    // n1 cannot pull; n2 comes back on its old image after its reboot.
    env.cluster
        .host("n1")
        .unwrap()
        .set_behaviour(host_sim::memory::Behaviour {
            stage_error: Some("pulling: 500 Internal Server Error".into()),
            ..host_sim::memory::Behaviour::default()
        });
    env.cluster
        .host("n2")
        .unwrap()
        .set_next_boot(NextBoot::OldImage);
    // n2 keeps its slot (it is unhealthy: an admin must look at it); the other slot
    // serves the rest.
    let invariants = Invariants::follow(env.emulator.handle(), 2, BTreeSet::new());
    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 2, "haltAfterUnhealthy": 2}))
        .await;
    let p = wait_pool(&env.client, "workers", "n3 and n4 updated", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.updated_count == 2 && s.degraded_count == 2)
    })
    .await;
    let (status, reason, message) = condition(&p, "Degraded").unwrap();
    assert_eq!(status, "True");
    assert_eq!(reason, "NodeDegraded", "{message}");
    assert!(
        message.contains("n1") && message.contains("500"),
        "{message}"
    );
    assert!(
        message.contains("n2") && message.contains("RebootDidNotApply"),
        "{message}"
    );
    // n1 never rebooted; n2 rebooted exactly once and was not rebooted again.
    assert_eq!(env.cluster.host("n1").unwrap().counters().reboots, 0);
    assert_eq!(env.cluster.host("n2").unwrap().counters().reboots, 1);
    for n in ["n3", "n4"] {
        assert_eq!(booted(&env, n), digest('2'), "{n}");
    }
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.violations.is_empty(), "{report:?}");
    controller.stop().await;
}

/// A pod `web-0` on `node` that a disruption budget allows no eviction of: the node's
/// drain is held up until the budget goes.
async fn web_pod_held_by_a_budget(env: &Env, node: &str) {
    let web = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let owner = PodOwner::ReplicaSet("web".into());
    env.cluster
        .add_pod(node, "default", "web-0", web, owner)
        .await
        .unwrap();
    blocking_pdb(&env.client, "web", "web").await;
}

/// Waits until `node` is cordoned.
async fn wait_cordoned(client: &Client, node: &str) {
    let deadline = Instant::now() + DEADLINE;
    while !unschedulable(client, node).await {
        assert!(Instant::now() < deadline, "{node} was never cordoned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The reasons of the Events on Node `node`, found as `kubectl describe node` finds
/// them (core/v1 Events by the involved object's kind, name and uid).
async fn node_events(client: &Client, node: &str) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let uid = nodes.get(node).await.unwrap().metadata.uid.unwrap();
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    let selector =
        format!("involvedObject.kind=Node,involvedObject.name={node},involvedObject.uid={uid}");
    api.list(&kube::api::ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.reason.unwrap_or_default())
        .collect()
}

/// Waits until `check` holds for the Events, or fails listing them.
async fn wait_events(client: &Client, what: &str, check: impl Fn(&[(String, String)]) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let seen = recorded_events(client, Some("BootcNodePool")).await;
        if check(&seen) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of one sample of the metrics text, 0 when absent.
fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_was_not_written_is_neither_announced_nor_counted() {
    let env = env(&["n1"]).await;
    web_pod_held_by_a_budget(&env, "n1").await;
    let deps = Dependencies::default();
    let metrics = deps.metrics.clone();
    let controller = start(&env.emulator, deps);
    env.apply_workers(json!({"maxUnavailable": 1})).await;
    // n1 holds the slot, cordoned, its drain held up by the disruption budget, which the
    // pool's status, the BootcNode's status and an event name, with the pod.
    wait_cordoned(&env.client, "n1").await;
    let p = wait_pool(&env.client, "workers", "the blocked drain named", |p| {
        condition(p, "UpToDate").is_some_and(|c| c.2.contains("drain blocked"))
    })
    .await;
    let message = condition(&p, "UpToDate").unwrap().2;
    assert!(
        message.contains("n1") && message.contains("web-0"),
        "{message}"
    );
    wait_events(&env.client, "the blocked drain announced", |seen| {
        seen.iter()
            .any(|(reason, note)| reason == "DrainBlocked" && note.contains("web-0"))
    })
    .await;
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    let noted = wait_for("drainBlocked in the BootcNode's status", async || {
        let b = bootc.get("n1").await.ok()?;
        b.status?.drain_blocked
    })
    .await;
    assert!(
        noted.message.contains("web-0") && noted.message.contains("disruption budget"),
        "{noted:?}"
    );
    assert!(noted.since.is_some());
    // From now on every write of the controller to a BootcNode fails; then the budget
    // goes, the drain finishes, and the approval is written, and fails.
    env.emulator
        .handle()
        .set_faults(kube_emulator::FaultConfig {
            error_rate: 1.0,
            writes_only: true,
            user_agent: Some(reconcile::USER_AGENT.to_owned()),
            resource: Some("bootcnodes".into()),
            ..Default::default()
        });
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), "default");
    pdbs.delete("web", &Default::default()).await.unwrap();
    wait_events(&env.client, "the failed approval reported", |seen| {
        seen.iter()
            .any(|(reason, note)| reason == "ActionFailed" && note.contains("update of node n1"))
    })
    .await;
    assert!(
        !recorded_events(&env.client, Some("BootcNodePool"))
            .await
            .iter()
            .any(|(r, _)| r == "RebootApproved"),
        "an approval that was not written was announced"
    );
    let text = metrics.encode();
    assert_eq!(
        sample(&text, "bootc_pool_reboots_approved_total{pool=\"workers\"}"),
        0.0
    );
    assert!(
        sample(
            &text,
            "bootc_pool_actions_total{pool=\"workers\",action=\"update\",outcome=\"api\"}"
        ) >= 1.0,
        "{text}"
    );
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    let n1 = bootc.get("n1").await.unwrap();
    assert_eq!(
        n1.spec.desired_image_state,
        bootc_crds::node::DesiredImageState::Staged
    );

    // The writes work again: the approval goes through, once, and is announced once.
    env.emulator
        .handle()
        .set_faults(kube_emulator::FaultConfig::default());
    wait_pool(&env.client, "workers", "n1 updated", |p| all_updated(p, 1)).await;
    // Stopped, the controller has sent every Event it queued.
    controller.stop().await;
    let approved = recorded_events(&env.client, Some("BootcNodePool"))
        .await
        .into_iter()
        .filter(|(r, _)| r == "RebootApproved")
        .count();
    assert_eq!(approved, 1);
    let text = metrics.encode();
    assert_eq!(
        sample(&text, "bootc_pool_reboots_approved_total{pool=\"workers\"}"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_deleted_mid_rollout_while_the_controller_is_down_leaves_no_trace() {
    let env = env(&["n1", "n2", "n3"]).await;
    // n3 was cordoned by an admin; n1's drain is held up by a disruption budget, so that
    // n1 stays cordoned by the pool, mid-rollout.
    set_unschedulable(&env.client, "n3", true).await;
    web_pod_held_by_a_budget(&env, "n1").await;
    let controller = start(&env.emulator, Dependencies::default());
    let pools = env.apply_workers(json!({"maxUnavailable": 1})).await;
    wait_cordoned(&env.client, "n1").await;
    let pool = pools.get("workers").await.unwrap();
    assert!(
        pool.finalizers()
            .iter()
            .any(|f| f == "node.bootc.dev/cleanup")
    );

    // The controller goes down; the pool is deleted meanwhile and waits for it.
    controller.stop().await;
    pools.delete("workers", &Default::default()).await.unwrap();
    let waiting = pools.get("workers").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());

    let deps = Dependencies::default();
    let metrics = deps.metrics.clone();
    let controller = start(&env.emulator, deps);
    let deadline = Instant::now() + DEADLINE;
    while pools.get_opt("workers").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the pool was never let go");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nor is anything kept of it: its metric series go once the reconcile that let it
    // go has ended, that reconcile's own count included.
    wait_for("the pool's series gone", async || {
        let text = metrics.encode();
        (!text.contains(r#"pool="workers""#)).then_some(())
    })
    .await;
    let bootc: Api<BootcNode> = Api::all(env.client.clone());
    assert!(
        bootc
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let nodes: Api<Node> = Api::all(env.client.clone());
    for node in nodes.list(&Default::default()).await.unwrap() {
        assert!(
            !node.labels().contains_key(MANAGED_LABEL),
            "{} still labelled",
            node.name_any()
        );
    }
    assert!(!unschedulable(&env.client, "n1").await, "n1 uncordoned");
    assert!(!unschedulable(&env.client, "n2").await);
    assert!(
        unschedulable(&env.client, "n3").await,
        "the admin's cordon stays"
    );
    assert_eq!(
        env.cluster.host("n1").unwrap().counters().reboots,
        0,
        "nothing booted the staged image"
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_only_once_the_caches_have_synced() {
    let env = env(&["n1"]).await;
    // Every request takes a while, so that the caches cannot have synced at once.
    env.emulator
        .handle()
        .set_faults(kube_emulator::FaultConfig {
            latency: Duration::from_millis(300),
            ..Default::default()
        });
    let deps = Dependencies::default();
    let health = deps.health.clone();
    let controller = start(&env.emulator, deps);
    assert!(!health.is_ready(), "ready before the caches synced");
    let deadline = Instant::now() + DEADLINE;
    while !health.is_ready() {
        assert!(
            Instant::now() < deadline,
            "never ready: {:?}",
            health.readiness()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    controller.stop().await;
    assert!(
        !health.is_ready(),
        "still ready after the controller stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_this_controller_cannot_read_is_reported_and_the_others_roll() {
    logs();
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    // The cluster serves a pool CRD whose spec takes anything, as one of another version
    // of the project might; a pool is stored that this controller's types refuse.
    let mut crd: Value = serde_yaml_ng::from_str(include_str!(
        "../../crds/node.bootc.dev_bootcnodepools.yaml"
    ))
    .unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let env = env_on(emulator, &["n1", "n2"]).await;
    let resource = ApiResource::erase::<BootcNodePool>(&());
    let raw: Api<DynamicObject> = Api::all_with(env.client.clone(), &resource);
    let broken: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "broken"},
        "spec": {"nodeSelector": {"matchLabels": {"role": "db"}}, "image": {"ref": 42}},
    }))
    .unwrap();
    raw.create(&PostParams::default(), &broken).await.unwrap();

    let controller = start(&env.emulator, Dependencies::default());
    env.apply_workers(json!({"maxUnavailable": 1})).await;
    wait_pool(&env.client, "workers", "both nodes updated", |p| {
        all_updated(p, 2)
    })
    .await;
    wait_events(&env.client, "the unreadable pool reported", |seen| {
        seen.iter().any(|(reason, note)| {
            reason == "PoolUnreadable" && note.contains("invalid type: integer `42`")
        })
    })
    .await;
    // Nothing was done to it: no finalizer, no status.
    let broken = raw.get("broken").await.unwrap();
    assert!(broken.finalizers().is_empty(), "{:?}", broken.finalizers());
    assert!(broken.data.get("status").is_none());
    controller.stop().await;
}

/// The nodes an event's note names first: `node n1 …` or `nodes n1, n2 …`.
fn named_nodes(note: &str) -> Vec<String> {
    if let Some(rest) = note.strip_prefix("nodes ") {
        let mut names = Vec::new();
        for part in rest.split(", ") {
            let name = part.split(' ').next().unwrap_or_default();
            names.push(name.to_owned());
            if part.contains(' ') {
                break;
            }
        }
        return names;
    }
    note.strip_prefix("node ")
        .and_then(|r| r.split(' ').next())
        .map(|n| vec![n.to_owned()])
        .unwrap_or_default()
}
