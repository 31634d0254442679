//! Node drains against the in-process API emulator: what is evicted and what is left,
//! refusals, disruption budgets, timeouts, cancellation, and the background [`Drainer`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use bootc_pool_controller::drain::{
    Backoff, CancellationToken, DrainDone, DrainOptions, DrainOutcome, DrainState, Drainer,
    drain_node,
};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

const NODE: &str = "n1";
const NS: &str = "default";
/// Upper bound for anything that should happen "soon".
const DEADLINE: Duration = Duration::from_secs(10);

/// An emulator and a client that does not retry 429 answers itself.
async fn setup() -> (Emulator, Client) {
    let emulator = Emulator::start().await.unwrap();
    let mut config = emulator.config();
    config.default_retry = false;
    let client = Client::try_from(config).unwrap();
    for node in [NODE, "n2"] {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": node},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
    }
    (emulator, client)
}

/// Drain options that retry quickly.
fn fast() -> DrainOptions {
    DrainOptions {
        backoff: Backoff {
            first: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        ..DrainOptions::default()
    }
}

/// Creates an owner object (`ReplicaSet` or `DaemonSet`) and returns a controller
/// reference to it (the emulator garbage-collects pods whose owners do not exist).
async fn owner(client: &Client, kind: &str, name: &str) -> OwnerReference {
    let body = json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"owner": name}}, "template": {"metadata": {"labels": {"owner": name}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}
    });
    let uid = match kind {
        "ReplicaSet" => Api::<ReplicaSet>::namespaced(client.clone(), NS)
            .create(
                &PostParams::default(),
                &serde_json::from_value(body).unwrap(),
            )
            .await
            .unwrap()
            .uid(),
        "DaemonSet" => Api::<DaemonSet>::namespaced(client.clone(), NS)
            .create(
                &PostParams::default(),
                &serde_json::from_value(body).unwrap(),
            )
            .await
            .unwrap()
            .uid(),
        other => panic!("no owner kind {other}"),
    };
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Creates a Running, Ready pod on `node`; `extra` is merged into the pod (metadata,
/// spec additions).
async fn pod(
    client: &Client,
    name: &str,
    node: &str,
    labels: &[(&str, &str)],
    owner: Option<&OwnerReference>,
    extra: Value,
) {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let mut body = json!({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}
    });
    if let Some(o) = owner {
        body["metadata"]["ownerReferences"] = json!([o]);
    }
    merge(&mut body, extra);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap();
    set_phase(client, name, "Running").await;
}

async fn set_phase(client: &Client, name: &str, phase: &str) {
    let ready = if phase == "Running" { "True" } else { "False" };
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}})),
        )
        .await
        .unwrap();
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Names of the pods on `node`, sorted.
async fn pods_on(client: &Client, node: &str) -> Vec<String> {
    let mut names: Vec<String> = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

/// A PodDisruptionBudget over `app=web`.
async fn budget(client: &Client, min_available: i32) {
    let pdb = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}});
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(pdb).unwrap(),
        )
        .await
        .unwrap();
}

async fn relax_budget(client: &Client) {
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
        )
        .await
        .unwrap();
}

/// Two ReplicaSet pods `web-1`, `web-2` (label app=web) on NODE.
async fn web_pods(client: &Client) {
    let rs = owner(client, "ReplicaSet", "web").await;
    for name in ["web-1", "web-2"] {
        pod(client, name, NODE, &[("app", "web")], Some(&rs), json!({})).await;
    }
}

/// Eviction requests answered with `code` so far.
fn evictions(emulator: &Emulator, code: u16) -> usize {
    emulator
        .handle()
        .requests()
        .iter()
        .filter(|r| r.subresource == "eviction" && r.code == code)
        .count()
}

/// The drain evicted `evicted` pods and left none on the node.
async fn assert_emptied(client: &Client, outcome: DrainOutcome, evicted: usize) {
    assert_eq!(outcome, DrainOutcome::Drained { evicted });
    assert!(pods_on(client, NODE).await.is_empty());
}

/// Polls `check` until it holds, failing after DEADLINE.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Drains [`NODE`] with `options`, never cancelled.
async fn drain(client: &Client, options: &DrainOptions) -> DrainOutcome {
    drain_node(client.clone(), NODE, options, &CancellationToken::new())
        .await
        .unwrap()
}

