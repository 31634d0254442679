//! `kubectl bootc rollback POOL [--to DIGEST] [--yes]`: which `deployHistory` entry to
//! go back to, the pinned reference that points at it, the confirmation asked before
//! writing, and what to tell the admin.
//!
//! Only an entry the controller itself targeted (`origin: Targeted`) in the pool's own
//! repository (that of `spec.image.ref`) is ever rolled back to: a digest only nodes
//! reported is evidence about those nodes, never a target for the pool.

use std::io::{BufRead, Write};

use bootc_crds::image_ref::digest_in;
use bootc_crds::pool::{BootcNodePool, DeployHistoryEntry, HistoryOrigin};
use bootc_crds::{Digest, ImageRef};
use kube::ResourceExt;
use serde_json::json;

use crate::error::{CliError, Result};
use crate::table::short_digest;

/// Fewest hex characters `--to` takes as a digest prefix.
pub const MIN_PREFIX: usize = 7;

/// A rollback decided: the pool's reference before and after, and the entry it goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    /// The pool.
    pub pool: String,
    /// `spec.image.ref` now.
    pub from: String,
    /// `spec.image.ref` after: `registry/repo@sha256:<hex>`.
    pub to: String,
    /// The history entry rolled back to.
    pub entry: DeployHistoryEntry,
}

