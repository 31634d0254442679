//! Pacing of pool status writes. A status that moved only in what changes with every
//! node (the counts, each history entry's node count and `lastDeployed`, the conditions'
//! messages) is written at most once per [`COUNTS_INTERVAL`] per pool; anything else (a
//! condition's status or reason, the target, the canary, the alert gate, the history's
//! digests or failure marks) is written at once. A rollout of N nodes would otherwise
//! write the pool's status about once per node; paced, a large pool's status costs a few
//! writes a second whatever its size, and the counts an admin reads lag by at most the
//! interval.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bootc_crds::pool::{BootcNodePool, BootcNodePoolStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::cache::lock;
use super::{Context, ReconcileError, api_error};
use crate::shared::FIELD_MANAGER;

/// How often a pool's status may be written for its counts alone.
pub(super) const COUNTS_INTERVAL: Duration = Duration::from_secs(1);

/// When each pool's status was last written.
#[derive(Default)]
pub(super) struct StatusPacing {
    written: Mutex<HashMap<String, Instant>>,
}

impl StatusPacing {
    /// How long the write of `new` over `old` should wait (`None`: write now).
    pub(super) fn wait(
        &self,
        pool: &str,
        old: Option<&BootcNodePoolStatus>,
        new: &BootcNodePoolStatus,
        now: Instant,
    ) -> Option<Duration> {
        let old = old?;
        if !counts_only(old, new) {
            return None;
        }
        let last = *lock(&self.written).get(pool)?;
        let since = now.saturating_duration_since(last);
        (since < COUNTS_INTERVAL).then(|| COUNTS_INTERVAL - since)
    }

    /// Records that `pool`'s status was written at `now`.
    pub(super) fn written(&self, pool: &str, now: Instant) {
        lock(&self.written).insert(pool.to_owned(), now);
    }

    /// Forgets a pool that is gone.
    pub(super) fn forget(&self, pool: &str) {
        lock(&self.written).remove(pool);
    }
}

/// Writes `status` as the pool's unless it is what the pool has, or it moved only in its
/// counts and the last write was less than [`COUNTS_INTERVAL`] ago: then returns how long
/// until it may be written (the reconcile comes back by then).
pub(super) async fn write_status(
    ctx: &Context,
    pool: &BootcNodePool,
    status: &BootcNodePoolStatus,
) -> Result<Option<Duration>, ReconcileError> {
    let name = pool.name_any();
    let old = pool.status.as_ref();
    if old == Some(status) {
        return Ok(None);
    }
    if let Some(wait) = ctx.pacing.wait(&name, old, status, Instant::now()) {
        return Ok(Some(wait));
    }
    let Some(patch) = status_write(old, status) else {
        return Ok(None);
    };
    let api: Api<BootcNodePool> = Api::all(ctx.client.clone());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let written = api
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
        .map_err(api_error(format!("status of pool {name}")))?;
    ctx.wrote_pool(written);
    ctx.pacing.written(&name, Instant::now());
    ctx.notifier.status_written(pool, status);
    Ok(None)
}

/// The body of the merge patch that writes `new` over the pool's `old` status (see
/// [`status_patch`]); `None` when the pool has it already, and nothing is written.
pub fn status_write(old: Option<&BootcNodePoolStatus>, new: &BootcNodePoolStatus) -> Option<Value> {
    (old != Some(new)).then(|| json!({ "status": status_patch(old, new) }))
}

/// The merge patch that makes the stored status `new`: `new` itself, with `null` for
/// every field `old` has and `new` does not, at every depth (a merge patch leaves a field
/// it does not name as it was: a target version, an alert gate message or a canary from
/// before would stay). Lists are replaced whole, as a merge patch does anyway.
pub(super) fn status_patch(old: Option<&BootcNodePoolStatus>, new: &BootcNodePoolStatus) -> Value {
    let new = serde_json::to_value(new).unwrap_or(Value::Null);
    match old.map(serde_json::to_value) {
        Some(Ok(old)) => with_removals(&old, new),
        _ => new,
    }
}

