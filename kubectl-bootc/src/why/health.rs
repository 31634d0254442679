//! What a health-gated rollout adds to `why`: the alert gate, the canary, the pools named
//! in `rollout.after`, a failed target, a node someone else cordoned, and a node whose
//! health units are not active. Read from the pool's `status.alertGate`,
//! `status.canary` and `deployHistory`, the other pools' conditions, the Node's
//! `spec.unschedulable` and the BootcNode's `status.health`.

use bootc_crds::conditions::{self, from_time, pool_degraded, up_to_date};
use bootc_crds::image_ref::runs_digest;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::{AlertGateState, BootcNodePool, CanaryPhase, DeployHistoryEntry};
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use kube::ResourceExt;

use crate::objects::{Cluster, condition, holds_slot};
use crate::table::{age, human_duration, short_digest};

/// ` (UpToDate/REASON)` when the pool's `UpToDate` condition has that reason, else
/// nothing.
fn reported(pool: &BootcNodePool, reason: &str) -> String {
    let said = pool.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, conditions::UP_TO_DATE).is_some_and(|c| c.reason == reason)
    });
    if said {
        format!(" (UpToDate/{reason})")
    } else {
        String::new()
    }
}

/// The pool's `Degraded` reason when it is `True`.
fn degraded_reason(pool: &BootcNodePool) -> Option<&str> {
    let status = pool.status.as_ref()?;
    condition(&status.conditions, conditions::DEGRADED)
        .filter(|c| c.status == "True")
        .map(|c| c.reason.as_str())
}

/// `; checked 20s ago`, when the gate says when it was asked.
fn checked(
    time: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: DateTime<Utc>,
) -> String {
    time.and_then(from_time)
        .map(|t| format!("; checked {} ago", age(t, now)))
        .unwrap_or_default()
}

