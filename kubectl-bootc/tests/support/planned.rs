//! The controller's own planner, run on a pool as the API holds it, for the tests of
//! `status` and `why`: they read statuses the controller wrote, never hand-written ones.
//! (Compiled into the unit tests and the command tests alike.)

use std::sync::Arc;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::{BootcNodePool, BootcNodePoolStatus};
use bootc_pool_controller::plan::{
    DrainView, GateView, Lookup, NodeView, PoolView, PullSecretView, Snapshot, Target,
};
use bootc_pool_controller::reconcile::observe;
use bootc_pool_controller::reconcile::pool_index::PoolIndex;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

/// What the controller's caches hold, and its clock.
pub struct World<'a> {
    pub pools: &'a [BootcNodePool],
    pub nodes: &'a [Node],
    pub bootc_nodes: &'a [BootcNode],
    pub now: DateTime<Utc>,
}

/// What else the controller's reconcile reads: the alert gate's answer and the drains.
#[derive(Clone)]
pub struct Answers<'a> {
    pub gate: GateView,
    pub drains: &'a [(&'a str, DrainView)],
}

impl Default for Answers<'_> {
    fn default() -> Self {
        Answers {
            gate: GateView::NotConfigured,
            drains: &[],
        }
    }
}

/// The status the controller plans for `pool` (one plan, from the status it has; its tag
/// resolved to the target that status names).
pub fn planned_status(
    world: &World<'_>,
    pool: &BootcNodePool,
    answers: Answers<'_>,
) -> BootcNodePoolStatus {
    bootc_pool_controller::plan::plan(&snapshot(world, pool, answers)).status
}

/// What the controller's reconcile would read for `pool`.
fn snapshot(world: &World<'_>, pool: &BootcNodePool, answers: Answers<'_>) -> Snapshot {
    let name = pool.name_any();
    let status = pool.status.clone();
    // Every pool's selector and summary, as the controller's reconcile shares them.
    let cached: Vec<Arc<BootcNodePool>> = world.pools.iter().cloned().map(Arc::new).collect();
    let (pool_selectors, pools) = PoolIndex::default().shared(&cached);
    let lookup = match status.as_ref().and_then(|s| s.target_image.as_deref()) {
        Some(image) => Lookup::Resolved {
            target: Target::from_ref(image).expect("a pinned target"),
            version: status.as_ref().and_then(|s| s.target_version.clone()),
            at: world.now,
        },
        None => Lookup::NotAsked,
    };
    Snapshot {
        pool: PoolView {
            name: name.clone(),
            generation: pool.metadata.generation,
            spec: pool.spec.clone(),
            status,
            deleting: false,
            finalized: true,
        },
        lookup,
        pull_secret: PullSecretView::default(),
        pool_selectors,
        pools,
        gate: answers.gate,
        nodes: members(world, pool),
        changes: None,
        drains: answers
            .drains
            .iter()
            .map(|(n, d)| ((*n).to_owned(), d.clone()))
            .collect(),
        progress: None,
        now: world.now,
        settled: Default::default(),
    }
}

/// The Nodes `pool` selects and the BootcNodes it owns, read as the controller's
/// reconcile reads its caches.
fn members(world: &World<'_>, pool: &BootcNodePool) -> Vec<NodeView> {
    let nodes: Vec<Arc<Node>> = world.nodes.iter().cloned().map(Arc::new).collect();
    let bootc: Vec<Arc<BootcNode>> = world.bootc_nodes.iter().cloned().map(Arc::new).collect();
    let names = observe::candidates(pool, nodes.iter().cloned(), bootc.iter().cloned());
    observe::members(pool, names, |n| named(&nodes, n), |n| named(&bootc, n))
}

fn named<K: ResourceExt>(objects: &[Arc<K>], name: &str) -> Option<Arc<K>> {
    objects.iter().find(|o| o.name_any() == name).cloned()
}
