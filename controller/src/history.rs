//! The pool's `status.deployHistory`: one entry per digest the
//! members have booted, newest `lastDeployed` first, at most `spec.history.limit` entries.
//!
//! [`merge`] is a pure function of the previous (stored) history, what the member nodes
//! report as booted now, the pool's target (now and before), the plan's `now` and the
//! limit ([`merge_observed`] is the same with the reports already gathered by digest,
//! [`Observed`], which the planner keeps between plans and updates as nodes change). It
//! reads no clock, keeps no state and increments no counter, so:
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
//!
//! # What a node's report may not do
//!
//! A report is evidence about that node, never an instruction for the pool:
//!
//! - **Origin.** An entry is `Targeted` when its digest is the pool's target now, was
//!   its target in the previous status, or was marked failed (only a target is); once
//!   targeted it stays so. Every other entry is `Observed`: audited and counted, never
//!   rolled back to. A stored entry without an origin (written before origins were
//!   recorded) reads as `Observed` unless one of those rules makes it `Targeted`.
//! - **Times.** A report's `since` is bounded by what the controller can vouch for: never
//!   earlier than the node's registration (its Node's `creationTimestamp`, written by the
//!   API server; no agent can have seen an image booted on a node the cluster did not
//!   know yet), never later than the plan's `now`. A `since` after `now` is not yet true:
//!   it adds no time to an entry that has one, and an entry that only such reports would
//!   create starts at `now`, the moment the controller first saw it. Stored times later
//!   than `now` are brought back to `now`. So a lie about the future cannot make an entry
//!   the newest for long, and re-planning later with the same reports writes nothing.
//! - **The limit.** When there are more entries than the limit, `Observed` entries are
//!   cut before `Targeted` ones (the oldest of each first): reports of foreign digests
//!   cannot push the pool's rollback targets out of its history. Within each origin, an
//!   entry that only reports from the future would create (stamped `now`) is cut before
//!   the others: it takes free room only, so such entries cannot take turns pushing
//!   each other out at every later `now` (which would write the status on every
//!   reconcile).

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};

use bootc_crds::node::BootedImage;
use bootc_crds::pool::{DeployHistoryEntry, HistoryOrigin};
use bootc_crds::{Digest, ImageRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod observed;
pub use observed::{Observed, OnDigest};

/// What one member node reports as booted, borrowed from its BootcNode where it can be
/// (a plan reads every member's report: copying them cost a fifth of a plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootedReport<'a> {
    /// The node's name; a node appearing more than once counts once.
    pub node: Cow<'a, str>,
    /// The image reference bootc tracks; may carry a (manifest-list) digest after `@`.
    pub image: Cow<'a, str>,
    /// The per-architecture manifest digest (`sha256:<hex>`).
    pub image_digest: Cow<'a, str>,
    /// The image's version label, when it has one.
    pub version: Option<Cow<'a, str>>,
    /// When the agent first saw this digest booted.
    pub since: Option<Time>,
    /// The earliest time the cluster can vouch for this node: its Node's
    /// `creationTimestamp`; an earlier `since` is raised to it.
    pub not_before: Option<Time>,
}

impl<'a> BootedReport<'a> {
    /// What `node` (registered at `not_before`) reports in its BootcNode's
    /// `status.booted`.
    pub fn from_booted(
        node: impl Into<Cow<'a, str>>,
        booted: &'a BootedImage,
        not_before: Option<Time>,
    ) -> Self {
        BootedReport {
            node: node.into(),
            image: Cow::Borrowed(&booted.image.image),
            image_digest: Cow::Borrowed(&booted.image.image_digest),
            version: booted.image.version.as_deref().map(Cow::Borrowed),
            since: booted.since.clone(),
            not_before,
        }
    }

    /// `since` raised to `not_before`; `None` without `since`.
    fn raised_since(&self) -> Option<&Time> {
        let since = self.since.as_ref()?;
        Some(match &self.not_before {
            Some(floor) if floor > since => floor,
            _ => since,
        })
    }

    /// The order used to pick one report when a node appears more than once: the latest
    /// `since`, then the largest digest, image and version. Independent of input order.
    fn precedence(&self) -> (&Option<Time>, &str, &str, Option<&str>) {
        (
            &self.since,
            &self.image_digest,
            &self.image,
            self.version.as_deref(),
        )
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

/// What the controller knows about the pool for one merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool<'a> {
    /// The pool's target now.
    pub target: Option<TargetImage<'a>>,
    /// The pool's target before this plan (the previous status's `targetDigest`).
    pub targeted_before: Option<&'a str>,
    /// The plan's time: no time in the history is later.
    pub now: &'a Time,
    /// `spec.history.limit`.
    pub limit: usize,
}

impl Pool<'_> {
    /// Whether the controller targeted `digest` (now or in the previous status).
    fn targeted(&self, digest: &str) -> bool {
        self.target.is_some_and(|t| t.digest == digest) || self.targeted_before == Some(digest)
    }
}

/// The digest whose entry a node's booted image counts for (see the module docs): the
/// target digest when the node is on it, else the digest inside its `image`, else its
/// per-arch `imageDigest`. `None` when the node reports no digest at all.
pub fn digest_of<'a>(
    observed: &'a BootedReport<'_>,
    target: Option<&TargetImage<'a>>,
) -> Option<&'a str> {
    digest_of_in(observed, target.map(|t| t.digest))
}

