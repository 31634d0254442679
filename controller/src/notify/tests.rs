#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bootc_crds::conditions::{DEGRADED, UP_TO_DATE};
use bootc_crds::pool::{BootcNodePoolStatus, DeployHistoryEntry};
use chrono::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::json;

use super::deliver::{answer_failure, jittered, parse_url};
use super::events::{EventKind, TEXT_MAX_LEN, describe, transitions};
use super::*;

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn time() -> Time {
    Time(jiff_time())
}

fn jiff_time() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap()
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: None,
        last_transition_time: time(),
    }
}

/// A status targeting `target`, with `UpToDate` (when given), `Degraded` with `degraded`
/// as its reason (when given), and history entries for `history`.
fn status(
    target: Option<char>,
    up: Option<bool>,
    degraded: Option<&str>,
    history: &[char],
) -> BootcNodePoolStatus {
    let mut conditions = Vec::new();
    if let Some(up) = up {
        let reason = if up {
            "AllUpdated"
        } else {
            "RolloutInProgress"
        };
        conditions.push(condition(UP_TO_DATE, up, reason, ""));
    }
    if let Some(reason) = degraded {
        let on = reason != "Healthy";
        conditions.push(condition(
            DEGRADED,
            on,
            reason,
            "2 unhealthy nodes\nhold slots",
        ));
    }
    BootcNodePoolStatus {
        target_image: target.map(|c| format!("registry.test/os@{}", digest(c))),
        target_digest: target.map(digest),
        target_short_digest: target.map(|c| c.to_string().repeat(12)),
        node_count: 3,
        updated_count: 1,
        deploy_history: history
            .iter()
            .map(|c| DeployHistoryEntry {
                digest: digest(*c),
                image: format!("registry.test/os@{}", digest(*c)),
                version: None,
                node_count: 3,
                first_deployed: time(),
                last_deployed: time(),
                origin: bootc_crds::pool::HistoryOrigin::Targeted,
                failed: false,
                failed_reason: None,
                failed_time: None,
                failed_generation: None,
            })
            .collect(),
        conditions,
        ..BootcNodePoolStatus::default()
    }
}

#[test]
fn transitions_announce_each_change_once() {
    use EventKind::*;
    let moving = |t| status(Some(t), Some(false), Some("Healthy"), &['1']);
    let done = |t| status(Some(t), Some(true), Some("Healthy"), &['1']);
    let halted = |t| status(Some(t), Some(false), Some("RolloutHalted"), &['1']);
    let cases: Vec<(
        &str,
        Option<BootcNodePoolStatus>,
        BootcNodePoolStatus,
        Vec<EventKind>,
    )> = vec![
        (
            "a new pool with work to do",
            None,
            moving('2'),
            vec![RolloutStarted],
        ),
        ("a new pool already there", None, done('2'), vec![]),
        (
            "the same status again",
            Some(moving('2')),
            moving('2'),
            vec![],
        ),
        (
            "a new target",
            Some(done('2')),
            moving('3'),
            vec![RolloutStarted],
        ),
        (
            "a new target all nodes run",
            Some(done('2')),
            done('3'),
            vec![],
        ),
        (
            "back to a digest of the history",
            Some(moving('2')),
            moving('1'),
            vec![RolledBack],
        ),
        (
            "back, and every node is there",
            Some(moving('2')),
            done('1'),
            vec![RolledBack, RolloutCompleted],
        ),
        (
            "the rollout finishes",
            Some(moving('2')),
            done('2'),
            vec![RolloutCompleted],
        ),
        ("still up to date", Some(done('2')), done('2'), vec![]),
        (
            "a halt",
            Some(moving('2')),
            halted('2'),
            vec![RolloutHalted],
        ),
        ("still halted", Some(halted('2')), halted('2'), vec![]),
        ("the halt lifts", Some(halted('2')), moving('2'), vec![]),
        (
            "a new target, halted at once",
            Some(done('2')),
            halted('3'),
            vec![RolloutStarted, RolloutHalted],
        ),
        (
            "no target yet",
            None,
            status(None, Some(false), None, &[]),
            vec![],
        ),
        (
            "the first target is in the history: not a rollback",
            Some(status(None, None, None, &['1'])),
            moving('1'),
            vec![RolloutStarted],
        ),
        (
            "UpToDate first written True",
            Some(status(Some('2'), None, None, &[])),
            done('2'),
            vec![],
        ),
    ];
    for (what, old, new, expected) in cases {
        assert_eq!(transitions(old.as_ref(), &new), expected, "{what}");
    }
}

#[test]
fn the_payload_names_the_target_and_says_it_in_one_line() {
    let mut new = status(Some('2'), Some(false), Some("RolloutHalted"), &['1']);
    new.target_version = Some("2026.11".into());
    let started = describe(EventKind::RolloutStarted, "workers", &new);
    let at = chrono::Utc
        .with_ymd_and_hms(2026, 11, 2, 10, 30, 0)
        .unwrap();
    assert_eq!(
        started.payload(at),
        json!({
            "event": "RolloutStarted",
            "pool": "workers",
            "digest": digest('2'),
            "image": format!("registry.test/os@{}", digest('2')),
            "version": "2026.11",
            "message": format!("rolling out registry.test/os@{} to 2 of 3 nodes", digest('2')),
            "time": "2026-11-02T10:30:00Z",
            "text": "Pool workers: rollout of version 2026.11 (222222222222) started, 2 of 3 nodes to update.",
        })
    );
    let halted = describe(EventKind::RolloutHalted, "workers", &new);
    assert_eq!(halted.message, "2 unhealthy nodes hold slots");
    assert!(!halted.text.contains('\n'), "{}", halted.text);
    let mut bare = status(Some('3'), Some(true), None, &[]);
    bare.target_short_digest = None;
    let done = describe(EventKind::RolloutCompleted, "w", &bare);
    assert_eq!(
        done.text,
        "Pool w: rollout of 333333333333 completed, all 3 nodes updated."
    );
    assert_eq!(done.payload(at)["version"], json!(null));
    let mut long = new.clone();
    long.conditions[1].message = "x".repeat(5000);
    let cut = describe(EventKind::RolloutHalted, "workers", &long);
    assert_eq!(cut.text.chars().count(), TEXT_MAX_LEN);
    assert_eq!(cut.message.chars().count(), TEXT_MAX_LEN);
}

