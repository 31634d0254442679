//! `kubectl bootc status`: the pools table and their nodes table, from objects only.

use bootc_crds::DRAIN_FAILED_ANNOTATION;
use bootc_crds::budget::Budget;
use bootc_crds::conditions::{self, idle, up_to_date};
use bootc_crds::image_ref::digest_in;
use bootc_crds::node::{BootcNode, ImageStatus};
use bootc_crds::pool::{AlertGateState, BootcNodePool, CanaryPhase};
use bootc_pool_common::node::owner_pool;
use chrono::{DateTime, Utc};
use kube::ResourceExt;
use serde_json::Value;

use crate::objects::{Cluster, Object, condition, holds_slot, transition};
use crate::table::{Table, age, bytes, short_digest};

/// Headers of the pools table.
pub const POOL_HEADERS: [&str; 9] = [
    "name", "target", "version", "nodes", "updated", "updating", "degraded", "slots", "state",
];

/// Headers of the nodes table.
pub const NODE_HEADERS: [&str; 8] = [
    "name", "pool", "state", "booted", "staged", "target", "since", "progress",
];

/// Shown for a value that is not there.
pub const NONE: &str = "-";

/// Reboot slots of a pool: how many of its BootcNodes hold one, and how many
/// `maxUnavailable` allows for its size (`None` when the value cannot be resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// BootcNodes with the reboot-slot annotation.
    pub in_use: usize,
    /// `maxUnavailable` resolved against the pool's node count.
    pub budget: Option<u32>,
}

impl Slots {
    /// The slots of `pool` in `cluster`.
    pub fn of(cluster: &Cluster, pool: &BootcNodePool) -> Self {
        let members = cluster.members(&pool.name_any());
        let in_use = members.iter().filter(|b| holds_slot(&b.typed)).count();
        let size = pool
            .status
            .as_ref()
            .map(|s| u32::try_from(s.node_count).unwrap_or(0))
            .unwrap_or_else(|| u32::try_from(members.len()).unwrap_or(u32::MAX));
        let budget = Budget::parse(&pool.spec.rollout.max_unavailable)
            .ok()
            .map(|b| b.resolve(size));
        Slots { in_use, budget }
    }

    /// `1/2`, or `1/?` when the budget cannot be resolved.
    pub fn cell(&self) -> String {
        match self.budget {
            Some(b) => format!("{}/{b}", self.in_use),
            None => format!("{}/?", self.in_use),
        }
    }
}

/// Where a pool stands: one word, then, comma-separated, what a health-gated rollout
/// adds (`canary:updating`, `canary:soaking`, `gate:firing`, `gate:unreachable`) and the
/// nodes left alone (`held:N`, `cordoned:N`). The word is `Pending` before the controller
/// reported, the `Degraded` reason when it is degraded, `UpToDate`, `Paused`,
/// `OutsideMaintenanceWindow`, `WaitingForPools`, `RollingBack`, `Stalled`, or
/// `RollingOut`; a bare `RollingOut` is left out when a canary or gate says more.
pub fn pool_state(pool: &BootcNodePool) -> String {
    let Some(status) = &pool.status else {
        return "Pending".to_owned();
    };
    let up_to_date =
        condition(&status.conditions, conditions::UP_TO_DATE).is_some_and(|c| c.status == "True");
    let mut tags = Vec::new();
    if !up_to_date {
        tags.extend(canary_tag(pool));
        tags.extend(gate_tag(pool));
    }
    let word = state_word(pool);
    let mut parts = Vec::new();
    if word != "RollingOut" || tags.is_empty() {
        parts.push(word);
    }
    parts.append(&mut tags);
    if status.held_count > 0 {
        parts.push(format!("held:{}", status.held_count));
    }
    if status.cordoned_count > 0 {
        parts.push(format!("cordoned:{}", status.cordoned_count));
    }
    parts.join(",")
}

