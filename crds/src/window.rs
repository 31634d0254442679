//! Maintenance windows: parsing of the fields `start` ("HH:MM"), `duration` ("3h", "90m",
//! "1h30m") and `timeZone` (an IANA name), and [`window_state`], which says whether new
//! reboots may be approved at a given instant and, if not, when they next may.
//!
//! # How a window is laid on the calendar
//!
//! A window `{days, start, duration, timeZone}` opens at the local date-time `(d, start)` in
//! `timeZone` for every local date `d` whose weekday is in `days`, and stays open for
//! `duration` of elapsed time: the day named is the day the window *starts*, so a
//! `Mon 23:00 + 3h` window also covers Tuesday 00:00 to 02:00, and a window may last up to
//! a week. Intervals are half-open: open at the start instant, closed at the end instant.
//!
//! Daylight-saving changes are followed:
//! - a start that falls in a spring-forward gap (e.g. 02:30 on the last Sunday of March in
//!   Europe/Berlin) is shifted forward by the length of the gap, i.e. read with the UTC
//!   offset in effect before the gap (02:30 CET = 03:30 CEST), as RFC 5545 does;
//! - a start that happens twice in a fall-back fold (e.g. 02:30 on the last Sunday of
//!   October in Europe/Berlin) is the earlier of the two instants (02:30 CEST);
//! - the duration is elapsed time, not wall-clock time: a 3h window opening at 01:00 on the
//!   spring-forward day in Europe/Berlin closes at 05:00 local, and a week-long (168h)
//!   window over the fall-back weekend leaves a one-hour gap before the next one opens.

use std::cmp::max;

use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeDelta,
    TimeZone, Utc,
};
use chrono_tz::Tz;

use crate::pool::MaintenanceWindow;
pub use crate::pool::{DURATION_PATTERN, START_PATTERN};

/// Shortest window.
pub const MIN_DURATION_MINUTES: i64 = 1;
/// Longest window (a week: longer windows are always open; leave windows unset instead).
pub const MAX_DURATION_MINUTES: i64 = 7 * 24 * 60;

/// Parses `HH:MM` (24-hour clock).
pub fn parse_start(s: &str) -> Result<NaiveTime, String> {
    let bad = || format!("{s:?} is not a time of day in 24-hour HH:MM form, e.g. \"02:30\"");
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 || !h.chars().chain(m.chars()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    NaiveTime::from_hms_opt(h, m, 0).ok_or_else(bad)
}

/// Parses `<hours>h<minutes>m` (either part may be left out) into a duration between one
/// minute and a week.
pub fn parse_duration(s: &str) -> Result<TimeDelta, String> {
    let bad = || format!("{s:?} is not a duration such as \"3h\", \"90m\" or \"1h30m\"");
    let (hours, rest) = match s.split_once('h') {
        Some((h, rest)) => (Some(h), rest),
        None => (None, s),
    };
    let minutes = match rest {
        "" => None,
        m => Some(m.strip_suffix('m').ok_or_else(bad)?),
    };
    if hours.is_none() && minutes.is_none() {
        return Err(bad());
    }
    let number = |part: Option<&str>, max_len: usize| -> Result<i64, String> {
        match part {
            None => Ok(0),
            Some(p)
                if !p.is_empty() && p.len() <= max_len && p.chars().all(|c| c.is_ascii_digit()) =>
            {
                p.parse().map_err(|_| bad())
            }
            Some(_) => Err(bad()),
        }
    };
    let total = number(hours, 3)? * 60 + number(minutes, 4)?;
    if !(MIN_DURATION_MINUTES..=MAX_DURATION_MINUTES).contains(&total) {
        return Err(format!(
            "{s:?} is out of range: a window lasts from 1m to 168h"
        ));
    }
    Ok(TimeDelta::minutes(total))
}

/// Parses an IANA time zone name such as `Europe/Berlin` or `UTC`.
pub fn parse_time_zone(s: &str) -> Result<Tz, String> {
    s.parse::<Tz>().map_err(|_| {
        format!("{s:?} is not an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"")
    })
}

/// A `maintenanceWindows` entry that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.rollout.maintenanceWindows[{index}].{field}: {message}")]
pub struct WindowError {
    /// Position of the window in `maintenanceWindows`.
    pub index: usize,
    /// The field at fault: `start`, `duration` or `timeZone`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Where an instant stands relative to a pool's maintenance windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// No windows configured: approvals are always allowed.
    Always,
    /// Inside a window. `until` is the end of the open stretch: windows that overlap or
    /// touch (one opens exactly when another closes) count as one stretch, so the state
    /// is `Open` at every instant from now up to `until` and, when `until` is less than a
    /// week away, closed at `until`. If the windows cover the whole week back to back,
    /// `until` is where the look-ahead stopped, at least a week ahead; evaluate again then.
    Open {
        /// When the open stretch ends (or, for a stretch longer than a week, a lower bound
        /// of that, at least a week ahead).
        until: DateTime<Utc>,
    },
    /// Outside every window.
    Closed {
        /// When the next window opens: the earliest opening after now, within eight days.
        /// `None` only when no window names a day, so none ever opens.
        next: Option<DateTime<Utc>>,
    },
}

impl WindowState {
    /// Whether new reboots may be approved now (`Always` or `Open`).
    pub fn is_open(&self) -> bool {
        matches!(self, WindowState::Always | WindowState::Open { .. })
    }
}

/// Local dates searched on either side of the current one. An occurrence that can contain
/// now started at most 168h ago; every weekday comes round within seven days; the margin
/// covers UTC-offset changes, even a skipped calendar day (Pacific/Apia, 2011).
const SEARCH_DAYS: i64 = 10;

/// How far back from a non-existent local time to look for the offset in effect before
/// the gap (the longest gap on record is a whole day).
const GAP_SEARCH: TimeDelta = TimeDelta::hours(48);
const GAP_STEP: TimeDelta = TimeDelta::minutes(15);

/// A window with its fields parsed.
#[derive(Debug)]
struct Window {
    days: Vec<chrono::Weekday>,
    start: NaiveTime,
    duration: TimeDelta,
    zone: Tz,
}

impl Window {
    fn parse(index: usize, window: &MaintenanceWindow) -> Result<Self, WindowError> {
        let error = |field: &'static str| {
            move |message: String| WindowError {
                index,
                field,
                message,
            }
        };
        Ok(Window {
            days: window.days.iter().map(|&d| d.into()).collect(),
            start: parse_start(&window.start).map_err(error("start"))?,
            duration: parse_duration(&window.duration).map_err(error("duration"))?,
            zone: parse_time_zone(&window.time_zone).map_err(error("timeZone"))?,
        })
    }

    /// The `[start, end)` intervals of the occurrences that start on the local dates
    /// within [`SEARCH_DAYS`] of the local date of `now`.
    fn occurrences(
        &self,
        now: DateTime<Utc>,
    ) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + '_ {
        let today = now.with_timezone(&self.zone).date_naive();
        (-SEARCH_DAYS..=SEARCH_DAYS).filter_map(move |k| {
            let date: NaiveDate = today.checked_add_signed(TimeDelta::days(k))?;
            if !self.days.contains(&date.weekday()) {
                return None;
            }
            let start = resolve_local(self.zone, date.and_time(self.start))?;
            Some((start, start.checked_add_signed(self.duration)?))
        })
    }
}

