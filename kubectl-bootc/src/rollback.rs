//! `kubectl bootc rollback POOL [--to DIGEST]`: which `deployHistory` entry to go back
//! to, the pinned reference that points at it, and what to tell the admin.

use bootc_crds::image_ref::digest_in;
use bootc_crds::pool::{BootcNodePool, DeployHistoryEntry};
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

/// Decides the rollback: the newest entry whose digest is not the current target, or
/// the one `to` names (a full digest, or a unique prefix of at least [`MIN_PREFIX`] hex
/// characters, with or without `sha256:`).
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
    let entry = match to {
        None => history
            .into_iter()
            .find(|e| Some(&e.digest) != current.as_ref())
            .ok_or_else(|| {
                CliError::msg(format!(
                    "bootcnodepool/{name}: deployHistory holds no digest other than the current target {}; nothing to roll back to",
                    current.as_deref().unwrap_or("-")
                ))
            })?,
        Some(wanted) => pick(&name, &history, wanted, current.as_deref())?,
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
