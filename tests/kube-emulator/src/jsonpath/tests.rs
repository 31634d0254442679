use super::*;
use proptest::prelude::*;
use serde_json::json;

fn pool() -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {
            "name": "workers",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"kubernetes.io/os": "linux", "a.b": "dotted", "plain": "p"},
        },
        "spec": {"image": {"ref": "quay.io/example/os:latest"}, "rollout": {"maxUnavailable": 1}},
        "status": {
            "targetShortDigest": "abc123",
            "nodeCount": 3,
            "updatedCount": 2,
            "updatingCount": 1,
            "degradedCount": 0,
            "ratio": 0.5,
            "nothing": null,
            "conditions": [
                {"type": "UpToDate", "status": "False", "reason": "Rolling"},
                {"type": "Degraded", "status": "False", "reason": "AsExpected"},
                {"type": "Idle", "status": "True", "reason": "Idle", "count": 2},
            ],
        },
    })
}

#[test]
fn eval_table() {
    let obj = pool();
    let cases: Vec<(&str, Result<Vec<Value>, ()>)> = vec![
        // printer-column paths of our CRDs
        (".status.targetShortDigest", Ok(vec![json!("abc123")])),
        (".status.nodeCount", Ok(vec![json!(3)])),
        (".status.updatedCount", Ok(vec![json!(2)])),
        (".status.updatingCount", Ok(vec![json!(1)])),
        (".status.degradedCount", Ok(vec![json!(0)])),
        (
            r#".status.conditions[?(@.type=="UpToDate")].status"#,
            Ok(vec![json!("False")]),
        ),
        (
            ".metadata.creationTimestamp",
            Ok(vec![json!("2025-01-01T00:00:00Z")]),
        ),
        (".spec.desiredImage", Ok(vec![])),
        (".status.booted.image", Ok(vec![])),
        (
            r#".status.conditions[?(@.type=="Idle")].reason"#,
            Ok(vec![json!("Idle")]),
        ),
        (
            r#".status.conditions[?(@.type=="Missing")].status"#,
            Ok(vec![]),
        ),
        // braces
        ("{.metadata.name}", Ok(vec![json!("workers")])),
        (
            "{.metadata.name}/{.status.nodeCount}",
            Ok(vec![json!("workers"), json!("/"), json!(3)]),
        ),
        // bracket keys: client-go splits dots unless escaped
        ("['metadata']['name']", Ok(vec![json!("workers")])),
        (".metadata.labels['a.b']", Ok(vec![])),
        (r".metadata.labels['a\.b']", Ok(vec![json!("dotted")])),
        (r".metadata.labels.a\.b", Ok(vec![json!("dotted")])),
        (
            r".metadata.labels.kubernetes\.io/os",
            Ok(vec![json!("linux")]),
        ),
        (".metadata.labels['plain']", Ok(vec![json!("p")])),
        // indexes and slices
        (".status.conditions[0].type", Ok(vec![json!("UpToDate")])),
        (".status.conditions[-1].type", Ok(vec![json!("Idle")])),
        (
            ".status.conditions[*].type",
            Ok(vec![json!("UpToDate"), json!("Degraded"), json!("Idle")]),
        ),
        (
            ".status.conditions[0:2].type",
            Ok(vec![json!("UpToDate"), json!("Degraded")]),
        ),
        (
            ".status.conditions[::2].type",
            Ok(vec![json!("UpToDate"), json!("Idle")]),
        ),
        (
            ".status.conditions[1:].type",
            Ok(vec![json!("Degraded"), json!("Idle")]),
        ),
        (
            ".status.conditions[0,2].type",
            Ok(vec![json!("UpToDate"), json!("Idle")]),
        ),
        (".status.conditions[].type", Ok(vec![json!("UpToDate")])),
        (".status.conditions[5].type", Err(())),
        (".status.conditions[0:0].type", Ok(vec![])),
        (".status.conditions.type", Ok(vec![])),
        (".metadata[0]", Err(())),
        // wildcard and recursive descent
        (
            ".spec.image.*",
            Ok(vec![json!("quay.io/example/os:latest")]),
        ),
        ("..maxUnavailable", Ok(vec![json!(1)])),
        ("..ref", Ok(vec![json!("quay.io/example/os:latest")])),
        // filters
        (
            r#".status.conditions[?(@.type!="UpToDate")].type"#,
            Ok(vec![json!("Degraded"), json!("Idle")]),
        ),
        (
            ".status.conditions[?(@.count)].type",
            Ok(vec![json!("Idle")]),
        ),
        (
            ".status.conditions[?(@.count>1)].type",
            Ok(vec![json!("Idle")]),
        ),
        (".status.conditions[?(@.count<2)].type", Ok(vec![])),
        (
            ".status.conditions[?(@.count>=2)].type",
            Ok(vec![json!("Idle")]),
        ),
        (".status.conditions[?(@.count==2.0)].type", Err(())),
        (
            r#".status.conditions[?(@.type=='Degraded')].reason"#,
            Ok(vec![json!("AsExpected")]),
        ),
        (r#".status.conditions[?(@.reason=="a)b")].type"#, Ok(vec![])),
        (
            r#".status.conditions[?(@.type>"E")].type"#,
            Ok(vec![json!("UpToDate"), json!("Idle")]),
        ),
        (r#".status[?(@.type=="x")]"#, Err(())),
        // nulls and missing parents
        (".status.nothing", Ok(vec![Value::Null])),
        (".status.nothing.deeper", Ok(vec![])),
        (".missing.deeper[0]", Ok(vec![])),
        (".missing[?(@.a)]", Ok(vec![])),
        ("{@}", Ok(vec![obj.clone()])),
        // malformed
        (".status.conditions[", Err(())),
        (".status.conditions[?(@.type==\"x\"]", Err(())),
        ("{.a", Err(())),
        (".a{", Err(())),
        (".a b", Err(())),
        ("..a..b", Ok(vec![])),
        ("....a", Err(())),
        (".a[x]", Err(())),
        (".a[1:2:3:4]", Err(())),
        ("#", Err(())),
        (r#"{"unterminated}"#, Err(())),
        // range
        (
            "{range .status.conditions[*]}{.type},{end}",
            Ok(vec![
                json!("UpToDate"),
                json!(","),
                json!("Degraded"),
                json!(","),
                json!("Idle"),
                json!(","),
            ]),
        ),
        ("{end}", Err(())),
    ];
    for (path, want) in cases {
        let got = eval(path, &obj);
        match want {
            Ok(values) => assert_eq!(got, Ok(values), "path {path}"),
            Err(()) => assert!(got.is_err(), "path {path} should fail, got {got:?}"),
        }
    }
}

#[test]
fn find_results_keeps_sets() {
    let obj = pool();
    assert_eq!(
        find_results("{.metadata.name}{.missing}", &obj),
        Ok(vec![vec![json!("workers")], vec![]])
    );
    assert_eq!(find_results(".missing", &obj), Ok(vec![vec![]]));
    assert!(validate(".status.conditions[?(@.type==\"UpToDate\")].status").is_ok());
    assert!(validate(".status[").is_err());
}

#[test]
fn go_text_table() {
    let cases = vec![
        (json!("s"), "s"),
        (json!(5), "5"),
        (json!(-5), "-5"),
        (json!(1.5), "1.5"),
        (json!(100000.0), "100000"),
        (json!(1000000.0), "1e+06"),
        (json!(1234567.0), "1.234567e+06"),
        (json!(0.0001), "0.0001"),
        (json!(0.00001), "1e-05"),
        (json!(5.0), "5"),
        (json!(true), "true"),
        (Value::Null, "<no value>"),
        (
            json!({"b": 1, "a": [1, "x", null]}),
            "map[a:[1 x <nil>] b:1]",
        ),
        (json!([]), "[]"),
        (json!(u64::MAX), "1.8446744073709552e+19"),
    ];
    for (value, want) in cases {
        assert_eq!(go_text(&value), want, "value {value}");
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z.]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_path() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just(".".to_string()),
        Just("..".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("[*]".to_string()),
        Just("[-1]".to_string()),
        Just("[0:2]".to_string()),
        Just("[?(@.a==\"x\")]".to_string()),
        Just("[?(@.a)]".to_string()),
        Just("[?(@.a<1)]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("{range .a[*]}".to_string()),
        Just("{end}".to_string()),
        "[a-z]{1,3}".prop_map(|s| s),
        "-?[0-9]{1,20}".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(token, 0..12).prop_map(|t| t.concat())
}

proptest! {
    #[test]
    fn eval_never_panics(path in arb_path(), obj in arb_json()) {
        let _ = eval(&path, &obj);
    }

    #[test]
    fn eval_never_panics_on_any_string(path in ".{0,40}", obj in arb_json()) {
        let _ = eval(&path, &obj);
    }
}
