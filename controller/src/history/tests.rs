use std::collections::{BTreeMap, BTreeSet};

use bootc_crds::conditions::to_time;
use bootc_crds::node::ImageStatus;
use chrono::{TimeDelta, TimeZone, Utc};
use proptest::prelude::*;

use super::*;

const REPO: &str = "quay.io/acme/os";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn pinned(c: char) -> String {
    format!("{REPO}@{}", digest(c))
}

/// 2025-06-01 at `hh:mm` UTC.
fn at(hh_mm: &str) -> Time {
    let (h, m) = hh_mm.split_once(':').unwrap();
    minutes(h.parse::<i64>().unwrap() * 60 + m.parse::<i64>().unwrap())
}

fn minutes(m: i64) -> Time {
    let base = Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap();
    to_time(base + TimeDelta::minutes(m)).unwrap()
}

/// The plan's time in the tests that are not about it: a day after every report.
fn now() -> Time {
    minutes(24 * 60)
}

/// [`super::merge`] at [`now`], the pool having targeted nothing before.
fn merge(
    previous: &[DeployHistoryEntry],
    observed: &[BootedReport<'static>],
    target: Option<TargetImage<'_>>,
    limit: usize,
) -> Vec<DeployHistoryEntry> {
    merge_at(previous, observed, target, &now(), limit)
}

fn merge_at(
    previous: &[DeployHistoryEntry],
    observed: &[BootedReport<'static>],
    target: Option<TargetImage<'_>>,
    now: &Time,
    limit: usize,
) -> Vec<DeployHistoryEntry> {
    let pool = Pool {
        target,
        targeted_before: None,
        now,
        limit,
    };
    super::merge(previous, observed, &pool)
}

fn node(name: &str, image: &str, image_digest: &str, since: Option<Time>) -> BootedReport<'static> {
    BootedReport {
        node: name.to_owned().into(),
        image: image.to_owned().into(),
        image_digest: image_digest.to_owned().into(),
        version: None,
        since,
        not_before: None,
    }
}

fn targeted(mut e: DeployHistoryEntry) -> DeployHistoryEntry {
    e.origin = HistoryOrigin::Targeted;
    e
}

fn entry(
    d: char,
    version: Option<&str>,
    count: i32,
    first: &str,
    last: &str,
) -> DeployHistoryEntry {
    DeployHistoryEntry {
        digest: digest(d),
        image: pinned(d),
        version: version.map(str::to_owned),
        node_count: count,
        first_deployed: at(first),
        last_deployed: at(last),
        origin: HistoryOrigin::Observed,
        failed: false,
        failed_reason: None,
        failed_time: None,
        failed_generation: None,
    }
}

// ---------------------------------------------------------------------------------------
// The table: v1 -> v2 -> v3 -> back to v1 on 6 nodes, history.limit 3.
// ---------------------------------------------------------------------------------------

/// A release: its manifest-list digest (what the pool targets and what the nodes track
/// after `bootc switch repo@list`), the per-arch digests bootc reports, and its version.
struct Release {
    list: char,
    amd64: char,
    arm64: char,
    version: &'static str,
}

const V1: Release = Release {
    list: 'a',
    amd64: '1',
    arm64: '4',
    version: "1.0",
};
const V2: Release = Release {
    list: 'b',
    amd64: '2',
    arm64: '5',
    version: "2.0",
};
const V3: Release = Release {
    list: 'c',
    amd64: '3',
    arm64: '6',
    version: "3.0",
};

fn release(v: u8) -> &'static Release {
    match v {
        1 => &V1,
        2 => &V2,
        _ => &V3,
    }
}

/// n1..n5 are amd64, n6 is arm64: its per-arch digest differs, its entry must not.
fn booted(n: usize, v: u8, since: &str) -> BootedReport<'static> {
    let r = release(v);
    let per_arch = if n == 6 { r.arm64 } else { r.amd64 };
    BootedReport {
        node: format!("n{n}").into(),
        image: pinned(r.list).into(),
        image_digest: digest(per_arch).into(),
        version: Some(r.version.to_owned().into()),
        since: Some(at(since)),
        not_before: None,
    }
}

