//! The BootcNode status the agent reports, composed from the host's bootc status and the
//! decision, so that an unchanged situation gives an identical status (and no write).

use bootc_crds::bounds::{PROGRESS_STEP_MAX_LEN, VERSION_MAX_LEN, truncate};
use bootc_crds::conditions::{DEGRADED, DRIFTED, IDLE, drifted, node_degraded};
use bootc_crds::node::{
    BootcNodeStatus, HOST_STATE_MAX_LEN, HostState, LastReboot, NodeHealth, StagingProgress,
    UnitHealth,
};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Map, Value};

use crate::bootc_status::BootcHost;
use crate::host::{BootIdentity, StageProgress};
use crate::machine::{Phase, RebootRecord};

/// Everything a status is made of.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// The status currently on the object (or last written).
    pub previous: Option<&'a BootcNodeStatus>,
    /// The BootcNode's `metadata.generation`.
    pub generation: Option<i64>,
    /// The host's bootc status; `None` when it could not be read (the previous images are
    /// kept).
    pub host: Option<&'a BootcHost>,
    /// `spec.desiredImage`.
    pub desired: &'a str,
    /// The state to report.
    pub phase: Phase,
    /// `Degraded=True` with this reason and message, or healthy.
    pub degraded: Option<(&'a str, String)>,
    /// The last reboot the agent started.
    pub last_reboot: Option<&'a RebootRecord>,
    /// The agent's version.
    pub agent_version: &'a str,
    /// What `bootc --version` said, when the agent could ask (else the previous value
    /// is kept).
    pub bootc_version: Option<&'a str>,
    /// The staging's progress as last shown, and when it was taken; reported only while
    /// staging the desired digest.
    pub progress: Option<(&'a StageProgress, DateTime<Utc>)>,
    /// `spec.healthUnits`: no `status.health` when empty.
    pub health_units: &'a [String],
    /// Their states as last read in this boot; `None` when not read (the previous
    /// `status.health` is kept while it is about the same units).
    pub health: Option<&'a NodeHealth>,
    /// Whether the host's update timer is masked; `None` before the agent tried.
    pub timer_masked: Option<bool>,
    /// The time of this report.
    pub now: DateTime<Utc>,
}

/// `status.host` from bootc's document (the previous one when it could not be read) and
/// the update timer's mask.
fn host_state(inputs: &Inputs<'_>) -> Option<HostState> {
    let mut state = match inputs.host {
        Some(host) => {
            let booted = host.status.booted.as_ref();
            let backend = booted.and_then(|b| {
                if b.composefs.is_some() {
                    Some("composefs")
                } else if b.ostree.is_some() {
                    Some("ostree")
                } else {
                    None
                }
            });
            HostState {
                backend: backend.map(str::to_owned),
                usr_overlay: host.status.usr_overlay.as_ref().map(|o| {
                    truncate(
                        format!("{}/{}", o.access_mode, o.persistence),
                        HOST_STATE_MAX_LEN,
                    )
                }),
                incompatible: booted.is_some_and(|b| b.incompatible),
                update_timer_masked: None,
            }
        }
        None => inputs.previous.and_then(|p| p.host.clone())?,
    };
    state.update_timer_masked = inputs.timer_masked.or(state.update_timer_masked);
    Some(state)
}

/// The `Drifted` condition's status, reason and message for `state`.
fn drift(state: &HostState) -> (bool, &'static str, String) {
    if let Some(overlay) = &state.usr_overlay {
        return (
            true,
            drifted::USR_OVERLAY,
            format!(
                "/usr carries a writable overlay ({overlay}, `bootc usr-overlay`): what runs may differ from the image"
            ),
        );
    }
    if state.incompatible {
        return (
            true,
            drifted::LOCAL_CHANGES,
            "bootc marks the booted deployment incompatible: it carries local changes (package layering) that are not in the image".to_owned(),
        );
    }
    (false, drifted::IN_SYNC, String::new())
}

/// Longest `activeState` and `subState` reported (systemd's are far shorter).
const UNIT_STATE_MAX_LEN: usize = 32;

/// What a unit whose state could not be read reports as its `activeState`.
pub const UNKNOWN: &str = "unknown";

/// `status.health` for `units` as read in the boot `identity`: healthy when every unit
/// is `active`.
pub fn node_health(identity: &BootIdentity, units: Vec<UnitHealth>) -> NodeHealth {
    let units: Vec<UnitHealth> = units
        .into_iter()
        .map(|u| UnitHealth {
            name: u.name,
            active_state: truncate(u.active_state, UNIT_STATE_MAX_LEN),
            sub_state: truncate(u.sub_state, UNIT_STATE_MAX_LEN),
        })
        .collect();
    NodeHealth {
        boot_id: identity.boot_id.clone(),
        soft_reboots: i64::try_from(identity.soft_reboots).unwrap_or(i64::MAX),
        healthy: units.iter().all(|u| u.active_state == "active"),
        units,
    }
}

/// Every unit of `names` as [`UNKNOWN`]: what is reported when the host could not say.
pub fn unknown_units(names: &[String]) -> Vec<UnitHealth> {
    names
        .iter()
        .map(|name| UnitHealth {
            name: name.clone(),
            active_state: UNKNOWN.to_owned(),
            sub_state: String::new(),
        })
        .collect()
}

/// Whether `health` is about exactly `names`, in that order.
fn same_units(health: &NodeHealth, names: &[String]) -> bool {
    health.units.len() == names.len() && health.units.iter().zip(names).all(|(u, n)| u.name == *n)
}

/// `status.health`: none without units; else what was read, or the previous report while
/// it is about the same units.
fn health_status(inputs: &Inputs<'_>) -> Option<NodeHealth> {
    if inputs.health_units.is_empty() {
        return None;
    }
    let about_units = |h: &&NodeHealth| same_units(h, inputs.health_units);
    inputs
        .health
        .filter(about_units)
        .or_else(|| {
            inputs
                .previous
                .and_then(|p| p.health.as_ref())
                .filter(about_units)
        })
        .cloned()
}

/// `status.progress` for `progress`, taken at `at`; `None` unless it is for the digest
/// `desired` pins.
pub fn progress_status(
    progress: &StageProgress,
    at: DateTime<Utc>,
    desired: &str,
) -> Option<StagingProgress> {
    let pinned = desired.rsplit_once('@').map(|(_, d)| d)?;
    if progress.digest != pinned {
        return None;
    }
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Some(StagingProgress {
        image_digest: progress.digest.clone(),
        bytes_done: as_i64(if progress.bytes_total > 0 {
            progress.bytes_done.min(progress.bytes_total)
        } else {
            progress.bytes_done
        }),
        bytes_total: as_i64(progress.bytes_total),
        step: truncate(
            match (progress.task.is_empty(), progress.description.is_empty()) {
                (true, _) => "starting".to_owned(),
                (false, true) => progress.task.clone(),
                (false, false) => format!("{}: {}", progress.task, progress.description),
            },
            PROGRESS_STEP_MAX_LEN,
        ),
        steps_done: as_i64(progress.steps_done),
        steps_total: as_i64(progress.steps_total),
        summary: truncate(progress.summary(), PROGRESS_STEP_MAX_LEN),
        updated: to_time(at),
    })
}

pub use bootc_crds::conditions::{from_time, to_time};

/// `status.lastReboot` as the decision logic remembers it.
pub fn record_from_status(last: &LastReboot) -> Option<RebootRecord> {
    Some(RebootRecord {
        digest: last.digest.clone(),
        boot_id: last.boot_id.clone(),
        soft_reboots: u64::try_from(last.soft_reboots).unwrap_or(0),
        time: from_time(&last.time)?,
    })
}

fn record_to_status(record: &RebootRecord) -> Option<LastReboot> {
    Some(LastReboot {
        digest: record.digest.clone(),
        boot_id: record.boot_id.clone(),
        soft_reboots: i64::try_from(record.soft_reboots).unwrap_or(i64::MAX),
        time: to_time(record.time)?,
    })
}

fn phase_message(phase: Phase, desired: &str) -> String {
    match phase {
        Phase::Idle => format!("the host runs {desired}"),
        Phase::Staging => format!("pulling and staging {desired}"),
        Phase::Staged => format!("{desired} is staged (locked); waiting for a reboot slot"),
        Phase::Rebooting => format!("rebooting into {desired}"),
    }
}

/// What the conditions of one report share: the previous ones, the generation, the time.
struct Conditions<'a> {
    previous: Option<&'a BootcNodeStatus>,
    generation: Option<i64>,
    now: DateTime<Utc>,
}