/// `new` with `null` for every field of `old` it does not have, at every depth; what it
/// has is kept in place, not copied.
fn with_removals(old: &Value, mut new: Value) -> Value {
    if let (Value::Object(o), Value::Object(n)) = (old, &mut new) {
        for (key, was) in o {
            match n.get_mut(key) {
                Some(now) => *now = with_removals(was, now.take()),
                None => {
                    n.insert(key.clone(), Value::Null);
                }
            }
        }
    }
    new
}

/// Whether `new` marks a digest failed that `old` does not: such a status is stored
/// before the plan that made it acts (sends nodes back to the good image), so that a
/// plan made after a lost or lagging write still knows the digest failed.
pub(super) fn marks_failure(old: Option<&BootcNodePoolStatus>, new: &BootcNodePoolStatus) -> bool {
    let had = |digest: &str| {
        old.is_some_and(|o| {
            o.deploy_history
                .iter()
                .any(|e| e.failed && e.digest == digest)
        })
    };
    new.deploy_history
        .iter()
        .any(|e| e.failed && !had(&e.digest))
}

/// Whether `new` differs from `old` only in what moves with every node.
pub(super) fn counts_only(old: &BootcNodePoolStatus, new: &BootcNodePoolStatus) -> bool {
    shape(old) == shape(new)
}