/// The instant a local date-time in `zone` names: the earlier one in a fold; in a gap,
/// the local time read with the offset in effect before the gap (shifted forward by the
/// gap's length). `None` only on overflow at the ends of the calendar.
fn resolve_local(zone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(earliest, latest) => Some(earliest.min(latest).with_timezone(&Utc)),
        LocalResult::None => {
            let mut back = GAP_STEP;
            while back <= GAP_SEARCH {
                let before = zone.from_local_datetime(&local.checked_sub_signed(back)?);
                if let Some(before) = before.latest() {
                    let offset =
                        TimeDelta::seconds(i64::from(before.offset().fix().local_minus_utc()));
                    return Some(local.checked_sub_signed(offset)?.and_utc());
                }
                back += GAP_STEP;
            }
            None
        }
    }
}

/// Where `now` stands relative to `windows`: [`WindowState::Always`] when there are none,
/// else [`WindowState::Open`] when any window is open (with the end of the open stretch)
/// or [`WindowState::Closed`] with the next opening. See the module documentation for how
/// windows are laid on the calendar and how daylight-saving changes are handled.
///
/// Fails on the first window (in list order; fields in the order `start`, `duration`,
/// `timeZone`) that cannot be parsed. A window with no days is valid here and never opens.
pub fn window_state(
    windows: &[MaintenanceWindow],
    now: DateTime<Utc>,
) -> Result<WindowState, WindowError> {
    if windows.is_empty() {
        return Ok(WindowState::Always);
    }
    let parsed = windows
        .iter()
        .enumerate()
        .map(|(i, w)| Window::parse(i, w))
        .collect::<Result<Vec<_>, _>>()?;
    let mut intervals: Vec<_> = parsed.iter().flat_map(|w| w.occurrences(now)).collect();
    intervals.sort_unstable();

    // Sorted by start: first the occurrences that contain now, then those that start
    // before the open stretch ends, extending it.
    let mut until: Option<DateTime<Utc>> = None;
    for &(start, end) in &intervals {
        if start <= now {
            if end > now {
                until = Some(until.map_or(end, |u| max(u, end)));
            }
        } else {
            match until {
                Some(u) if start <= u => until = Some(max(u, end)),
                Some(u) => return Ok(WindowState::Open { until: u }),
                None => return Ok(WindowState::Closed { next: Some(start) }),
            }
        }
    }
    Ok(match until {
        Some(until) => WindowState::Open { until },
        None => WindowState::Closed { next: None },
    })
}

#[cfg(test)]
mod tests;
