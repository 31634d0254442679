//! `kubectl bootc history POOL`: the pool's `status.deployHistory` as a table.

use bootc_crds::conditions::from_time;
use bootc_crds::pool::{BootcNodePool, BootcNodePoolStatus, DeployHistoryEntry, HistoryOrigin};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::status::NONE;
use crate::table::{Table, age, short_digest};

/// Headers of the history table.
pub const HEADERS: [&str; 7] = [
    "digest",
    "version",
    "image",
    "nodes",
    "first deployed",
    "last deployed",
    "origin",
];

/// A time as `2026-03-01T02:00:00Z (5d)`: the instant and how long ago.
pub fn when(t: &Time, now: DateTime<Utc>) -> String {
    match from_time(t) {
        Some(t) => format!(
            "{} ({})",
            t.to_rfc3339_opts(SecondsFormat::Secs, true),
            age(t, now)
        ),
        None => NONE.to_owned(),
    }
}

/// The history table, newest first as the status keeps them; the current target is
/// marked with `*` after its digest, a digest marked failed with `!`. The origin says
/// whether the controller targeted the digest (`Targeted`, a rollback may go back to
/// it) or only nodes reported it (`Observed`).
pub fn table(pool: &BootcNodePool, now: DateTime<Utc>) -> Table {
    let mut table = Table::new(&HEADERS);
    let status = pool.status.clone().unwrap_or_default();
    for entry in &status.deploy_history {
        table.rows.push(row(&status, entry, now));
    }
    table
}

/// One entry's line of the history table.
pub fn row(
    status: &BootcNodePoolStatus,
    entry: &DeployHistoryEntry,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut digest = short_digest(&entry.digest);
    if status.target_digest.as_deref() == Some(entry.digest.as_str()) {
        digest.push('*');
    }
    if entry.failed {
        digest.push('!');
    }
    let origin = match entry.origin {
        HistoryOrigin::Targeted => "Targeted",
        HistoryOrigin::Observed => "Observed",
    };
    vec![
        digest,
        entry.version.clone().unwrap_or_else(|| NONE.to_owned()),
        entry.image.clone(),
        entry.node_count.to_string(),
        when(&entry.first_deployed, now),
        when(&entry.last_deployed, now),
        origin.to_owned(),
    ]
}

/// The whole `history` text; a pool without history says so.
pub fn render(pool: &BootcNodePool, now: DateTime<Utc>) -> String {
    let table = table(pool, now);
    if table.rows.is_empty() {
        return format!(
            "bootcnodepool/{} has no deployHistory yet: no node has been seen booted\n",
            kube::ResourceExt::name_any(pool)
        );
    }
    let marked = table.rows.iter().any(|r| r[0].contains('*'));
    let mut out = table.render();
    if marked {
        out.push_str("* the current target\n");
    }
    for line in failed_lines(pool, now) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One line per digest marked failed: when, why, and until when the mark holds.
pub fn failed_lines(pool: &BootcNodePool, now: DateTime<Utc>) -> Vec<String> {
    let Some(status) = &pool.status else {
        return Vec::new();
    };
    status
        .deploy_history
        .iter()
        .filter(|e| e.failed)
        .map(|e| {
            let at = e
                .failed_time
                .as_ref()
                .map(|t| format!(" at {}", when(t, now)))
                .unwrap_or_default();
            let reason = e.failed_reason.as_deref().unwrap_or("no reason recorded");
            let until = match e.failed_generation {
                Some(g) if pool.metadata.generation.is_some_and(|now| now > g) => {
                    " (the spec changed since: the mark no longer holds)".to_owned()
                }
                Some(g) => {
                    format!(" (not targeted again until the spec changes past generation {g})")
                }
                None => String::new(),
            };
            format!("! {} failed{at}: {reason}{until}", short_digest(&e.digest))
        })
        .collect()
}

#[cfg(test)]
mod tests;