/// The digest the pool rolls out now: its status's target, else the digest its
/// reference pins.
pub fn current_target(pool: &BootcNodePool) -> Option<String> {
    pool.status
        .as_ref()
        .and_then(|s| s.target_digest.clone())
        .or_else(|| digest_in(&pool.spec.image.r#ref).map(|d| d.to_string()))
}

/// Why `entry` may not be rolled back to in a pool of `repository`, if it may not.
fn refusal(entry: &DeployHistoryEntry, repository: Option<&str>) -> Option<String> {
    let name = ImageRef::parse(&entry.image).ok().map(|r| r.name());
    if name.is_none() || name.as_deref() != repository {
        return Some(format!(
            "{} is from another repository ({}) than the pool's {}; a rollback stays in the pool's repository",
            entry.digest,
            entry.image,
            repository.unwrap_or("-")
        ));
    }
    match entry.origin {
        HistoryOrigin::Targeted => None,
        HistoryOrigin::Observed => Some(format!(
            "{} is a digest only nodes reported (origin Observed), never a target of the pool; it is not rolled back to",
            entry.digest
        )),
    }
}

/// Decides the rollback: the newest entry that the controller targeted in the pool's
/// repository and whose digest is not the current target, or the one `to` names (a full
/// digest, or a unique prefix of at least [`MIN_PREFIX`] hex characters, with or
/// without `sha256:`), which must be such an entry too.
pub fn choose(pool: &BootcNodePool, to: Option<&str>) -> Result<Rollback> {
    let name = pool.name_any();
    let mut history: Vec<&DeployHistoryEntry> = pool
        .status
        .as_ref()
        .map(|s| s.deploy_history.iter().collect())
        .unwrap_or_default();
    if history.is_empty() {
        return Err(CliError::msg(format!(
            "bootcnodepool/{name} has no deployHistory: no node has been seen booted, so there is nothing to roll back to"
        )));
    }
    // Newest first, as the status keeps them; sorted again in case it does not.
    history.sort_by(|a, b| b.last_deployed.cmp(&a.last_deployed));
    let current = current_target(pool);
    let repository = ImageRef::parse(&pool.spec.image.r#ref)
        .ok()
        .map(|r| r.name());
    let entry = match to {
        None => history
            .into_iter()
            .filter(|e| refusal(e, repository.as_deref()).is_none())
            .find(|e| Some(&e.digest) != current.as_ref())
            .ok_or_else(|| {
                CliError::msg(format!(
                    "bootcnodepool/{name}: deployHistory holds no digest the pool targeted in its repository other than the current target {}; nothing to roll back to",
                    current.as_deref().unwrap_or("-")
                ))
            })?,
        Some(wanted) => {
            let entry = pick(&name, &history, wanted, current.as_deref())?;
            if let Some(why) = refusal(entry, repository.as_deref()) {
                return Err(CliError::msg(format!("--to {wanted}: {why}")));
            }
            entry
        }
    };
    let to = pin_of(entry)?;
    Ok(Rollback {
        pool: name,
        from: pool.spec.image.r#ref.clone(),
        to,
        entry: entry.clone(),
    })
}

/// The entry `wanted` names.
fn pick<'a>(
    pool: &str,
    history: &[&'a DeployHistoryEntry],
    wanted: &str,
    current: Option<&str>,
) -> Result<&'a DeployHistoryEntry> {
    let hex = wanted.strip_prefix("sha256:").unwrap_or(wanted);
    let is_hex = hex
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    if !is_hex || hex.len() < MIN_PREFIX || hex.len() > 64 {
        return Err(CliError::msg(format!(
            "--to {wanted:?}: give a digest (sha256:<64 hex>) or at least {MIN_PREFIX} of its first hex characters (lower case)"
        )));
    }
    let matches: Vec<&DeployHistoryEntry> = history
        .iter()
        .copied()
        .filter(|e| {
            e.digest
                .strip_prefix("sha256:")
                .unwrap_or(&e.digest)
                .starts_with(hex)
        })
        .collect();
    match matches.as_slice() {
        [] => Err(CliError::msg(format!(
            "--to {wanted}: no deployHistory entry of bootcnodepool/{pool} matches; see `kubectl bootc history {pool}`"
        ))),
        [one] if Some(one.digest.as_str()) == current => Err(CliError::msg(format!(
            "--to {wanted}: {} is the current target of bootcnodepool/{pool}; nothing to roll back to",
            one.digest
        ))),
        [one] => Ok(one),
        many => Err(CliError::msg(format!(
            "--to {wanted} is ambiguous: it matches {} deployHistory entries ({}); give more of the digest",
            many.len(),
            many.iter()
                .map(|e| short_digest(&e.digest))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `registry/repo@sha256:<hex>`: the entry's repository pinned at the entry's digest.
pub fn pin_of(entry: &DeployHistoryEntry) -> Result<String> {
    let image = ImageRef::parse(&entry.image).map_err(|e| {
        CliError::msg(format!(
            "deployHistory entry {}: its image {:?} is not an image reference: {e}",
            entry.digest, entry.image
        ))
    })?;
    let digest: Digest = entry.digest.parse().map_err(|e| {
        CliError::msg(format!(
            "deployHistory entry {:?} is not a sha256 digest: {e}",
            entry.digest
        ))
    })?;
    Ok(image.pin(&digest))
}

/// What the rollback will do, shown before asking: the digest, its history line and the
/// reference before and after.
pub fn preview(
    pool: &BootcNodePool,
    rollback: &Rollback,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let status = pool.status.clone().unwrap_or_default();
    let mut table = crate::table::Table::new(&crate::history::HEADERS);
    table
        .rows
        .push(crate::history::row(&status, &rollback.entry, now));
    format!(
        "bootcnodepool/{} will roll back to {}:\n{}  spec.image.ref: {}\n              -> {}\n",
        rollback.pool,
        rollback.entry.digest,
        table.render(),
        rollback.from,
        rollback.to
    )
}

/// Whether to write: yes with `--yes`; else the admin's answer on a terminal (`y` or
/// `yes`); without a terminal to ask on, an error rather than a wait.
pub fn confirm(
    yes: bool,
    terminal: bool,
    input: &mut impl BufRead,
    prompt: &mut impl Write,
) -> Result<bool> {
    if yes {
        return Ok(true);
    }
    if !terminal {
        return Err(CliError::msg(
            "not rolled back: stdin is not a terminal to confirm on; pass --yes to roll back without asking",
        ));
    }
    let asked = prompt
        .write_all(b"Roll back? [y/N] ")
        .and_then(|()| prompt.flush());
    asked.map_err(|e| CliError::msg(format!("cannot ask for confirmation: {e}")))?;
    let mut answer = String::new();
    input
        .read_line(&mut answer)
        .map_err(|e| CliError::msg(format!("cannot read the confirmation: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// The merge patch that sets the reference, on the version the decision was made from.
pub fn patch(rollback: &Rollback, resource_version: Option<&str>) -> serde_json::Value {
    let mut patch = json!({"spec": {"image": {"ref": rollback.to}}});
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

/// What was changed and how to undo it: follow the tag again when the old reference
/// named one, else go back to the old reference.
pub fn report(rollback: &Rollback) -> String {
    let Rollback {
        pool,
        from,
        to,
        entry,
    } = rollback;
    let version = entry
        .version
        .as_deref()
        .map(|v| format!("version {v}, "))
        .unwrap_or_default();
    let mut out = format!(
        "bootcnodepool.node.bootc.dev/{pool} rolled back\n  spec.image.ref: {from}\n              -> {to}\n  ({version}{} node(s), last deployed {})\n",
        entry.node_count,
        bootc_crds::conditions::from_time(&entry.last_deployed).map_or_else(
            || "-".to_owned(),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    );
    let tag = ImageRef::parse(from).ok().and_then(|r| {
        r.tag()
            .map(|t| (r.name(), t.to_owned(), r.digest().is_some()))
    });
    let (back, what) = match tag {
        Some((_, _, false)) => (
            from.clone(),
            format!("The pool no longer follows the tag of {from}; to follow it again:"),
        ),
        Some((name, tag, true)) => {
            let tagged = format!("{name}:{tag}");
            (
                tagged.clone(),
                format!("The pool is pinned; to follow the tag {tagged} again:"),
            )
        }
        None => (
            from.clone(),
            "To go back to the reference it had:".to_owned(),
        ),
    };
    let body = json!({"spec": {"image": {"ref": back}}});
    out.push_str(&format!(
        "{what}\n  kubectl patch bootcnodepool {pool} --type merge -p '{body}'\n"
    ));
    out
}

#[cfg(test)]
mod tests;
