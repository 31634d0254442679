//! Times as kube-apiserver's printers show them: ages of timestamps, and `HumanDuration`.

use chrono::{DateTime, TimeDelta, Utc};

/// A `date` cell: the age of an RFC 3339 timestamp, `<unknown>` for an empty or zero time, `<invalid>` when unparsable.
pub(super) fn date_cell(s: &str, now: DateTime<Utc>) -> String {
    if s.is_empty() || s == "null" {
        return "<unknown>".to_string();
    }
    match DateTime::parse_from_rfc3339(s) {
        Ok(t) => age(Some(t.with_timezone(&Utc)), now),
        Err(_) => "<invalid>".to_string(),
    }
}

/// kube-apiserver's `translateTimestampSince`: the humanized time since `t`, `<unknown>` when unset or zero.
pub(super) fn age(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) if !is_zero_time(t) => human_duration(now - t),
        _ => "<unknown>".to_string(),
    }
}

pub(super) fn is_zero_time(t: DateTime<Utc>) -> bool {
    t.timestamp() == -62_135_596_800 && t.timestamp_subsec_nanos() == 0
}

/// k8s.io/apimachinery's `duration.HumanDuration`: "0s", "45s", "5m3s", "15m", "5h3m", "2d", "3y100d", "<invalid>".
pub fn human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{}h", hours / 24, h);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{}d", hours / 24 / 365, dy);
    }
    format!("{}y", hours / 24 / 365)
}
