use std::collections::BTreeMap;

use super::*;
use serde_json::json;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Checks that a selector was refused with an error containing `want`; `case` names it.
fn assert_refused<T: std::fmt::Debug>(case: &str, got: Result<T, String>, want: &str) {
    let e = match got {
        Ok(s) => panic!("{case} should be refused, got {s:?}"),
        Err(e) => e,
    };
    assert!(e.contains(want), "{case}: {e:?} does not contain {want:?}");
}

#[test]
fn label_selector_operators_table() {
    // (selector, labels, expected match)
    type Case = (&'static str, &'static [(&'static str, &'static str)], bool);
    let cases: &[Case] = &[
        ("", &[], true),
        ("   ", &[("a", "b")], true),
        ("a=b", &[("a", "b")], true),
        ("a=b", &[("a", "c")], false),
        ("a=b", &[], false),
        ("a==b", &[("a", "b")], true),
        ("a==b", &[("a", "x")], false),
        ("a!=b", &[("a", "b")], false),
        ("a!=b", &[("a", "c")], true),
        ("a!=b", &[], true),
        ("a in (x,y)", &[("a", "y")], true),
        ("a in (x,y)", &[("a", "z")], false),
        ("a in (x,y)", &[], false),
        ("a notin (x)", &[("a", "x")], false),
        ("a notin (x)", &[("a", "y")], true),
        ("a notin (x)", &[], true),
        ("a", &[("a", "")], true),
        ("a", &[("b", "")], false),
        ("!a", &[("b", "")], true),
        ("!a", &[("a", "x")], false),
        ("a=", &[("a", "")], true),
        ("a=", &[("a", "x")], false),
        ("a in ()", &[("a", "")], true),
        ("a>5", &[("a", "6")], true),
        ("a>5", &[("a", "5")], false),
        ("a>5", &[("a", "x")], false),
        ("a>5", &[], false),
        ("a<5", &[("a", "-3")], true),
        ("a<5", &[("a", "7")], false),
        ("a=b,c!=d", &[("a", "b"), ("c", "e")], true),
        ("a=b,c!=d", &[("a", "b"), ("c", "d")], false),
        (
            " a = b , c notin ( d , e ) , !f ",
            &[("a", "b"), ("c", "x")],
            true,
        ),
        (
            " a = b , c notin ( d , e ) , !f ",
            &[("a", "b"), ("f", "x")],
            false,
        ),
        (
            "example.com/role=worker",
            &[("example.com/role", "worker")],
            true,
        ),
        (
            "node-role.kubernetes.io/worker",
            &[("node-role.kubernetes.io/worker", "")],
            true,
        ),
        // `in` and `notin` are plain values/keys where a value is expected.
        ("a in (in,notin)", &[("a", "notin")], true),
        ("a=in", &[("a", "in")], true),
        ("a\tin\n(x)", &[("a", "x")], true),
    ];
    for (sel, l, want) in cases {
        let parsed =
            parse_label_selector(sel).unwrap_or_else(|e| panic!("{sel:?} should parse: {e}"));
        assert_eq!(parsed.matches(&labels(l)), *want, "{sel:?} on {l:?}");
    }
}

