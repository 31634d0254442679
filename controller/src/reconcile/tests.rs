use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::*;
use crate::plan::Action;

#[test]
fn error_backoff_doubles_from_a_second_to_five_minutes() {
    let waits: Vec<u64> = (1..=11).map(|n| error_backoff(n).as_secs()).collect();
    assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    assert_eq!(error_backoff(u32::MAX), ERROR_BACKOFF.max);
}

/// A reconciler's context on `client` with empty caches: filled (what a reconcile of a
/// pool with no members reads) when `synced`, else gone.
fn context(client: Client, deps: Dependencies, synced: bool) -> Arc<Context> {
    let (_, synced) = watch::channel(synced);
    let recorder = recorder(&client, &deps);
    let (events, _sender) = event_queue::EventQueue::start(recorder.clone(), deps.metrics.clone());
    let (drainer, _drained) = drainer(&client);
    Arc::new(Context {
        notifier: notifier(&client, &recorder, &deps),
        events,
        drainer,
        pools: reflector::store().0,
        bootc: reflector::store().0,
        nodes: reflector::store().0,
        copies: reflector::store().0,
        pool_overlay: pools::PoolOverlay::default(),
        client,
        deps,
        bootc_overlay: Arc::default(),
        node_overlay: Arc::default(),
        failures: Mutex::new(HashMap::new()),
        pacing: pacing::StatusPacing::default(),
        synced: Synced::new(synced.clone(), synced),
        progress: Mutex::new(HashMap::new()),
        membership: Arc::default(),
        views: views::Views::default(),
        pool_index: Mutex::default(),
        node_turns: tokio::sync::Semaphore::new(execute::CONCURRENT_NODES_IN_ALL),
        gone: Mutex::default(),
    })
}

/// The planner, with one more action that fails: a write to a BootcNode that is not there.
fn plan_with_a_failing_write() -> PlanFn {
    Arc::new(|snapshot| {
        let mut plan = plan::plan(snapshot);
        plan.actions.push(Action::SetHeld {
            node: "absent".to_owned(),
            held: true,
        });
        plan
    })
}

/// The pool `workers`, on a digest, with the clean-up finalizer.
fn workers() -> BootcNodePool {
    let digest = format!("registry.test/os@sha256:{}", "a".repeat(64));
    serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "workers", "finalizers": ["node.bootc.dev/cleanup"]},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": digest},
        },
    }))
    .unwrap()
}

/// The pool `workers`, created (with the pools' CRD as shipped) and deleted: what a
/// reconcile lets go.
async fn deleted_pool(client: &Client) -> BootcNodePool {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(include_str!(
        "../../../crds/node.bootc.dev_bootcnodepools.yaml"
    ))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .create(&PostParams::default(), &workers())
        .await
        .unwrap();
    pools
        .delete("workers", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = pools.get("workers").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    deleting
}

/// A reconcile that lets its pool go and fails in another action leaves nothing of the
/// pool behind, its count of failures included, once the error policy has run after it
/// (as the runtime runs them).
#[tokio::test]
async fn a_pool_let_go_by_a_failing_reconcile_keeps_no_failure_count() {
    let emulator = kube_emulator::Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let deps = Dependencies {
        plan: plan_with_a_failing_write(),
        ..Dependencies::default()
    };
    let ctx = context(client.clone(), deps, true);
    let pool = Arc::new(deleted_pool(&client).await);

    let error = reconcile(Arc::clone(&pool), Arc::clone(&ctx))
        .await
        .expect_err("the write to the absent BootcNode fails");
    assert!(matches!(error, ReconcileError::Api { .. }), "{error}");
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    assert!(
        pools.get_opt("workers").await.unwrap().is_none(),
        "the finalizer was removed and the pool is gone"
    );
    let requeue = error_policy(pool, &error, Arc::clone(&ctx));

    assert_eq!(requeue, Requeue::requeue(error_backoff(1)));
    assert!(
        lock(&ctx.failures).is_empty(),
        "failures kept of a pool let go: {:?}",
        lock(&ctx.failures)
    );
}

/// Failed reconciles in a row of a pool that stays are counted, and each waits longer
/// than the one before; a conflict is planned again at once and not counted.
#[tokio::test]
async fn failed_reconciles_in_a_row_back_off_longer() {
    let emulator = kube_emulator::Emulator::start().await.unwrap();
    let ctx = context(emulator.client().unwrap(), Dependencies::default(), false);
    let pool = Arc::new(workers());
    let mut waits = Vec::new();
    for _ in 0..3 {
        let error = reconcile(Arc::clone(&pool), Arc::clone(&ctx))
            .await
            .expect_err("the caches are gone");
        assert!(matches!(error, ReconcileError::CacheGone), "{error}");
        waits.push(error_policy(Arc::clone(&pool), &error, Arc::clone(&ctx)));
    }
    let conflict = ReconcileError::Conflict("workers".to_owned());
    let again = error_policy(Arc::clone(&pool), &conflict, Arc::clone(&ctx));

    let expected: Vec<Requeue> = (1..=3)
        .map(|n| Requeue::requeue(error_backoff(n)))
        .collect();
    assert_eq!(waits, expected);
    assert_eq!(again, Requeue::requeue(Duration::from_millis(50)));
    assert_eq!(lock(&ctx.failures).get("workers"), Some(&3));
}