struct Step {
    what: &'static str,
    /// The release the pool targets.
    target: u8,
    /// What n1 and n2, n3 and n4, n5 and n6 report as booted: (release, since). The
    /// nodes reboot two at a time.
    pairs: [(u8, &'static str); 3],
    /// The deployHistory after this step, by hand: (release, nodeCount, first, last).
    expected: &'static [(u8, i32, &'static str, &'static str)],
}

const STEPS: &[Step] = &[
    Step {
        what: "all six nodes provisioned on v1",
        target: 1,
        pairs: [(1, "00:00"); 3],
        expected: &[(1, 6, "00:00", "00:00")],
    },
    Step {
        what: "v2: n1, n2 rebooted",
        target: 2,
        pairs: [(2, "01:00"), (1, "00:00"), (1, "00:00")],
        // v1 keeps 6: the most nodes seen on it at once.
        expected: &[(2, 2, "01:00", "01:00"), (1, 6, "00:00", "00:00")],
    },
    Step {
        what: "v2: n3, n4 rebooted",
        target: 2,
        pairs: [(2, "01:00"), (2, "01:10"), (1, "00:00")],
        expected: &[(2, 4, "01:00", "01:10"), (1, 6, "00:00", "00:00")],
    },
    Step {
        what: "v2: n5, n6 rebooted, rollout complete",
        target: 2,
        pairs: [(2, "01:00"), (2, "01:10"), (2, "01:20")],
        // v1 is booted nowhere: kept as it was.
        expected: &[(2, 6, "01:00", "01:20"), (1, 6, "00:00", "00:00")],
    },
    Step {
        what: "v3: n1, n2 rebooted",
        target: 3,
        pairs: [(3, "02:00"), (2, "01:10"), (2, "01:20")],
        expected: &[
            (3, 2, "02:00", "02:00"),
            (2, 6, "01:00", "01:20"),
            (1, 6, "00:00", "00:00"),
        ],
    },
    Step {
        what: "v3: n3, n4 rebooted, then v3 is found bad",
        target: 3,
        pairs: [(3, "02:00"), (3, "02:10"), (2, "01:20")],
        expected: &[
            (3, 4, "02:00", "02:10"),
            (2, 6, "01:00", "01:20"),
            (1, 6, "00:00", "00:00"),
        ],
    },
    Step {
        what: "back to v1: n1, n2 rebooted",
        target: 1,
        pairs: [(1, "03:00"), (3, "02:10"), (2, "01:20")],
        // v1 moves to the top; its firstDeployed stays 00:00 and its count stays 6.
        expected: &[
            (1, 6, "00:00", "03:00"),
            (3, 4, "02:00", "02:10"),
            (2, 6, "01:00", "01:20"),
        ],
    },
    Step {
        what: "back to v1: n3, n4 rebooted",
        target: 1,
        pairs: [(1, "03:00"), (1, "03:10"), (2, "01:20")],
        expected: &[
            (1, 6, "00:00", "03:10"),
            (3, 4, "02:00", "02:10"),
            (2, 6, "01:00", "01:20"),
        ],
    },
    Step {
        what: "back to v1: n5, n6 rebooted, rollback complete",
        target: 1,
        pairs: [(1, "03:00"), (1, "03:10"), (1, "03:20")],
        expected: &[
            (1, 6, "00:00", "03:20"),
            (3, 4, "02:00", "02:10"),
            (2, 6, "01:00", "01:20"),
        ],
    },
];

const TABLE_LIMIT: usize = 3;

fn step_observed(step: &Step) -> Vec<BootedReport<'static>> {
    (1..=6)
        .map(|n| {
            let (v, since) = step.pairs[(n - 1) / 2];
            booted(n, v, since)
        })
        .collect()
}

fn step_target(step: &Step) -> (String, String, &'static str) {
    let r = release(step.target);
    (digest(r.list), pinned(r.list), r.version)
}

fn merge_step(previous: &[DeployHistoryEntry], step: &Step) -> Vec<DeployHistoryEntry> {
    let (d, image, version) = step_target(step);
    let target = TargetImage {
        digest: &d,
        image: &image,
        version: Some(version),
    };
    merge(previous, &step_observed(step), Some(target), TABLE_LIMIT)
}

fn expected_table(step: &Step) -> Vec<DeployHistoryEntry> {
    step.expected
        .iter()
        .map(|&(v, count, first, last)| {
            let r = release(v);
            targeted(entry(r.list, Some(r.version), count, first, last))
        })
        .collect()
}

#[test]
fn v1_v2_v3_back_to_v1_on_six_nodes_with_limit_3() {
    let mut history = Vec::new();
    for step in STEPS {
        history = merge_step(&history, step);
        assert_eq!(history, expected_table(step), "after: {}", step.what);

        // The same reconcile again (nothing changed, or a replayed watch event).
        assert_eq!(
            merge_step(&history, step),
            history,
            "re-merged: {}",
            step.what
        );

        // A controller restart: the history comes back from the stored status.
        let stored = serde_json::to_string(&history).unwrap();
        let restored: Vec<DeployHistoryEntry> = serde_json::from_str(&stored).unwrap();
        assert_eq!(restored, history);
        assert_eq!(
            merge_step(&restored, step),
            history,
            "restarted: {}",
            step.what
        );
    }

    // Stale snapshots replayed after the fact (old watch events, a lagging cache) change
    // nothing: every one of them is already absorbed.
    for step in STEPS {
        assert_eq!(
            merge_step(&history, step),
            history,
            "replayed late: {}",
            step.what
        );
    }
}

#[test]
fn a_fourth_release_evicts_the_oldest_last_deployed() {
    let mut history = Vec::new();
    for step in STEPS {
        history = merge_step(&history, step);
    }
    // A v4 canary on n1 (tracks list 'd', reports per-arch '7').
    let mut observed = step_observed(&STEPS[STEPS.len() - 1]);
    observed[0] = BootedReport {
        node: "n1".to_owned().into(),
        image: pinned('d').into(),
        image_digest: digest('7').into(),
        version: Some("4.0".to_owned().into()),
        since: Some(at("04:00")),
        not_before: None,
    };
    let owned = owned_target('d', Some("4.0"));
    let target = as_target(&owned).unwrap();
    let next = merge(&history, &observed, Some(target), TABLE_LIMIT);
    assert_eq!(
        next,
        vec![
            targeted(entry('d', Some("4.0"), 1, "04:00", "04:00")),
            targeted(entry('a', Some("1.0"), 6, "00:00", "03:20")),
            targeted(entry('c', Some("3.0"), 4, "02:00", "02:10")),
        ]
    );
    assert_eq!(merge(&next, &observed, Some(target), TABLE_LIMIT), next);
}

// ---------------------------------------------------------------------------------------
// The decisions, one by one.
// ---------------------------------------------------------------------------------------

#[test]
fn manifest_list_target_and_per_arch_reports_make_one_entry() {
    let owned = owned_target('a', Some("1.0"));
    let target = as_target(&owned).unwrap();
    let observed = [
        node("amd", &pinned('a'), &digest('1'), Some(at("00:05"))),
        node("arm", &pinned('a'), &digest('2'), Some(at("00:10"))),
    ];
    let history = merge(&[], &observed, Some(target), 5);
    assert_eq!(
        history,
        vec![targeted(entry('a', Some("1.0"), 2, "00:05", "00:10"))]
    );
}

#[test]
fn node_on_target_by_per_arch_digest_counts_for_the_target() {
    // The pool pins the per-arch digest '1' while the node tracks the list 'a'.
    let owned = owned_target('1', None);
    let target = as_target(&owned).unwrap();
    let observed = [node("n", &pinned('a'), &digest('1'), Some(at("00:00")))];
    assert_eq!(
        digest_of(&observed[0], Some(&target)),
        Some(digest('1').as_str())
    );
    assert_eq!(
        merge(&[], &observed, Some(target), 5),
        vec![targeted(entry('1', None, 1, "00:00", "00:00"))]
    );
    // Without that target the node counts for the digest it tracks.
    assert_eq!(digest_of(&observed[0], None), Some(digest('a').as_str()));
}

#[test]
fn node_tracking_a_tag_counts_for_its_per_arch_digest() {
    let observed = [node(
        "n",
        "quay.io/acme/os:latest",
        &digest('1'),
        Some(at("00:00")),
    )];
    assert_eq!(
        merge(&[], &observed, None, 5),
        vec![entry('1', None, 1, "00:00", "00:00")]
    );
}

#[test]
fn image_is_normalised_to_the_pin() {
    let observed = [node(
        "n",
        &format!("quay.io/acme/os:stable@{}", digest('a')),
        &digest('1'),
        Some(at("00:00")),
    )];
    assert_eq!(merge(&[], &observed, None, 5)[0].image, pinned('a'));
}

#[test]
fn nodes_without_since_count_but_bring_no_time() {
    let previous = [entry('a', None, 1, "00:00", "00:10")];
    let observed = [
        node("n1", &pinned('a'), &digest('1'), None),
        node("n2", &pinned('a'), &digest('1'), None),
        node("n3", &pinned('a'), &digest('1'), Some(at("00:05"))),
        // A new digest only since-less nodes run: no entry yet.
        node("n4", &pinned('b'), &digest('2'), None),
    ];
    let history = merge(&previous, &observed, None, 5);
    assert_eq!(history, vec![entry('a', None, 3, "00:00", "00:10")]);
    assert_eq!(merge(&history, &observed, None, 5), history);

    // Once one of them reports since, the entry appears, counting both.
    let mut observed = observed.to_vec();
    observed.push(node("n5", &pinned('b'), &digest('2'), Some(at("00:20"))));
    assert_eq!(
        merge(&history, &observed, None, 5),
        vec![
            entry('b', None, 2, "00:20", "00:20"),
            entry('a', None, 3, "00:00", "00:10"),
        ]
    );
}

#[test]
fn a_node_reported_twice_counts_once() {
    let one = node("n1", &pinned('a'), &digest('1'), Some(at("00:00")));
    let observed = [one.clone(), one.clone(), one];
    assert_eq!(
        merge(&[], &observed, None, 5),
        vec![entry('a', None, 1, "00:00", "00:00")]
    );
}

#[test]
fn entries_nobody_boots_keep_their_values_even_the_target() {
    let previous = [
        entry('a', Some("1.0"), 3, "00:00", "01:00"),
        targeted(entry('b', None, 2, "00:30", "00:40")),
    ];
    let owned = owned_target('b', Some("2.0"));
    let target = as_target(&owned).unwrap();
    assert_eq!(merge(&previous, &[], Some(target), 5), previous.to_vec());
}

#[test]
fn a_node_joining_on_an_old_image_updates_only_that_entry() {
    let previous = [
        entry('b', Some("2.0"), 4, "01:00", "01:10"),
        entry('a', Some("1.0"), 6, "00:00", "00:20"),
    ];
    let observed = [node("new", &pinned('a'), &digest('1'), Some(at("05:00")))];
    assert_eq!(
        merge(&previous, &observed, None, 5),
        vec![
            entry('a', Some("1.0"), 6, "00:00", "05:00"),
            entry('b', Some("2.0"), 4, "01:00", "01:10"),
        ]
    );
}

#[test]
fn version_prefers_the_nodes_then_the_target_then_the_old_one() {
    let previous = [entry('a', Some("old"), 1, "00:00", "00:00")];
    let owned = owned_target('a', Some("target"));
    let target = as_target(&owned).unwrap();
    let mut n = node("n", &pinned('a'), &digest('1'), Some(at("00:00")));
    let version = |n: &BootedReport<'static>, t: Option<TargetImage<'_>>| {
        merge(&previous, std::slice::from_ref(n), t, 5)[0]
            .version
            .clone()
    };
    assert_eq!(version(&n, None).as_deref(), Some("old"));
    assert_eq!(version(&n, Some(target)).as_deref(), Some("target"));
    n.version = Some("node".into());
    assert_eq!(version(&n, Some(target)).as_deref(), Some("node"));
}

#[test]
fn previous_out_of_order_duplicated_or_over_the_limit_is_normalised() {
    let previous = [
        entry('a', None, 1, "00:00", "00:10"),
        entry('c', None, 2, "00:00", "00:30"),
        entry('b', None, 3, "00:00", "00:20"),
        entry('c', Some("3.0"), 5, "00:05", "00:25"),
    ];
    // spec.history.limit lowered to 2.
    assert_eq!(
        merge(&previous, &[], None, 2),
        vec![
            entry('c', Some("3.0"), 5, "00:00", "00:30"),
            entry('b', None, 3, "00:00", "00:20"),
        ]
    );
}

#[test]
fn ties_on_last_deployed_are_broken_by_digest() {
    let observed = [
        node("n1", &pinned('c'), &digest('3'), Some(at("00:00"))),
        node("n2", &pinned('a'), &digest('1'), Some(at("00:00"))),
        node("n3", &pinned('b'), &digest('2'), Some(at("00:00"))),
    ];
    let digests: Vec<String> = merge(&[], &observed, None, 2)
        .into_iter()
        .map(|e| e.digest)
        .collect();
    assert_eq!(digests, vec![digest('a'), digest('b')]);
}

#[test]
fn from_booted_copies_what_history_needs() {
    let booted = BootedImage {
        image: ImageStatus {
            image: pinned('a'),
            image_digest: digest('1'),
            version: Some("1.0".to_owned()),
            ..ImageStatus::default()
        },
        since: Some(at("00:00")),
    };
    assert_eq!(
        BootedReport::from_booted("n1", &booted, Some(at("00:00"))),
        BootedReport {
            node: "n1".to_owned().into(),
            image: pinned('a').into(),
            image_digest: digest('1').into(),
            version: Some("1.0".to_owned().into()),
            since: Some(at("00:00")),
            not_before: Some(at("00:00")),
        }
    );
}

// ---------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------

const HEX: [char; 6] = ['a', 'b', 'c', 'd', 'e', 'f'];

fn arb_digest() -> impl Strategy<Value = String> {
    (0..HEX.len()).prop_map(|i| digest(HEX[i]))
}

fn arb_time() -> impl Strategy<Value = Time> {
    (0i64..40).prop_map(minutes)
}

fn arb_version() -> impl Strategy<Value = Option<String>> {
    proptest::option::of((1u8..4).prop_map(|v| format!("{v}.0")))
}

/// A node: tracks a pinned ref or a tag, reports a per-arch digest, mostly with since.
fn arb_node(names: usize, with_since: bool) -> impl Strategy<Value = BootedReport<'static>> {
    (
        0..names,
        proptest::option::of(arb_digest()),
        arb_digest(),
        arb_version(),
        proptest::bool::weighted(0.8),
        arb_time(),
    )
        .prop_map(
            move |(n, in_ref, per_arch, version, has_since, since)| BootedReport {
                node: format!("n{n}").into(),
                image: in_ref
                    .map_or_else(|| format!("{REPO}:latest"), |d| format!("{REPO}@{d}"))
                    .into(),
                image_digest: per_arch.into(),
                version: version.map(Into::into),
                since: (has_since || with_since).then_some(since),
                not_before: None,
            },
        )
}

