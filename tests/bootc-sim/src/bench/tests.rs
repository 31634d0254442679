#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::{Value, json};

use super::child::{cpu_ticks, status_kib};
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

#[test]
fn the_childs_cpu_time_and_peak_are_read_from_proc() {
    // The command name may hold spaces and parentheses; utime 250 + stime 50.
    let stat = "4242 (tokio (x) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
    assert_eq!(cpu_ticks(stat), Some(300));
    assert_eq!(cpu_ticks("4242 (x) S 1"), None);
    let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n";
    assert_eq!(status_kib(status, "VmHWM"), Some(2048.0));
    assert_eq!(status_kib(status, "VmSwap"), None);
    let own = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert!(cpu_ticks(&own).is_some());
}