#[test]
fn a_lagging_read_is_taken_for_the_last_write() {
    let (a, b, c) = (
        status(Some('1'), Some(true), None, &['1']),
        status(Some('2'), Some(false), None, &['1']),
        status(Some('2'), Some(true), None, &['1']),
    );
    let mut written = Written::default();
    assert_eq!(written.replaced(Some(&a), &b), Some(a.clone()));
    // The watch has not brought the write yet: the reconcile still reads `a`.
    assert_eq!(written.replaced(Some(&a), &b), Some(b.clone()));
    assert_eq!(written.replaced(Some(&a), &c), Some(b.clone()));
    // It brings `b`, an earlier write; the last one is `c`.
    assert_eq!(written.replaced(Some(&b), &c), Some(c.clone()));
    // A status this replica never wrote nor read is taken as read.
    let other = status(Some('3'), Some(false), None, &[]);
    assert_eq!(written.replaced(Some(&other), &c), Some(other.clone()));
    assert_eq!(Written::default().replaced(None, &a), None);
}

#[test]
fn a_lagging_read_announces_nothing_twice() {
    let (a, b) = (
        status(Some('1'), Some(true), None, &['1']),
        status(Some('2'), Some(false), None, &['1']),
    );
    let mut written = Written::default();
    let mut announced = Vec::new();
    for _ in 0..3 {
        let old = written.replaced(Some(&a), &b);
        announced.extend(transitions(old.as_ref(), &b));
    }
    assert_eq!(announced, vec![EventKind::RolloutStarted]);
}

#[test]
fn urls_are_checked_without_repeating_them() {
    let ok = parse_url(Some(b" https://hooks.example.com/services/T0/B0/secret\n")).unwrap();
    assert_eq!(ok.host_str(), Some("hooks.example.com"));
    assert!(parse_url(Some(b"http://127.0.0.1:8080/hook")).is_ok());
    let refused: [(Option<&[u8]>, &str); 6] = [
        (None, "is missing"),
        (Some(b""), "is empty"),
        (Some(b"  \n"), "is empty"),
        (Some(b"\xff\xfe"), "is not UTF-8 text"),
        (
            Some(b"hooks.example.com/secret"),
            "does not hold a valid URL",
        ),
        (
            Some(b"ftp://example.com/secret"),
            "does not hold an http or https URL",
        ),
    ];
    for (value, problem) in refused {
        assert_eq!(parse_url(value).unwrap_err(), problem, "{value:?}");
    }
}

#[test]
fn answers_that_may_pass_are_retried() {
    use http::StatusCode;
    assert_eq!(answer_failure(StatusCode::OK), None);
    assert_eq!(answer_failure(StatusCode::NO_CONTENT), None);
    for status in [500, 502, 503, 408, 429] {
        let failure = answer_failure(StatusCode::from_u16(status).unwrap()).unwrap();
        assert!(failure.retry, "{status}");
        assert!(failure.message.contains(&status.to_string()));
    }
    for status in [400, 401, 403, 404, 410] {
        let failure = answer_failure(StatusCode::from_u16(status).unwrap()).unwrap();
        assert!(!failure.retry, "{status}");
    }
    let redirect = answer_failure(StatusCode::MOVED_PERMANENTLY).unwrap();
    assert!(!redirect.retry);
    assert!(
        redirect.message.contains("not followed"),
        "{}",
        redirect.message
    );
}

#[test]
fn jitter_waits_half_to_all_of_the_delay() {
    let delay = Duration::from_secs(8);
    let waits: Vec<Duration> = (0..200).map(|_| jittered(delay)).collect();
    assert!(
        waits.iter().all(|w| *w >= delay / 2 && *w <= delay),
        "{waits:?}"
    );
    let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
    assert!(distinct.len() > 1, "no jitter: {waits:?}");
}

#[test]
fn every_series_of_a_pool_is_known() {
    let outcomes = [Outcome::Delivered, Outcome::Failed, Outcome::Dropped];
    let all: Vec<NotificationLabels> = EVENT_KINDS
        .iter()
        .flat_map(|e| {
            outcomes.iter().map(|o| NotificationLabels {
                pool: "p".to_owned(),
                event: e.as_str(),
                outcome: o.as_str(),
            })
        })
        .collect();
    assert_eq!(all.len(), EVENT_KINDS.len() * 3);
    let metrics = Metrics::new();
    for labels in &all {
        metrics.record_notification(labels);
    }
    metrics.record_notification(&NotificationLabels {
        pool: "q".into(),
        event: "RolloutStarted",
        outcome: "delivered",
    });
    let text = metrics.encode();
    assert!(
        text.contains(
            "bootc_pool_notifications_total{pool=\"p\",event=\"RolledBack\",outcome=\"dropped\"} 1"
        ),
        "{text}"
    );
    metrics.forget_pool("p");
    let text = metrics.encode();
    assert!(!text.contains("pool=\"p\""), "{text}");
    assert!(text.contains("pool=\"q\""), "{text}");
}