/// The one word of [`pool_state`].
fn state_word(pool: &BootcNodePool) -> String {
    let Some(status) = &pool.status else {
        return "Pending".to_owned();
    };
    let find = |t| condition(&status.conditions, t);
    if let Some(d) = find(conditions::DEGRADED).filter(|c| c.status == "True") {
        return d.reason.clone();
    }
    let up = find(conditions::UP_TO_DATE);
    if up.is_some_and(|c| c.status == "True") {
        return "UpToDate".to_owned();
    }
    if pool.spec.rollout.paused || up.is_some_and(|c| c.reason == up_to_date::PAUSED) {
        return "Paused".to_owned();
    }
    let worded = [
        up_to_date::OUTSIDE_MAINTENANCE_WINDOW,
        up_to_date::WAITING_FOR_POOLS,
        up_to_date::ROLLING_BACK,
    ];
    if let Some(c) = up.filter(|c| worded.contains(&c.reason.as_str())) {
        return c.reason.clone();
    }
    // Said by the tags when the status carries them; else by the reason.
    if let Some(c) = up.filter(|c| {
        (c.reason == up_to_date::CANARY && canary_tag(pool).is_none())
            || (c.reason == up_to_date::ALERT_GATE_CLOSED && gate_tag(pool).is_none())
    }) {
        return c.reason.clone();
    }
    if find(conditions::PROGRESSING).is_some_and(|c| c.status == "False") {
        return find(conditions::PROGRESSING)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
    }
    match up {
        Some(_) => "RollingOut".to_owned(),
        None => "Pending".to_owned(),
    }
}

/// `canary:updating` or `canary:soaking` while the canary of the current target is not
/// complete.
pub fn canary_tag(pool: &BootcNodePool) -> Option<String> {
    let status = pool.status.as_ref()?;
    let canary = status.canary.as_ref()?;
    let current = status.target_digest.as_deref() == Some(canary.digest.as_str());
    let phase = match canary.phase {
        CanaryPhase::Updating => "updating",
        CanaryPhase::Soaking => "soaking",
        CanaryPhase::Complete => return None,
    };
    current.then(|| format!("canary:{phase}"))
}

/// `gate:firing` or `gate:unreachable` while the pool's alert gate is closed.
pub fn gate_tag(pool: &BootcNodePool) -> Option<String> {
    pool.spec.health.as_ref()?.alerts.as_ref()?;
    let gate = pool.status.as_ref()?.alert_gate.as_ref()?;
    match gate.state {
        AlertGateState::Open => None,
        AlertGateState::Firing => Some("gate:firing".to_owned()),
        AlertGateState::Unreachable => Some("gate:unreachable".to_owned()),
    }
}

/// The pools table.
pub fn pools_table(cluster: &Cluster, pools: &[&Object<BootcNodePool>]) -> Table {
    let mut table = Table::new(&POOL_HEADERS);
    for pool in pools {
        let pool = &pool.typed;
        let status = pool.status.clone().unwrap_or_default();
        let target = status
            .target_short_digest
            .clone()
            .or_else(|| status.target_digest.as_deref().map(short_digest))
            .unwrap_or_else(|| NONE.to_owned());
        table.rows.push(vec![
            pool.name_any(),
            target,
            status.target_version.unwrap_or_else(|| NONE.to_owned()),
            status.node_count.to_string(),
            status.updated_count.to_string(),
            status.updating_count.to_string(),
            status.degraded_count.to_string(),
            Slots::of(cluster, pool).cell(),
            pool_state(pool),
        ]);
    }
    table
}

/// Where a node stands: `Held`, `Degraded`, the agent's `Idle` reason (`Idle`,
/// `Staging`, `Staged`, `Rebooting`), or `Unknown` before the agent reported; and since
/// when (the transition of the condition that says so).
pub fn node_state(cluster: &Cluster, bootc: &BootcNode) -> (String, Option<DateTime<Utc>>) {
    let conds = bootc
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let idle_cond = condition(conds, conditions::IDLE);
    let idle_since = idle_cond.and_then(transition);
    if cluster
        .node(&bootc.name_any())
        .is_some_and(crate::objects::held)
    {
        return ("Held".to_owned(), idle_since);
    }
    if let Some(d) = condition(conds, conditions::DEGRADED).filter(|c| c.status == "True") {
        return ("Degraded".to_owned(), transition(d));
    }
    if bootc.annotations().contains_key(DRAIN_FAILED_ANNOTATION) {
        return ("Degraded".to_owned(), idle_since);
    }
    match idle_cond {
        Some(c)
            if [idle::IDLE, idle::STAGING, idle::STAGED, idle::REBOOTING]
                .contains(&c.reason.as_str()) =>
        {
            (c.reason.clone(), idle_since)
        }
        _ => ("Unknown".to_owned(), idle_since),
    }
}

