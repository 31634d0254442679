//! Why a pool is not progressing.

use bootc_crds::DRAIN_FAILED_ANNOTATION;
use bootc_crds::conditions::{self, from_time, pool_degraded, progressing};
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use kube::ResourceExt;

use super::Why;
use super::gates::{GateKind, degraded, pool_gates};
use crate::objects::{Cluster, condition, held};
use crate::table::age;

/// The pool's reasons: the controller's silence, a `Degraded` reason, the gates of its
/// staged nodes, and what holds up single nodes (drains, holds); else its progress.
pub fn why_pool(cluster: &Cluster, pool: &BootcNodePool) -> Why {
    let name = pool.name_any();
    let mut why = Why::new(format!("bootcnodepool/{name}"));
    let Some(status) = &pool.status else {
        why.blocked.push(
            "the controller has not written its status yet: is bootc-pool-controller running? (`kubectl get -n bootc-system deploy bootc-pool-controller`)".to_owned(),
        );
        return why;
    };
    if let (Some(seen), Some(generation)) = (status.observed_generation, pool.metadata.generation)
        && seen < generation
    {
        why.progressing.push(format!(
            "the controller has not acted on the latest spec yet (generation {generation}, status from {seen})"
        ));
    }
    let up = condition(&status.conditions, conditions::UP_TO_DATE);
    let all_updated = up.is_some_and(|c| c.status == "True");
    let degraded_reason = condition(&status.conditions, conditions::DEGRADED)
        .filter(|c| c.status == "True")
        .map(|c| c.reason.clone());
    // The halt and an invalid spec are gates too; said once, there.
    let gated = [pool_degraded::ROLLOUT_HALTED, pool_degraded::INVALID_SPEC];
    if let Some(text) = degraded(pool)
        && !degraded_reason
            .as_deref()
            .is_some_and(|r| gated.contains(&r))
    {
        why.blocked.push(text);
    }
    let target = status
        .target_short_digest
        .clone()
        .unwrap_or_else(|| "-".to_owned());
    let version = status
        .target_version
        .as_deref()
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    if all_updated {
        why.up_to_date = format!(
            "up to date: all {} nodes run the target {target}{version}",
            status.node_count
        );
        return why;
    }
    let members = cluster.members(&name);
    let staged_waiting = members.iter().any(|m| waiting_for_slot(&m.typed));
    // A full budget holds up only staged nodes; the other gates hold up the rollout.
    why.blocked.extend(
        pool_gates(cluster, pool)
            .into_iter()
            .filter(|g| g.kind != GateKind::Budget || staged_waiting)
            .map(|g| g.text),
    );
    for member in &members {
        why.blocked.extend(node_holdups(cluster, &member.typed));
    }
    if let Some(c) = condition(&status.conditions, conditions::PROGRESSING)
        .filter(|c| c.status == "False" && c.reason == progressing::STALLED)
    {
        why.blocked
            .push(format!("stalled (Progressing/Stalled): {}", c.message));
    }
    let message = up.map(|c| c.message.clone()).unwrap_or_default();
    why.progressing.push(format!(
        "rolling out {target}{version}: {}",
        if message.is_empty() { "-" } else { &message }
    ));
    why
}

/// A member staged on its target and waiting for a slot (agent `Idle=False/Staged`, no
/// slot annotation).
pub fn waiting_for_slot(bootc: &BootcNode) -> bool {
    let staged = bootc.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, conditions::IDLE)
            .is_some_and(|c| c.reason == conditions::idle::STAGED)
    });
    staged && !crate::objects::holds_slot(bootc)
}

/// What holds up one member by itself: a hold, a blocked or failed drain.
fn node_holdups(cluster: &Cluster, bootc: &BootcNode) -> Vec<String> {
    let name = bootc.name_any();
    let mut out = Vec::new();
    if cluster.node(&name).is_some_and(held) {
        out.push(format!(
            "node {name} is held (label {}=true)",
            bootc_crds::HOLD_LABEL
        ));
    }
    if let Some(blocked) = bootc.status.as_ref().and_then(|s| s.drain_blocked.as_ref()) {
        let since = blocked
            .since
            .as_ref()
            .and_then(from_time)
            .map(|t| format!(" for {}", age(t, cluster.now)))
            .unwrap_or_default();
        out.push(format!(
            "node {name}: drain blocked{since}: {}",
            blocked.message
        ));
    }
    if let Some(digest) = bootc.annotations().get(DRAIN_FAILED_ANNOTATION) {
        out.push(format!(
            "node {name}: its drain for {digest} timed out ({DRAIN_FAILED_ANNOTATION}); remove the annotation to try again: `kubectl annotate bootcnode {name} {DRAIN_FAILED_ANNOTATION}-`"
        ));
    }
    out
}
