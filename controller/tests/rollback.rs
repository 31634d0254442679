//! Boot health and automatic rollback against the API emulator, simulated nodes whose
//! units a test sets per image, and (for tags) Debian's docker-registry: a unit that
//! comes up late is waited for, one that fails halts the rollout, and with
//! `onFailure: Rollback` the failing image is marked failed and undone; a tag that flips
//! back to it does not start it again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::reconcile::Dependencies;
use bootc_pool_controller::resolve::{Resolver, ResolverOptions};
use common::*;
use host_sim::cluster::{Invariants, SimCluster, SimOptions};
use host_sim::memory::Catalog;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use kube_emulator::Emulator;
use serde_json::json;
use test_registry::Registry;

const UNIT: &str = "boot-complete.target";

fn health_pool(image: &str, on_failure: &str) -> BootcNodePool {
    workers_pool_spec(json!({
        "image": {"ref": image, "resolveIntervalSeconds": 30},
        "rollout": {"maxUnavailable": 1, "haltAfterUnhealthy": 1, "onFailure": on_failure},
        "health": {"units": [UNIT], "timeoutSeconds": 60},
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_unit_is_waited_for_and_a_failed_one_halts() {
    let names = ["n1", "n2", "n3"];
    let r = Rollout::start(&names, 1, BTreeSet::new()).await;
    let pools: Api<BootcNodePool> = Api::all(r.client.clone());
    pools
        .create(&PostParams::default(), &health_pool(&r.v1, "Halt"))
        .await
        .unwrap();
    wait_pool(&r.client, "workers", "all on v1", |p| all_updated(p, 3)).await;

    // v2's unit is still starting when a node comes back: it keeps its slot.
    r.cluster
        .set_boot_units(&digest('2'), &[(UNIT, "activating")]);
    let patch = json!({"spec": {"image": {"ref": r.v2}}});
    patch_pool(&r.client, "workers", patch).await;
    // The first node to get a slot is whichever staged first.
    let first = wait_for("a node back on v2", async || {
        names
            .iter()
            .find(|n| booted(&r.cluster, n) == digest('2'))
            .map(|n| (*n).to_owned())
    })
    .await;
    let p = wait_pool(&r.client, "workers", "the first node waited for", |p| {
        condition(p, "UpToDate").is_some_and(|c| c.2.contains("1 rebooting"))
    })
    .await;
    assert_eq!(
        p.status.as_ref().unwrap().updated_count,
        0,
        "not released yet"
    );
    for n in names.iter().filter(|n| **n != first) {
        assert_eq!(booted(&r.cluster, n), digest('1'), "nobody else went: {n}");
    }
    // The unit comes up: the rollout goes on.
    r.cluster.set_boot_units(&digest('2'), &[(UNIT, "active")]);
    wait_pool(&r.client, "workers", "all on v2", |p| all_updated(p, 3)).await;

    // A v3 whose unit fails: the first node is unhealthy and the rollout halts there.
    let catalog_v3 = r
        .cluster
        .catalog()
        .push("registry.test/os", "v3", &digest('3'), Some("k3"));
    r.cluster.set_boot_units(&digest('3'), &[(UNIT, "failed")]);
    let patch = json!({"spec": {"image": {"ref": catalog_v3}}});
    patch_pool(&r.client, "workers", patch).await;
    let p = wait_pool(&r.client, "workers", "halted", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "RolloutHalted")
    })
    .await;
    let message = condition(&p, "Degraded").unwrap().2;
    assert!(
        message.contains("boot-complete.target is failed"),
        "{message}"
    );
    let on_v3: Vec<String> = names
        .iter()
        .filter(|n| booted(&r.cluster, n) == digest('3'))
        .map(|n| (*n).to_owned())
        .collect();
    assert_eq!(on_v3.len(), 1, "only the first node went: {on_v3:?}");
    let report = r.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.violations.is_empty(), "{report:?}");
    // The node that went keeps its slot and cordon (whichever staged first).
    assert_eq!(report.left_cordoned, on_v3, "{report:?}");
    r.controller.stop().await;
}

fn total_reboots(cluster: &SimCluster, names: &[&str]) -> u64 {
    names
        .iter()
        .map(|n| cluster.host(n).unwrap().counters().reboots)
        .sum()
}

/// The pool's tag was resolved after `t` (the status keeps whole seconds).
fn resolved_since(p: &BootcNodePool, t: chrono::DateTime<chrono::Utc>) -> bool {
    let last = p
        .status
        .as_ref()
        .and_then(|s| s.last_resolved_time.as_ref());
    last.and_then(bootc_crds::conditions::from_time)
        .is_some_and(|last| last > t)
}

fn push(registry: &Registry, catalog: &Catalog, tag: &str, version: &str) -> String {
    let digest = registry
        .push("os", tag, &[("org.opencontainers.image.version", version)])
        .unwrap();
    catalog.push(&format!("{}/os", registry.host()), tag, &digest, Some("k1"));
    digest
}

/// Points `stable` at `tag` in the registry and the catalog.
fn flip(registry: &Registry, catalog: &Catalog, tag: &str) -> String {
    let digest = registry.retag("os", tag, "stable").unwrap();
    catalog.push(
        &format!("{}/os", registry.host()),
        "stable",
        &digest,
        Some("k1"),
    );
    digest
}

const NAMES: [&str; 3] = ["n1", "n2", "n3"];

/// Three nodes running `good`, in a pool with `onFailure: Rollback` that follows tag
/// `stable` in a real registry; `bad`'s unit fails.
struct Tagged {
    registry: Registry,
    catalog: Arc<Catalog>,
    good: String,
    bad: String,
    emulator: Emulator,
    client: kube::Client,
    cluster: SimCluster,
    pinned_good: String,
    invariants: Invariants,
    metrics: bootc_pool_controller::metrics::Metrics,
    controller: Running,
}

impl Tagged {
    /// Everything started, and every node on `good`.
    async fn start() -> Self {
        let registry = Registry::start().unwrap();
        let catalog = Catalog::new();
        let good = push(&registry, &catalog, "good", "1.0");
        let bad = push(&registry, &catalog, "bad", "2.0");
        catalog.set_boot_units(&bad, &[(UNIT, "failed")]);
        flip(&registry, &catalog, "good");
        let emulator = Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let cluster = SimCluster::start(emulator.config(), Arc::clone(&catalog))
            .await
            .unwrap();
        let options = SimOptions {
            node_labels: [("role".to_owned(), "worker".to_owned())].into(),
            ..SimOptions::default()
        };
        let pinned_good = format!("{}/os@{good}", registry.host());
        for n in NAMES {
            cluster.add_node(n, &pinned_good, &options).await.unwrap();
        }
        let invariants = Invariants::follow(emulator.handle(), 1, BTreeSet::new());
        let deps = Dependencies {
            resolver: Resolver::new(ResolverOptions {
                insecure_registries: vec![registry.host()],
                ..ResolverOptions::default()
            }),
            ..Dependencies::default()
        };
        let metrics = deps.metrics.clone();
        let controller = start(&emulator, deps);
        let pools: Api<BootcNodePool> = Api::all(client.clone());
        let pool = health_pool(&registry.image("os", "stable"), "Rollback");
        pools.create(&PostParams::default(), &pool).await.unwrap();
        wait_pool(&client, "workers", "all on good", |p| {
            all_updated(p, 3) && p.status.as_ref().unwrap().target_digest.as_deref() == Some(&good)
        })
        .await;
        Tagged {
            registry,
            catalog,
            good,
            bad,
            emulator,
            client,
            cluster,
            pinned_good,
            invariants,
            metrics,
            controller,
        }
    }

    /// Waits until the bad image is marked failed, and checks the reason.
    async fn marked_failed(&self) {
        let p = wait_pool(
            &self.client,
            "workers",
            "the bad image marked failed",
            |p| {
                p.status.as_ref().is_some_and(|s| {
                    s.deploy_history
                        .iter()
                        .any(|e| e.digest == self.bad && e.failed)
                })
            },
        )
        .await;
        let entry = p
            .status
            .as_ref()
            .unwrap()
            .deploy_history
            .iter()
            .find(|e| e.digest == self.bad)
            .cloned()
            .unwrap();
        assert!(
            entry
                .failed_reason
                .as_deref()
                .unwrap()
                .contains("boot-complete.target is failed"),
            "{entry:?}"
        );
    }

    /// Checks, over every stored change, that the bad image's failure mark was stored
    /// before any BootcNode was sent back to the good image: a plan made from a pool
    /// without the mark would send the next node to the bad image.
    fn mark_stored_first(&self, changes: &[Arc<kube_emulator::Event>]) {
        let desired = |o: &serde_json::Value| o["spec"]["desiredImage"].as_str().map(str::to_owned);
        let marked = |o: &serde_json::Value| {
            o["status"]["deployHistory"].as_array().is_some_and(|h| {
                h.iter()
                    .any(|e| e["digest"] == *self.bad && e["failed"] == true)
            })
        };
        let mark = changes
            .iter()
            .find(|c| c.key.plural == "bootcnodepools" && marked(&c.object))
            .expect("the failure mark stored");
        let back = changes
            .iter()
            .find(|c| {
                c.key.plural == "bootcnodes"
                    && desired(&c.object).as_deref() == Some(&self.pinned_good)
                    && c.previous.as_deref().and_then(desired).as_deref() != Some(&self.pinned_good)
            })
            .expect("a BootcNode sent back to the good image");
        assert!(
            mark.rv < back.rv,
            "the mark (rv {}) was stored after a BootcNode was sent back (rv {})",
            mark.rv,
            back.rv
        );
    }

    /// Waits until every node runs the good image again.
    async fn rolled_back(&self) -> BootcNodePool {
        wait_pool(&self.client, "workers", "all back on good", |p| {
            all_updated(p, 3)
                && p.status.as_ref().unwrap().target_digest.as_deref() == Some(&self.good)
        })
        .await
    }

    /// The nodes that rebooted at all (each only ever to the bad image and back).
    fn rebooted(&self) -> Vec<String> {
        NAMES
            .iter()
            .filter(|n| self.cluster.host(n).unwrap().counters().reboots > 0)
            .map(|n| (*n).to_owned())
            .collect()
    }

    /// A BootcNode asked for another image than the good one, if any.
    async fn asks_for_another(&self) -> Option<String> {
        let bootc: Api<BootcNode> = Api::all(self.client.clone());
        let list = bootc.list(&Default::default()).await.ok()?;
        list.iter()
            .find(|b| b.spec.desired_image != self.pinned_good)
            .map(|b| format!("{}: {}", b.name_any(), b.spec.desired_image))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_image_is_rolled_back_and_not_tried_again_when_the_tag_flips_back() {
    let t = Tagged::start().await;
    let (client, cluster, good, bad) = (&t.client, &t.cluster, &t.good, &t.bad);

    // The tag moves to the bad image: one node boots it, fails, and everything is
    // rolled back to the good one.
    let recorder = Recorder::start(&t.emulator);
    flip(&t.registry, &t.catalog, "bad");
    t.marked_failed().await;
    let p = t.rolled_back().await;
    t.mark_stored_first(&recorder.all().await);
    assert_eq!(condition(&p, "Degraded").unwrap().1, "TargetFailed");
    let went_bad = t.rebooted();
    assert_eq!(
        went_bad.len(),
        1,
        "one node tried the bad image: {went_bad:?}"
    );
    let reboots_after_rollback = total_reboots(cluster, &NAMES);

    // The tag flips back to good, then to bad again: bad is not tried again. Every
    // stored change of a BootcNode from here on is read.
    let mut changes = t.emulator.handle().events();
    for (tag, digest) in [("good", good), ("bad", bad)] {
        let flipped_at = chrono::Utc::now();
        assert_eq!(&flip(&t.registry, &t.catalog, tag), digest);
        let p = wait_pool(
            client,
            "workers",
            &format!("the tag resolved after it moved to {tag}"),
            |p| resolved_since(p, flipped_at),
        )
        .await;
        // Whatever the plan that wrote this status did to the nodes is done by now.
        assert_eq!(
            p.status.as_ref().unwrap().target_digest.as_deref(),
            Some(good.as_str())
        );
        // The mark stays; it says so while the tag points at the failed image.
        let status = p.status.as_ref().unwrap();
        assert!(
            status
                .deploy_history
                .iter()
                .any(|e| &e.digest == bad && e.failed)
        );
        let degraded = condition(&p, "Degraded").unwrap().1;
        let expected = if tag == "bad" {
            "TargetFailed"
        } else {
            "Healthy"
        };
        assert_eq!(degraded, expected, "after the move to {tag}");
        // Nor in the plans that follow: three more, each checked.
        never_over_reconciles(
            client,
            &t.metrics,
            ("workers", 3),
            &format!("after the move to {tag}, a node asked for another image"),
            async || t.asks_for_another().await,
        )
        .await;
    }
    // And at no stored version in between.
    loop {
        match changes.try_recv() {
            Ok(change) if change.key.plural == "bootcnodes" => {
                let desired = &change.object["spec"]["desiredImage"];
                assert_eq!(desired, &json!(t.pinned_good), "rv {}", change.rv);
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
            Err(e) => panic!("changes missed: {e}"),
        }
    }
    assert_eq!(
        total_reboots(cluster, &NAMES),
        reboots_after_rollback,
        "no node rebooted again"
    );
    for n in NAMES {
        assert_eq!(&booted(cluster, n), good, "{n}");
    }
    let report = t.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    t.controller.stop().await;
}

/// The controller's watch of the pools lags behind its own writes: it is held from before
/// the tag moves to the bad image until after the rollback. Every plan in between is made
/// from the pool as the controller last wrote it, not from the older one its watch has,
/// so the failure mark it wrote is never undone: no other node tries the bad image, and
/// the one that did is not sent back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_pool_watch_does_not_undo_a_failure_mark() {
    let t = Tagged::start().await;
    let handle = t.emulator.handle();
    handle.hold_watches("bootcnodepools");
    flip(&t.registry, &t.catalog, "bad");
    t.marked_failed().await;
    t.rolled_back().await;
    let went_bad = t.rebooted();
    assert_eq!(
        went_bad.len(),
        1,
        "one node tried the bad image: {went_bad:?}"
    );
    let reboots = total_reboots(&t.cluster, &NAMES);
    assert_eq!(reboots, 2, "to the bad image and back");
    // Three more plans with the watch still held, each brought by a BootcNode's change
    // (the pool's own changes do not reach the controller now).
    never_over_reconciles_poking(
        &t.metrics,
        ("workers", 3),
        "with the pools' watch held, a node asked for another image",
        async || poke_bootc(&t.client, "n1").await,
        async || t.asks_for_another().await,
    )
    .await;
    // And once the watch has caught up.
    handle.release_watches("bootcnodepools");
    never_over_reconciles(
        &t.client,
        &t.metrics,
        ("workers", 3),
        "with the pools' watch caught up, a node asked for another image",
        async || t.asks_for_another().await,
    )
    .await;
    assert_eq!(
        total_reboots(&t.cluster, &NAMES),
        reboots,
        "no node rebooted again"
    );
    let report = t.invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    t.controller.stop().await;
}
