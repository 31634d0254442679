//! One reconcile plans once: the planner owns every decision of a reconcile (windows,
//! stalls, fallbacks, history), so the shell never plans a second time to complete a
//! status. A whole rollout runs against the API emulator and simulated nodes, with a
//! planner that counts its calls; the plans counted are then held to the reconciles the
//! metrics counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bootc_pool_controller::plan;
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use kube::Api;
use kube::api::PostParams;
use kube_emulator::Emulator;
use serde_json::json;

/// The sum of `bootc_pool_reconciles_total` over the outcomes that got as far as a plan
/// (every outcome but `cache`: the caches went away before anything was read).
fn planned_reconciles(metrics_text: &str) -> u64 {
    metrics_text
        .lines()
        .filter(|l| l.starts_with("bootc_pool_reconciles_total{"))
        .filter(|l| !l.contains("outcome=\"cache\""))
        .map(|l| {
            let value = l.rsplit(' ').next().unwrap();
            value.parse::<f64>().unwrap() as u64
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_plans_once() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (cluster, _, v2) =
        workers_cluster(&emulator, &["n1", "n2", "n3"], Default::default()).await;
    let plans_made = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&plans_made);
    let deps = Dependencies {
        plan: Arc::new(move |snapshot| {
            counter.fetch_add(1, Ordering::Relaxed);
            plan::plan(snapshot)
        }),
        ..Dependencies::default()
    };
    let metrics = deps.metrics.clone();
    let controller = start(&emulator, deps);
    let pools: Api<bootc_crds::BootcNodePool> = Api::all(client.clone());
    let pool = workers_pool(&v2, json!({"maxUnavailable": 1}));
    pools.create(&PostParams::default(), &pool).await.unwrap();
    wait_pool(&client, "workers", "all nodes on v2", |p| all_updated(p, 3)).await;
    controller.stop().await;

    let plans = plans_made.load(Ordering::Relaxed);
    let reconciles = planned_reconciles(&metrics.encode());
    assert!(
        reconciles >= 3,
        "a three-node rollout takes several reconciles: {reconciles}"
    );
    assert_eq!(
        plans, reconciles,
        "plans made against reconciles that planned"
    );
    cluster.stop().await;
}
