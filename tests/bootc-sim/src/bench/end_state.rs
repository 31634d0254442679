//! What the store and the hosts show once the rollout is over.

use std::collections::{BTreeMap, BTreeSet};

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use host_sim::cluster::SimCluster;
use serde_json::Value;

use super::setup::PoolPlan;

/// What the end state shows, read from the store and the hosts.
#[derive(Debug, Default)]
pub(super) struct EndState {
    pub(super) on_target: usize,
    /// Per node: full and soft reboots its host was asked for.
    pub(super) host_reboots: BTreeMap<String, u64>,
    /// Per node: the most boots its host made into any one digest (at most one reboot
    /// per node and target means at most 1).
    pub(super) boots_per_target: BTreeMap<String, u64>,
    pub(super) slots_held: Vec<String>,
    /// The first pool's status.
    pub(super) pool_status: Value,
    pub(super) history_limit: usize,
    pub(super) history_problems: Vec<String>,
}

pub(super) fn end_state(
    handle: &kube_emulator::Handle,
    cluster: &SimCluster,
    target_digest: &str,
    pools: &[PoolPlan],
) -> EndState {
    let mut end = EndState::default();
    for name in cluster.nodes() {
        if let Some(host) = cluster.host(&name) {
            let state = host.state();
            if state
                .booted
                .as_ref()
                .is_some_and(|b| b.info.digest == target_digest)
            {
                end.on_target += 1;
            }
            let c = host.counters();
            let most = c.boots_into.values().copied().max().unwrap_or(0);
            end.boots_per_target.insert(name.clone(), most);
            end.host_reboots.insert(name, c.reboots + c.soft_reboots);
        }
    }
    for b in handle.list("node.bootc.dev", "bootcnodes") {
        let slot = b
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION));
        if slot {
            end.slots_held.push(
                b.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
            );
        }
    }
    for (i, plan) in pools.iter().enumerate() {
        let pool = handle
            .get("node.bootc.dev", "bootcnodepools", "", &plan.name)
            .unwrap_or(Value::Null);
        let status = pool.get("status").cloned().unwrap_or(Value::Null);
        let limit = pool
            .pointer("/spec/history/limit")
            .and_then(Value::as_u64)
            .unwrap_or(5) as usize;
        let history = status
            .get("deployHistory")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let problems = history_problems(&history, limit, target_digest);
        end.history_problems
            .extend(problems.into_iter().map(|p| match pools.len() {
                1 => p,
                _ => format!("pool {}: {p}", plan.name),
            }));
        if i == 0 {
            end.pool_status = status;
            end.history_limit = limit;
        }
    }
    end
}

/// What is wrong with the pool's deployHistory at the end of a rollout to
/// `target_digest`: over the limit, a repeated digest, not newest `lastDeployed` first,
/// or the target's entry missing or not the newest.
pub(super) fn history_problems(
    history: &[Value],
    limit: usize,
    target_digest: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    if history.len() > limit {
        problems.push(format!(
            "deployHistory has {} entries, limit {}",
            history.len(),
            limit
        ));
    }
    let digests: BTreeSet<&str> = history
        .iter()
        .filter_map(|e| e.get("digest").and_then(Value::as_str))
        .collect();
    if digests.len() != history.len() {
        problems.push("deployHistory repeats a digest".to_owned());
    }
    let last: Vec<&str> = history
        .iter()
        .filter_map(|e| e.get("lastDeployed").and_then(Value::as_str))
        .collect();
    if last.windows(2).any(|w| w[0] < w[1]) {
        problems.push("deployHistory is not newest lastDeployed first".to_owned());
    }
    // The target's entry is the newest; another entry may share its lastDeployed (the
    // times are whole seconds: a node's first report of the old image can fall in the
    // second of the last boot of the new one), and ties are ordered by digest.
    let target_last = history
        .iter()
        .find(|e| e.get("digest").and_then(Value::as_str) == Some(target_digest))
        .and_then(|e| e.get("lastDeployed").and_then(Value::as_str));
    match (target_last, last.first()) {
        (Some(target), Some(newest)) if target == *newest => {}
        (Some(_), _) => problems.push("deployHistory's newest entry is not the target".to_owned()),
        (None, _) => problems.push("deployHistory has no entry for the target".to_owned()),
    }
    problems
}
