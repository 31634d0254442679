//! `--chaos`: the disturbances that need a script, on top of the controller and agent
//! kills and the API faults for every client. The pool follows the tag `v2` of a real
//! registry on loopback; mid-rollout the registry goes down, the pool's image is edited
//! to the tag `v3` (resolved once the registry is back), a node is deleted and added
//! again (booted on v1), watch streams are cut every [`CUT_EVERY`], and the pool is
//! deleted and, once gone, created again.
//!
//! The invariant this adds: a pool that no longer exists leaves no trace. The instant
//! the deleted pool is gone (its finalizer removed), no Node carries the managed label or
//! a cordon, and no BootcNode is owned by it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use bootc_crds::{MANAGED_LABEL, REBOOT_SLOT_ANNOTATION};
use host_sim::memory::Catalog;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;

use super::setup::World;
use super::{POOL, secs};
use crate::stats::Rng;
use crate::track::RolloutTracker;

/// How often every watch stream is cut.
const CUT_EVERY: Duration = Duration::from_secs(2);
/// How long the script's own API calls are retried (they meet the injected faults too).
const CALL_DEADLINE: Duration = Duration::from_secs(120);
/// How long the deleted pool may take to go (its clean-up runs under the faults).
const GONE_DEADLINE: Duration = Duration::from_secs(300);

/// The registry on loopback and the images the pool follows.
pub(super) struct Images {
    registry: Arc<Mutex<Registry>>,
    /// `HOST/os:v2`: the pool's image at first.
    pub(super) v2_tag: String,
    /// `HOST/os:v3`: the pool's image after the edit.
    pub(super) v3_tag: String,
    /// The digest of v3: the rollout's final target.
    pub(super) v3_digest: String,
}

fn lock(registry: &Mutex<Registry>) -> std::sync::MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Images {
    /// Starts the registry, pushes v2 and v3 to it, and puts the same digests in the
    /// hosts' `catalog`.
    pub(super) async fn push(catalog: &Catalog) -> Result<Images, String> {
        let (registry, v2, v3) = tokio::task::spawn_blocking(|| {
            let registry = Registry::start().map_err(|e| format!("the registry: {e}"))?;
            let push = |tag: &str| {
                registry
                    .push("os", tag, &[("org.opencontainers.image.version", tag)])
                    .map_err(|e| format!("pushing os:{tag}: {e}"))
            };
            let (v2, v3) = (push("v2")?, push("v3")?);
            Ok::<_, String>((registry, v2, v3))
        })
        .await
        .map_err(|e| format!("the registry set-up: {e}"))??;
        let repo = format!("{}/os", registry.host());
        catalog.push(&repo, "v2", &v2, Some("k2"));
        catalog.push(&repo, "v3", &v3, Some("k3"));
        Ok(Images {
            registry: Arc::new(Mutex::new(registry)),
            v2_tag: format!("{repo}:v2"),
            v3_tag: format!("{repo}:v3"),
            v3_digest: v3,
        })
    }

    /// The registry's `host:port`, which the controller reaches over plain HTTP.
    pub(super) fn host(&self) -> String {
        lock(&self.registry).host()
    }

    async fn set_up(&self, up: bool) -> Result<(), String> {
        let registry = Arc::clone(&self.registry);
        tokio::task::spawn_blocking(move || {
            let mut registry = lock(&registry);
            if up {
                registry
                    .restart()
                    .map_err(|e| format!("restarting the registry: {e}"))
            } else {
                registry.stop();
                Ok(())
            }
        })
        .await
        .map_err(|e| format!("the registry: {e}"))?
    }

    /// Stops the registry and removes its files.
    pub(super) async fn stop(self) {
        let registry = self.registry;
        let _ = tokio::task::spawn_blocking(move || drop(registry)).await;
    }
}

