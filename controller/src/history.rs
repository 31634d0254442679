//! The pool's `status.deployHistory`: one entry per digest the
//! members have booted, newest `lastDeployed` first, at most `spec.history.limit` entries.
//!
//! [`merge`] is a pure function of the previous (stored) history, what the member nodes
//! report as booted now, the pool's target and the limit. It reads no clock, keeps no
//! state and increments no counter, so:
//!
//! - merging the same inputs twice gives the same history (a reconcile with nothing new
//!   writes nothing, a replayed watch event changes nothing);
//! - a restarted controller loses nothing: the stored status is all it needs;
//! - every field is a lattice join (`max` count, `min` first, `max` last), so an entry's
//!   count never goes down and its times never move backwards, and a node joining on an
//!   old image touches that old digest's entry only.
//!
//! # Which digest a node counts for
//!
//! A node is "on" a digest D when its per-arch `imageDigest` is D or the `@sha256:` inside
//! its tracked `image` is D (the matching rule, `bootc_crds::image_ref::runs_digest`), so a node can be on two digests at once (a
//! manifest list and one of its per-arch manifests). It counts for exactly one, chosen by
//! [`digest_of`] from the node and the target alone:
//!
//! 1. the target digest, when the node is on it (so a manifest-list target and the
//!    per-arch digests the nodes report land in one entry, keyed by the list digest);
//! 2. else the digest inside its `image`, when there is one (the node was switched to a
//!    pinned ref, which is how the pool moves nodes: the list digest again);
//! 3. else its per-arch `imageDigest` (the node tracks a tag).
//!
//! The choice does not depend on the previous history on purpose: an entry cut by the
//! limit would otherwise change how its nodes are keyed on the next merge, and the
//! history would not settle.
//!
//! # Nodes without `since`
//!
//! Such a node counts in `nodeCount` but contributes no time. A digest none of whose
//! nodes carries `since` and that has no entry yet gets no entry (there is no time to
//! give it that would not be the wall clock, and a wall-clock time would make a cut entry
//! come back newer on every reconcile). The agent always reports `since` with `booted`,
//! so this only concerns older agents.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use bootc_crds::node::BootedImage;
use bootc_crds::pool::DeployHistoryEntry;
use bootc_crds::{Digest, ImageRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What one member node reports as booted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootedReport {
    /// The node's name; a node appearing more than once counts once.
    pub node: String,
    /// The image reference bootc tracks; may carry a (manifest-list) digest after `@`.
    pub image: String,
    /// The per-architecture manifest digest (`sha256:<hex>`).
    pub image_digest: String,
    /// The image's version label, when it has one.
    pub version: Option<String>,
    /// When the agent first saw this digest booted.
    pub since: Option<Time>,
}

impl BootedReport {
    /// What `node` reports in its BootcNode's `status.booted`.
    pub fn from_booted(node: impl Into<String>, booted: &BootedImage) -> Self {
        BootedReport {
            node: node.into(),
            image: booted.image.image.clone(),
            image_digest: booted.image.image_digest.clone(),
            version: booted.image.version.clone(),
            since: booted.since.clone(),
        }
    }

    /// The order used to pick one report when a node appears more than once: the latest
    /// `since`, then the largest digest, image and version. Independent of input order.
    fn precedence(&self) -> (&Option<Time>, &str, &str, &Option<String>) {
        (&self.since, &self.image_digest, &self.image, &self.version)
    }
}

/// The image the pool targets, as the history needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetImage<'a> {
    /// The target digest (`sha256:<hex>`); may be a manifest-list digest.
    pub digest: &'a str,
    /// The target pinned: `registry/repo@sha256:<hex>`.
    pub image: &'a str,
    /// The target's version label, when known.
    pub version: Option<&'a str>,
}

/// The digest inside an image reference (`repo@sha256:…`), if it carries one.
pub fn ref_digest(image: &str) -> Option<String> {
    bootc_crds::image_ref::digest_in(image).map(|d| d.to_string())
}

/// The digest whose entry a node's booted image counts for (see the module docs): the
/// target digest when the node is on it, else the digest inside its `image`, else its
/// per-arch `imageDigest`. `None` when the node reports no digest at all.
pub fn digest_of(observed: &BootedReport, target: Option<&TargetImage<'_>>) -> Option<String> {
    let in_ref = ref_digest(&observed.image);
    let per_arch = Some(observed.image_digest.as_str()).filter(|d| !d.is_empty());
    if let Some(target) = target.filter(|t| !t.digest.is_empty())
        && (per_arch == Some(target.digest) || in_ref.as_deref() == Some(target.digest))
    {
        return Some(target.digest.to_owned());
    }
    in_ref.or_else(|| per_arch.map(str::to_owned))
}