fn arb_observed() -> impl Strategy<Value = Vec<BootedReport<'static>>> {
    proptest::collection::vec(arb_node(8, false), 0..12)
}

/// A stored history: one entry per digest, first <= last.
fn arb_previous() -> impl Strategy<Value = Vec<DeployHistoryEntry>> {
    proptest::collection::vec(
        (
            arb_digest(),
            1i32..10,
            0i64..40,
            0i64..20,
            arb_version(),
            any::<bool>(),
        ),
        0..8,
    )
    .prop_map(|rows| {
        let mut by_digest = BTreeMap::new();
        for (d, count, first, span, version, was_target) in rows {
            by_digest.entry(d.clone()).or_insert(DeployHistoryEntry {
                image: format!("{REPO}@{d}"),
                digest: d,
                version,
                node_count: count,
                first_deployed: minutes(first),
                last_deployed: minutes(first + span),
                origin: if was_target {
                    HistoryOrigin::Targeted
                } else {
                    HistoryOrigin::Observed
                },
                failed: false,
                failed_reason: None,
                failed_time: None,
                failed_generation: None,
            });
        }
        by_digest.into_values().collect()
    })
}

/// A target, owned; borrowed with [`as_target`].
type OwnedTarget = Option<(String, String, Option<String>)>;

