#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::{Value, json};

use super::end_state::history_problems;
use super::setup::budget;

fn entry(digest: char, last: &str) -> Value {
    json!({"digest": format!("sha256:{}", digest.to_string().repeat(64)), "lastDeployed": last})
}

#[test]
fn the_history_must_have_the_target_newest_ties_allowed() {
    let target = format!("sha256:{}", "2".repeat(64));
    let newest = [
        entry('2', "2026-11-22T11:18:15Z"),
        entry('1', "2026-11-22T11:18:05Z"),
    ];
    assert!(history_problems(&newest, 5, &target).is_empty());
    // The old image's last report in the target's last second sorts first by digest.
    let tie = [
        entry('1', "2026-11-22T11:18:15Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(history_problems(&tie, 5, &target).is_empty());
    let older = [
        entry('1', "2026-11-22T11:18:16Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert_eq!(
        history_problems(&older, 5, &target),
        vec!["deployHistory's newest entry is not the target"]
    );
    let missing = [entry('1', "2026-11-22T11:18:16Z")];
    assert_eq!(
        history_problems(&missing, 5, &target),
        vec!["deployHistory has no entry for the target"]
    );
    let unordered = [
        entry('1', "2026-11-22T11:18:05Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(
        history_problems(&unordered, 5, &target)
            .contains(&"deployHistory is not newest lastDeployed first".to_owned())
    );
    let repeated = [
        entry('2', "2026-11-22T11:18:15Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(
        history_problems(&repeated, 1, &target)
            .iter()
            .any(|p| p.contains("repeats") || p.contains("limit 1"))
    );
}

#[test]
fn budgets() {
    assert_eq!(budget("5", 50).unwrap().0, 5);
    assert_eq!(budget("10%", 200).unwrap().0, 20);
    assert_eq!(budget("5%", 10).unwrap().0, 1);
    assert_eq!(budget("10%", 200).unwrap().1, json!("10%"));
    assert!(budget("0", 5).is_err());
    assert!(budget("x", 5).is_err());
    assert!(budget("0%", 5).is_err());
}
