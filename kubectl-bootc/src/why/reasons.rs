//! Degraded nodes by reason: what each node reason means for an admin, and the pool's
//! `status.degradedByReason` with the members that report each.

use bootc_crds::conditions::{self, node_degraded};
use bootc_crds::pool::BootcNodePool;
use kube::ResourceExt;

use crate::objects::{Cluster, condition};

/// What a node's `Degraded` reason asks of an admin, for the reasons that name a cause.
pub fn hint(reason: &str) -> Option<&'static str> {
    Some(match reason {
        node_degraded::INSUFFICIENT_SPACE => {
            "out of disk: free space on the node's /sysroot; the agent tries again"
        }
        node_degraded::IMAGE_NOT_FOUND => {
            "the registry has no such image: check the pool's spec.image and that it was pushed"
        }
        node_degraded::REGISTRY_UNREACHABLE => {
            "the node cannot reach the registry: check its network, DNS and the registry"
        }
        node_degraded::REGISTRY_AUTH_FAILED => {
            "the registry refused the node's credentials: check the pool's pull Secret"
        }
        node_degraded::SIGNATURE_POLICY_REJECTED => {
            "the node's signature policy refused the image: check /etc/containers/policy.json"
        }
        _ => return None,
    })
}

/// `degraded nodes by reason: InsufficientSpace 2 (w1, w3), DrainTimeout 1`: the pool's
/// `status.degradedByReason`, each with the members whose agent reports that reason.
pub fn by_reason(cluster: &Cluster, pool: &BootcNodePool) -> Option<String> {
    let list = &pool.status.as_ref()?.degraded_by_reason;
    if list.is_empty() {
        return None;
    }
    let members = cluster.members(&pool.name_any());
    let parts: Vec<String> = list
        .iter()
        .map(|r| {
            let names: Vec<String> = members
                .iter()
                .filter(|m| reports(&m.typed, &r.reason))
                .map(|m| m.typed.name_any())
                .collect();
            if names.is_empty() {
                format!("{} {}", r.reason, r.count)
            } else {
                format!("{} {} ({})", r.reason, r.count, names.join(", "))
            }
        })
        .collect();
    Some(format!("degraded nodes by reason: {}", parts.join(", ")))
}

/// `Drifted/REASON: message` when `bootc`'s agent reports `Drifted=True`.
pub fn drift(bootc: &bootc_crds::node::BootcNode) -> Option<String> {
    let status = bootc.status.as_ref()?;
    let c = condition(&status.conditions, conditions::DRIFTED).filter(|c| c.status == "True")?;
    Some(format!("Drifted/{}: {}", c.reason, c.message))
}

/// `N nodes drifted: w1 (Drifted/UsrOverlay: …)`: the members whose agent reports
/// `Drifted=True`.
pub fn drifted_members(cluster: &Cluster, pool: &BootcNodePool) -> Option<String> {
    let members = cluster.members(&pool.name_any());
    let drifted: Vec<String> = members
        .iter()
        .filter_map(|m| Some(format!("{} ({})", m.typed.name_any(), drift(&m.typed)?)))
        .collect();
    (!drifted.is_empty()).then(|| {
        format!(
            "{} drifted from their image (status.driftedCount): {}",
            drifted.len(),
            drifted.join("; ")
        )
    })
}

/// Whether `bootc`'s agent reports `Degraded=True` with `reason`.
fn reports(bootc: &bootc_crds::node::BootcNode, reason: &str) -> bool {
    bootc.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, conditions::DEGRADED)
            .is_some_and(|c| c.status == "True" && c.reason == reason)
    })
}