fn arb_target() -> impl Strategy<Value = OwnedTarget> {
    proptest::option::of(
        (arb_digest(), arb_version()).prop_map(|(d, v)| (d.clone(), format!("{REPO}@{d}"), v)),
    )
}

/// Release `c` (`REPO@` its digest) with `version`, as a target.
fn owned_target(c: char, version: Option<&str>) -> OwnedTarget {
    Some((digest(c), pinned(c), version.map(str::to_owned)))
}

fn as_target(t: &OwnedTarget) -> Option<TargetImage<'_>> {
    t.as_ref().map(|(d, i, v)| TargetImage {
        digest: d,
        image: i,
        version: v.as_deref(),
    })
}

/// The distinct nodes that count for each digest, written from the contract alone: a
/// node reported twice counts by its report with the latest `since` (then the largest
/// digest, image, version); it counts for the target when its per-arch digest or the
/// digest after `@` is the target's, else for the digest after `@`, else for its
/// per-arch digest.
fn counted(
    observed: &[BootedReport<'static>],
    target: Option<TargetImage<'_>>,
) -> BTreeMap<String, usize> {
    let mut nodes: BTreeMap<&str, &BootedReport<'static>> = BTreeMap::new();
    for o in observed {
        let key = |r: &BootedReport<'static>| {
            (
                r.since.clone(),
                r.image_digest.clone(),
                r.image.clone(),
                r.version.clone(),
            )
        };
        let kept = nodes.entry(&o.node).or_insert(o);
        if key(o) > key(kept) {
            *kept = o;
        }
    }
    let mut counts = BTreeMap::new();
    for o in nodes.values() {
        *counts.entry(digest_by_hand(o, target)).or_default() += 1;
    }
    counts
}

