use serde_json::{Value, json};

use super::*;
use crate::tests::fixtures::*;

fn entry(c: char, last: i64) -> Value {
    json!({
        "digest": digest(c), "image": pin(c), "version": format!("v{c}"),
        "nodeCount": 2, "firstDeployed": ago(last + 60), "lastDeployed": ago(last),
        "origin": "Targeted",
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
fn the_pin_is_built_from_the_entry_image_in_the_pools_repository() {
    // The same repository written another way: normalised, then pinned.
    let mut e = entry('2', 10);
    e["image"] = json!(format!("registry.test/os:v2@{}", digest('2')));
    let p = with_history('3', json!([entry('3', 0), e]));
    assert_eq!(choose(&p, None).unwrap().to, pin('2'));
    // Another repository, or no reference at all: never chosen.
    for image in [
        format!("quay.io/example/node-os@{}", digest('2')),
        "Not A Reference".to_owned(),
    ] {
        let mut other = entry('2', 10);
        other["image"] = json!(image);
        let p = with_history('3', json!([entry('3', 0), other]));
        let e = choose(&p, None).unwrap_err();
        assert!(e.message().contains("nothing to roll back to"), "{e}");
        let e = choose(&p, Some(&digest('2'))).unwrap_err();
        assert!(e.message().contains("another repository"), "{e}");
    }
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
    assert!(e.message().contains("other than the current target"), "{e}");
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

#[test]
fn only_a_targeted_entry_of_the_pools_repository_is_chosen() {
    let mut foreign = entry('9', 0);
    foreign["image"] = json!(format!("evil.example/os@{}", digest('9')));
    let mut observed = entry('8', 1);
    observed["origin"] = json!("Observed");
    let mut old = entry('1', 30);
    old.as_object_mut().unwrap().remove("origin");
    let p = with_history(
        '3',
        json!([foreign, observed, entry('3', 5), entry('2', 20), old]),
    );
    let r = choose(&p, None).unwrap();
    assert_eq!(r.entry.digest, digest('2'));
    for (to, why) in [
        ("9999999", "another repository"),
        ("8888888", "only nodes reported"),
        ("1111111", "only nodes reported"),
    ] {
        let e = choose(&p, Some(to)).unwrap_err();
        assert!(e.message().contains(why), "--to {to}: {e}");
    }
    // Nothing targeted besides the current target: nothing to roll back to.
    let p = with_history('3', json!([entry('3', 5), observed_only('2')]));
    let e = choose(&p, None).unwrap_err();
    assert!(e.message().contains("nothing to roll back to"), "{e}");
}

fn observed_only(c: char) -> Value {
    let mut e = entry(c, 20);
    e["origin"] = json!("Observed");
    e
}

#[test]
fn the_preview_shows_the_digest_and_its_history_line() {
    let p = with_history('3', json!([entry('3', 0), entry('2', 10)]));
    let r = choose(&p, None).unwrap();
    let text = preview(&p, &r, chrono::Utc::now());
    assert!(
        text.starts_with(&format!(
            "bootcnodepool/workers will roll back to {}:\n",
            digest('2')
        )),
        "{text}"
    );
    assert!(
        text.contains(&pin('2')) && text.contains("Targeted"),
        "{text}"
    );
}

#[test]
fn confirmation_is_asked_on_a_terminal_and_refused_without_one() {
    let ask = |yes: bool, terminal: bool, answer: &str| {
        let mut prompt = Vec::new();
        let got = confirm(yes, terminal, &mut answer.as_bytes(), &mut prompt);
        (got, String::from_utf8(prompt).unwrap())
    };
    assert_eq!(ask(true, false, ""), (Ok(true), String::new()));
    assert_eq!(ask(true, true, "n\n"), (Ok(true), String::new()));
    let (got, _) = ask(false, false, "y\n");
    assert!(got.unwrap_err().message().contains("pass --yes"));
    for (answer, expected) in [
        ("y\n", true),
        ("YES\n", true),
        ("n\n", false),
        ("", false),
        ("\n", false),
    ] {
        let (got, prompt) = ask(false, true, answer);
        assert_eq!(got, Ok(expected), "{answer:?}");
        assert_eq!(prompt, "Roll back? [y/N] ");
    }
}
