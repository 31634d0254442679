#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One writer across failover: two controller replicas with leader election (lease 1 s,
//! renew deadline 600 ms, retry 100 ms) roll a pool of simulated nodes out, the target
//! flipped between two images whenever every node is on it, while the leader's requests
//! are held up (2 s each, longer than its renew deadline and than the takeover) again and again, so that the
//! standby takes over while the old leader's reconciles are mid-flight. The availability
//! checker follows every change of the Nodes and BootcNodes throughout.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::leader::LeaseConfig;
use common::*;
use host_sim::cluster::Invariants;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube_emulator::{Emulator, FaultConfig};
use serde_json::json;
use tokio::time::Instant;

const NAMESPACE: &str = "bootc-system";
const REPLICAS: [(&str, &str); 2] = [
    (
        "replica-a",
        concat!(
            "bootc-pool-controller/",
            env!("CARGO_PKG_VERSION"),
            " replica-a"
        ),
    ),
    (
        "replica-b",
        concat!(
            "bootc-pool-controller/",
            env!("CARGO_PKG_VERSION"),
            " replica-b"
        ),
    ),
];
const FAILOVERS: u32 = 50;
/// How long each of the leader's requests is held up: past its renew deadline, past the
/// cut-off of any write it sends, and past the other replica's takeover, so that a write
/// that got through would land after the new leader planned.
const HELD_UP: Duration = Duration::from_millis(2000);
const BUDGET: usize = 2;
const NODES: usize = 12;

fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
        ..LeaseConfig::new("bootc-pool-controller", NAMESPACE, identity)
    }
}

/// The Lease's holder and transitions, if it exists yet.
async fn holder(leases: &Api<Lease>) -> Option<(String, i32)> {
    let spec = leases.get_opt("bootc-pool-controller").await.ok()??.spec?;
    Some((spec.holder_identity?, spec.lease_transitions.unwrap_or(0)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_failovers_mid_reconcile_keep_the_budget() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    ensure_namespace(&client, NAMESPACE).await;
    let names: Vec<String> = (0..NODES).map(|i| format!("n{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (cluster, v1, v2) = workers_cluster(&emulator, &refs, Default::default()).await;
    let invariants = Invariants::follow(emulator.handle(), BUDGET, BTreeSet::new());
    let replicas: Vec<_> = REPLICAS
        .iter()
        .map(|(identity, agent)| start_elected(&emulator, agent, lease(identity)))
        .collect();
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .create(
            &PostParams::default(),
            &workers_pool(&v2, json!({"maxUnavailable": BUDGET})),
        )
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);

    let mut failovers = 0;
    let mut flips = 0;
    let mut image = v2.clone();
    let started = Instant::now();
    let (_, transitions_before) = wait_for("a leader", async || holder(&leases).await).await;
    while failovers < FAILOVERS {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{failovers} failovers in 10 minutes"
        );
        // Keep the rollout going: a new target whenever every node runs this one.
        let pool = pools.get("workers").await.unwrap();
        if all_updated(&pool, NODES as i32) {
            image = if image == v2 { v1.clone() } else { v2.clone() };
            let edit = json!({"spec": {"image": {"ref": image}}});
            patch_pool(&client, "workers", edit).await;
            flips += 1;
        }
        let (leader, _) = wait_for("a leader", async || holder(&leases).await).await;
        let agent = REPLICAS.iter().find(|(id, _)| *id == leader).unwrap().0;
        // Let the leader work a while (a different while each time, to meet its
        // reconciles at different points), then hold its requests up until the other
        // replica holds the Lease.
        let work = 100 + u64::from(failovers * 97 % 500);
        tokio::time::sleep(Duration::from_millis(work)).await;
        emulator.handle().set_faults(FaultConfig {
            latency: HELD_UP,
            latency_user_agent: Some(agent.to_owned()),
            ..FaultConfig::default()
        });
        wait_for("the other replica to take over", async || {
            holder(&leases)
                .await
                .filter(|(h, _)| *h != leader)
                .map(|_| ())
        })
        .await;
        emulator.handle().clear_faults();
        failovers += 1;
    }

    // The last target, rolled out to the end.
    wait_pool(&client, "workers", "every node on the last target", |p| {
        all_updated(p, NODES as i32)
            && p.status
                .as_ref()
                .and_then(|s| s.target_image.as_deref())
                .is_some_and(|t| t == image)
    })
    .await;
    for replica in replicas {
        replica.abort();
    }
    let (_, transitions_after) = holder(&leases).await.unwrap();
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(
        report.violations.is_empty(),
        "{} violations: {:#?}",
        report.violations.len(),
        report.violations
    );
    assert!(report.max_unavailable_seen <= BUDGET, "{report:?}");
    assert!(
        report.max_unavailable_seen > 0 && report.events > 0,
        "the checker saw the rollout: {report:?}"
    );
    assert!(
        transitions_after - transitions_before >= FAILOVERS as i32,
        "{transitions_before} → {transitions_after} lease transitions"
    );
    assert!(flips > 0, "the target moved during the failovers");
    let digest = if image == v2 {
        digest('2')
    } else {
        digest('1')
    };
    for name in &names {
        assert_eq!(booted(&cluster, name), digest, "{name}");
    }
    eprintln!(
        "{failovers} failovers ({} lease transitions), {flips} new targets, max {} of {BUDGET} unavailable, {} events checked",
        transitions_after - transitions_before,
        report.max_unavailable_seen,
        report.events
    );
}
