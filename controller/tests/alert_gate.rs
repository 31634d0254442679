//! The alert gate (`spec.health.alerts`) against a real Prometheus and Alertmanager on
//! loopback, the API emulator and simulated nodes: while an alert matching the pool's
//! matchers fires, no node gets a reboot slot and `UpToDate` says `AlertGateClosed`;
//! once it resolves the rollout completes, asking Alertmanager or Prometheus alike; an
//! alert the matchers do not match leaves the gate open; a URL nobody answers closes the
//! gate (`Degraded=AlertGateUnreachable`) unless `failClosed` is false.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "alert_gate/monitoring.rs"]
mod monitoring;

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::pool::{AlertGateState, BootcNodePool};
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use host_sim::cluster::{Invariants, SimCluster};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use monitoring::{Monitoring, free_port};
use serde_json::{Value, json};

const NODES: [&str; 2] = ["n1", "n2"];

/// The cluster, the controller and what the test reads of them.
struct Env {
    emulator: Emulator,
    client: Client,
    cluster: SimCluster,
    metrics: Metrics,
    controller: Running,
    v1: String,
    v2: String,
}

async fn env() -> Env {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (cluster, v1, v2) = workers_cluster(&emulator, &NODES, Default::default()).await;
    let metrics = Metrics::new();
    let deps = Dependencies {
        metrics: metrics.clone(),
        ..Dependencies::default()
    };
    let controller = start(&emulator, deps);
    Env {
        emulator,
        client,
        cluster,
        metrics,
        controller,
        v1,
        v2,
    }
}

impl Env {
    /// Creates the pool `workers` on v1 with `alerts` and waits until both nodes run it.
    async fn create_pool(&self, alerts: Value) {
        let mut pool = workers_pool(&self.v1, json!({"maxUnavailable": 1}));
        pool.spec.health = Some(serde_json::from_value(json!({"alerts": alerts})).unwrap());
        let pools: Api<BootcNodePool> = Api::all(self.client.clone());
        pools.create(&PostParams::default(), &pool).await.unwrap();
        wait_pool(&self.client, "workers", "all on v1", |p| all_updated(p, 2)).await;
    }

    /// Sets the pool's alert gate to `alerts`.
    async fn set_gate(&self, alerts: Value) {
        self.patch(json!({"spec": {"health": {"alerts": alerts}}}))
            .await;
    }

    /// Targets `image`.
    async fn target(&self, image: &str) {
        self.patch(json!({"spec": {"image": {"ref": image}}})).await;
    }