#[test]
fn label_selector_parse_errors_table() {
    // (selector, substring of the error)
    let cases: &[(&str, &str)] = &[
        ("a=b,", "found '', expected: identifier after ','"),
        (
            ",a",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        (
            "=a",
            "found '=', expected: !, identifier, or 'end of string'",
        ),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "a in x",
            "unable to parse requirement: found 'x' expected: '('",
        ),
        (
            "a in (x",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        ("a in (x y)", "found 'y', expected: ',' or ')'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (
            "a=(",
            "unable to parse requirement: found '(', expected: identifier",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        (
            "a>x",
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "Bad Key=1",
            "found 'Key', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "-a=b",
            "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters",
        ),
        (
            "Example.com/a=b",
            "<nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain",
        ),
        ("/a=b", "prefix part must be non-empty"),
        ("a/b/c=d", "a qualified name must consist of"),
        ("a/=b", "name part must be non-empty"),
        (
            "a=-b",
            "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be an empty string",
        ),
        ("a=<", "found '<', expected: identifier"),
    ];
    for (sel, want) in cases {
        assert_refused(&format!("{sel:?}"), parse_label_selector(sel), want);
    }
}

#[test]
fn label_key_and_value_limits() {
    let long63 = "a".repeat(63);
    let long64 = "a".repeat(64);
    assert!(parse_label_selector(&format!("{long63}=x")).is_ok());
    let e = parse_label_selector(&format!("{long64}=x")).unwrap_err();
    assert!(
        e.contains("name part must be no more than 63 characters"),
        "{e}"
    );
    assert!(parse_label_selector(&format!("a={long63}")).is_ok());
    let e = parse_label_selector(&format!("a={long64}")).unwrap_err();
    assert!(e.contains("must be no more than 63 characters"), "{e}");
    let prefix = format!("{}.com", "a".repeat(250));
    let e = parse_label_selector(&format!("{prefix}/x=y")).unwrap_err();
    assert!(
        e.contains("prefix part must be no more than 253 characters"),
        "{e}"
    );
    // Underscores and dots are fine inside names and values.
    assert!(parse_label_selector("my_key.x=v_1.2").is_ok());
    // Uppercase is allowed in the name part, not in the prefix.
    assert!(parse_label_selector("ex.com/MyKey=V").is_ok());
}

#[test]
fn lexer_is_greedy_like_apimachinery() {
    // "!=" then "=" ; "==" then "("
    assert!(parse_label_selector("a!==b").is_err());
    let s = parse_label_selector("a==b").unwrap();
    assert_eq!(s.requirements()[0].operator(), LabelOperator::DoubleEquals);
    // Unknown special sequences are lexer errors.
    assert!(parse_label_selector("a=b,)").is_err());
    // A NUL byte ends the input.
    assert!(parse_label_selector("a=b\0garbage here").is_ok());
    // Non-ASCII keys are rejected, not panicked on.
    assert!(parse_label_selector("ä=b").is_err());
    assert!(parse_label_selector("a=ä").is_err());
}

#[test]
fn values_are_a_sorted_set_and_display_is_canonical() {
    let s = parse_label_selector("z in (b,a,b), a = x ,!m, k, n>3").unwrap();
    assert_eq!(s.to_string(), "a=x,k,!m,n>3,z in (a,b)");
    assert_eq!(s.requirements()[4].values(), ["a", "b"]);
    assert_eq!(
        parse_label_selector("a in (,)").unwrap().requirements()[0].values(),
        [""]
    );
    assert_eq!(
        parse_label_selector("a in (x,,y)").unwrap().requirements()[0].values(),
        ["", "x", "y"]
    );
    // Like apimachinery, a trailing ",," before ")" is an error.
    assert!(parse_label_selector("a in (,x,,)").is_err());
}

#[test]
fn everything_and_nothing() {
    assert!(LabelSelector::everything().is_everything());
    assert!(LabelSelector::everything().matches(&labels(&[("a", "b")])));
    assert!(parse_label_selector("").unwrap().is_everything());
    assert!(!parse_label_selector("a").unwrap().is_everything());
    let n = LabelSelector::nothing();
    assert!(n.is_nothing() && !n.is_everything());
    assert!(!n.matches(&labels(&[])));
    assert!(!n.matches_object(&json!({"metadata": {"labels": {"a": "b"}}})));
}

#[test]
fn from_label_selector_json_table() {
    let pod = |l: serde_json::Value| json!({"metadata": {"name": "p", "labels": l}});
    // (selector, object labels, expected)
    let cases = vec![
        (json!(null), json!({}), true),
        (json!({}), json!({"a": "b"}), true),
        (json!({"matchLabels": {}}), json!({}), true),
        (
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"}),
            true,
        ),
        (
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "db"}),
            false,
        ),
        (
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}),
            json!({"app": "web", "tier": "b"}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}),
            json!({"tier": "a"}),
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
            json!({"tier": ""}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]}),
            json!({"tier": ""}),
            false,
        ),
    ];
    for (sel, l, want) in cases {
        let s = LabelSelector::from_label_selector_json(&sel).unwrap();
        assert_eq!(s.matches_object(&pod(l.clone())), want, "{sel} on {l}");
    }
    assert!(
        LabelSelector::from_label_selector_json(&json!({}))
            .unwrap()
            .is_everything()
    );
    // Objects without labels.
    let s = LabelSelector::from_label_selector_json(&json!({"matchLabels": {"a": "b"}})).unwrap();
    assert!(!s.matches_object(&json!({"metadata": {}})));
    assert!(!s.matches_object(&json!(42)));
}

#[test]
fn from_label_selector_json_errors() {
    let cases = vec![
        (json!("a=b"), "must be an object"),
        (
            json!({"matchLabels": []}),
            "matchLabels: expected an object",
        ),
        (
            json!({"matchLabels": {"a": 1}}),
            "matchLabels[a]: expected a string",
        ),
        (
            json!({"matchLabels": {"-a": "b"}}),
            "key: Invalid value: \"-a\"",
        ),
        (
            json!({"matchLabels": {"a": "-b"}}),
            "values[0][a]: Invalid value: \"-b\"",
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            "\"Gt\" is not a valid label selector operator",
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist",
        ),
        (
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}),
            "expected a list of strings",
        ),
        (
            json!({"matchExpressions": {}}),
            "matchExpressions: expected a list",
        ),
        (
            json!({"matchExpressions": [7]}),
            "matchExpressions[0]: expected an object",
        ),
        (
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            "key: Invalid value: \"\"",
        ),
    ];
    for (sel, want) in cases {
        let got = LabelSelector::from_label_selector_json(&sel);
        assert_refused(&sel.to_string(), got, want);
    }
}

#[test]
fn requirement_new_aggregates_errors() {
    let e = Requirement::new("-a", LabelOperator::Equals, vec![]).unwrap_err();
    assert!(e.starts_with('['), "{e}");
    assert!(
        e.contains("exact-match compatibility requires one single value"),
        "{e}"
    );
    let e = Requirement::new(
        "a",
        LabelOperator::GreaterThan,
        vec!["1".into(), "x".into()],
    )
    .unwrap_err();
    assert!(e.contains("exactly one value is required"), "{e}");
    assert!(e.contains("values[1]: Invalid value: \"x\""), "{e}");
}

