//! Health-gated rollouts against the API emulator and simulated nodes: a canary that goes
//! first and soaks, a node someone else cordoned left alone, and pools that wait for
//! others (`rollout.after`), including a cycle.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::pool::{BootcNodePool, CanaryPhase};
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use host_sim::cluster::{Invariants, SimCluster, SimOptions};
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;

async fn set_image(client: &Client, pool: &str, image: &str) {
    patch_pool(client, pool, json!({"spec": {"image": {"ref": image}}})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_updates_first_and_soaks_before_the_rest_go() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let r = Rollout::start(&names, 5, BTreeSet::new()).await;
    let pools: Api<BootcNodePool> = Api::all(r.client.clone());
    let pool = workers_pool(
        &r.v1,
        json!({"maxUnavailable": 5, "canary": {"nodes": "40%", "soakSeconds": 3}}),
    );
    pools.create(&PostParams::default(), &pool).await.unwrap();
    wait_pool(&r.client, "workers", "all on v1", |p| all_updated(p, 5)).await;

    // Every stored change from here on is read: while the canary is not complete, at
    // most its two nodes hold slots or run v2; the third node goes only after the soak.
    let recorder = Recorder::start(&r.emulator);
    set_image(&r.client, "workers", &r.v2).await;
    wait_pool(&r.client, "workers", "all on v2", |p| {
        all_updated(p, 5)
            && p.status.as_ref().unwrap().target_digest.as_deref() == Some(digest('2').as_str())
    })
    .await;
    canary_went_first(&recorder.all_timed().await);
    // The hosts agree with what was stored.
    for n in names {
        assert_eq!(booted(&r.cluster, n), digest('2'), "{n}");
    }
    let report = r.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    r.controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_someone_else_cordoned_is_skipped_and_stays_cordoned() {
    let names = ["n1", "n2", "n3"];
    let r = Rollout::start(&names, 2, ["n2".to_owned()].into()).await;
    let pools: Api<BootcNodePool> = Api::all(r.client.clone());
    let pool = workers_pool(&r.v1, json!({"maxUnavailable": 2}));
    pools.create(&PostParams::default(), &pool).await.unwrap();
    wait_pool(&r.client, "workers", "all on v1", |p| all_updated(p, 3)).await;
    set_unschedulable(&r.client, "n2", true).await;

    set_image(&r.client, "workers", &r.v2).await;
    let p = wait_pool(
        &r.client,
        "workers",
        "all but the cordoned node on v2",
        |p| {
            p.status.as_ref().is_some_and(|s| s.updated_count == 2)
                && condition(p, "Progressing").is_some_and(|c| c.1 == "HeldNodesLeft")
        },
    )
    .await;
    assert_eq!(p.status.as_ref().unwrap().cordoned_count, 1);
    assert_eq!(booted(&r.cluster, "n2"), digest('1'));
    assert_eq!(r.cluster.host("n2").unwrap().counters().reboots, 0);
    let nodes: Api<Node> = Api::all(r.client.clone());
    let n2 = nodes.get("n2").await.unwrap();
    assert_eq!(
        n2.spec.unwrap().unschedulable,
        Some(true),
        "never uncordoned by us"
    );

    // Uncordoned by its owner: it updates too.
    set_unschedulable(&r.client, "n2", false).await;
    let p = wait_pool(&r.client, "workers", "all on v2", |p| all_updated(p, 3)).await;
    assert_eq!(p.status.as_ref().unwrap().cordoned_count, 0);
    let report = r.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    r.controller.stop().await;
}

/// Over `changes` (every stored change from before the pool was given v2 until all ran
/// it): until the pool's canary for v2 says `Complete`, no more than two nodes have
/// moved (held the reboot slot or reported v2 booted, counted from the first change on);
/// the canary went `Updating`, `Soaking`, `Complete`; and the third node moved at least
/// the soak (3 s, less 100 ms for the reading) after `Soaking` was stored.
fn canary_went_first(changes: &[Timed]) {
    let v2 = json!(digest('2'));
    let mut phase: Option<CanaryPhase> = None;
    let mut phases: Vec<CanaryPhase> = Vec::new();
    let mut moved: BTreeSet<String> = BTreeSet::new();
    let (mut soaking_at, mut third_at) = (None, None);
    let mut node_changes = 0;
    for (at, change) in changes {
        let o = &change.object;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        match change.key.plural.as_str() {
            "bootcnodepools" if name == "workers" && o["status"]["canary"]["digest"] == v2 => {
                let now: CanaryPhase =
                    serde_json::from_value(o["status"]["canary"]["phase"].clone()).unwrap();
                if now == CanaryPhase::Soaking {
                    soaking_at.get_or_insert(*at);
                }
                if phases.last() != Some(&now) {
                    phases.push(now);
                }
                phase = Some(now);
            }
            "bootcnodes" => {
                node_changes += 1;
                let slot = o["metadata"]["annotations"][REBOOT_SLOT_ANNOTATION]
                    .as_str()
                    .is_some_and(|s| !s.is_empty());
                if slot || o.pointer("/status/booted/imageDigest") == Some(&v2) {
                    moved.insert(name.to_owned());
                }
                if moved.len() > 2 {
                    third_at.get_or_insert(*at);
                }
                assert!(
                    moved.len() <= 2 || phase == Some(CanaryPhase::Complete),
                    "rv {}: {moved:?} moved while the canary was {phase:?}",
                    change.rv
                );
            }
            _ => {}
        }
    }
    assert!(node_changes > 0, "no BootcNode change was read");
    assert_eq!(moved.len(), 5, "every node moved: {moved:?}");
    assert_eq!(
        phases,
        [
            CanaryPhase::Updating,
            CanaryPhase::Soaking,
            CanaryPhase::Complete
        ]
    );
    let third_at = third_at.expect("a third node moved");
    let soaked = third_at - soaking_at.expect("Soaking stored before it");
    assert!(
        soaked >= Duration::from_millis(2900),
        "the rest went {soaked:?} after the soak began"
    );
}

/// Over `changes`: a worker's BootcNode gets the reboot slot only once both infra nodes
/// report v2 booted, one did get it, and before that `workers` said it waited for infra.
fn ordered_after_infra(changes: &[std::sync::Arc<kube_emulator::Event>]) {
    let v2 = json!(digest('2'));
    let mut infra_on_v2: BTreeMap<String, bool> = BTreeMap::new();
    let (mut first_worker_slot, mut waited) = (None, false);
    for change in changes {
        let o = &change.object;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        match change.key.plural.as_str() {
            "bootcnodes" if name.starts_with('i') => {
                let on = o.pointer("/status/booted/imageDigest") == Some(&v2);
                infra_on_v2.insert(name.to_owned(), on);
            }
            "bootcnodes" if o["metadata"]["annotations"][REBOOT_SLOT_ANNOTATION].is_string() => {
                let done = ["i1", "i2"]
                    .iter()
                    .all(|n| infra_on_v2.get(*n) == Some(&true));
                assert!(
                    done,
                    "rv {}: {name} got a slot before infra ran v2 everywhere: {infra_on_v2:?}",
                    change.rv
                );
                first_worker_slot.get_or_insert(change.rv);
            }
            "bootcnodepools" if name == "workers" && first_worker_slot.is_none() => {
                let conditions = o["status"]["conditions"].as_array().cloned();
                waited |= conditions.unwrap_or_default().iter().any(|c| {
                    c["type"] == "UpToDate"
                        && c["reason"] == "WaitingForPools"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("pool infra"))
                });
            }
            _ => {}
        }
    }
    assert!(first_worker_slot.is_some(), "no worker ever got a slot");
    assert!(waited, "workers never said it waited for infra");
}

fn role_pool(name: &str, role: &str, image: &str, after: &[&str]) -> BootcNodePool {
    serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": role}},
            "image": {"ref": image},
            "rollout": {"maxUnavailable": 2, "after": after},
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_waits_for_the_pools_it_follows_and_a_cycle_is_refused() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let catalog = host_sim::memory::Catalog::new();
    let v1 = catalog.push("registry.test/os", "v1", &digest('1'), Some("k1"));
    let v2 = catalog.push("registry.test/os", "v2", &digest('2'), Some("k2"));
    let cluster = SimCluster::start(emulator.config(), catalog).await.unwrap();
    for (n, role) in [
        ("i1", "infra"),
        ("i2", "infra"),
        ("w1", "worker"),
        ("w2", "worker"),
    ] {
        let options = SimOptions {
            node_labels: [("role".to_owned(), role.to_owned())].into(),
            ..SimOptions::default()
        };
        cluster.add_node(n, &v1, &options).await.unwrap();
    }
    let invariants = Invariants::follow(emulator.handle(), 2, BTreeSet::new());
    let controller = start(&emulator, Dependencies::default());
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    for pool in [
        role_pool("infra", "infra", &v1, &[]),
        role_pool("workers", "worker", &v1, &["infra"]),
    ] {
        pools.create(&PostParams::default(), &pool).await.unwrap();
    }
    wait_pool(&client, "infra", "infra on v1", |p| all_updated(p, 2)).await;
    wait_pool(&client, "workers", "workers on v1", |p| all_updated(p, 2)).await;

    // Both move to v2 at once: no worker gets a slot before infra runs v2 everywhere,
    // checked on every stored change.
    let recorder = Recorder::start(&emulator);
    set_image(&client, "workers", &v2).await;
    set_image(&client, "infra", &v2).await;
    wait_pool(&client, "workers", "workers on v2", |p| {
        all_updated(p, 2)
            && p.status.as_ref().unwrap().target_digest.as_deref() == Some(digest('2').as_str())
    })
    .await;
    ordered_after_infra(&recorder.all().await);
    // A cycle: infra now follows workers too.
    patch_pool(
        &client,
        "infra",
        json!({"spec": {"rollout": {"after": ["workers"]}}}),
    )
    .await;
    let p = wait_pool(&client, "workers", "the cycle reported", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "OrderingCycle")
    })
    .await;
    let message = condition(&p, "Degraded").unwrap().2;
    assert!(message.contains("workers -> infra -> workers"), "{message}");
    wait_pool(&client, "infra", "the cycle reported", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "OrderingCycle")
    })
    .await;
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    controller.stop().await;
}
