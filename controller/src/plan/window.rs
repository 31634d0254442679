//! Maintenance windows, as the plan sees them: open, or closed until the next opening.

use chrono::{DateTime, Utc};

use bootc_crds::window::{WindowState, window_state};

/// `None` inside a window or without windows; `Some(next)` outside every window, with
/// when the next one opens (`None`: never). Windows that cannot be evaluated close the
/// gate (the spec check reports them as invalid before a plan gets here).
pub fn closed_until(
    spec: &bootc_crds::pool::BootcNodePoolSpec,
    now: DateTime<Utc>,
) -> Option<Option<DateTime<Utc>>> {
    match window_state(&spec.rollout.maintenance_windows, now) {
        Ok(WindowState::Closed { next }) => Some(next),
        Ok(_) => None,
        Err(_) => Some(None),
    }
}