#[test]
fn field_selector_table() {
    let pod = json!({
        "metadata": {"name": "p1", "namespace": "ns"},
        "spec": {"nodeName": "n1", "priority": 5, "hostNetwork": true},
        "status": {"phase": "Running"}
    });
    let node = json!({"metadata": {"name": "n1"}, "spec": {}});
    // (selector, object, expected)
    let cases = vec![
        ("", &pod, true),
        ("metadata.name=p1", &pod, true),
        ("metadata.name=p2", &pod, false),
        ("metadata.name==p1", &pod, true),
        ("spec.nodeName==n1", &pod, true),
        ("status.phase!=Running", &pod, false),
        ("status.phase!=Pending", &pod, true),
        ("metadata.namespace=ns,spec.nodeName=n1", &pod, true),
        ("metadata.namespace=ns,spec.nodeName=n2", &pod, false),
        ("spec.missing=", &pod, true),
        ("spec.missing!=", &pod, false),
        ("spec.priority=5", &pod, true),
        ("spec.hostNetwork=true", &pod, true),
        ("spec.unschedulable=false", &node, true),
        ("spec.unschedulable!=true", &node, true),
        ("spec.unschedulable=", &node, false),
        ("metadata=", &pod, true),
        ("a=b,,", &pod, false),
    ];
    for (sel, obj, want) in cases {
        let s = parse_field_selector(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
        assert_eq!(s.matches(obj), want, "{sel:?}");
    }
    let cordoned = json!({"spec": {"unschedulable": true}});
    assert!(
        parse_field_selector("spec.unschedulable=true")
            .unwrap()
            .matches(&cordoned)
    );
}

#[test]
fn field_selector_escapes() {
    let obj = json!({"metadata": {"name": "a,b=c\\d"}});
    let s = parse_field_selector("metadata.name=a\\,b\\=c\\\\d").unwrap();
    assert_eq!(s.requirements()[0].value(), "a,b=c\\d");
    assert!(s.matches(&obj));
    assert_eq!(s.to_string(), "metadata.name=a\\,b\\=c\\\\d");
    assert_eq!(s.single_name(), Some("a,b=c\\d"));
    // `==` is tried before `=`, so the value keeps no leading `=`.
    let s = parse_field_selector("a==b").unwrap();
    assert_eq!(s.requirements()[0].value(), "b");
}

#[test]
fn field_selector_errors_table() {
    let cases = vec![
        (
            "metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        ("a=b,c", "can't understand 'c'"),
        (
            "a=b=c",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "a=b\\x",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        (
            "a=b\\",
            "invalid field selector: invalid escape sequence: \\",
        ),
    ];
    for (sel, want) in cases {
        assert_refused(&format!("{sel:?}"), parse_field_selector(sel), want);
    }
}

#[test]
fn field_selector_fields_and_single_name() {
    let s = parse_field_selector("spec.nodeName=n1,metadata.name=x").unwrap();
    let fields: Vec<&str> = s.fields().collect();
    assert_eq!(fields, ["metadata.name", "spec.nodeName"]);
    assert_eq!(s.single_name(), None);
    assert_eq!(
        parse_field_selector("metadata.name=x")
            .unwrap()
            .single_name(),
        Some("x")
    );
    assert_eq!(
        parse_field_selector("metadata.name==x")
            .unwrap()
            .single_name(),
        Some("x")
    );
    assert_eq!(
        parse_field_selector("metadata.name!=x")
            .unwrap()
            .single_name(),
        None
    );
    assert_eq!(
        parse_field_selector("spec.nodeName=x")
            .unwrap()
            .single_name(),
        None
    );
    assert!(FieldSelector::everything().is_everything());
    assert!(FieldSelector::everything().matches(&json!({})));
    assert_eq!(FieldSelector::everything().fields().count(), 0);
    // No whitespace trimming, like apimachinery: the field name keeps the space.
    let s = parse_field_selector("metadata.name = x").unwrap();
    assert_eq!(s.fields().collect::<Vec<_>>(), ["metadata.name "]);
}

proptest::proptest! {
    #[test]
    fn selector_parsers_never_panic(s in ".{0,64}") {
        let _ = parse_label_selector(&s);
        let _ = parse_field_selector(&s);
    }

    #[test]
    fn label_selector_display_round_trips(
        keys in proptest::collection::vec("[a-z][a-z0-9]{0,5}", 1..4),
        vals in proptest::collection::vec("[A-Za-z0-9]{0,5}", 1..4),
    ) {
        let sel = keys.iter().zip(vals.iter().cycle())
            .map(|(k, v)| format!("{k} in ({v},x)"))
            .collect::<Vec<_>>().join(",");
        let parsed = parse_label_selector(&sel).unwrap();
        let again = parse_label_selector(&parsed.to_string()).unwrap();
        proptest::prop_assert_eq!(parsed, again);
    }
}
