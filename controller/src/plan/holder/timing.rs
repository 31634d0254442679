//! How the time bears on a slot holder's part of the plan. Its objects unchanged, that
//! part changes with the time alone at a few moments: its reboot timeout running out,
//! the grace for its agent's record of the reboot ending, its soak or the wait for its
//! units ending. Each is a moment fixed by its objects and the spec, noted as the
//! holder is planned, and so is when the plan asks to look again. A holder planned
//! with a wait that moves with the time (a moment read as `now`) is noted as such, and
//! its part is not kept (see [`super::super::settled`]).

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// What the time does to the member being planned.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(in super::super) struct Timing {
    /// What it is found to be holds while the time is before this.
    pub until: Option<DateTime<Utc>>,
    /// When the plan asks to look at it again.
    pub wake: Option<DateTime<Utc>>,
    /// Its part moves with the time otherwise: it is not kept.
    pub floating: bool,
}

/// `d` after `t`, when that is a time chrono can hold.
pub(super) fn after(t: DateTime<Utc>, d: Duration) -> Option<DateTime<Utc>> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
}

/// The first moment strictly after `t`: what `since > d` turns true at, for `since`
/// counted from `t`.
pub(super) fn just_after(t: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    t?.checked_add_signed(TimeDelta::nanoseconds(1))
}
