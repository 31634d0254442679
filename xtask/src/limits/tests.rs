use super::*;

fn breaches(text: &str) -> Vec<String> {
    check_text(Path::new("x.rs"), text)
        .unwrap()
        .into_iter()
        .map(|b| b.what)
        .collect()
}

fn function(lines: usize, args: usize) -> String {
    let params: Vec<String> = (0..args).map(|i| format!("a{i}: u8")).collect();
    let mut text = format!("fn f({}) {{\n", params.join(", "));
    for _ in 0..lines.saturating_sub(2) {
        text.push_str("    let _ = 1;\n");
    }
    text.push_str("}\n");
    text
}

#[test]
fn a_function_of_eighty_lines_and_six_arguments_passes() {
    assert!(breaches(&function(80, 6)).is_empty());
}

#[test]
fn one_line_or_one_argument_more_is_a_breach() {
    assert_eq!(breaches(&function(81, 0)), ["fn f has 81 lines (limit 80)"]);
    assert_eq!(
        breaches(&function(3, 7)),
        ["fn f has 7 arguments (limit 6)"]
    );
}

#[test]
fn methods_count_and_self_does_not() {
    let text = format!(
        "impl S {{\n    fn m(&self, a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) {{}}\n}}\nimpl S {{\n{}}}\n",
        function(90, 0)
    );
    assert_eq!(breaches(&text), ["fn f has 90 lines (limit 80)"]);
}

#[test]
fn test_code_is_left_out() {
    let text = format!(
        "#[cfg(test)]\nmod t {{\n{}}}\n#[test]\n{}",
        function(90, 9),
        function(90, 9)
    );
    assert!(breaches(&text).is_empty());
}

#[test]
fn a_long_file_is_a_breach() {
    let text = "const A: u8 = 1;\n".repeat(601);
    assert_eq!(breaches(&text), ["file has 601 lines (limit 600)"]);
    assert!(breaches(&"const A: u8 = 1;\n".repeat(600)).is_empty());
}

#[test]
fn test_paths_are_told_apart_from_sources() {
    for test in [
        "controller/tests/rollout.rs",
        "controller/src/plan/tests.rs",
        "controller/src/plan/tests/slots.rs",
        "tests/kube-emulator/tests/kube_rs.rs",
        "tests/kube-emulator/src/patch/tests.rs",
    ] {
        assert!(is_test_path(Path::new(test)), "{test}");
    }
    for source in [
        "controller/src/plan.rs",
        "tests/kube-emulator/src/patch.rs",
        "tests/host-sim/src/node.rs",
        "xtask/src/main.rs",
    ] {
        assert!(!is_test_path(Path::new(source)), "{source}");
    }
}