/// The pods a timed-out drain was waiting for and its last error; fails on any other
/// outcome.
fn timed_out(outcome: DrainOutcome) -> (Vec<String>, String) {
    let DrainOutcome::TimedOut {
        waiting_for,
        last_error,
    } = outcome
    else {
        panic!("expected a timeout, got {outcome:?}");
    };
    (waiting_for, last_error.expect("a timed-out drain says why"))
}

#[tokio::test]
async fn evicts_ordinary_pods_and_leaves_daemonset_mirror_and_terminated_pods() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    let ds = owner(&client, "DaemonSet", "agent").await;
    pod(&client, "agent-x", NODE, &[], Some(&ds), json!({})).await;
    pod(
        &client,
        "static-x",
        NODE,
        &[],
        None,
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "abc"}}}),
    )
    .await;
    let rs = owner(&client, "ReplicaSet", "jobs").await;
    pod(&client, "finished", NODE, &[], Some(&rs), json!({})).await;
    set_phase(&client, "finished", "Succeeded").await;
    pod(&client, "elsewhere", "n2", &[], Some(&rs), json!({})).await;

    let outcome = drain(&client, &fast()).await;

    assert_eq!(outcome, DrainOutcome::Drained { evicted: 2 });
    assert_eq!(
        pods_on(&client, NODE).await,
        ["agent-x", "finished", "static-x"]
    );
    assert_eq!(pods_on(&client, "n2").await, ["elsewhere"]);
    assert_eq!(evictions(&emulator, 201), 2);
    // Draining an already drained node is a no-op.
    let again = drain(&client, &fast()).await;
    assert_eq!(again, DrainOutcome::Drained { evicted: 0 });
    assert_eq!(evictions(&emulator, 201), 2);
}

#[tokio::test]
async fn pod_selector_limits_what_is_evicted() {
    let (_emulator, client) = setup().await;
    web_pods(&client).await;
    let rs = owner(&client, "ReplicaSet", "db").await;
    pod(
        &client,
        "db-1",
        NODE,
        &[("app", "db")],
        Some(&rs),
        json!({}),
    )
    .await;
    // An unmanaged pod outside the selector is not evicted, so it does not block either.
    pod(&client, "bare-db", NODE, &[("app", "db")], None, json!({})).await;

    let options = DrainOptions {
        pod_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            ..LabelSelector::default()
        }),
        ..fast()
    };
    let outcome = drain(&client, &options).await;

    assert_eq!(outcome, DrainOutcome::Drained { evicted: 2 });
    assert_eq!(pods_on(&client, NODE).await, ["bare-db", "db-1"]);
}

#[tokio::test]
async fn unmanaged_pod_is_refused_without_force_and_evicted_with_it() {
    let (emulator, client) = setup().await;
    let rs = owner(&client, "ReplicaSet", "web").await;
    pod(&client, "web-1", NODE, &[], Some(&rs), json!({})).await;
    pod(&client, "bare", NODE, &[], None, json!({})).await;

    let options = DrainOptions {
        timeout: Some(Duration::from_millis(400)),
        ..fast()
    };
    let outcome = drain(&client, &options).await;

    let (waiting_for, error) = timed_out(outcome);
    assert_eq!(waiting_for, names(&["default/bare", "default/web-1"]));
    assert!(
        error.contains("default/bare") && error.contains("disruption.drain.force"),
        "{error}"
    );
    assert!(!error.contains("web-1"), "{error}");
    // Nothing was evicted while a pod was refused.
    assert_eq!(pods_on(&client, NODE).await, ["bare", "web-1"]);
    assert_eq!(evictions(&emulator, 201), 0);

    let forced = DrainOptions {
        force: true,
        ..options
    };
    let outcome = drain(&client, &forced).await;
    assert_emptied(&client, outcome, 2).await;
}

#[tokio::test]
async fn empty_dir_pod_is_refused_without_delete_empty_dir_data() {
    let (_emulator, client) = setup().await;
    let rs = owner(&client, "ReplicaSet", "cache").await;
    pod(
        &client,
        "cache-1",
        NODE,
        &[],
        Some(&rs),
        json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}),
    )
    .await;

    let keep = DrainOptions {
        delete_empty_dir_data: false,
        timeout: Some(Duration::from_millis(300)),
        ..fast()
    };
    let outcome = drain(&client, &keep).await;
    let (waiting_for, error) = timed_out(outcome);
    assert_eq!(waiting_for, names(&["default/cache-1"]));
    assert!(
        error.contains("default/cache-1") && error.contains("deleteEmptyDirData"),
        "{error}"
    );
    assert_eq!(pods_on(&client, NODE).await, ["cache-1"]);

    // The default (deleteEmptyDirData: true) evicts it.
    let outcome = drain(&client, &fast()).await;
    assert_eq!(outcome, DrainOutcome::Drained { evicted: 1 });
}

