//! Automatic rollback (`spec.rollout.onFailure: Rollback`). When the unhealthy slot
//! holders reach `haltAfterUnhealthy`, the target digest is marked failed in
//! `deployHistory` (with the reason, the time and the pool's generation) and the plan is
//! made again with the mark in place: from then on the pool's target is the image it ran
//! before (the newest other digest in `deployHistory` that is not failed, that the
//! controller itself targeted (`origin: Targeted`) and that is in the repository of
//! `spec.image.ref`: what only nodes reported is never rolled back to), which every
//! node that booted the failed digest keeps in its rollback deployment, so going back
//! pulls nothing; it goes under the same budget as any update, and without a canary.
//!
//! A mark applies while the pool's `metadata.generation` is the one it was made at: the
//! same digest resolved again (a tag flipped back) is not tried again, and any spec
//! change clears it. Without an earlier image there is nothing to roll back to: the pool
//! approves nothing and says so.

use bootc_crds::ImageRef;
use bootc_crds::conditions::to_time;
use bootc_crds::pool::{
    BootcNodePoolStatus, DeployHistoryEntry, FAILED_REASON_MAX_LEN, FailurePolicy, HistoryOrigin,
};

use super::target::{Target, TargetDecision};
use super::world::Snapshot;

/// The target was marked failed for the current spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingBack {
    /// The failed image, pinned.
    pub failed: String,
    /// Why it failed.
    pub reason: String,
    /// The image rolled back to; `None` when the pool ran nothing before.
    pub to: Option<String>,
}

/// The mark on `digest` that applies to the current spec.
fn mark<'a>(
    status: Option<&'a BootcNodePoolStatus>,
    digest: &str,
    generation: Option<i64>,
) -> Option<&'a DeployHistoryEntry> {
    status?
        .deploy_history
        .iter()
        .find(|e| e.digest == digest && e.failed && e.failed_generation == generation)
}

/// Replaces a target marked failed by the image the pool ran before.
pub(super) fn apply(snap: &Snapshot, decision: &mut TargetDecision) -> Option<RollingBack> {
    let target = decision.target.as_ref().ok()?;
    let digest = target.digest.as_str();
    let status = snap.pool.status.as_ref();
    let entry = mark(status, digest, snap.pool.generation)?;
    let repository = ImageRef::parse(&snap.pool.spec.image.r#ref)
        .ok()
        .map(|r| r.name());
    let before = status?
        .deploy_history
        .iter()
        .filter(|e| e.digest != digest && !e.failed && e.node_count > 0)
        .filter(|e| e.origin == HistoryOrigin::Targeted)
        .find_map(|e| {
            let to = Target::from_ref(&e.image)?;
            let same = ImageRef::parse(&to.image).ok().map(|r| r.name()) == repository;
            same.then(|| (to, e.version.clone()))
        });
    let out = RollingBack {
        failed: target.image.clone(),
        reason: entry.failed_reason.clone().unwrap_or_default(),
        to: before.as_ref().map(|(t, _)| t.image.clone()),
    };
    if let Some((to, version)) = before {
        decision.target = Ok(to);
        decision.version = version;
    }
    Some(out)
}

/// Whether this plan's halt fails the target: `onFailure: Rollback`, not already rolling
/// back.
pub(super) fn fails(snap: &Snapshot, halted: bool, rolling_back: bool) -> bool {
    halted && !rolling_back && snap.pool.spec.rollout.on_failure == FailurePolicy::Rollback
}

/// `snap` with `target` marked failed in its status (the entry made when no node booted
/// the digest yet).
pub(super) fn marked(snap: &Snapshot, target: &Target, reason: String) -> Snapshot {
    let mut snap = snap.clone();
    let status = snap.pool.status.get_or_insert_with(Default::default);
    let digest = target.digest.to_string();
    let now = to_time(snap.now);
    let at = status
        .deploy_history
        .iter()
        .position(|e| e.digest == digest);
    let entry = match at {
        Some(i) => &mut status.deploy_history[i],
        None => {
            let Some(now) = now.clone() else { return snap };
            status.deploy_history.insert(
                0,
                DeployHistoryEntry {
                    digest,
                    image: target.image.clone(),
                    version: None,
                    node_count: 0,
                    first_deployed: now.clone(),
                    last_deployed: now,
                    origin: HistoryOrigin::Targeted,
                    failed: false,
                    failed_reason: None,
                    failed_time: None,
                    failed_generation: None,
                },
            );
            &mut status.deploy_history[0]
        }
    };
    entry.origin = HistoryOrigin::Targeted;
    entry.failed = true;
    entry.failed_reason = Some(bootc_crds::bounds::truncate(reason, FAILED_REASON_MAX_LEN));
    entry.failed_time = now;
    entry.failed_generation = snap.pool.generation;
    snap
}

/// Marks that no longer apply (the spec changed since) are taken off.
pub(super) fn clear_stale(history: &mut [DeployHistoryEntry], generation: Option<i64>) {
    for e in history
        .iter_mut()
        .filter(|e| e.failed && e.failed_generation != generation)
    {
        e.failed = false;
        e.failed_reason = None;
        e.failed_time = None;
        e.failed_generation = None;
    }
}

#[cfg(test)]
mod tests;
