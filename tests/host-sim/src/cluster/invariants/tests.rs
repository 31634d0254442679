//! [`Invariants::try_settled`] refuses to report what the checker did not see.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