#[tokio::test]
async fn disruption_budget_blocks_until_the_timeout() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    budget(&client, 2).await;

    let options = DrainOptions {
        timeout: Some(Duration::from_millis(600)),
        ..fast()
    };
    let start = Instant::now();
    let outcome = drain(&client, &options).await;
    let took = start.elapsed();

    let (waiting_for, error) = timed_out(outcome);
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(waiting_for, names(&["default/web-1", "default/web-2"]));
    assert!(
        error.contains("disruption budget") && error.contains("web needs 2 healthy pods"),
        "{error}"
    );
    assert_eq!(pods_on(&client, NODE).await, ["web-1", "web-2"]);
    // Retried with backoff, not hammered: 2 pods, 50 ms doubling to 200 ms, 600 ms.
    let refused = evictions(&emulator, 429);
    assert!((2..=20).contains(&refused), "{refused} refused evictions");
}

#[tokio::test]
async fn drain_finishes_when_the_budget_is_relaxed() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    budget(&client, 2).await;

    let options = DrainOptions {
        timeout: Some(Duration::from_secs(30)),
        ..fast()
    };
    let drain = tokio::spawn({
        let client = client.clone();
        async move { drain_node(client, NODE, &options, &CancellationToken::new()).await }
    });
    eventually("a refused eviction", || async {
        evictions(&emulator, 429) > 0
    })
    .await;
    assert!(!drain.is_finished());

    relax_budget(&client).await;
    let outcome = timeout(DEADLINE, drain).await.unwrap().unwrap().unwrap();
    assert_emptied(&client, outcome, 2).await;
}

