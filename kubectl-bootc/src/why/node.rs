//! Why a node is not progressing.

use bootc_crds::DRAIN_FAILED_ANNOTATION;
use bootc_crds::conditions::{self, from_time, idle, pool_degraded};
use bootc_crds::image_ref::{digest_in, runs_digest};
use bootc_crds::node::{BootcNode, DesiredImageState};
use bootc_pool_common::node::{owner_pool, ready_condition};
use kube::ResourceExt;

use super::Why;
use super::gates::{degraded, describe, is_progress, verdicts};
use crate::objects::{Cluster, condition, held, holds_slot};
use crate::status::progress;
use crate::table::{age, short_digest};

/// The node's reasons: membership, a hold, the Node's readiness, the agent's
/// `Degraded`, its health units, a cordon by someone else, its drain, and, for a staged
/// node without a slot, its pool's gates.
pub fn why_node(cluster: &Cluster, name: &str) -> Why {
    let mut why = Why::new(format!("node/{name}"));
    let node = cluster.node(name);
    let Some(bootc) = cluster.bootc_node(name) else {
        not_a_member(cluster, name, &mut why);
        return why;
    };
    let bootc = &bootc.typed;
    match node {
        None => why.blocked.push(
            "its Node is gone; the BootcNode is left for its pool's controller to delete"
                .to_owned(),
        ),
        Some(n) if held(n) => why.blocked.push(format!(
            "held: the Node has the label {}=true, so it is not staged or rebooted; release it with `kubectl bootc release {name}`",
            bootc_crds::HOLD_LABEL
        )),
        Some(_) => {}
    }
    if let Some(n) = node
        && let Some(ready) = ready_condition(n).filter(|c| c.status != "True")
    {
        let detail = [ready.reason.as_deref(), ready.message.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        why.blocked.push(format!(
            "the Node is not Ready (Ready={}{})",
            ready.status,
            if detail.is_empty() {
                String::new()
            } else {
                format!(", {detail}")
            }
        ));
    }
    agent_findings(cluster, bootc, &mut why);
    if let Some(drift) = super::reasons::drift(bootc) {
        why.notes.push(format!(
            "the booted system is not the image it claims ({drift}); it does not stop the rollout"
        ));
    }
    why.blocked
        .extend(super::problems::unit_health(cluster, bootc));
    drain_findings(cluster, bootc, &mut why);
    progress_findings(cluster, &object_raw(cluster, name), bootc, &mut why);
    why
}

fn object_raw(cluster: &Cluster, name: &str) -> serde_json::Value {
    cluster
        .bootc_node(name)
        .map(|b| b.raw.clone())
        .unwrap_or_default()
}

/// A node with no BootcNode: in no pool, in several, or not yet taken in.
fn not_a_member(cluster: &Cluster, name: &str, why: &mut Why) {
    let pools = cluster.pools_of_node(name);
    match pools.as_slice() {
        [] => why.blocked.push(
            "no BootcNodePool selects it, so nothing updates it (it has no BootcNode)".to_owned(),
        ),
        [pool] => why.progressing.push(format!(
            "bootcnodepool/{pool} selects it but has no BootcNode for it yet; the controller creates one (maxStaging may hold it back; a large pool is written one wave at a time)"
        )),
        many => why.blocked.push(format!(
            "selected by pools {}: a node belongs to at most one pool, so none of them updates it (Degraded/{})",
            many.join(" and "),
            pool_degraded::NODE_CONFLICT
        )),
    }
    if cluster.node(name).is_some_and(held) {
        why.blocked.push(format!(
            "held: the Node has the label {}=true",
            bootc_crds::HOLD_LABEL
        ));
    }
}

/// The agent's report: silence, an old answer, `Degraded`.
fn agent_findings(cluster: &Cluster, bootc: &BootcNode, why: &mut Why) {
    let Some(status) = &bootc.status else {
        why.blocked.push(
            "its agent has not reported: is bootc-node-agent running on the node?".to_owned(),
        );
        return;
    };
    if let (Some(seen), Some(generation)) = (status.observed_generation, bootc.metadata.generation)
        && seen < generation
    {
        why.progressing.push(format!(
            "its agent has not answered the latest spec yet (generation {generation}, status from {seen})"
        ));
    }
    if let Some(d) =
        condition(&status.conditions, conditions::DEGRADED).filter(|c| c.status == "True")
    {
        let since = from_time(&d.last_transition_time)
            .map(|t| format!(" for {}", age(t, cluster.now)))
            .unwrap_or_default();
        let hint = super::reasons::hint(&d.reason)
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        why.blocked.push(format!(
            "its agent reports Degraded/{}{since}{hint}: {}",
            d.reason, d.message
        ));
    }
}

/// `drain blocked for 2m: …`, when the node's drain is held up.
pub(super) fn drain_blocked(cluster: &Cluster, bootc: &BootcNode) -> Option<String> {
    let blocked = bootc.status.as_ref()?.drain_blocked.as_ref()?;
    let since = blocked
        .since
        .as_ref()
        .and_then(from_time)
        .map(|t| format!(" for {}", age(t, cluster.now)))
        .unwrap_or_default();
    Some(format!("drain blocked{since}: {}", blocked.message))
}

/// A drain held up, or one that timed out.
fn drain_findings(cluster: &Cluster, bootc: &BootcNode, why: &mut Why) {
    let name = bootc.name_any();
    why.blocked.extend(drain_blocked(cluster, bootc));
    if let Some(digest) = bootc.annotations().get(DRAIN_FAILED_ANNOTATION) {
        why.blocked.push(format!(
            "its drain for {digest} timed out (annotation {DRAIN_FAILED_ANNOTATION}); it gets no reboot slot for that digest until the annotation is removed: `kubectl annotate bootcnode {name} {DRAIN_FAILED_ANNOTATION}-`"
        ));
    }
}

/// Where the node is on its way to the target: up to date, staging, waiting for a slot
/// (with the pool's gates), holding one, rebooting.
fn progress_findings(cluster: &Cluster, raw: &serde_json::Value, bootc: &BootcNode, why: &mut Why) {
    let desired = digest_in(&bootc.spec.desired_image);
    let short = desired
        .as_ref()
        .map_or_else(|| "-".to_owned(), |d| d.short().to_owned());
    let status = bootc.status.as_ref();
    let pool = owner_pool(bootc).and_then(|p| cluster.pool(&p));
    let booted = status.and_then(|s| s.booted.as_ref()).map(|b| &b.image);
    let on_desired = desired
        .as_ref()
        .is_some_and(|d| booted.is_some_and(|b| runs_digest(&b.image, &b.image_digest, d)));
    let pool_target = pool.and_then(|p| p.typed.status.as_ref()?.target_digest.clone());
    if let Some(pool) = pool
        && pool_target.is_some()
        && pool_target.as_deref() != desired.as_ref().map(ToString::to_string).as_deref()
    {
        if let Some(text) = degraded(&pool.typed) {
            why.blocked
                .push(format!("bootcnodepool/{}: {text}", pool.typed.name_any()));
        }
        why.progressing.push(format!(
            "its BootcNode asks for {short}; the pool's target is {}: the controller moves it there when a staging place is free (a large pool is written one wave at a time)",
            short_digest(pool_target.as_deref().unwrap_or_default())
        ));
        return;
    }
    if on_desired {
        why.up_to_date = format!("up to date: runs its pool's target {short}");
        return;
    }
    let reason = status
        .and_then(|s| condition(&s.conditions, conditions::IDLE))
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    let slot = holds_slot(bootc);
    match reason.as_str() {
        idle::STAGING => why.progressing.push(format!(
            "staging {short}: {}",
            match progress(raw).as_str() {
                "-" => "pulling".to_owned(),
                p => p.to_owned(),
            }
        )),
        idle::REBOOTING => why.progressing.push(format!("rebooting into {short}")),
        idle::STAGED if !slot => {
            staged_findings(pool.map(|p| &p.typed), &bootc.name_any(), &short, why)
        }
        _ if slot && bootc.spec.desired_image_state == DesiredImageState::Staged => {
            why.progressing.push(format!(
                "holds a reboot slot: being cordoned and drained before its reboot into {short}"
            ))
        }
        _ if slot => why
            .progressing
            .push(format!("approved to reboot into {short}")),
        _ => why.progressing.push(format!(
            "not yet on {short}; its agent reports {}",
            if reason.is_empty() {
                "nothing yet"
            } else {
                &reason
            }
        )),
    }
}

/// A staged node without a slot: the gates its pool's controller found closed for it (a
/// canary is progress, the rest holds it up; a hold is said above already), or a free
/// slot the controller grants on its next plan.
fn staged_findings(
    pool: Option<&bootc_crds::pool::BootcNodePool>,
    node: &str,
    short: &str,
    why: &mut Why,
) {
    let gates: Vec<_> = pool
        .into_iter()
        .flat_map(|p| verdicts(p, Some(node)).map(move |v| (p, v)))
        .filter(|(_, v)| v.reason != bootc_crds::pool::GateReason::Held)
        .collect();
    if gates.is_empty() {
        why.progressing.push(format!(
            "staged {short}, waiting for a reboot slot: one is free, the controller grants it on its next plan"
        ));
    }
    for (pool, v) in gates {
        let text = format!(
            "staged {short}, waiting for a reboot slot: {}",
            describe(pool, v)
        );
        if is_progress(v) {
            why.progressing.push(text);
        } else {
            why.blocked.push(text);
        }
    }
}