/// The short digest a deployment runs: the one in the reference bootc tracks when it
/// carries one (so a node on a manifest-list target shows the target's digest), else
/// the per-architecture digest.
pub fn image_short(image: Option<&ImageStatus>) -> String {
    let Some(image) = image else {
        return NONE.to_owned();
    };
    match digest_in(&image.image) {
        Some(d) => d.short().to_owned(),
        None if !image.image_digest.is_empty() => short_digest(&image.image_digest),
        None => NONE.to_owned(),
    }
}

/// A BootcNode's `status.progress` (`{bytesDone, bytesTotal, step, …}`, newer than these
/// types, so read from the raw object) as `step 42% (120Mi/300Mi)`, or, while no byte
/// total is known (0: unspecified, as bootc's composefs backend reports), the bytes so
/// far and the steps (`step 12Mi 2/5`), never a percentage; `-` without one.
pub fn progress(raw: &Value) -> String {
    let Some(p) = raw.pointer("/status/progress").filter(|p| p.is_object()) else {
        return NONE.to_owned();
    };
    let mut parts = Vec::new();
    if let Some(step) = p["step"].as_str().filter(|s| !s.is_empty()) {
        parts.push(step.to_owned());
    }
    let done = p["bytesDone"].as_u64();
    match (done, p["bytesTotal"].as_u64().filter(|t| *t > 0)) {
        (Some(done), Some(total)) => {
            let percent = done.min(total).saturating_mul(100) / total;
            parts.push(format!("{percent}% ({}/{})", bytes(done), bytes(total)));
        }
        (done, _) => {
            if let Some(done) = done.filter(|d| *d > 0) {
                parts.push(bytes(done));
            }
            if let (Some(n), Some(of)) = (
                p["stepsDone"].as_u64(),
                p["stepsTotal"].as_u64().filter(|t| *t > 0),
            ) {
                parts.push(format!("{n}/{of}"));
            }
        }
    }
    if parts.is_empty() {
        NONE.to_owned()
    } else {
        parts.join(" ")
    }
}

/// The nodes table: one row per BootcNode given.
pub fn nodes_table(cluster: &Cluster, nodes: &[&Object<BootcNode>]) -> Table {
    let mut table = Table::new(&NODE_HEADERS);
    for object in nodes {
        let bootc = &object.typed;
        let status = bootc.status.as_ref();
        let (mut state, since) = node_state(cluster, bootc);
        if crate::why::drift(bootc).is_some() {
            state.push_str("+Drifted");
        }
        let target = digest_in(&bootc.spec.desired_image)
            .map_or_else(|| NONE.to_owned(), |d| d.short().to_owned());
        table.rows.push(vec![
            bootc.name_any(),
            owner_pool(bootc).unwrap_or_else(|| NONE.to_owned()),
            state,
            image_short(status.and_then(|s| s.booted.as_ref()).map(|b| &b.image)),
            image_short(status.and_then(|s| s.staged.as_ref()).map(|s| &s.image)),
            target,
            since.map_or_else(|| NONE.to_owned(), |t| age(t, cluster.now)),
            progress(&object.raw),
        ]);
    }
    table
}

/// Pools and BootcNodes to show.
pub type Selection<'a> = (Vec<&'a Object<BootcNodePool>>, Vec<&'a Object<BootcNode>>);

/// The pools to show (`pool` alone when named) and their BootcNodes (every BootcNode,
/// pool or not, when no pool is named).
pub fn select<'a>(cluster: &'a Cluster, pool: Option<&str>) -> crate::error::Result<Selection<'a>> {
    match pool {
        None => Ok((
            cluster.pools.iter().collect(),
            cluster.bootc_nodes.iter().collect(),
        )),
        Some(name) => {
            let pool = cluster.pool(name).ok_or_else(|| {
                crate::error::CliError::msg(format!(
                    "bootcnodepools.node.bootc.dev \"{name}\" not found"
                ))
            })?;
            Ok((vec![pool], cluster.members(name)))
        }
    }
}

/// The whole `status` text: the pools table, a blank line, the nodes table (`No
/// resources found` when there is nothing to show, as kubectl says).
pub fn render(cluster: &Cluster, pool: Option<&str>) -> crate::error::Result<String> {
    let (pools, nodes) = select(cluster, pool)?;
    if pools.is_empty() && nodes.is_empty() {
        return Ok("No resources found\n".to_owned());
    }
    let mut out = pools_table(cluster, &pools).render();
    if !nodes.is_empty() {
        out.push('\n');
        out.push_str(&nodes_table(cluster, &nodes).render());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