#[tokio::test]
async fn drain_waits_until_evicted_pods_are_gone() {
    let (_emulator, client) = setup().await;
    let rs = owner(&client, "ReplicaSet", "slow").await;
    pod(
        &client,
        "slow-1",
        NODE,
        &[],
        Some(&rs),
        json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    )
    .await;

    let drain = tokio::spawn({
        let client = client.clone();
        async move { drain_node(client, NODE, &fast(), &CancellationToken::new()).await }
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually("the pod to be terminating", || async {
        pods.get("slow-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(!drain.is_finished());

    pods.patch(
        "slow-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let outcome = timeout(DEADLINE, drain).await.unwrap().unwrap().unwrap();
    assert_eq!(outcome, DrainOutcome::Drained { evicted: 1 });
}

#[tokio::test]
async fn cancel_stops_a_blocked_drain_promptly() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    budget(&client, 2).await;

    // A backoff of 30 s: cancelling must not wait for the next step. A cancel that
    // waited for it takes about 30 s, a prompt one milliseconds, so 10 s is a bound a
    // loaded machine keeps and a late cancel cannot.
    let options = DrainOptions {
        backoff: Backoff {
            first: Duration::from_secs(30),
            max: Duration::from_secs(30),
        },
        ..DrainOptions::default()
    };
    let cancel = CancellationToken::new();
    let drain = tokio::spawn({
        let (client, cancel) = (client.clone(), cancel.clone());
        async move { drain_node(client, NODE, &options, &cancel).await }
    });
    eventually("both evictions refused", || async {
        evictions(&emulator, 429) >= 2
    })
    .await;

    let start = Instant::now();
    let refused = evictions(&emulator, 429);
    cancel.cancel();
    let outcome = timeout(DEADLINE, drain).await.unwrap().unwrap().unwrap();
    assert_eq!(outcome, DrainOutcome::Cancelled);
    assert_eq!(
        evictions(&emulator, 429),
        refused,
        "no eviction after the cancel"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(pods_on(&client, NODE).await, ["web-1", "web-2"]);
}

/// The state of `node`'s drain, once `check` holds for it.
async fn state_when(
    drainer: &Drainer,
    node: &str,
    what: &str,
    check: impl Fn(&DrainState) -> bool,
) -> DrainState {
    let start = Instant::now();
    loop {
        if let Some(state) = drainer.state(node).filter(&check) {
            return state;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for {what}: {:?}",
            drainer.state(node)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn blocked_on(needle: &'static str) -> impl Fn(&DrainState) -> bool {
    move |s| matches!(s, DrainState::Running { last_error: Some(e), .. } if e.contains(needle))
}

#[tokio::test]
async fn drainer_runs_drains_in_the_background_once() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    budget(&client, 2).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let drainer = Drainer::new(client.clone(), tx);
    assert_eq!(drainer.state(NODE), None);

    drainer.start("pool-a", NODE, fast());
    let running = state_when(
        &drainer,
        NODE,
        "a blocked drain",
        blocked_on("disruption budget"),
    )
    .await;
    let DrainState::Running { pool, since, .. } = &running else {
        unreachable!()
    };
    assert_eq!(pool, "pool-a");
    // A second start neither starts another drain nor restarts this one.
    drainer.start("pool-a", NODE, fast());
    assert!(matches!(
        drainer.state(NODE),
        Some(DrainState::Running { since: s, .. }) if s == *since
    ));
    assert_eq!(drainer.nodes(), [NODE]);

    relax_budget(&client).await;
    let done = timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
    assert_eq!(
        done,
        DrainDone {
            pool: "pool-a".into(),
            node: NODE.into()
        }
    );
    let Some(DrainState::Finished {
        pool,
        since: finished_since,
        result,
        ..
    }) = drainer.state(NODE)
    else {
        panic!("expected a finished drain, got {:?}", drainer.state(NODE));
    };
    assert_eq!(pool, "pool-a");
    assert_eq!(finished_since, *since);
    assert_eq!(result, Ok(DrainOutcome::Drained { evicted: 2 }));
    // Each pod was evicted once: one drain ran.
    assert_eq!(evictions(&emulator, 201), 2);
    assert_eq!(evictions(&emulator, 404), 0);

    // Finished and not forgotten: start does nothing, and nothing more is announced.
    let finished = drainer.state(NODE);
    drainer.start("pool-a", NODE, fast());
    assert_eq!(drainer.state(NODE), finished);
    assert!(
        timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err()
    );

    drainer.forget(NODE);
    assert_eq!(drainer.state(NODE), None);
    // After forgetting, a new drain starts (and finds nothing left to evict).
    drainer.start("pool-a", NODE, fast());
    timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
    assert!(matches!(
        drainer.state(NODE),
        Some(DrainState::Finished {
            result: Ok(DrainOutcome::Drained { evicted: 0 }),
            ..
        })
    ));
}

#[tokio::test]
async fn drainer_start_passes_fixed_options_to_a_running_drain() {
    let (_emulator, client) = setup().await;
    pod(&client, "bare", NODE, &[], None, json!({})).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let drainer = Drainer::new(client.clone(), tx);

    drainer.start("pool-a", NODE, fast());
    state_when(
        &drainer,
        NODE,
        "a refused pod",
        blocked_on("disruption.drain.force"),
    )
    .await;
    assert_eq!(pods_on(&client, NODE).await, ["bare"]);

    // The admin sets force on the pool; the reconciler passes the new options on.
    let forced = DrainOptions {
        force: true,
        ..fast()
    };
    drainer.start("pool-a", NODE, forced);
    timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
    assert!(matches!(
        drainer.state(NODE),
        Some(DrainState::Finished {
            result: Ok(DrainOutcome::Drained { evicted: 1 }),
            ..
        })
    ));
    assert!(pods_on(&client, NODE).await.is_empty());
}

#[tokio::test]
async fn drainer_cancel_stops_and_forgets_a_drain() {
    let (emulator, client) = setup().await;
    web_pods(&client).await;
    budget(&client, 2).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let drainer = Drainer::new(client.clone(), tx);

    drainer.start("pool-a", NODE, fast());
    state_when(
        &drainer,
        NODE,
        "a blocked drain",
        blocked_on("disruption budget"),
    )
    .await;
    drainer.cancel(NODE);
    assert_eq!(drainer.state(NODE), None);
    assert!(drainer.nodes().is_empty());
    // A cancelled drain announces nothing and stops evicting.
    assert!(
        timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err()
    );
    let attempts = evictions(&emulator, 429);
    assert!(
        timeout(Duration::from_millis(400), rx.recv())
            .await
            .is_err()
    );
    assert_eq!(evictions(&emulator, 429), attempts);

    // Cancelling an unknown node is harmless; a new start runs a new drain.
    drainer.cancel("nope");
    drainer.start("pool-b", NODE, fast());
    relax_budget(&client).await;
    let done = timeout(DEADLINE, rx.recv()).await.unwrap().unwrap();
    assert_eq!(done.pool, "pool-b");
    assert!(matches!(
        drainer.state(NODE),
        Some(DrainState::Finished { pool, result: Ok(DrainOutcome::Drained { evicted: 2 }), .. }) if pool == "pool-b"
    ));
}
