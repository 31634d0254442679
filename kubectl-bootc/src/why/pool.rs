//! Why a pool is not progressing.

use bootc_crds::DRAIN_FAILED_ANNOTATION;
use bootc_crds::conditions::{self, progressing, up_to_date};
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use kube::ResourceExt;

use super::Why;
use super::gates::{degraded, describe, is_progress, said_by_degraded, verdicts};
use super::problems;
use crate::objects::{Cluster, condition};

/// The pool's reasons: the controller's silence, a `Degraded` reason, the gates of its
/// staged nodes, and what holds up single nodes (drains, holds, a cordon by someone else,
/// health units); else its progress (a canary among it).
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
    if let Some(text) = degraded(pool) {
        why.blocked.push(text);
    }
    why.blocked.extend(super::reasons::by_reason(cluster, pool));
    why.notes
        .extend(super::reasons::drifted_members(cluster, pool));
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
    gate_findings(cluster, pool, &mut why);
    if let Some(c) = condition(&status.conditions, conditions::PROGRESSING)
        .filter(|c| c.status == "False" && c.reason == progressing::STALLED)
    {
        why.blocked
            .push(format!("stalled (Progressing/Stalled): {}", c.message));
    }
    let message = up.map(|c| c.message.clone()).unwrap_or_default();
    if status.target_short_digest.is_none() {
        // Nothing to roll out yet: say so, with the controller's words for it.
        let said = up.map_or_else(
            || "the controller has not said why".to_owned(),
            |c| format!("UpToDate/{}: {}", c.reason, c.message),
        );
        why.progressing
            .push(format!("no target yet, nothing to roll out ({said})"));
        return why;
    }
    let doing = if up.is_some_and(|c| c.reason == up_to_date::ROLLING_BACK) {
        "rolling back to"
    } else {
        "rolling out"
    };
    why.progressing.push(format!(
        "{doing} {target}{version}: {}",
        if message.is_empty() { "-" } else { &message }
    ));
    why
}

/// The gates the controller found closed (a canary is progress, the rest holds the
/// pool up; a gate the `Degraded` condition names is said there once), the alert gate
/// failing open, and what holds up single members.
fn gate_findings(cluster: &Cluster, pool: &BootcNodePool, why: &mut Why) {
    for v in verdicts(pool, None).filter(|v| !said_by_degraded(pool, v)) {
        if is_progress(v) {
            why.progressing.push(describe(pool, v));
        } else {
            why.blocked.push(describe(pool, v));
        }
    }
    if let Some(note) = problems::alert_gate_fails_open(pool, cluster.now) {
        why.progressing.push(note);
    }
    for member in cluster.members(&pool.name_any()) {
        why.blocked.extend(node_holdups(cluster, &member.typed));
    }
}

/// What holds up one member by itself, as its BootcNode says: a blocked drain, health
/// units not active, a failed drain. (A hold and a cordon are gates.)
fn node_holdups(cluster: &Cluster, bootc: &BootcNode) -> Vec<String> {
    let name = bootc.name_any();
    let mut out = Vec::new();
    let findings = [
        super::node::drain_blocked(cluster, bootc),
        problems::unit_health(cluster, bootc),
    ];
    for finding in findings.into_iter().flatten() {
        out.push(format!("node {name}: {finding}"));
    }
    if let Some(digest) = bootc.annotations().get(DRAIN_FAILED_ANNOTATION) {
        out.push(format!(
            "node {name}: its drain for {digest} timed out ({DRAIN_FAILED_ANNOTATION}); remove the annotation to try again: `kubectl annotate bootcnode {name} {DRAIN_FAILED_ANNOTATION}-`"
        ));
    }
    out
}
