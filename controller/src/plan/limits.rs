//! The spec's numbers as the plan uses them, each read so that a value it cannot use
//! closes the gate instead of opening it: a budget that cannot be resolved grants no
//! slot, a `maxStaging` that cannot be resolved lets no new node pull, a negative halt
//! threshold halts at the first unhealthy node, a negative soak keeps the slot, and
//! windows that cannot be evaluated are closed. Each such value also gives a problem,
//! reported as `InvalidSpec`. (The spec check refuses all of these first; this is the
//! second line, for whatever it might miss.)

use std::time::Duration;

use bootc_crds::pool::RolloutSpec;
use chrono::{DateTime, Utc};

/// A value read from the spec, and the problem when it had to fall back.
pub type Read<T> = (T, Option<String>);

/// How many slots (`maxUnavailable` of `pool_size`); none when it cannot be resolved.
pub fn budget(rollout: &RolloutSpec, pool_size: usize) -> Read<usize> {
    let size = u32::try_from(pool_size).unwrap_or(u32::MAX);
    match bootc_crds::budget::resolve_budget(Some(&rollout.max_unavailable), size, 1) {
        Ok(n) => (n as usize, None),
        Err(e) => (
            0,
            Some(format!(
                "spec.rollout.maxUnavailable: {e}; no reboot slot is granted"
            )),
        ),
    }
}

/// How many members may pull at once (`maxStaging`; `None`: no limit); none when it
/// cannot be resolved.
pub fn staging(rollout: &RolloutSpec, pool_size: usize) -> Read<Option<usize>> {
    let Some(max) = rollout.max_staging.as_ref() else {
        return (None, None);
    };
    let size = u32::try_from(pool_size).unwrap_or(u32::MAX);
    match bootc_crds::budget::resolve_budget(Some(max), size, u32::MAX) {
        Ok(n) => (Some(n as usize), None),
        Err(e) => (
            Some(0),
            Some(format!(
                "spec.rollout.maxStaging: {e}; no node starts pulling"
            )),
        ),
    }
}

/// How many unhealthy slot holders halt the rollout (`0`: never); a negative value
/// halts at the first.
pub fn halt_threshold(rollout: &RolloutSpec) -> Read<usize> {
    match usize::try_from(rollout.halt_after_unhealthy) {
        Ok(n) => (n, None),
        Err(_) => (
            1,
            Some(format!(
                "spec.rollout.haltAfterUnhealthy: {} is negative; halting at the first unhealthy node",
                rollout.halt_after_unhealthy
            )),
        ),
    }
}

/// How long a node soaks before its slot is released; a negative value keeps the slot.
pub fn soak(rollout: &RolloutSpec) -> Read<Duration> {
    match u64::try_from(rollout.post_reboot_delay_seconds) {
        Ok(s) => (Duration::from_secs(s), None),
        Err(_) => (
            Duration::MAX,
            Some(format!(
                "spec.rollout.postRebootDelaySeconds: {} is negative; slots are not released",
                rollout.post_reboot_delay_seconds
            )),
        ),
    }
}

/// How long after its approval a node may take to come back; a negative value gives it
/// none (it is unhealthy at once, which counts toward a halt).
pub fn reboot_timeout(rollout: &RolloutSpec) -> Read<Duration> {
    match u64::try_from(rollout.reboot_timeout_seconds) {
        Ok(s) => (Duration::from_secs(s), None),
        Err(_) => (
            Duration::ZERO,
            Some(format!(
                "spec.rollout.rebootTimeoutSeconds: {} is negative; approved nodes count as unhealthy",
                rollout.reboot_timeout_seconds
            )),
        ),
    }
}

/// Outside every maintenance window: `Some(next opening)` (`None` inside a window or
/// without windows). Windows that cannot be evaluated are closed, never to open.
pub fn window(rollout: &RolloutSpec, now: DateTime<Utc>) -> Read<Option<Option<DateTime<Utc>>>> {
    use bootc_crds::window::{WindowState, window_state};
    match window_state(&rollout.maintenance_windows, now) {
        Ok(WindowState::Closed { next }) => (Some(next), None),
        Ok(_) => (None, None),
        Err(e) => (
            Some(None),
            Some(format!(
                "spec.rollout.maintenanceWindows: {e}; no reboot slot is granted"
            )),
        ),
    }
}

/// How many nodes the canary has (`canary.nodes` of `pool_size`, at least one); the
/// whole pool when it cannot be resolved (no node goes before the canary is through).
pub fn canary(canary: &bootc_crds::pool::CanarySpec, pool_size: usize) -> Read<usize> {
    let size = u32::try_from(pool_size).unwrap_or(u32::MAX);
    match bootc_crds::budget::resolve_budget(Some(&canary.nodes), size, 1) {
        Ok(n) => (n as usize, None),
        Err(e) => (
            pool_size,
            Some(format!(
                "spec.rollout.canary.nodes: {e}; the whole pool is the canary"
            )),
        ),
    }
}

/// How long the canary soaks; a negative value soaks a week.
pub fn canary_soak(canary: &bootc_crds::pool::CanarySpec) -> Read<Duration> {
    match u64::try_from(canary.soak_seconds) {
        Ok(s) => (Duration::from_secs(s), None),
        Err(_) => (
            Duration::from_secs(604_800),
            Some(format!(
                "spec.rollout.canary.soakSeconds: {} is negative; soaking a week",
                canary.soak_seconds
            )),
        ),
    }
}
