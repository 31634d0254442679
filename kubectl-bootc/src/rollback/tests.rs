use serde_json::{Value, json};

use super::*;
use crate::tests::fixtures::*;

fn entry(c: char, last: i64) -> Value {
    json!({
        "digest": digest(c), "image": pin(c), "version": format!("v{c}"),
        "nodeCount": 2, "firstDeployed": ago(last + 60), "lastDeployed": ago(last),
    })
}

fn with_history(target: char, history: Value) -> BootcNodePool {
    let mut status = pool_status(target, [2, 2, 0, 0], json!([]));
    status["deployHistory"] = history;
    pool("workers", json!({}), status).typed
}

#[test]
fn the_default_is_the_newest_entry_that_is_not_the_target() {
    let p = with_history('3', json!([entry('3', 0), entry('2', 10), entry('1', 20)]));
    let r = choose(&p, None).unwrap();
    assert_eq!(r.to, pin('2'));
    assert_eq!(r.from, "registry.test/os:stable");
    assert_eq!(r.entry.version.as_deref(), Some("v2"));
    // Out of order in the status: still the newest by lastDeployed.
    let p = with_history('3', json!([entry('1', 20), entry('3', 0), entry('2', 10)]));
    assert_eq!(choose(&p, None).unwrap().to, pin('2'));
}

#[test]
fn the_pin_is_built_from_the_entry_image_repository() {
    let mut e = entry('2', 10);
    e["image"] = json!("quay.io/example/node-os@sha256:".to_owned() + &"2".repeat(64));
    let p = with_history('3', json!([entry('3', 0), e]));
    assert_eq!(
        choose(&p, None).unwrap().to,
        format!("quay.io/example/node-os@{}", digest('2'))
    );
    let mut bad = entry('2', 10);
    bad["image"] = json!("Not A Reference");
    let p = with_history('3', json!([entry('3', 0), bad]));
    let e = choose(&p, None).unwrap_err();
    assert!(e.message().contains("is not an image reference"), "{e}");
}

#[test]
fn to_picks_by_full_digest_or_unique_prefix() {
    let mut a = entry('a', 10);
    a["digest"] = json!(format!("sha256:abc1234{}", "0".repeat(57)));
    let mut b = entry('b', 20);
    b["digest"] = json!(format!("sha256:abc1299{}", "0".repeat(57)));
    let p = with_history('3', json!([entry('3', 0), a.clone(), b.clone()]));
    let full = a["digest"].as_str().unwrap();
    assert_eq!(choose(&p, Some(full)).unwrap().entry.digest, full);
    assert_eq!(choose(&p, Some("abc1234")).unwrap().entry.digest, full);
    assert_eq!(
        choose(&p, Some("sha256:abc1299")).unwrap().entry.digest,
        b["digest"]
    );

    let ambiguous = choose(&p, Some("abc12")).unwrap_err();
    assert!(ambiguous.message().contains("at least 7"), "{ambiguous}");
    let ambiguous = choose(&p, Some("abc12")).unwrap_err();
    assert!(!ambiguous.message().contains("matches 2"), "{ambiguous}");
    let mut c = entry('c', 30);
    c["digest"] = json!(format!("sha256:abc1234f{}", "0".repeat(56)));
    let p = with_history('3', json!([entry('3', 0), a, c]));
    let ambiguous = choose(&p, Some("abc1234")).unwrap_err();
    assert!(
        ambiguous.message().contains("is ambiguous: it matches 2"),
        "{ambiguous}"
    );

    let none = choose(&p, Some("fffffff")).unwrap_err();
    assert!(none.message().contains("no deployHistory entry"), "{none}");
    let bad = choose(&p, Some("ABCDEFG")).unwrap_err();
    assert!(bad.message().contains("lower case"), "{bad}");
    let current = choose(&p, Some(&digest('3'))).unwrap_err();
    assert!(
        current.message().contains("is the current target"),
        "{current}"
    );
}

#[test]
fn nothing_to_go_back_to_is_refused() {
    let p = with_history('3', json!([entry('3', 0)]));
    let e = choose(&p, None).unwrap_err();
    assert!(
        e.message()
            .contains("no digest other than the current target"),
        "{e}"
    );
    let p = pool("workers", json!({}), Value::Null).typed;
    let e = choose(&p, None).unwrap_err();
    assert!(e.message().contains("has no deployHistory"), "{e}");
}

#[test]
fn the_patch_sets_the_ref_on_the_version_read() {
    let p = with_history('3', json!([entry('3', 0), entry('2', 10)]));
    let r = choose(&p, None).unwrap();
    assert_eq!(
        patch(&r, Some("42")),
        json!({"spec": {"image": {"ref": pin('2')}}, "metadata": {"resourceVersion": "42"}})
    );
}

#[test]
fn the_report_says_what_changed_and_how_to_follow_the_tag_again() {
    let p = with_history('3', json!([entry('3', 0), entry('2', 10)]));
    let text = report(&choose(&p, None).unwrap());
    assert!(
        text.starts_with("bootcnodepool.node.bootc.dev/workers rolled back\n"),
        "{text}"
    );
    assert!(text.contains(&format!("-> {}", pin('2'))), "{text}");
    assert!(text.contains("version v2"), "{text}");
    assert!(
        text.contains("no longer follows the tag of registry.test/os:stable"),
        "{text}"
    );
    assert!(
        text.contains(r#"kubectl patch bootcnodepool workers --type merge -p '{"spec":{"image":{"ref":"registry.test/os:stable"}}}'"#),
        "{text}"
    );
    // Rolled back from a tag@digest pin: following the tag again is offered.
    let mut pinned = p.clone();
    pinned.spec.image.r#ref = format!("registry.test/os:stable@{}", digest('3'));
    let text = report(&choose(&pinned, None).unwrap());
    assert!(
        text.contains("to follow the tag registry.test/os:stable again"),
        "{text}"
    );
    // From a bare pin: the old pin.
    pinned.spec.image.r#ref = pin('3');
    let text = report(&choose(&pinned, None).unwrap());
    assert!(
        text.contains("To go back to the reference it had"),
        "{text}"
    );
    assert!(text.contains(&pin('3')), "{text}");
}