/// The digest a report counts for, written from the contract alone (not `digest_of`):
/// the target's when it runs the target (by digest, or by the digest in its reference),
/// else the digest in its reference, else the one it reports.
fn digest_by_hand(o: &BootedReport<'static>, target: Option<TargetImage<'_>>) -> String {
    let in_ref = o.image.split_once('@').map(|(_, d)| d.to_owned());
    let on_target = target.filter(|t| {
        !t.digest.is_empty() && (o.image_digest == t.digest || in_ref.as_deref() == Some(t.digest))
    });
    match (on_target, in_ref) {
        (Some(t), _) => t.digest.to_owned(),
        (None, Some(d)) => d,
        (None, None) => o.image_digest.to_string(),
    }
}

/// The history's order as documented, written here (not `newest_first`): a later
/// lastDeployed first, equal ones by digest.
fn comes_before(a: &DeployHistoryEntry, b: &DeployHistoryEntry) -> bool {
    a.last_deployed > b.last_deployed || (a.last_deployed == b.last_deployed && a.digest < b.digest)
}

fn by_digest(history: &[DeployHistoryEntry]) -> BTreeMap<&str, &DeployHistoryEntry> {
    history.iter().map(|e| (e.digest.as_str(), e)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Merging the same inputs again changes nothing (a reconcile writes nothing, a
    /// replayed watch event does nothing).
    #[test]
    fn idempotent(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        limit in 1usize..8,
    ) {
        let once = merge(&previous, &observed, as_target(&target), limit);
        let twice = merge(&once, &observed, as_target(&target), limit);
        prop_assert_eq!(twice, once);
    }

    /// At most `limit` entries, one per digest, newest lastDeployed first, ties by digest.
    #[test]
    fn bounded_unique_and_ordered(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        limit in 1usize..8,
    ) {
        let history = merge(&previous, &observed, as_target(&target), limit);
        prop_assert!(history.len() <= limit);
        let digests: BTreeSet<&str> = history.iter().map(|e| e.digest.as_str()).collect();
        prop_assert_eq!(digests.len(), history.len());
        for pair in history.windows(2) {
            prop_assert!(comes_before(&pair[0], &pair[1]), "{:?} before {:?}", pair[0], pair[1]);
        }
        for e in &history {
            prop_assert!(e.first_deployed <= e.last_deployed);
            prop_assert!(e.node_count >= 1);
        }
    }

    /// The limit cuts what only nodes reported before what the pool targeted, the
    /// oldest of each first: the history with the largest limit, less some entries.
    #[test]
    fn limit_cuts_observed_entries_first(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        limit in 1usize..8,
    ) {
        let full = merge(&previous, &observed, as_target(&target), 20);
        let cut = merge(&previous, &observed, as_target(&target), limit);
        prop_assert_eq!(cut.len(), full.len().min(limit));
        let kept: Vec<&DeployHistoryEntry> = full.iter().filter(|e| cut.contains(e)).collect();
        prop_assert_eq!(kept.len(), cut.len(), "the cut history is a part of the full one");
        let targeted = |e: &&DeployHistoryEntry| e.origin == HistoryOrigin::Targeted;
        for dropped in full.iter().filter(|e| !cut.contains(e)) {
            for k in &cut {
                if targeted(&dropped) {
                    prop_assert!(targeted(&k), "an observed entry kept over a targeted one");
                    prop_assert!(comes_before(k, dropped));
                } else if !targeted(&k) {
                    prop_assert!(comes_before(k, dropped));
                }
            }
        }
    }

    /// The order and repetition of the reports do not matter: a replayed or duplicated
    /// report never counts twice.
    #[test]
    fn reports_order_and_repetition_do_not_matter(
        (observed, shuffled) in arb_observed()
            .prop_flat_map(|o| (Just(o.clone()), Just(o).prop_shuffle())),
        previous in arb_previous(),
        target in arb_target(),
        limit in 1usize..8,
    ) {
        let expected = merge(&previous, &observed, as_target(&target), limit);
        prop_assert_eq!(merge(&previous, &shuffled, as_target(&target), limit), expected.clone());
        let doubled: Vec<BootedReport<'static>> = observed.iter().chain(shuffled.iter()).cloned().collect();
        prop_assert_eq!(merge(&previous, &doubled, as_target(&target), limit), expected.clone());
        // One report a node, in name order (as the planner passes them): the winning
        // report of each node is the last after sorting by node, then precedence.
        let mut sorted = doubled.clone();
        sorted.sort_by(|a, b| a.node.cmp(&b.node).then_with(|| a.precedence().cmp(&b.precedence())));
        let one_each: Vec<BootedReport<'static>> = sorted
            .iter()
            .enumerate()
            .filter(|(i, o)| sorted.get(i + 1).is_none_or(|next| next.node != o.node))
            .map(|(_, o)| o.clone())
            .collect();
        prop_assert!(one_each.windows(2).all(|w| w[0].node < w[1].node));
        prop_assert_eq!(merge(&previous, &one_each, as_target(&target), limit), expected);
    }

    /// Counts never go down, times never move backwards; no count exceeds the most nodes
    /// actually seen (no event-style counter); every digest on which a node counts is at
    /// least that many.
    #[test]
    fn counts_and_times_only_widen(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
    ) {
        let history = merge(&previous, &observed, as_target(&target), 20);
        let old = by_digest(&previous);
        let now = counted(&observed, as_target(&target));
        for e in &history {
            let seen = now.get(&e.digest).copied().unwrap_or(0);
            let seen = i32::try_from(seen).unwrap();
            match old.get(e.digest.as_str()) {
                Some(o) => {
                    prop_assert!(e.node_count >= o.node_count);
                    prop_assert!(e.first_deployed <= o.first_deployed);
                    prop_assert!(e.last_deployed >= o.last_deployed);
                    prop_assert_eq!(e.node_count, o.node_count.max(seen));
                    if seen == 0 {
                        let mut kept = (*o).clone();
                        kept.origin = e.origin;
                        prop_assert_eq!(e, &kept, "not booted anywhere: kept as is");
                    }
                }
                None => prop_assert_eq!(e.node_count, seen),
            }
        }
        // Nothing stored is lost while the limit allows it.
        for d in old.keys() {
            prop_assert!(history.iter().any(|e| e.digest == *d));
        }
    }

    /// A restart with empty caches (no reports yet) loses nothing.
    #[test]
    fn no_reports_keep_the_history(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        limit in 1usize..8,
    ) {
        let history = merge(&previous, &observed, as_target(&target), limit);
        prop_assert_eq!(merge(&history, &[], as_target(&target), limit), history.clone());
        prop_assert_eq!(merge(&history, &[], None, limit), history);
    }

    /// A node joining on some (old) image touches only the entry it counts for, and that
    /// one only widens.
    #[test]
    fn a_joining_node_touches_only_its_entry(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        joiner in arb_node(1, false),
        limit in 1usize..8,
    ) {
        let joiner = BootedReport { node: "joiner".into(), ..joiner };
        let before = merge(&previous, &observed, as_target(&target), limit);
        let mut with = observed.clone();
        with.push(joiner.clone());
        let after = merge(&previous, &with, as_target(&target), limit);
        let own = Some(digest_by_hand(&joiner, as_target(&target)));
        let before_by = by_digest(&before);
        for e in &after {
            let Some(b) = before_by.get(e.digest.as_str()) else { continue };
            if Some(&e.digest) == own.as_ref() {
                prop_assert!(e.node_count >= b.node_count);
                prop_assert!(e.node_count <= b.node_count + 1);
                prop_assert!(e.first_deployed <= b.first_deployed);
                prop_assert!(e.last_deployed >= b.last_deployed);
            } else {
                prop_assert_eq!(e, *b);
            }
        }
    }

    /// Counts and times are joins: snapshots applied in either order, or a stale one
    /// replayed late, give the same counts and times (all reports carry `since`; the
    /// limit does not cut).
    #[test]
    fn snapshots_commute(
        previous in arb_previous(),
        a in proptest::collection::vec(arb_node(8, true), 0..10),
        b in proptest::collection::vec(arb_node(8, true), 0..10),
        target in arb_target(),
    ) {
        let t = as_target(&target);
        let ab = merge(&merge(&previous, &a, t, 20), &b, t, 20);
        let ba = merge(&merge(&previous, &b, t, 20), &a, t, 20);
        let key = |h: &[DeployHistoryEntry]| -> Vec<(String, i32, Time, Time)> {
            h.iter()
                .map(|e| (e.digest.clone(), e.node_count, e.first_deployed.clone(), e.last_deployed.clone()))
                .collect()
        };
        prop_assert_eq!(key(&ab), key(&ba));
        // Replaying `a` after `b` changes no count or time.
        prop_assert_eq!(key(&merge(&ab, &a, t, 20)), key(&ab));
    }
}

// ---------------------------------------------------------------------------------------
// What one node's report may not do.
// ---------------------------------------------------------------------------------------

const FOREIGN: &str = "evil.example/os";

/// A node reporting a foreign image booted "since" a year after `now`.
fn liar(name: &str) -> BootedReport<'static> {
    BootedReport {
        node: name.to_owned().into(),
        image: format!("{FOREIGN}@{}", digest('f')).into(),
        image_digest: digest('f').into(),
        version: Some("6.6.6".to_owned().into()),
        since: Some(minutes(24 * 60 + 365 * 24 * 60)),
        not_before: None,
    }
}

#[test]
fn a_lying_report_is_observed_at_now_and_moves_nothing_else() {
    let owned = owned_target('a', Some("1.0"));
    let target = as_target(&owned).unwrap();
    let honest = [node("n1", &pinned('a'), &digest('1'), Some(at("00:10")))];
    let previous = [targeted(entry('b', None, 3, "00:00", "00:05"))];
    let without = merge(&previous, &honest, Some(target), 3);
    let mut with = honest.to_vec();
    with.push(liar("n2"));
    let history = merge(&previous, &with, Some(target), 3);
    let mut lie = entry('f', Some("6.6.6"), 1, "00:00", "00:00");
    lie.image = format!("{FOREIGN}@{}", digest('f'));
    lie.first_deployed = now();
    lie.last_deployed = now();
    assert_eq!(history[0], lie, "observed, its times the plan's now");
    assert_eq!(history[1..], without[..]);
    // Again, and a day later with the same reports: nothing changes.
    assert_eq!(merge(&history, &with, Some(target), 3), history);
    let later = minutes(48 * 60);
    assert_eq!(merge_at(&history, &with, Some(target), &later, 3), history);
    // With no room, the lie goes before any targeted entry.
    let history = merge(&previous, &with, Some(target), 2);
    assert_eq!(history, without);
}

#[test]
fn a_stored_time_after_now_is_brought_back_to_now() {
    let mut future = entry('f', None, 1, "00:00", "00:00");
    future.first_deployed = minutes(30 * 24 * 60);
    future.last_deployed = minutes(30 * 24 * 60);
    let history = merge(&[future], &[], None, 5);
    assert_eq!(history[0].first_deployed, now());
    assert_eq!(history[0].last_deployed, now());
}

#[test]
fn a_time_before_the_node_was_registered_is_raised_to_it() {
    let mut n = node("n1", &pinned('a'), &digest('1'), Some(at("00:10")));
    n.not_before = Some(at("02:00"));
    assert_eq!(
        merge(&[], &[n], None, 5),
        vec![entry('a', None, 1, "02:00", "02:00")]
    );
}

#[test]
fn the_previous_target_and_a_failed_mark_make_an_entry_targeted() {
    let mut failed = entry('c', None, 1, "00:00", "00:00");
    failed.failed = true;
    let previous = [
        entry('a', None, 1, "00:00", "00:00"),
        entry('b', None, 1, "00:00", "00:00"),
        failed,
    ];
    let now = now();
    let (d, image) = (digest('a'), pinned('a'));
    let pool = Pool {
        target: Some(TargetImage {
            digest: &d,
            image: &image,
            version: None,
        }),
        targeted_before: Some(&digest('b')),
        now: &now,
        limit: 5,
    };
    let history = super::merge(&previous, &[], &pool);
    assert!(
        history.iter().all(|e| e.origin == HistoryOrigin::Targeted),
        "{history:?}"
    );
    // A digest only a node reports stays observed, however often it is merged.
    let observed = [node("n", &pinned('e'), &digest('5'), Some(at("00:01")))];
    let history = super::merge(&history, &observed, &pool);
    let e = history.iter().find(|e| e.digest == digest('e')).unwrap();
    assert_eq!(e.origin, HistoryOrigin::Observed);
    assert_eq!(super::merge(&history, &observed, &pool), history);
}

/// Nodes whose `since` may lie anywhere, far future included.
fn arb_any_time_node() -> impl Strategy<Value = BootedReport<'static>> {
    (arb_node(8, false), proptest::option::of(0i64..100_000)).prop_map(|(n, since)| BootedReport {
        since: since.map(minutes),
        ..n
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No time in the history is after the plan's `now`; merging again at the same or a
    /// later `now` with reports that are all still in its future changes nothing.
    #[test]
    fn times_never_pass_now(
        previous in arb_previous(),
        observed in proptest::collection::vec(arb_any_time_node(), 0..12),
        target in arb_target(),
        now in 0i64..60,
        later in 0i64..60,
        limit in 1usize..8,
    ) {
        let now = minutes(now);
        let history = merge_at(&previous, &observed, as_target(&target), &now, limit);
        for e in &history {
            prop_assert!(e.last_deployed <= now && e.first_deployed <= now);
            prop_assert!(e.first_deployed <= e.last_deployed);
        }
        prop_assert_eq!(
            merge_at(&history, &observed, as_target(&target), &now, limit),
            history.clone()
        );
        let later = minutes(60 + later);
        let future: Vec<BootedReport<'static>> = observed
            .iter()
            .filter(|o| o.since.as_ref().is_some_and(|s| *s > later))
            .cloned()
            .collect();
        let again = merge_at(&history, &future, as_target(&target), &later, limit);
        let times = |h: &[DeployHistoryEntry]| -> Vec<(String, Time, Time)> {
            h.iter()
                .map(|e| (e.digest.clone(), e.first_deployed.clone(), e.last_deployed.clone()))
                .collect()
        };
        let before: BTreeMap<String, (Time, Time)> = times(&history)
            .into_iter()
            .map(|(d, f, l)| (d, (f, l)))
            .collect();
        for (d, f, l) in times(&again) {
            if let Some(old) = before.get(&d) {
                prop_assert_eq!(&(f, l), old, "a report still in the future moved {}", d);
            }
        }
    }

    /// An entry is targeted exactly when the pool targets its digest, targeted it before,
    /// it was stored targeted, or it is marked failed.
    #[test]
    fn origin_comes_from_the_pool_never_from_the_nodes(
        previous in arb_previous(),
        observed in arb_observed(),
        target in arb_target(),
        before in proptest::option::of(arb_digest()),
    ) {
        let now = now();
        let pool = Pool {
            target: as_target(&target),
            targeted_before: before.as_deref(),
            now: &now,
            limit: 20,
        };
        let history = super::merge(&previous, &observed, &pool);
        for e in &history {
            let stored = previous
                .iter()
                .any(|p| p.digest == e.digest && (p.origin == HistoryOrigin::Targeted || p.failed));
            let expected = stored
                || target.as_ref().is_some_and(|t| t.0 == e.digest)
                || before.as_ref() == Some(&e.digest);
            prop_assert_eq!(e.origin == HistoryOrigin::Targeted, expected, "{}", e.digest);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Reports gathered step by step (some added, then some of them taken back and
    /// others added) are the remaining reports gathered from scratch.
    #[test]
    fn reports_gathered_step_by_step_are_those_gathered_at_once(
        first in proptest::collection::vec(arb_any_time_node(), 0..12),
        then in proptest::collection::vec(arb_any_time_node(), 0..12),
        gone in proptest::collection::vec(any::<bool>(), 12),
        target in arb_target(),
    ) {
        let target = target.as_ref().map(|(d, _, _)| d.as_str());
        let mut stepwise = super::Observed::default();
        first.iter().for_each(|r| stepwise.add(r, target));
        let mut left = Vec::new();
        for (r, gone) in first.iter().zip(gone.iter().chain(std::iter::repeat(&false))) {
            if *gone {
                stepwise.remove(r, target);
            } else {
                left.push(r.clone());
            }
        }
        then.iter().for_each(|r| stepwise.add(r, target));
        left.extend(then.iter().cloned());
        // Named apart, so that gathering at once keeps every report.
        for (i, r) in left.iter_mut().enumerate() {
            r.node = format!("node-{i:02}").into();
        }
        prop_assert_eq!(stepwise, super::Observed::of(&left, target));
    }
}