/// [`digest_of`], with the target's digest alone.
fn digest_of_in<'a>(observed: &'a BootedReport<'_>, target: Option<&'a str>) -> Option<&'a str> {
    let per_arch = Some(&*observed.image_digest).filter(|d| !d.is_empty());
    let target = target.filter(|d| !d.is_empty());
    if target.is_some() && per_arch == target {
        return target;
    }
    // The digest in the reference, the target's or not, comes before the per-arch one.
    bootc_crds::image_ref::digest_text_in(&observed.image).or(per_arch)
}

/// The new deployHistory from the previous one and what the members run now.
///
/// For every digest D some member counts for ([`digest_of`]), with `n` the number of
/// distinct nodes on it now and `since` their `since` times, bounded as the module docs
/// say:
///
/// - `nodeCount = max(old, n)`, `firstDeployed = min(old, min since)`,
///   `lastDeployed = max(old, max since)`;
/// - `version`: the one most of those nodes report (ties: the smallest), else the
///   target's when D is the target digest, else the old one;
/// - `image`: the target's pin when D is the target digest, else the old one, else the
///   node's repository pinned at D;
/// - `origin`: `Targeted` when the pool targets D now or did before, else the old one,
///   else `Observed`.
///
/// Entries no member counts for are kept as they are (their times brought back to `now`
/// at the latest). Duplicated digests in `previous` are folded into one. The result is
/// sorted by `lastDeployed`, newest first, then by digest, and cut to `limit` entries,
/// `Observed` ones first.
pub fn merge(
    previous: &[DeployHistoryEntry],
    observed: &[BootedReport<'_>],
    pool: &Pool<'_>,
) -> Vec<DeployHistoryEntry> {
    let target = pool.target.map(|t| t.digest);
    merge_observed(previous, &Observed::of(observed, target), pool)
}

/// [`merge`], with the reports already gathered by digest (against the target's
/// digest).
pub fn merge_observed(
    previous: &[DeployHistoryEntry],
    observed: &Observed,
    pool: &Pool<'_>,
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
    for entry in entries.values_mut() {
        bound(entry, pool);
    }
    let mut stamped = BTreeSet::new();
    for (digest, on) in observed.iter() {
        let seen = DigestSeen::of(on, digest, pool.target, pool.now);
        match entries.get_mut(digest) {
            Some(entry) => seen.widen(entry),
            None => {
                if seen.last.is_none() && seen.later {
                    stamped.insert(digest.to_owned());
                }
                if let Some(mut entry) = seen.entry(digest.to_owned(), on, pool.now) {
                    bound(&mut entry, pool);
                    entries.insert(digest.to_owned(), entry);
                }
            }
        }
    }
    let mut history: Vec<DeployHistoryEntry> = entries.into_values().collect();
    cut(&mut history, pool.limit, &stamped);
    history.sort_by(newest_first);
    history
}

/// A stored entry as the controller vouches for it: no time after `now`, and targeted
/// when the pool targets its digest now or did before, or marked it failed.
fn bound(entry: &mut DeployHistoryEntry, pool: &Pool<'_>) {
    if entry.last_deployed > *pool.now {
        entry.last_deployed = pool.now.clone();
    }
    if entry.first_deployed > *pool.now {
        entry.first_deployed = pool.now.clone();
    }
    if entry.failed || pool.targeted(&entry.digest) {
        entry.origin = HistoryOrigin::Targeted;
    }
}

/// Keeps at most `limit` entries of `history`: targeted before observed, and within
/// each, entries with times of their own before new ones `stamped` with `now` (see the
/// module docs), the newest first. An entry cut once is thus cut again when it comes
/// back stamped at a later `now`.
fn cut(history: &mut Vec<DeployHistoryEntry>, limit: usize, stamped: &BTreeSet<String>) {
    let rank = |e: &DeployHistoryEntry| {
        let stamped = stamped.contains(&e.digest);
        match e.origin {
            HistoryOrigin::Targeted => u8::from(stamped),
            HistoryOrigin::Observed => 2 + u8::from(stamped),
        }
    };
    history.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| newest_first(a, b)));
    history.truncate(limit);
}

/// What the nodes on one digest say now, their times bounded (see the module docs).
struct DigestSeen {
    count: i32,
    first: Option<Time>,
    last: Option<Time>,
    /// Some node reports a `since` after `now`.
    later: bool,
    version: Option<String>,
    /// The target's pin, when the digest is the target's.
    target_image: Option<String>,
}

impl DigestSeen {
    fn of(on: &OnDigest, digest: &str, target: Option<TargetImage<'_>>, now: &Time) -> Self {
        let target = target.filter(|t| t.digest == digest);
        let (first, last, later) = on.times(now);
        DigestSeen {
            count: i32::try_from(on.nodes()).unwrap_or(i32::MAX),
            first: first.cloned(),
            last: last.cloned(),
            later,
            version: on
                .majority_version()
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

    /// A new entry, when some node gives it a time: its nodes' times, or `now` when some
    /// node reports a time after it.
    fn entry(self, digest: String, on: &OnDigest, now: &Time) -> Option<DeployHistoryEntry> {
        let (first, last) = match (self.first, self.last, self.later) {
            (first, _, true) => (first.unwrap_or_else(|| now.clone()), now.clone()),
            (Some(first), Some(last), false) => (first, last),
            _ => return None,
        };
        let image = self.target_image.unwrap_or_else(|| {
            on.images()
                .map(|image| pin(image, &digest))
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
            origin: HistoryOrigin::Observed,
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
    kept.origin = kept.origin.max(other.origin);
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