/// What the script did, and what it found wrong.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) watch_cuts: u64,
    pub(super) registry_outages: u64,
    pub(super) registry_down_s: f64,
    pub(super) nodes_replaced: u64,
    /// The nodes deleted and added again.
    pub(super) replaced: Vec<String>,
    pub(super) image_edits: u64,
    pub(super) pool_recreations: u64,
    /// Nodes on the target when the pool was deleted (to show it was mid-rollout).
    pub(super) on_target_at_pool_delete: usize,
    /// Nodes cordoned or holding a reboot slot when the pool was deleted.
    pub(super) in_flight_at_pool_delete: usize,
    /// Seconds from the pool's deletion to its finalizer's removal.
    pub(super) pool_cleanup_s: f64,
    /// Breaches of "a pool that no longer exists leaves no trace", and script failures.
    pub(super) violations: Vec<String>,
}

impl Tally {
    /// The `chaos` object of the JSON result.
    pub(super) fn json(&self) -> Value {
        json!({
            "watch_cuts": self.watch_cuts,
            "registry_outages": self.registry_outages,
            "registry_down_s": super::round(self.registry_down_s, 2),
            "nodes_deleted_and_added_again": self.nodes_replaced,
            "nodes_replaced": self.replaced,
            "pool_image_edits": self.image_edits,
            "pool_deleted_and_created_again": self.pool_recreations,
            "nodes_on_target_at_pool_delete": self.on_target_at_pool_delete,
            "nodes_in_flight_at_pool_delete": self.in_flight_at_pool_delete,
            "pool_cleanup_s": super::round(self.pool_cleanup_s, 2),
            "no_trace_violations": self.violations.len(),
            "violations": self.violations,
        })
    }
}

/// Runs the script once, mid-rollout (the watch cuts run beside it, for the whole
/// rollout: [`cut_watches`]), then re-arms the completion (the rollout counts as
/// done only once seen complete after the pool came back).
pub(super) async fn run(
    world: &World,
    images: &Images,
    tracker: &RolloutTracker,
    seed: u64,
) -> Tally {
    let mut tally = Tally::default();
    if let Err(e) = script(world, images, tracker, seed, &mut tally).await {
        tally
            .violations
            .push(format!("the chaos script failed: {e}"));
    }
    tracker.rearm();
    tally
}

