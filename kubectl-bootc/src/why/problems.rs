//! What a health-gated rollout adds to `why` beyond the gates' verdicts: an alert gate
//! failing open, the `Degraded` text of the health-gated reasons (a cycle, an alert gate
//! nobody can ask, a failed target) and a node whose health units are not active. Read
//! from the pool's `status.alertGate` and `deployHistory` and the BootcNode's
//! `status.health`.

use bootc_crds::conditions::{from_time, pool_degraded};
use bootc_crds::node::BootcNode;
use bootc_crds::pool::{AlertGateState, BootcNodePool, DeployHistoryEntry};
use chrono::{DateTime, Utc};

use crate::objects::Cluster;
use crate::table::{age, short_digest};

/// ` (UpToDate/REASON)` when the pool's `UpToDate` condition has that reason, else
/// `; checked 20s ago`, when the gate says when it was asked.
fn checked(
    time: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: DateTime<Utc>,
) -> String {
    time.and_then(from_time)
        .map(|t| format!("; checked {} ago", age(t, now)))
        .unwrap_or_default()
}

/// The alert gate cannot be asked but fails open (`failClosed: false`): the rollout goes
/// on, which is worth a note. (A closed gate is a verdict in `status.gates`.)
pub fn alert_gate_fails_open(pool: &BootcNodePool, now: DateTime<Utc>) -> Option<String> {
    let spec = pool.spec.health.as_ref()?.alerts.as_ref()?;
    let gate = pool.status.as_ref()?.alert_gate.as_ref()?;
    if gate.state != AlertGateState::Unreachable || spec.fail_closed {
        return None;
    }
    let message = gate.message.as_deref().filter(|m| !m.is_empty());
    let when = checked(gate.checked_time.as_ref(), now);
    Some(format!(
        "the alert gate at {} cannot be asked ({}){when}; failClosed is false, so the rollout goes on as if no alert fired",
        spec.url,
        message.unwrap_or("no error given"),
    ))
}

/// The pool's `Degraded` text for the health-gated reasons, before its `(Degraded/…):
/// message` tail.
pub fn degraded_text(pool: &BootcNodePool, reason: &str) -> Option<String> {
    match reason {
        pool_degraded::ORDERING_CYCLE => Some(
            "ordering cycle: spec.rollout.after waits, through other pools, on this pool itself, so nothing is approved; take a name out of one pool's spec.rollout.after"
                .to_owned(),
        ),
        pool_degraded::ALERT_GATE_UNREACHABLE => {
            let url = pool
                .spec
                .health
                .as_ref()
                .and_then(|h| h.alerts.as_ref())
                .map_or("the alert gate's URL", |a| a.url.as_str());
            let error = pool
                .status
                .as_ref()
                .and_then(|s| s.alert_gate.as_ref())
                .and_then(|g| g.message.as_deref())
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            Some(format!(
                "alert gate unreachable: {url} cannot be asked{error} and failClosed is true, so no new reboot is approved"
            ))
        }
        pool_degraded::TARGET_FAILED => Some(target_failed(pool)),
        _ => None,
    }
}

/// The digests marked failed whose mark still holds (the spec has not changed since).
pub fn failed_entries(pool: &BootcNodePool) -> Vec<&DeployHistoryEntry> {
    let generation = pool.metadata.generation;
    pool.status
        .as_ref()
        .map(|s| {
            s.deploy_history
                .iter()
                .filter(|e| e.failed)
                .filter(|e| match (e.failed_generation, generation) {
                    (Some(failed), Some(now)) => now <= failed,
                    _ => true,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A failed target: which digest, why, and how to clear the mark.
fn target_failed(pool: &BootcNodePool) -> String {
    let failed = failed_entries(pool);
    let what = match failed.first() {
        Some(e) => format!(
            "{} is marked failed in deployHistory ({})",
            short_digest(&e.digest),
            e.failed_reason.as_deref().unwrap_or("no reason recorded")
        ),
        None => "the target is marked failed".to_owned(),
    };
    format!(
        "target failed: {what}; the nodes that booted it roll back to the image before (onFailure: Rollback) and it is not targeted again until the spec changes: point spec.image.ref at a fixed image, or change any spec field to try it again"
    )
}

/// The pools named in `rollout.after` that this pool still waits for, each with why; as
/// The node's pool, when it has one.
fn pool_of<'a>(cluster: &'a Cluster, bootc: &BootcNode) -> Option<&'a BootcNodePool> {
    bootc_pool_common::node::owner_pool(bootc)
        .and_then(|p| cluster.pool(&p))
        .map(|p| &p.typed)
}

/// A member someone else cordoned, left alone because its pool respects cordons: not on
/// its pool's target, its Node unschedulable, and no reboot slot (the controller cordons
/// Health units not active in the node's running boot, as its agent reported them.
pub fn unit_health(cluster: &Cluster, bootc: &BootcNode) -> Option<String> {
    let health = bootc.status.as_ref()?.health.as_ref()?;
    if health.healthy {
        return None;
    }
    let bad: Vec<String> = health
        .units
        .iter()
        .filter(|u| u.active_state != "active")
        .map(|u| match u.sub_state.as_str() {
            "" => format!("{} {}", u.name, u.active_state),
            sub => format!("{} {} ({sub})", u.name, u.active_state),
        })
        .collect();
    let units = if bad.is_empty() {
        "its agent reports it unhealthy".to_owned()
    } else {
        bad.join(", ")
    };
    let timeout = pool_of(cluster, bootc)
        .and_then(|p| p.spec.health.as_ref())
        .map(|h| format!(" within {} s", h.timeout_seconds))
        .unwrap_or_default();
    Some(format!(
        "unhealthy: health units not active in its running boot: {units}; each must be active{timeout} of its return on the target, or the node counts toward haltAfterUnhealthy (`journalctl -u UNIT` on the node says why)"
    ))
}

#[cfg(test)]
mod tests;