/// The new deployHistory from the previous one and what the members run now.
///
/// For every digest D some member counts for ([`digest_of`]), with `n` the number of
/// distinct nodes on it now and `since` their `since` times:
///
/// - `nodeCount = max(old, n)`, `firstDeployed = min(old, min since)`,
///   `lastDeployed = max(old, max since)`;
/// - `version`: the one most of those nodes report (ties: the smallest), else the
///   target's when D is the target digest, else the old one;
/// - `image`: the target's pin when D is the target digest, else the old one, else the
///   node's repository pinned at D.
///
/// Entries no member counts for are kept as they are. Duplicated digests in `previous`
/// are folded into one. The result is sorted by `lastDeployed`, newest first, then by
/// digest, and cut to `limit` entries.
pub fn merge(
    previous: &[DeployHistoryEntry],
    observed: &[BootedReport],
    target: Option<TargetImage<'_>>,
    limit: usize,
) -> Vec<DeployHistoryEntry> {
    let mut entries: BTreeMap<String, DeployHistoryEntry> = BTreeMap::new();
    for entry in previous {
        match entries.get_mut(&entry.digest) {
            Some(kept) => fold(kept, entry),
            None => {
                entries.insert(entry.digest.clone(), entry.clone());
            }
        }
    }
    for (digest, on) in by_digest(observed, target.as_ref()) {
        let seen = DigestSeen::of(&on, &digest, target);
        match entries.get_mut(&digest) {
            Some(entry) => seen.widen(entry),
            None => {
                if let Some(entry) = seen.entry(digest.clone(), &on) {
                    entries.insert(digest, entry);
                }
            }
        }
    }
    let mut history: Vec<DeployHistoryEntry> = entries.into_values().collect();
    history.sort_by(newest_first);
    history.truncate(limit);
    history
}

/// One report per node (whatever order or repetition the caller passes), grouped by the
/// digest each counts for.
fn by_digest<'a>(
    observed: &'a [BootedReport],
    target: Option<&TargetImage<'_>>,
) -> BTreeMap<String, Vec<&'a BootedReport>> {
    let mut nodes: BTreeMap<&str, &BootedReport> = BTreeMap::new();
    for o in observed {
        let kept = nodes.entry(o.node.as_str()).or_insert(o);
        if o.precedence() > kept.precedence() {
            *kept = o;
        }
    }
    let mut by_digest: BTreeMap<String, Vec<&BootedReport>> = BTreeMap::new();
    for o in nodes.into_values() {
        if let Some(digest) = digest_of(o, target) {
            by_digest.entry(digest).or_default().push(o);
        }
    }
    by_digest
}

/// What the nodes on one digest say now.
struct DigestSeen {
    count: i32,
    first: Option<Time>,
    last: Option<Time>,
    version: Option<String>,
    /// The target's pin, when the digest is the target's.
    target_image: Option<String>,
}

impl DigestSeen {
    fn of(on: &[&BootedReport], digest: &str, target: Option<TargetImage<'_>>) -> Self {
        let target = target.filter(|t| t.digest == digest);
        DigestSeen {
            count: i32::try_from(on.len()).unwrap_or(i32::MAX),
            first: on.iter().filter_map(|o| o.since.as_ref()).min().cloned(),
            last: on.iter().filter_map(|o| o.since.as_ref()).max().cloned(),
            version: majority(on.iter().filter_map(|o| o.version.as_deref()))
                .or_else(|| target.and_then(|t| t.version))
                .map(str::to_owned),
            target_image: target.map(|t| t.image.to_owned()).filter(|i| !i.is_empty()),
        }
    }

    /// Widens an existing entry: counts and times only grow outwards.
    fn widen(self, entry: &mut DeployHistoryEntry) {
        entry.node_count = entry.node_count.max(self.count);
        if let Some(first) = self.first
            && first < entry.first_deployed
        {
            entry.first_deployed = first;
        }
        if let Some(last) = self.last
            && last > entry.last_deployed
        {
            entry.last_deployed = last;
        }
        if self.version.is_some() {
            entry.version = self.version;
        }
        if let Some(image) = self.target_image {
            entry.image = image;
        }
    }

    /// A new entry, when some node gives it a time.
    fn entry(self, digest: String, on: &[&BootedReport]) -> Option<DeployHistoryEntry> {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return None;
        };
        let image = self.target_image.unwrap_or_else(|| {
            on.iter()
                .map(|o| pin(&o.image, &digest))
                .min()
                .unwrap_or_default()
        });
        Some(DeployHistoryEntry {
            digest,
            image,
            version: self.version,
            node_count: self.count,
            first_deployed: first,
            last_deployed: last,
            failed: false,
            failed_reason: None,
            failed_time: None,
            failed_generation: None,
        })
    }
}

/// The history's order: `lastDeployed` newest first, then digest ascending.
pub fn newest_first(a: &DeployHistoryEntry, b: &DeployHistoryEntry) -> Ordering {
    (Reverse(&a.last_deployed), &a.digest).cmp(&(Reverse(&b.last_deployed), &b.digest))
}

/// Folds a duplicate entry for the same digest into the kept one.
fn fold(kept: &mut DeployHistoryEntry, other: &DeployHistoryEntry) {
    kept.node_count = kept.node_count.max(other.node_count);
    if other.first_deployed < kept.first_deployed {
        kept.first_deployed = other.first_deployed.clone();
    }
    if other.last_deployed > kept.last_deployed {
        kept.last_deployed = other.last_deployed.clone();
    }
    if kept.version.is_none() {
        kept.version = other.version.clone();
    }
    if kept.image.is_empty() {
        kept.image = other.image.clone();
    }
}

/// The value reported most often; ties go to the smallest.
fn majority<'a>(values: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    // Ascending keys; `max_by_key` keeps the last maximum, so compare on (count, Reverse).
    counts
        .into_iter()
        .max_by_key(|&(v, n)| (n, Reverse(v)))
        .map(|(v, _)| v)
}

/// `image`'s repository pinned at `digest`: `registry/repo@sha256:<hex>`.
fn pin(image: &str, digest: &str) -> String {
    match (ImageRef::parse(image), digest.parse::<Digest>()) {
        (Ok(reference), Ok(digest)) => reference.pin(&digest),
        _ => {
            let name = image.split_once('@').map_or(image, |(name, _)| name);
            format!("{name}@{digest}")
        }
    }
}

#[cfg(test)]
mod tests;