async fn script(
    world: &World,
    images: &Images,
    tracker: &RolloutTracker,
    seed: u64,
    tally: &mut Tally,
) -> Result<(), String> {
    let pools: Api<BootcNodePool> = Api::all(world.client.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    images.set_up(false).await?;
    let down = Instant::now();
    tally.registry_outages += 1;

    tokio::time::sleep(Duration::from_millis(500)).await;
    let edit = json!({"spec": {"image": {"ref": images.v3_tag}}});
    let (params, edit) = (PatchParams::default(), Patch::Merge(&edit));
    retry("edit the pool's image", || {
        pools.patch(POOL, &params, &edit)
    })
    .await?;
    tally.image_edits += 1;

    tokio::time::sleep(Duration::from_millis(500)).await;
    let nodes = world.cluster.nodes();
    let pick = Rng::new(seed).next_u64() as usize % nodes.len();
    let victim = nodes[pick].clone();
    retry("delete a node", || world.cluster.remove_node(&victim)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    retry("add the node again", || {
        world.cluster.add_node(&victim, &world.v1, &world.sim)
    })
    .await?;
    tally.nodes_replaced += 1;
    tally.replaced.push(victim);

    tokio::time::sleep(Duration::from_millis(500)).await;
    images.set_up(true).await?;
    tally.registry_down_s = secs(down.elapsed());

    // The pool goes mid-rollout: once a node is cordoned or holds a reboot slot.
    let waiting = Instant::now();
    while in_flight(&world.handle) == 0 {
        if waiting.elapsed() > GONE_DEADLINE {
            return Err("no node was in flight to delete the pool under".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tally.on_target_at_pool_delete = tracker.counts().states[0];
    recreate_pool(world, &pools, tally).await
}

/// Deletes the pool, checks the moment it is gone that it left nothing behind, and
/// creates it again with the same spec.
async fn recreate_pool(
    world: &World,
    pools: &Api<BootcNodePool>,
    tally: &mut Tally,
) -> Result<(), String> {
    let old = pools
        .get(POOL)
        .await
        .map_err(|e| format!("reading the pool: {e}"))?;
    let uid = old.uid().unwrap_or_default();
    tally.in_flight_at_pool_delete = in_flight(&world.handle);
    let params = DeleteParams::default();
    retry("delete the pool", || pools.delete(POOL, &params)).await?;
    let deleted = Instant::now();
    loop {
        match pools.get_opt(POOL).await {
            Ok(None) => break,
            Ok(Some(_)) | Err(_) if deleted.elapsed() < GONE_DEADLINE => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => return Err("the deleted pool did not go within 300 s".to_owned()),
        }
    }
    tally.pool_cleanup_s = secs(deleted.elapsed());
    tally.violations.extend(traces(&world.handle, &uid));
    let mut again = BootcNodePool::new(POOL, old.spec.clone());
    again.metadata.labels = old.metadata.labels.clone();
    let params = PostParams::default();
    retry("create the pool again", || pools.create(&params, &again)).await?;
    tally.pool_recreations += 1;
    Ok(())
}

/// Nodes cordoned or holding a reboot slot now.
fn in_flight(handle: &kube_emulator::Handle) -> usize {
    let cordoned = handle
        .list("", "nodes")
        .iter()
        .filter(|n| n["spec"]["unschedulable"] == Value::Bool(true))
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
        .collect::<std::collections::BTreeSet<_>>();
    let holding = handle
        .list("node.bootc.dev", "bootcnodes")
        .iter()
        .filter(|b| {
            b["metadata"]["annotations"]
                .get(REBOOT_SLOT_ANNOTATION)
                .is_some()
        })
        .filter_map(|b| b["metadata"]["name"].as_str().map(str::to_owned))
        .collect::<std::collections::BTreeSet<_>>();
    cordoned.union(&holding).count()
}

/// What a pool gone with uid `uid` left behind: labelled or cordoned Nodes, BootcNodes
/// it owns.
pub(super) fn traces(handle: &kube_emulator::Handle, uid: &str) -> Vec<String> {
    let mut found = Vec::new();
    for node in handle.list("", "nodes") {
        let name = node["metadata"]["name"].as_str().unwrap_or("?").to_owned();
        if node["metadata"]["labels"].get(MANAGED_LABEL).is_some() {
            found.push(format!(
                "node {name} still carries {MANAGED_LABEL} after its pool went"
            ));
        }
        if node["spec"]["unschedulable"] == Value::Bool(true) {
            found.push(format!("node {name} still cordoned after its pool went"));
        }
    }
    for bootc in handle.list("node.bootc.dev", "bootcnodes") {
        let owned = bootc["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid));
        if owned {
            let name = bootc["metadata"]["name"].as_str().unwrap_or("?");
            found.push(format!(
                "BootcNode {name} still owned by the pool that went"
            ));
        }
    }
    found
}

/// Cuts every watch stream every [`CUT_EVERY`] until told to stop; returns how often.
pub(super) async fn cut_watches(
    handle: kube_emulator::Handle,
    mut stop: watch::Receiver<bool>,
) -> u64 {
    let mut cuts = 0;
    loop {
        tokio::select! {
            () = tokio::time::sleep(CUT_EVERY) => {
                handle.cut_watches();
                cuts += 1;
            }
            _ = stop.wait_for(|s| *s) => return cuts,
        }
    }
}

/// `call` until it succeeds (the injected faults hit the script too) or
/// [`CALL_DEADLINE`] passes.
async fn retry<T, E, F, Fut>(what: &str, mut call: F) -> Result<T, String>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + CALL_DEADLINE;
    loop {
        match call().await {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "chaos: {what} failed; again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}