    async fn patch(&self, patch: Value) {
        let pools: Api<BootcNodePool> = Api::all(self.client.clone());
        pools
            .patch("workers", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Waits until the pool's status says the gate is in `state`, the answer being at
    /// most an interval old: the next plans see that state too.
    async fn wait_gate(&self, state: AlertGateState) -> BootcNodePool {
        let what = format!("the gate {state:?}");
        wait_pool(&self.client, "workers", &what, |p| {
            p.status
                .as_ref()
                .and_then(|s| s.alert_gate.as_ref())
                .is_some_and(|g| g.state == state)
        })
        .await
    }

    /// Successful reconciles of the pool so far.
    fn plans(&self) -> u64 {
        let text = self.metrics.encode();
        text.lines()
            .find_map(|l| {
                l.strip_prefix(r#"bootc_pool_reconciles_total{pool="workers",outcome="ok"} "#)
            })
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits until the pool has been planned `n` more times.
    async fn wait_plans(&self, n: u64) {
        let start = self.plans();
        wait_for(&format!("{n} more plans"), async || {
            (self.plans() >= start + n).then_some(())
        })
        .await;
    }

    /// The BootcNodes holding a reboot slot now.
    async fn slot_holders(&self) -> BTreeSet<String> {
        slot_holders(&self.client).await
    }

    /// Shows that, once the pool targets `digest`, the gate (in `state`) keeps it from
    /// going on (`UpToDate=AlertGateClosed`) for a few plans, and that no node gets a
    /// reboot slot or reboots meanwhile. Returns the pool as it was when first closed.
    async fn closed_for_a_while(&self, digest: &str, state: AlertGateState) -> BootcNodePool {
        let watch = Invariants::follow(self.emulator.handle(), 1, BTreeSet::new());
        let what = format!("the gate {state:?} for {digest}");
        let p = wait_pool(&self.client, "workers", &what, |p| {
            let status = p.status.as_ref();
            status.and_then(|s| s.target_digest.as_deref()) == Some(digest)
                && status
                    .and_then(|s| s.alert_gate.as_ref())
                    .is_some_and(|g| g.state == state)
                && condition(p, "UpToDate").is_some_and(|c| c.1 == "AlertGateClosed")
        })
        .await;
        self.wait_plans(3).await;
        assert_eq!(self.slot_holders().await, BTreeSet::new());
        let report = watch.settled(Duration::from_secs(10)).await;
        assert_eq!(report.max_unavailable_seen, 0, "{report:?}");
        assert!(report.reboots.values().all(|n| *n == 0), "{report:?}");
        let p2: Api<BootcNodePool> = Api::all(self.client.clone());
        let now = p2.get("workers").await.unwrap();
        assert_eq!(
            condition(&now, "UpToDate").map(|c| c.1),
            Some("AlertGateClosed".to_owned()),
            "still closed after a few plans"
        );
        p
    }

    /// Waits until every node runs `digest` with the gate open, and checks the budget was
    /// kept from `watch`'s start.
    async fn completes(&self, digest: &str, watch: Invariants) {
        let what = format!("all on {digest}");
        let p = wait_pool(&self.client, "workers", &what, |p| {
            all_updated(p, 2)
                && p.status.as_ref().and_then(|s| s.target_digest.as_deref()) == Some(digest)
        })
        .await;
        for n in NODES {
            let booted = self.cluster.host(n).unwrap().state().booted.unwrap();
            assert_eq!(booted.info.digest, digest, "{n}");
        }
        let gate = p.status.unwrap().alert_gate.unwrap();
        assert_eq!(gate.state, AlertGateState::Open, "{gate:?}");
        let report = watch.settled(Duration::from_secs(10)).await;
        assert!(report.is_clean_rollout(), "{report:?}");
    }
}

/// The gate of `url` with `matchers`, asked every second.
fn alerts(url: &str, matchers: &[&str]) -> Value {
    json!({"url": url, "matchers": matchers, "intervalSeconds": 1})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firing_alerts_hold_the_rollout_until_they_resolve() {
    let mut mon = Monitoring::start().await;
    let env = env().await;
    let critical = [r#"severity="critical""#];
    let am = mon.alertmanager_url.clone();
    let prom = mon.prometheus_url.clone();
    env.create_pool(alerts(&am, &critical)).await;

    // Alertmanager: NodeTrouble fires before v2 is targeted; nothing reboots until it
    // resolves.
    mon.set_trouble(1).await;
    env.wait_gate(AlertGateState::Firing).await;
    env.target(&env.v2).await;
    let p = env
        .closed_for_a_while(&digest('2'), AlertGateState::Firing)
        .await;
    let message = p.status.unwrap().alert_gate.unwrap().message.unwrap();
    assert!(message.contains("NodeTrouble{"), "{message}");
    assert!(message.contains(r#"severity="critical""#), "{message}");
    assert!(message.contains(&am), "{message}");
    let watch = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    mon.set_trouble(0).await;
    env.completes(&digest('2'), watch).await;

    // Prometheus, the same way, back to v1.
    env.set_gate(alerts(&prom, &critical)).await;
    mon.set_trouble(1).await;
    env.wait_gate(AlertGateState::Firing).await;
    env.target(&env.v1).await;
    let p = env
        .closed_for_a_while(&digest('1'), AlertGateState::Firing)
        .await;
    let message = p.status.unwrap().alert_gate.unwrap().message.unwrap();
    assert!(message.contains("NodeTrouble{"), "{message}");
    assert!(message.contains(&prom), "{message}");
    let watch = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    mon.set_trouble(0).await;
    env.completes(&digest('1'), watch).await;

    // A matcher NodeTrouble does not match: the rollout goes on while it fires. The
    // gate is first seen closed by NodeTrouble at the same URL, so the answer the
    // matcher is applied to holds it.
    env.set_gate(alerts(&am, &critical)).await;
    mon.set_trouble(1).await;
    env.wait_gate(AlertGateState::Firing).await;
    env.set_gate(alerts(&am, &[r#"severity="page""#])).await;
    env.wait_gate(AlertGateState::Open).await;
    let watch = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    env.target(&env.v2).await;
    env.completes(&digest('2'), watch).await;
    mon.set_trouble(0).await;

    env.controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gate_fails_closed_unless_told_otherwise() {
    let env = env().await;
    // A loopback port nothing listens on.
    let url = format!("http://127.0.0.1:{}", free_port());
    env.create_pool(alerts(&url, &[])).await;
    env.wait_gate(AlertGateState::Unreachable).await;
    env.target(&env.v2).await;
    let p = env
        .closed_for_a_while(&digest('2'), AlertGateState::Unreachable)
        .await;
    let (status, reason, message) = condition(&p, "Degraded").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "AlertGateUnreachable")
    );
    assert!(message.contains(&url), "{message}");
    let gate = p.status.unwrap().alert_gate.unwrap();
    assert!(gate.message.unwrap().contains(&url));

    // failClosed: false: the rollout goes on as if no alert fired.
    let watch = Invariants::follow(env.emulator.handle(), 1, BTreeSet::new());
    let open = json!({"url": url, "failClosed": false, "intervalSeconds": 1});
    env.set_gate(open).await;
    let p = wait_pool(&env.client, "workers", "all on v2", |p| all_updated(p, 2)).await;
    assert_eq!(condition(&p, "Degraded").unwrap().0, "False");
    assert_eq!(
        p.status.unwrap().alert_gate.map(|g| g.state),
        Some(AlertGateState::Unreachable)
    );
    let report = watch.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");

    env.controller.stop().await;
}
