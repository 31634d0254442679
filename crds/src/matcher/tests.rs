use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn good_matchers_parse_to_name_operator_and_value() {
    let cases: &[(&str, &str, MatchOp, &str)] = &[
        (
            r#"severity="critical""#,
            "severity",
            MatchOp::Equal,
            "critical",
        ),
        (r#"team!="dev""#, "team", MatchOp::NotEqual, "dev"),
        (
            r#"alertname=~"Node.*""#,
            "alertname",
            MatchOp::Regex,
            "Node.*",
        ),
        (r#"env!~"test|dev""#, "env", MatchOp::NotRegex, "test|dev"),
        (
            r#"  severity = "critical"  "#,
            "severity",
            MatchOp::Equal,
            "critical",
        ),
        (r#"a=~ "x" "#, "a", MatchOp::Regex, "x"),
        ("severity=critical", "severity", MatchOp::Equal, "critical"),
        (
            "severity = critical ",
            "severity",
            MatchOp::Equal,
            "critical",
        ),
        (
            "alertname=~Node.*|Disk.+",
            "alertname",
            MatchOp::Regex,
            "Node.*|Disk.+",
        ),
        ("msg=two words", "msg", MatchOp::Equal, "two words"),
        ("_x1=", "_x1", MatchOp::Equal, ""),
        (r#"e="""#, "e", MatchOp::Equal, ""),
        (r#"q="say \"hi\"""#, "q", MatchOp::Equal, r#"say "hi""#),
        (r#"p="C:\\dir""#, "p", MatchOp::Equal, r"C:\dir"),
        (r#"n="a\nb""#, "n", MatchOp::Equal, "a\nb"),
        (r#"d=~"\d+""#, "d", MatchOp::Regex, r"\d+"),
        (r"u=a\b", "u", MatchOp::Equal, r"a\b"),
        (r"t=end\", "t", MatchOp::Equal, r"end\"),
        (r#"v="{}=~!,""#, "v", MatchOp::Equal, "{}=~!,"),
        (r#"w="ünïcödé""#, "w", MatchOp::Equal, "ünïcödé"),
    ];
    for (text, name, op, value) in cases {
        let m = Matcher::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(
            (m.name.as_str(), m.op, m.value.as_str()),
            (*name, *op, *value),
            "{text:?}"
        );
    }
}

#[test]
fn bad_matchers_say_what_is_wrong() {
    let long = format!("a=\"{}\"", "x".repeat(MATCHER_MAX_LEN));
    let cases: &[(&str, &str)] = &[
        ("", "must start with a label name"),
        ("   ", "must start with a label name"),
        (r#"="x""#, "must start with a label name"),
        (r#"{severity="critical"}"#, "must start with a label name"),
        (r#"1abc="x""#, "must start with a letter or '_'"),
        ("severity", "has no operator"),
        (r#"sev-erity="x""#, "not one of =, !=, =~ or !~"),
        (r#"sev.erity="x""#, "not one of =, !=, =~ or !~"),
        (r#"a.b="x""#, "comes '.'"),
        (r#"severity=="x""#, "double quote that is not escaped"),
        (r#"severity~"x""#, "comes '~'"),
        (r#"a="x"#, "does not close it"),
        (r#"a=""#, "does not close it"),
        (r#"a="x\""#, "does not close it"),
        (r#"a="x"y"#, "text after its closing double quote"),
        (r#"a="x" "y""#, "text after its closing double quote"),
        (r#"a=x"y"#, "double quote that is not escaped"),
        (r#"a=x""#, "double quote that is not escaped"),
        (r#"a=~"(unclosed""#, "regex \"(unclosed\" is not valid"),
        (r#"a!~"[z-a]""#, "is not valid"),
        (r#"a=~"*""#, "is not valid"),
        (r#"a=~"(a{1000}){1000}""#, "too large"),
        (long.as_str(), "more than the limit of 1024"),
    ];
    for (text, expected) in cases {
        match Matcher::parse(text) {
            Ok(m) => panic!("{text:?} parsed as {m:?}"),
            Err(e) => assert!(e.contains(expected), "{text:?}: {e:?} lacks {expected:?}"),
        }
    }
}

#[test]
fn matching_follows_alertmanager() {
    let alert = labels(&[
        ("alertname", "NodeTrouble"),
        ("severity", "critical"),
        ("env", "prod"),
        ("empty", ""),
    ]);
    let cases: &[(&str, bool)] = &[
        (r#"severity="critical""#, true),
        (r#"severity="page""#, false),
        (r#"severity!="page""#, true),
        (r#"severity!="critical""#, false),
        (r#"alertname=~"Node.*""#, true),
        // Anchored: a part of the value does not match.
        (r#"alertname=~"Node""#, false),
        (r#"alertname=~"Trouble""#, false),
        (r#"alertname=~"node.*""#, false),
        (r#"alertname=~"(?i)node.*""#, true),
        (r#"alertname=~"Disk.*|Node.*""#, true),
        (r#"env!~"test|dev""#, true),
        (r#"env!~"prod|dev""#, false),
        // A missing label is the empty string.
        (r#"team="""#, true),
        (r#"team!="""#, false),
        (r#"team="dev""#, false),
        (r#"team!="dev""#, true),
        (r#"team=~".*""#, true),
        (r#"team=~".+""#, false),
        (r#"team!~".+""#, true),
        (r#"empty="""#, true),
        (r#"env=~"""#, false),
        ("severity=critical", true),
    ];
    for (text, expected) in cases {
        let m = Matcher::parse(text).unwrap();
        assert_eq!(m.matches(&alert), *expected, "{text:?}");
    }
}

#[test]
fn every_matcher_must_match() {
    let alert = labels(&[("alertname", "NodeTrouble"), ("severity", "critical")]);
    let both = parse_all(&[
        r#"severity="critical""#.to_owned(),
        r#"alertname=~"Node.*""#.to_owned(),
    ])
    .unwrap();
    assert!(matches_all(&both, &alert));
    let one_not = parse_all(&[
        r#"severity="critical""#.to_owned(),
        r#"alertname="Other""#.to_owned(),
    ])
    .unwrap();
    assert!(!matches_all(&one_not, &alert));
    assert!(matches_all(&[], &alert), "no matcher: every alert");
    let err = parse_all(&["a=\"b\"".to_owned(), "bad".to_owned()]).unwrap_err();
    assert!(err.starts_with("matcher 1: "), "{err}");
}

#[test]
fn display_is_canonical_and_parses_back() {
    for text in [
        r#"  severity = critical "#,
        r#"q="say \"hi\" \\ now""#,
        r#"n=~"a\nb|c""#,
        "t!~x",
        "e!=",
    ] {
        let m = Matcher::parse(text).unwrap();
        let shown = m.to_string();
        assert!(shown.ends_with('"'), "{shown}");
        assert_eq!(
            Matcher::parse(&shown).unwrap(),
            m,
            "{text:?} shown as {shown}"
        );
    }
    let m = Matcher::parse("severity = critical").unwrap();
    assert_eq!(m.to_string(), r#"severity="critical""#);
}

#[test]
fn validate_reports_each_bad_matcher_at_its_index() {
    let spec: crate::BootcNodePoolSpec = serde_json::from_value(serde_json::json!({
        "nodeSelector": {"matchLabels": {"role": "worker"}},
        "image": {"ref": "registry.test/os:v1"},
        "health": {"alerts": {
            "url": "http://alertmanager.monitoring:9093",
            "matchers": ["severity=\"critical\"", "sev-erity=\"x\"", "ok=~\"a|b\"", "a=~\"(\""],
        }},
    }))
    .unwrap();
    let errors = spec.validate().unwrap_err().0;
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.health.alerts.matchers[1]",
            "spec.health.alerts.matchers[3]"
        ],
        "{errors:?}"
    );
    assert!(errors[0].message.contains("sev-erity"), "{errors:?}");
    assert!(errors[1].message.contains("not valid"), "{errors:?}");
}
