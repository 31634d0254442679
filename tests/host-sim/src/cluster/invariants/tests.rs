//! [`Invariants::try_settled`] refuses to report what the checker did not see.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube_emulator::Emulator;

use super::{Invariants, NotSettled, Tracker};

/// An emulator whose resourceVersion has moved past the start.
async fn moved_emulator() -> Emulator {
    let emulator = Emulator::start().await.expect("emulator");
    let api: Api<Namespace> = Api::all(emulator.client().expect("client"));
    let mut ns = Namespace::default();
    ns.metadata.name = Some("moved".to_owned());
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    assert!(emulator.handle().resource_version() > 0);
    emulator
}

/// A checker that examined nothing, with `task` in place of its event loop.
fn stuck(emulator: &Emulator, task: tokio::task::JoinHandle<()>) -> Invariants {
    Invariants {
        tracker: Arc::new(Mutex::new(Tracker::default())),
        handle: emulator.handle(),
        task,
    }
}

#[tokio::test]
async fn a_checker_that_falls_behind_is_an_error_and_a_panic() {
    let emulator = moved_emulator().await;
    let checker = stuck(&emulator, tokio::spawn(std::future::pending()));
    let err = checker
        .try_settled(Duration::from_millis(50))
        .await
        .expect_err("a checker that examined nothing did not settle");
    assert!(
        matches!(err, NotSettled::Timeout { processed: 0, .. }),
        "{err}"
    );
    let panicked = tokio::spawn(async move {
        checker.settled(Duration::from_millis(50)).await;
    })
    .await;
    assert!(panicked.is_err_and(|e| e.is_panic()));
}

#[tokio::test]
async fn a_checker_whose_task_ended_is_an_error() {
    let emulator = moved_emulator().await;
    let task = tokio::spawn(async {});
    while !task.is_finished() {
        tokio::task::yield_now().await;
    }
    let checker = stuck(&emulator, task);
    let err = checker
        .try_settled(Duration::from_secs(30))
        .await
        .expect_err("a checker without its task did not settle");
    assert!(
        matches!(err, NotSettled::Stopped { processed: 0, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_live_checker_settles_and_an_idle_one_is_clean_but_saw_no_rollout() {
    let emulator = moved_emulator().await;
    let checker = Invariants::follow(emulator.handle(), 1, BTreeSet::new());
    let api: Api<Namespace> = Api::all(emulator.client().expect("client"));
    let mut ns = Namespace::default();
    ns.metadata.name = Some("later".to_owned());
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let report = checker
        .try_settled(Duration::from_secs(30))
        .await
        .expect("settled");
    assert_eq!(report.events, 1, "{report:?}");
    assert!(report.is_clean(), "{report:?}");
    assert!(!report.is_clean_rollout(), "{report:?}");
}

/// Every unavailable node with why, scanned from scratch: what the tracker keeps as the
/// events come.
fn scanned(t: &super::Tracker) -> BTreeMap<String, Vec<&'static str>> {
    let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for (name, facts) in &t.nodes {
        if facts.unschedulable && !t.admin_cordoned.contains(name) {
            out.entry(name.clone()).or_default().push("cordoned");
        }
        if facts.ready == Some(false) {
            out.entry(name.clone()).or_default().push("NotReady");
        }
    }
    for (name, facts) in &t.bootc_nodes {
        if facts.slot {
            out.entry(name.clone()).or_default().push("reboot-slot");
        }
    }
    out
}

/// Thousands of random changes to a few Nodes and BootcNodes (cordons, readiness, slots,
/// deletions, stale versions): after each, the unavailable set the tracker keeps is the
/// one a scan of everything finds, and a violation is told once per new set over budget.
#[test]
fn the_kept_unavailable_set_is_what_a_full_scan_finds() {
    let t = super::Tracker {
        budget: 3,
        admin_cordoned: BTreeSet::from(["n1".to_owned()]),
        ..super::Tracker::default()
    };
    random_changes(t, &[(None, 3)]);
}

/// The same, with two pools checked on their own (n0 to n3 with budget 1, n4 to n6
/// with budget 2) and n7 in none: a violation is told once per new set over a pool's
/// budget, and names that pool.
#[test]
fn each_pool_is_checked_against_its_own_budget() {
    let mut t = super::Tracker {
        admin_cordoned: BTreeSet::from(["n1".to_owned()]),
        ..super::Tracker::default()
    };
    for (i, (name, nodes, budget)) in [("a", 0..4, 1), ("b", 4..7, 2)].into_iter().enumerate() {
        for n in nodes {
            t.pool_of.insert(format!("n{n}"), i);
        }
        t.pools.push(super::PoolCheck {
            name: name.to_owned(),
            budget,
            ..super::PoolCheck::default()
        });
    }
    let told = random_changes(t, &[(Some(0), 1), (Some(1), 2)]);
    assert!(told.iter().any(|v| v.contains("pool a: ")), "{told:?}");
    assert!(told.iter().any(|v| v.contains("pool b: ")), "{told:?}");
}

/// Applies random changes to `t` and checks, after each, its kept set against a scan
/// and its violations against `checks` (each a pool index, `None` for the whole
/// cluster, and its budget); returns the violations told.
fn random_changes(mut t: super::Tracker, checks: &[(Option<usize>, usize)]) -> Vec<String> {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut over, mut told) = (0, 0);
    // Per check: the names over budget after the previous event, if they were.
    let mut previous: Vec<Option<BTreeSet<String>>> = vec![None; checks.len()];
    for rv in 1..5_000u64 {
        let name = format!("n{}", next(8));
        // Now and then an event older than what is known, which changes nothing.
        let rv_seen = if next(10) == 0 {
            rv.saturating_sub(50)
        } else {
            rv
        };
        let deleted = next(20) == 0;
        let (group, plural, object) = if next(2) == 0 {
            let ready = ["True", "False", "Unknown"][usize::try_from(next(3)).unwrap()];
            let object = serde_json::json!({
                "metadata": {"name": name},
                "spec": {"unschedulable": next(2) == 0},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            });
            ("", "nodes", object)
        } else {
            let mut annotations = serde_json::Map::new();
            if next(2) == 0 {
                annotations.insert(REBOOT_SLOT_ANNOTATION.to_owned(), "1".into());
            }
            let object =
                serde_json::json!({"metadata": {"name": name, "annotations": annotations}});
            (super::BOOTC_GROUP, "bootcnodes", object)
        };
        let before = t.violations.len();
        assert!(t.apply(group, plural, &object, deleted, rv_seen));
        t.evaluate(rv);
        let scan = scanned(&t);
        assert_eq!(t.down, scan, "after rv {rv}");
        let with_slot = scan.values().filter(|w| w.contains(&"reboot-slot")).count();
        assert_eq!(t.down_with_slot, with_slot, "slots after rv {rv}");
        let mut to_tell = 0;
        for ((pool, budget), previous) in checks.iter().zip(previous.iter_mut()) {
            let names: BTreeSet<String> = scan
                .keys()
                .filter(|n| pool.is_none() || t.pool_of.get(*n) == pool.as_ref())
                .cloned()
                .collect();
            let now_over = (names.len() > *budget).then_some(names);
            over += usize::from(now_over.is_some());
            to_tell += usize::from(now_over.is_some() && now_over != *previous);
            *previous = now_over;
        }
        assert_eq!(t.violations.len() - before, to_tell, "after rv {rv}");
        told += to_tell;
    }
    assert!(
        over > 0 && told > 0,
        "the budget was exceeded ({over}) and told ({told})"
    );
    t.violations
}