/// `status` without what moves with every node.
fn shape(status: &BootcNodePoolStatus) -> BootcNodePoolStatus {
    let mut s = status.clone();
    s.node_count = 0;
    s.updated_count = 0;
    s.updating_count = 0;
    s.staged_count = 0;
    s.staging_count = 0;
    s.staging_percent = None;
    s.degraded_count = 0;
    s.held_count = 0;
    s.cordoned_count = 0;
    for entry in &mut s.deploy_history {
        entry.node_count = 0;
        entry.last_deployed = entry.first_deployed.clone();
    }
    for condition in &mut s.conditions {
        condition.message.clear();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootc_crds::pool::{CanaryPhase, CanaryStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn status() -> BootcNodePoolStatus {
        BootcNodePoolStatus {
            target_digest: Some("sha256:aa".into()),
            node_count: 10,
            updated_count: 3,
            conditions: vec![Condition {
                type_: "UpToDate".into(),
                status: "False".into(),
                reason: "RollingOut".into(),
                message: "3/10 nodes run the target".into(),
                last_transition_time: bootc_crds::conditions::to_time(chrono::DateTime::UNIX_EPOCH)
                    .unwrap(),
                observed_generation: Some(1),
            }],
            ..BootcNodePoolStatus::default()
        }
    }

    #[test]
    fn the_patch_removes_what_the_new_status_no_longer_has() {
        let mut old = status();
        old.target_version = Some("2.0".into());
        old.canary = Some(CanaryStatus {
            digest: "sha256:aa".into(),
            phase: CanaryPhase::Soaking,
            nodes: 1,
            soak_started_time: bootc_crds::conditions::to_time(chrono::DateTime::UNIX_EPOCH),
        });
        let mut new = status();
        new.target_digest = Some("sha256:bb".into());
        new.canary = Some(CanaryStatus {
            digest: "sha256:bb".into(),
            phase: CanaryPhase::Updating,
            nodes: 1,
            soak_started_time: None,
        });
        let patch = status_patch(Some(&old), &new);
        assert_eq!(patch["targetVersion"], Value::Null);
        assert!(patch.as_object().unwrap().contains_key("targetVersion"));
        assert_eq!(
            patch["canary"],
            json!({"digest": "sha256:bb", "phase": "Updating", "nodes": 1, "soakStartedTime": null})
        );
        assert_eq!(patch["targetDigest"], "sha256:bb");
        assert_eq!(
            patch["conditions"],
            serde_json::to_value(&new.conditions).unwrap()
        );
        // Nothing to remove: the status itself.
        assert_eq!(
            status_patch(None, &new),
            serde_json::to_value(&new).unwrap()
        );
        assert_eq!(
            status_patch(Some(&new), &new),
            serde_json::to_value(&new).unwrap()
        );
    }

    #[test]
    fn a_status_the_pool_has_is_not_written() {
        let old = status();
        assert_eq!(status_write(Some(&old), &old), None);
        let mut new = status();
        new.updated_count = 4;
        assert_eq!(
            status_write(Some(&old), &new),
            Some(json!({ "status": serde_json::to_value(&new).unwrap() }))
        );
        assert_eq!(
            status_write(None, &old),
            Some(json!({ "status": serde_json::to_value(&old).unwrap() }))
        );
    }

    #[test]
    fn counts_and_messages_alone_are_paced() {
        let old = status();
        let mut new = status();
        new.updated_count = 4;
        new.updating_count = 2;
        new.conditions[0].message = "4/10 nodes run the target".into();
        assert!(counts_only(&old, &new));
        let pacing = StatusPacing::default();
        let t0 = Instant::now();
        // Never written by this controller: at once.
        assert_eq!(pacing.wait("p", Some(&old), &new, t0), None);
        pacing.written("p", t0);
        let wait = pacing.wait("p", Some(&old), &new, t0 + Duration::from_millis(300));
        assert_eq!(wait, Some(Duration::from_millis(700)));
        assert_eq!(
            pacing.wait("p", Some(&old), &new, t0 + COUNTS_INTERVAL),
            None
        );
        // Another pool is paced on its own.
        assert_eq!(pacing.wait("q", Some(&old), &new, t0), None);
        pacing.forget("p");
        assert_eq!(pacing.wait("p", Some(&old), &new, t0), None);
    }

    #[test]
    fn anything_else_is_written_at_once() {
        let pacing = StatusPacing::default();
        let t0 = Instant::now();
        pacing.written("p", t0);
        let old = status();
        let changes: [fn(&mut BootcNodePoolStatus); 4] = [
            |s| s.conditions[0].status = "True".into(),
            |s| s.conditions[0].reason = "Complete".into(),
            |s| s.target_digest = Some("sha256:bb".into()),
            |s| {
                s.canary = Some(CanaryStatus {
                    digest: "sha256:aa".into(),
                    phase: CanaryPhase::Soaking,
                    nodes: 1,
                    soak_started_time: None,
                });
            },
        ];
        for change in changes {
            let mut new = status();
            change(&mut new);
            assert!(!counts_only(&old, &new), "{new:?}");
            assert_eq!(pacing.wait("p", Some(&old), &new, t0), None);
        }
        // A pool without a status yet is written at once.
        assert_eq!(pacing.wait("p", None, &status(), t0), None);
    }

    fn entry(digest: &str, failed: bool) -> bootc_crds::pool::DeployHistoryEntry {
        let t = bootc_crds::conditions::to_time(chrono::DateTime::UNIX_EPOCH).unwrap();
        bootc_crds::pool::DeployHistoryEntry {
            digest: digest.into(),
            image: format!("r/os@{digest}"),
            version: None,
            node_count: 1,
            first_deployed: t.clone(),
            last_deployed: t,
            origin: bootc_crds::pool::HistoryOrigin::Targeted,
            failed,
            failed_reason: failed.then(|| "n1: unit failed".into()),
            failed_time: None,
            failed_generation: failed.then_some(1),
        }
    }

    #[test]
    fn a_new_failure_mark_is_told_apart_from_one_the_status_has() {
        let with = |entries: Vec<_>| BootcNodePoolStatus {
            deploy_history: entries,
            ..status()
        };
        let unmarked = with(vec![entry("sha256:aa", false), entry("sha256:bb", false)]);
        let marked = with(vec![entry("sha256:aa", false), entry("sha256:bb", true)]);
        // A new mark, on a digest the pool had or one it never had.
        assert!(marks_failure(Some(&unmarked), &marked));
        assert!(marks_failure(None, &marked));
        assert!(marks_failure(
            Some(&with(vec![entry("sha256:aa", false)])),
            &marked
        ));
        // A mark the status has already, a mark cleared, and no mark at all.
        assert!(!marks_failure(Some(&marked), &marked));
        assert!(!marks_failure(Some(&marked), &unmarked));
        assert!(!marks_failure(Some(&unmarked), &unmarked));
        // The same digest marked in the old status does not hide another one's mark.
        let both = with(vec![entry("sha256:aa", true), entry("sha256:bb", true)]);
        assert!(marks_failure(Some(&marked), &both));
    }
}
