//! Boot health (`spec.health.units`): a slot holder back on the target counts healthy
//! only when its agent reports, from the boot after its reboot, every named unit
//! `active`. A unit that failed (or is not there) makes it unhealthy at once; one not
//! active within `spec.health.timeoutSeconds` of the node's return makes it unhealthy
//! then. An unhealthy holder keeps its slot and counts toward `haltAfterUnhealthy`.

use std::time::Duration;

use bootc_crds::node::NodeHealth;

use super::agent::AgentReport;

/// Unit states that will not turn `active` by waiting. (`inactive` may: a unit whose
/// start job is still queued at boot is inactive until the job runs.)
const FINAL: [&str; 5] = ["failed", "not-found", "bad-setting", "error", "masked"];

/// What the agent's report says of the named units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BootHealth {
    /// Every unit is active (or none is named).
    Healthy,
    /// Not yet: no report from this boot, or units still starting (named in the message).
    Waiting(String),
    /// A unit failed or is missing: which, and its state.
    Failed(String),
}

/// The report is from the boot after the agent's last recorded reboot: another boot ID,
/// or (a soft reboot keeps it) another soft-reboot count.
fn from_this_boot(health: &NodeHealth, agent: &AgentReport<'_>) -> bool {
    let Some(last) = agent.last_reboot() else {
        return true;
    };
    !super::agent::same_boot_id(&health.boot_id, &last.boot_id)
        || health.soft_reboots != last.soft_reboots
}

/// The named units' health as the agent reports it.
pub(super) fn judge(units: &[String], agent: &AgentReport<'_>) -> BootHealth {
    if units.is_empty() {
        return BootHealth::Healthy;
    }
    let Some(health) = agent.status.and_then(|s| s.health.as_ref()) else {
        return BootHealth::Waiting("no unit states reported yet".to_owned());
    };
    let reported: Vec<&str> = health.units.iter().map(|u| u.name.as_str()).collect();
    if reported != units.iter().map(String::as_str).collect::<Vec<_>>() {
        return BootHealth::Waiting("the agent has not reported these units yet".to_owned());
    }
    if !from_this_boot(health, agent) {
        return BootHealth::Waiting("no unit states reported from the new boot yet".to_owned());
    }
    let state = |u: &bootc_crds::node::UnitHealth| match u.sub_state.as_str() {
        "" => u.active_state.clone(),
        sub => format!("{} ({sub})", u.active_state),
    };
    let failed: Vec<String> = health
        .units
        .iter()
        .filter(|u| FINAL.contains(&u.active_state.as_str()))
        .map(|u| format!("{} is {}", u.name, state(u)))
        .collect();
    if !failed.is_empty() {
        return BootHealth::Failed(failed.join(", "));
    }
    let waiting: Vec<String> = health
        .units
        .iter()
        .filter(|u| u.active_state != "active")
        .map(|u| format!("{} is {}", u.name, state(u)))
        .collect();
    if waiting.is_empty() {
        BootHealth::Healthy
    } else {
        BootHealth::Waiting(waiting.join(", "))
    }
}

/// `spec.health.timeoutSeconds` (10 minutes when unset or negative).
pub(super) fn timeout(spec: &bootc_crds::pool::BootcNodePoolSpec) -> Duration {
    spec.health
        .as_ref()
        .and_then(|h| u64::try_from(h.timeout_seconds).ok())
        .map_or(Duration::from_secs(600), Duration::from_secs)
}

/// `spec.health.units`.
pub(super) fn units(spec: &bootc_crds::pool::BootcNodePoolSpec) -> &[String] {
    spec.health.as_ref().map_or(&[], |h| h.units.as_slice())
}
