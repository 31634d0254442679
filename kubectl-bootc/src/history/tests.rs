use serde_json::json;

use super::*;
use crate::tests::fixtures::*;

fn entry(c: char, nodes: i32, first: i64, last: i64) -> serde_json::Value {
    json!({
        "digest": digest(c), "image": pin(c), "version": format!("v{c}"),
        "nodeCount": nodes, "firstDeployed": ago(first), "lastDeployed": ago(last),
    })
}

#[test]
fn the_history_lists_every_entry_newest_first_and_marks_the_target() {
    let mut status = pool_status('2', [3, 3, 0, 0], json!([]));
    status["deployHistory"] = json!([entry('2', 3, 60, 0), entry('1', 3, 3 * 24 * 60, 60)]);
    let p = pool("workers", json!({}), status);
    let t = table(&p.typed, now());
    assert_eq!(t.headers, HEADERS);
    assert_eq!(
        t.rows[0],
        [
            format!("{}*", "2".repeat(12)),
            "v2".into(),
            pin('2'),
            "3".into(),
            "2026-03-02T11:00:00Z (60m)".into(),
            "2026-03-02T12:00:00Z (0s)".into(),
            "Observed".into(),
        ]
    );
    assert_eq!(t.rows[1][0], "1".repeat(12));
    assert_eq!(t.rows[1][4], "2026-02-27T12:00:00Z (3d)");
    let text = render(&p.typed, now());
    assert!(
        text.starts_with("DIGEST          VERSION   IMAGE"),
        "{text}"
    );
    assert!(text.ends_with("* the current target\n"), "{text}");
}

#[test]
fn a_pool_without_history_says_so() {
    let p = pool("workers", json!({}), serde_json::Value::Null);
    assert_eq!(
        render(&p.typed, now()),
        "bootcnodepool/workers has no deployHistory yet: no node has been seen booted\n"
    );
}
