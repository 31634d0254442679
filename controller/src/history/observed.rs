//! What the members report as booted, gathered by the digest each counts for
//! ([`super::digest_of`]): per digest, how many nodes, and how many of them report each
//! time, version and image. Kept as counts, so that one node's new report is one removal
//! and one addition, and the gathering of a thousand unchanged reports need not be done
//! again (the planner keeps one between plans, see `plan::settled`).
//!
//! Gathered from scratch or step by step, the same reports give the same value: every
//! count that falls to zero is removed with its key.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{BootedReport, digest_of_in};

/// What the nodes on one digest report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OnDigest {
    /// How many nodes.
    nodes: usize,
    /// Their `since` raised to their registration (nodes without `since`: none), each
    /// with how many nodes report it.
    times: BTreeMap<Time, usize>,
    /// The versions they report, each with how many report it.
    versions: BTreeMap<String, usize>,
    /// The images they track, each with how many track it.
    images: BTreeMap<String, usize>,
}

impl OnDigest {
    /// How many nodes are on the digest.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The earliest and the latest time no later than `now`, and whether some node
    /// reports a time after it.
    pub fn times(&self, now: &Time) -> (Option<&Time>, Option<&Time>, bool) {
        let first = self.times.keys().next().filter(|t| *t <= now);
        let last = self.times.range(..=now.clone()).next_back().map(|(t, _)| t);
        let later = self.times.keys().next_back().is_some_and(|t| t > now);
        (first, last, later)
    }

    /// The version most nodes report; ties go to the smallest.
    pub fn majority_version(&self) -> Option<&str> {
        // Ascending keys; `max_by_key` keeps the last maximum, so compare on Reverse.
        self.versions
            .iter()
            .max_by_key(|&(v, n)| (n, Reverse(v)))
            .map(|(v, _)| v.as_str())
    }

    /// The images the nodes track.
    pub fn images(&self) -> impl Iterator<Item = &str> {
        self.images.keys().map(String::as_str)
    }

    fn change(&mut self, report: &BootedReport<'_>, add: bool) {
        if add {
            self.nodes += 1;
        } else {
            self.nodes = self.nodes.saturating_sub(1);
        }
        if let Some(time) = report.raised_since() {
            change_key(&mut self.times, time, add);
        }
        if let Some(version) = report.version.as_deref() {
            change_key(&mut self.versions, version, add);
        }
        change_key(&mut self.images, &*report.image, add);
    }
}

/// Every digest some node counts for, with what its nodes report.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    by_digest: BTreeMap<String, OnDigest>,
    /// The last report's image and per-arch digest, and the digest it counted for: most
    /// nodes run what the node before them runs, and reading the digest out of an image
    /// reference again for each of them was most of a gathering.
    last: Option<Last>,
}

#[derive(Debug, Clone)]
struct Last {
    image: String,
    image_digest: String,
    target: Option<String>,
    digest: Option<String>,
}

/// Gathered from the same reports: what was read last is no part of the value.
impl PartialEq for Observed {
    fn eq(&self, other: &Self) -> bool {
        self.by_digest == other.by_digest
    }
}

impl Eq for Observed {}

impl Observed {
    /// One report per node gathered (whatever order or repetition `reports` come in:
    /// of a node's reports, the one of highest precedence), against the target digest.
    pub fn of(reports: &[BootedReport<'_>], target: Option<&str>) -> Self {
        let mut observed = Observed::default();
        let mut nodes: BTreeMap<&str, &BootedReport<'_>> = BTreeMap::new();
        for r in reports {
            let kept = nodes.entry(&r.node).or_insert(r);
            if r.precedence() > kept.precedence() {
                *kept = r;
            }
        }
        nodes.into_values().for_each(|r| observed.add(r, target));
        observed
    }

    /// One more node's report.
    pub fn add(&mut self, report: &BootedReport<'_>, target: Option<&str>) {
        let Some(digest) = counted_for(&mut self.last, report, target) else {
            return;
        };
        if let Some(on) = self.by_digest.get_mut(digest) {
            on.change(report, true);
        } else {
            let mut on = OnDigest::default();
            on.change(report, true);
            self.by_digest.insert(digest.to_owned(), on);
        }
    }

    /// A report added before, taken back (its node changed or left).
    pub fn remove(&mut self, report: &BootedReport<'_>, target: Option<&str>) {
        let Some(digest) = counted_for(&mut self.last, report, target) else {
            return;
        };
        if let Some(on) = self.by_digest.get_mut(digest) {
            on.change(report, false);
            if on.nodes == 0 {
                self.by_digest.remove(digest);
            }
        }
    }

    /// Each digest and what its nodes report, in digest order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &OnDigest)> {
        self.by_digest.iter().map(|(d, on)| (d.as_str(), on))
    }
}

/// The digest `report` counts for ([`super::digest_of`]), read again only when it is
/// not the `last` one's.
fn counted_for<'l>(
    last: &'l mut Option<Last>,
    report: &BootedReport<'_>,
    target: Option<&str>,
) -> Option<&'l str> {
    let same = last.as_ref().is_some_and(|l| {
        l.image == report.image
            && l.image_digest == report.image_digest
            && l.target.as_deref() == target
    });
    if !same {
        *last = Some(Last {
            image: report.image.to_string(),
            image_digest: report.image_digest.to_string(),
            target: target.map(str::to_owned),
            digest: digest_of_in(report, target).map(str::to_owned),
        });
    }
    last.as_ref().and_then(|l| l.digest.as_deref())
}

/// One more `key` (`add`) or one fewer; a key counted zero times is removed.
fn change_key<K, Q>(counts: &mut BTreeMap<K, usize>, key: &Q, add: bool)
where
    K: Borrow<Q> + Ord,
    Q: Ord + ToOwned<Owned = K> + ?Sized,
{
    match counts.get_mut(key) {
        Some(n) if !add && *n <= 1 => {
            counts.remove(key);
        }
        Some(n) if !add => *n -= 1,
        Some(n) => *n += 1,
        None if add => {
            counts.insert(key.to_owned(), 1);
        }
        None => {}
    }
}