impl Conditions<'_> {
    /// The condition `type_`, its transition time kept when its status did not change.
    fn next(&self, type_: &str, status: bool, reason: &str, message: String) -> Option<Condition> {
        let previous = self.previous.map_or(&[][..], |p| p.conditions.as_slice());
        let new = bootc_crds::conditions::NewCondition {
            type_,
            status,
            reason,
            message,
        };
        bootc_crds::conditions::next(previous, new, self.generation, self.now)
    }
}

/// The status to report.
pub fn compose(inputs: &Inputs<'_>) -> BootcNodeStatus {
    let previous = inputs.previous;
    let (booted, staged, rollback) = match inputs.host {
        Some(host) => {
            let (mut booted, staged, rollback) = host.report();
            if let Some(b) = booted.as_mut() {
                let same = previous
                    .and_then(|p| p.booted.as_ref())
                    .filter(|p| p.image.image_digest == b.image.image_digest);
                b.since = match same {
                    Some(p) => p.since.clone(),
                    None => to_time(inputs.now),
                };
            }
            (booted, staged, rollback)
        }
        None => (
            previous.and_then(|p| p.booted.clone()),
            previous.and_then(|p| p.staged.clone()),
            previous.and_then(|p| p.rollback.clone()),
        ),
    };
    let conditions = Conditions {
        previous,
        generation: inputs.generation,
        now: inputs.now,
    };
    let idle = conditions.next(
        IDLE,
        inputs.phase == Phase::Idle,
        inputs.phase.reason(),
        phase_message(inputs.phase, inputs.desired),
    );
    let degraded = match &inputs.degraded {
        Some((reason, message)) => conditions.next(DEGRADED, true, reason, message.clone()),
        None => conditions.next(DEGRADED, false, node_degraded::HEALTHY, String::new()),
    };
    let host = host_state(inputs);
    let drifted = host.as_ref().and_then(|h| {
        let (status, reason, message) = drift(h);
        conditions.next(DRIFTED, status, reason, message)
    });
    BootcNodeStatus {
        observed_generation: inputs.generation,
        booted,
        staged,
        rollback,
        last_reboot: inputs
            .last_reboot
            .and_then(record_to_status)
            .or_else(|| previous.and_then(|p| p.last_reboot.clone())),
        bootc_version: inputs
            .bootc_version
            .map(|v| truncate(v.to_owned(), VERSION_MAX_LEN))
            .or_else(|| previous.and_then(|p| p.bootc_version.clone())),
        agent_version: Some(truncate(inputs.agent_version.to_owned(), VERSION_MAX_LEN)),
        conditions: idle.into_iter().chain(degraded).chain(drifted).collect(),
        // The controller's fields: left out of the agent's merge patch, so never touched.
        drain_blocked: None,
        held: None,
        progress: inputs
            .progress
            .filter(|_| inputs.phase == Phase::Staging)
            .and_then(|(p, at)| progress_status(p, at, inputs.desired)),
        health: health_status(inputs),
        host,
    }
}

/// A JSON merge patch that makes the object's status exactly `status`: fields that
/// `status` leaves out are sent as `null`, so that a merge removes them.
pub fn merge_patch(status: &BootcNodeStatus) -> Value {
    let mut body = match serde_json::to_value(status) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for key in [
        "observedGeneration",
        "booted",
        "staged",
        "rollback",
        "lastReboot",
        "bootcVersion",
        "agentVersion",
        "conditions",
        "progress",
        "health",
        "host",
    ] {
        body.entry(key).or_insert(Value::Null);
    }
    // A merge patch keeps nested keys it does not name: a usr overlay gone since the last
    // report must be named too.
    if let Some(Value::Object(host)) = body.get_mut("host") {
        for key in ["backend", "usrOverlay", "updateTimerMasked"] {
            host.entry(key).or_insert(Value::Null);
        }
    }
    serde_json::json!({ "status": body })
}

#[cfg(test)]
mod tests;
