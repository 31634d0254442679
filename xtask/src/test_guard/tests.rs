use super::*;

fn found(text: &str) -> Vec<String> {
    check_text(Path::new("t.rs"), text)
        .unwrap()
        .into_iter()
        .map(|b| format!("{}: {}", b.line, b.what))
        .collect()
}

/// `contains("")`, spelled so that this file does not hold it.
fn hollow() -> String {
    format!("contains({:?})", "")
}

#[test]
fn an_assertion_of_contains_empty_is_found_and_a_real_one_is_not() {
    let text = format!(
        "#[test]\nfn t() {{\n    let m = f();\n    assert!(m.{}, \"{{m}}\");\n    assert!(m.contains(\"x\"));\n}}\n",
        hollow()
    );
    assert_eq!(
        found(&text),
        [format!(
            "4: an assertion of {}, which every string satisfies",
            hollow()
        )]
    );
}

#[test]
fn a_return_before_any_assertion_is_found_unless_it_is_an_opt_out() {
    let bad = "#[test]\nfn t() {\n    if slow() {\n        return;\n    }\n    assert!(ok());\n}\n";
    assert_eq!(
        found(bad),
        ["4: test t returns before any assertion (not an opt-out)"]
    );
    let opt_out = "#[test]\nfn t() {\n    let Some(a) = common::real_archive() else {\n        return;\n    };\n    assert!(ok(a));\n}\n";
    assert!(found(opt_out).is_empty());
    let after = "#[tokio::test]\nasync fn t() {\n    assert!(ok());\n    if done() {\n        return;\n    }\n}\n";
    assert!(found(after).is_empty());
    // A closure's or an async block's return is not the test's.
    let inner = "#[test]\nfn t() {\n    let f = || { return 1; };\n    assert_eq!(f(), 1);\n}\n";
    assert!(found(inner).is_empty());
    // Not a test: not looked at.
    let helper = "fn h() {\n    return;\n}\n";
    assert!(found(helper).is_empty());
}

#[test]
fn a_negative_assertion_right_after_a_sleep_is_found() {
    for negative in [
        "assert!(!halted());",
        "assert_ne!(a, b);",
        "assert!(seen.is_empty());",
        "assert!(x.is_none(), \"{x:?}\");",
        "assert!(b.is_leader() && !a.is_leader());",
        "assert_eq!(approvals(), 0, \"approved\");",
    ] {
        let text = format!(
            "#[tokio::test]\nasync fn t() {{\n    tokio::time::sleep(D).await;\n    {negative}\n}}\n"
        );
        assert_eq!(
            found(&text),
            ["4: a negative assertion right after a sleep: wait for counted events"],
            "{negative}"
        );
    }
    // A positive assertion after a sleep, or a negative one after a counted wait, passes.
    let positive =
        "#[tokio::test]\nasync fn t() {\n    sleep(D).await;\n    assert!(ready());\n}\n";
    assert!(found(positive).is_empty());
    let counted =
        "#[tokio::test]\nasync fn t() {\n    wait_plans(3).await;\n    assert!(!halted());\n}\n";
    assert!(found(counted).is_empty());
}

#[test]
fn test_files_are_those_under_tests_or_with_test_functions() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("a/tests/it.rs", "fn x() {}\n");
    write("a/src/lib.rs", "pub fn y() {}\n");
    write("a/src/m.rs", "#[test]\nfn z() {}\n");
    write("target/debug/t.rs", "#[test]\nfn z() {}\n");
    let files: Vec<PathBuf> = test_files(dir.path())
        .unwrap()
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        files,
        [PathBuf::from("a/src/m.rs"), PathBuf::from("a/tests/it.rs")]
    );
}