/// What the alert gate does to the rollout now: `Err` when it keeps every new reboot
/// back (matching alerts fire; or it cannot be asked and fails closed, unless the
/// pool's `Degraded/AlertGateUnreachable` says that already), `Ok` with a note when it
/// cannot be asked but fails open; `None` when it is open or there is none.
pub fn alert_gate(pool: &BootcNodePool, now: DateTime<Utc>) -> Option<Result<String, String>> {
    let spec = pool.spec.health.as_ref()?.alerts.as_ref()?;
    let gate = pool.status.as_ref()?.alert_gate.as_ref()?;
    let message = gate.message.as_deref().filter(|m| !m.is_empty());
    let when = checked(gate.checked_time.as_ref(), now);
    match gate.state {
        AlertGateState::Open => None,
        AlertGateState::Firing => {
            let matching = if spec.matchers.is_empty() {
                "alerts".to_owned()
            } else {
                format!("alerts matching {}", spec.matchers.join(", "))
            };
            Some(Err(format!(
                "alert gate closed: {matching} fire at {}{}: {}{when}; no new reboot is approved until they stop (nodes already rebooting finish)",
                spec.url,
                reported(pool, up_to_date::ALERT_GATE_CLOSED),
                message.unwrap_or("(no alert named)"),
            )))
        }
        AlertGateState::Unreachable if !spec.fail_closed => Some(Ok(format!(
            "the alert gate at {} cannot be asked ({}){when}; failClosed is false, so the rollout goes on as if no alert fired",
            spec.url,
            message.unwrap_or("no error given"),
        ))),
        AlertGateState::Unreachable
            if degraded_reason(pool) == Some(pool_degraded::ALERT_GATE_UNREACHABLE) =>
        {
            None
        }
        AlertGateState::Unreachable => Some(Err(format!(
            "alert gate unreachable: {} cannot be asked: {}{when}; failClosed is true, so no new reboot is approved",
            spec.url,
            message.unwrap_or("no error given"),
        ))),
    }
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

/// The canary of the current target while it is not complete: `(soaking, text)`.
pub fn canary(pool: &BootcNodePool, now: DateTime<Utc>) -> Option<(bool, String)> {
    let status = pool.status.as_ref()?;
    let canary = status.canary.as_ref()?;
    if status.target_digest.as_deref() != Some(canary.digest.as_str()) {
        return None;
    }
    let soak = pool
        .spec
        .rollout
        .canary
        .as_ref()
        .map_or(0, |c| c.soak_seconds);
    let short = short_digest(&canary.digest);
    let tag = reported(pool, up_to_date::CANARY);
    let n = canary.nodes;
    match canary.phase {
        CanaryPhase::Complete => None,
        CanaryPhase::Updating => Some((
            false,
            format!(
                "canary updating{tag}: {n} node(s) go first to {short}; the rest of the pool waits until they run it and stay healthy for the {soak} s soak"
            ),
        )),
        CanaryPhase::Soaking => {
            let left = match canary.soak_started_time.as_ref().and_then(from_time) {
                Some(start) => {
                    let end = start + TimeDelta::seconds(soak);
                    if end > now {
                        format!(
                            "the rest of the pool goes on at {} (in {}) if they stay healthy and no alert gate closes",
                            end.to_rfc3339_opts(SecondsFormat::Secs, true),
                            human_duration(end - now)
                        )
                    } else {
                        "the soak is over; the controller lets the rest of the pool go on at its next plan".to_owned()
                    }
                }
                None => format!("the soak lasts {soak} s"),
            };
            Some((
                true,
                format!(
                    "canary soaking{tag}: its {n} node(s) run {short} and are watched; {left} (a problem meanwhile starts the soak again)"
                ),
            ))
        }
    }
}

/// The pools named in `rollout.after` that this pool still waits for, each with why; as
/// one text, `None` when it waits for none.
pub fn waiting_for_pools(cluster: &Cluster, pool: &BootcNodePool) -> Option<String> {
    let waiting: Vec<String> = pool
        .spec
        .rollout
        .after
        .iter()
        .filter_map(|name| {
            let Some(other) = cluster.pool(name) else {
                return Some(format!("bootcnodepool/{name} does not exist"));
            };
            let other = &other.typed;
            let status = other.status.as_ref();
            let find = |t: &str| status.and_then(|s| condition(&s.conditions, t));
            let current = status.and_then(|s| s.observed_generation) == other.metadata.generation;
            let halted = find(conditions::DEGRADED)
                .is_some_and(|c| c.status == "True" && c.reason == pool_degraded::ROLLOUT_HALTED);
            let up = current
                && find(conditions::UP_TO_DATE)
                    .is_some_and(|c| c.status == "True" && c.reason == up_to_date::ALL_UPDATED);
            if halted {
                Some(format!(
                    "bootcnodepool/{name} is halted (Degraded/RolloutHalted)"
                ))
            } else if !up {
                Some(format!(
                    "bootcnodepool/{name} is not up to date ({})",
                    crate::status::pool_state(other)
                ))
            } else {
                None
            }
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    Some(format!(
        "waiting for the pools in spec.rollout.after{}: {}; staging goes on meanwhile",
        reported(pool, up_to_date::WAITING_FOR_POOLS),
        waiting.join("; ")
    ))
}

/// The node's pool, when it has one.
fn pool_of<'a>(cluster: &'a Cluster, bootc: &BootcNode) -> Option<&'a BootcNodePool> {
    bootc_pool_common::node::owner_pool(bootc)
        .and_then(|p| cluster.pool(&p))
        .map(|p| &p.typed)
}

/// A member someone else cordoned, left alone because its pool respects cordons: not on
/// its pool's target, its Node unschedulable, and no reboot slot (the controller cordons
/// only the nodes it gave one).
pub fn cordoned_by_others(cluster: &Cluster, bootc: &BootcNode) -> Option<String> {
    let name = bootc.name_any();
    let pool = pool_of(cluster, bootc)?;
    let unschedulable = cluster
        .node(&name)?
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !unschedulable || holds_slot(bootc) || !pool.spec.disruption.respect_cordon {
        return None;
    }
    let target = pool.status.as_ref()?.target_digest.as_deref()?;
    let target: bootc_crds::image_ref::Digest = target.parse().ok()?;
    let booted = bootc.status.as_ref().and_then(|s| s.booted.as_ref());
    if booted.is_some_and(|b| runs_digest(&b.image.image, &b.image.image_digest, &target)) {
        return None;
    }
    Some(format!(
        "cordoned by someone else: the Node is unschedulable and bootcnodepool/{} respects cordons (spec.disruption.respectCordon), so it may stage but gets no reboot slot until it is uncordoned (`kubectl uncordon {name}`)",
        pool.name_any()
    ))
}

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
