//! The gates closed on a pool, as its controller judged them in its last plan
//! (`status.gates`, in order of precedence), and the pool's `Degraded` condition. `why`
//! words them and adds the command that helps; it decides nothing itself.

use bootc_crds::conditions::{self, pool_degraded};
use bootc_crds::pool::{BootcNodePool, GatePhase, GateReason, GateVerdict};
use kube::ResourceExt;

use crate::objects::condition;

/// The verdicts of `pool` that hold back `node` (the pool-wide ones and those naming it),
/// or every verdict without a node.
pub fn verdicts<'a>(
    pool: &'a BootcNodePool,
    node: Option<&'a str>,
) -> impl Iterator<Item = &'a GateVerdict> {
    pool.status
        .iter()
        .flat_map(|s| s.gates.iter())
        .filter(move |v| match node {
            None => true,
            Some(n) => v.nodes.is_empty() || v.nodes.iter().any(|m| m == n),
        })
}

/// The verdict is progress rather than a hold-up: the canary going first.
pub fn is_progress(v: &GateVerdict) -> bool {
    matches!(
        v.reason,
        GateReason::CanaryUpdating | GateReason::CanarySoaking
    )
}

/// The verdict's reason is the pool's `Degraded` reason: said there already.
pub fn said_by_degraded(pool: &BootcNodePool, v: &GateVerdict) -> bool {
    let degraded = pool.status.as_ref().and_then(|s| {
        condition(&s.conditions, conditions::DEGRADED).filter(|c| c.status == "True")
    });
    degraded.is_some_and(|c| c.reason == v.reason.as_str())
}

/// One verdict in words: its message, its reason and what it closes, whether the wait is
/// on purpose, how many nodes it holds back, and the command that lifts it.
pub fn describe(pool: &BootcNodePool, v: &GateVerdict) -> String {
    let closes = match v.closes {
        GatePhase::Slots => "no new reboot slot",
        GatePhase::Approvals => "no reboot approved",
        GatePhase::SlotsAndApprovals => "no new reboot slot or approval",
    };
    let reason = v.reason.as_str();
    let on_purpose = if v.deliberate { ", on purpose" } else { "" };
    let count = match v.node_count {
        Some(n) if usize::try_from(n).is_ok_and(|n| n > v.nodes.len()) => {
            format!(", {n} nodes")
        }
        _ => String::new(),
    };
    let mut out = format!("{} (gate {reason}: {closes}{on_purpose}{count})", v.message);
    if let Some(hint) = hint(pool, v) {
        out.push_str("; ");
        out.push_str(&hint);
    }
    out
}

/// The command that lifts a gate an admin controls.
fn hint(pool: &BootcNodePool, v: &GateVerdict) -> Option<String> {
    let first = v.nodes.first().map_or("NODE", String::as_str);
    Some(match v.reason {
        GateReason::Paused => format!("resume with `kubectl bootc resume {}`", pool.name_any()),
        GateReason::Held => format!("release with `kubectl bootc release {first}`"),
        GateReason::CordonedByOthers => format!("`kubectl uncordon {first}`"),
        _ => return None,
    })
}

/// The pool's `Degraded` condition when it is `True`, worded by its reason.
pub fn degraded(pool: &BootcNodePool) -> Option<String> {
    let status = pool.status.as_ref()?;
    let c = condition(&status.conditions, conditions::DEGRADED).filter(|c| c.status == "True")?;
    if let Some(what) = super::problems::degraded_text(pool, &c.reason) {
        return Some(format!("{what} (Degraded/{}): {}", c.reason, c.message));
    }
    let what = match c.reason.as_str() {
        pool_degraded::ROLLOUT_HALTED => {
            "rollout halted: too many nodes holding reboot slots are unhealthy, so no new reboot is approved"
        }
        pool_degraded::TAG_RESOLUTION_ERROR => {
            "the tag cannot be resolved; the last good target keeps rolling out"
        }
        pool_degraded::INVALID_SPEC => "invalid spec: nothing is rolled out until it is fixed",
        pool_degraded::NODE_CONFLICT => "nodes selected by more than one pool are left alone",
        pool_degraded::NODE_DEGRADED => "nodes report Degraded",
        _ => "degraded",
    };
    Some(format!("{what} (Degraded/{}): {}", c.reason, c.message))
}
