use super::json::value_depth;
use super::strategic::{Ident, normalize_order};
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn node() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "labels": {"kubernetes.io/hostname": "n1", "pool": "a"},
            "finalizers": ["x/one", "x/two"]
        },
        "spec": {
            "podCIDRs": ["10.0.0.0/24"],
            "taints": [{"key": "a", "effect": "NoSchedule"}]
        },
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]
        }
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:1"},
                {"name": "c", "image": "c:1"}
            ],
            "volumes": [{"name": "v1", "emptyDir": {}}],
            "tolerations": [{"key": "t1", "operator": "Exists"}]
        }
    })
}

fn smp(live: &Value, patch: Value) -> Result<Value, PatchError> {
    let kind = live.get("kind").and_then(Value::as_str).unwrap_or("");
    apply_patch(
        PatchType::Strategic,
        live,
        patch.to_string().as_bytes(),
        &BuiltinLists::new(kind),
    )
}

fn merge(live: &Value, patch: Value) -> Result<Value, PatchError> {
    apply_patch(
        PatchType::Merge,
        live,
        patch.to_string().as_bytes(),
        &BuiltinLists::new(""),
    )
}

fn jsonp(live: &Value, patch: Value) -> Result<Value, PatchError> {
    apply_patch(
        PatchType::Json,
        live,
        patch.to_string().as_bytes(),
        &BuiltinLists::new(""),
    )
}

fn ssa(live: &Value, body: &str, lists: &dyn ListSemantics) -> Result<Value, PatchError> {
    apply_patch(PatchType::Apply, live, body.as_bytes(), lists)
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e.get("name")
                .or_else(|| e.get("type"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string())
        })
        .collect()
}

fn has_directive(v: &Value) -> bool {
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| is_directive_key(k) || has_directive(v)),
        Value::Array(a) => a.iter().any(has_directive),
        _ => false,
    }
}

/// Checks that a patch was refused with `status` and a message containing `want`;
/// `case` names the input in every failure message.
fn assert_refused(case: &str, got: Result<Value, PatchError>, status: u16, want: &str) {
    let e = got.expect_err(case);
    assert_eq!(e.status_code(), status, "{case}: {e}");
    assert!(
        e.to_string().contains(want),
        "{case}: {e} does not contain {want:?}"
    );
}

/// Applies each strategic merge patch to `live` and compares the value at a JSON pointer.
fn assert_smp_results(live: &Value, cases: Vec<(Value, &str, Value)>) {
    for (patch, pointer, want) in cases {
        let out = smp(live, patch.clone()).unwrap_or_else(|e| panic!("{patch}: {e}"));
        assert_eq!(out.pointer(pointer), Some(&want), "{patch} at {pointer}");
    }
}

// ----- content types -----

#[test]
fn content_types_table() {
    let cases = [
        ("application/merge-patch+json", Some(PatchType::Merge)),
        ("application/json-patch+json", Some(PatchType::Json)),
        (
            "application/strategic-merge-patch+json",
            Some(PatchType::Strategic),
        ),
        ("application/apply-patch+yaml", Some(PatchType::Apply)),
        (
            "application/merge-patch+json; charset=utf-8",
            Some(PatchType::Merge),
        ),
        (
            "application/apply-patch+yaml;charset=UTF-8",
            Some(PatchType::Apply),
        ),
        ("Application/JSON-Patch+JSON", Some(PatchType::Json)),
        (
            " application/strategic-merge-patch+json ",
            Some(PatchType::Strategic),
        ),
        ("application/json", None),
        ("application/yaml", None),
        ("text/plain", None),
        ("", None),
    ];
    for (ct, want) in cases {
        assert_eq!(PatchType::from_content_type(ct), want, "{ct:?}");
    }
    for t in [
        PatchType::Merge,
        PatchType::Json,
        PatchType::Strategic,
        PatchType::Apply,
    ] {
        assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
    }
}

#[test]
fn error_statuses() {
    let cases: Vec<(PatchError, u16, &str)> = vec![
        (PatchError::InvalidBody("x".into()), 400, "BadRequest"),
        (PatchError::InvalidDirective("x".into()), 400, "BadRequest"),
        (PatchError::InvalidApply("x".into()), 400, "BadRequest"),
        (
            PatchError::OperationFailed {
                index: 0,
                op: "test".into(),
                message: "m".into(),
            },
            422,
            "Invalid",
        ),
        (PatchError::CannotApply("x".into()), 422, "Invalid"),
        (
            PatchError::TooManyOperations { max: 1, got: 2 },
            413,
            "RequestEntityTooLarge",
        ),
    ];
    for (e, status, reason) in cases {
        assert_eq!(e.status_code(), status, "{e:?}");
        assert_eq!(e.reason(), reason, "{e:?}");
    }
}

// ----- merge patch -----

#[test]
fn merge_patch_kubectl_cordon_uncordon_label() {
    let n = node();
    let cordoned = merge(&n, json!({"spec": {"unschedulable": true}})).unwrap();
    assert_eq!(cordoned["spec"]["unschedulable"], json!(true));
    assert_eq!(cordoned["spec"]["taints"], n["spec"]["taints"]);
    let uncordoned = merge(&cordoned, json!({"spec": {"unschedulable": null}})).unwrap();
    assert_eq!(uncordoned, n);
    // kubectl label / annotate send merge patches.
    let labelled = merge(
        &n,
        json!({"metadata": {"labels": {"bootc.dev/state": "updating"}}}),
    )
    .unwrap();
    assert_eq!(
        labelled["metadata"]["labels"]["bootc.dev/state"],
        json!("updating")
    );
    assert_eq!(labelled["metadata"]["labels"]["pool"], json!("a"));
    let unlabelled = merge(
        &labelled,
        json!({"metadata": {"labels": {"bootc.dev/state": null}}}),
    )
    .unwrap();
    assert_eq!(unlabelled, n);
    let annotated = merge(
        &n,
        json!({"metadata": {"annotations": {"a": "1"}, "resourceVersion": "5"}}),
    )
    .unwrap();
    assert_eq!(annotated["metadata"]["annotations"], json!({"a": "1"}));
}

#[test]
fn merge_patch_semantics_table() {
    let live = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
    let cases = vec![
        (json!({}), live.clone()),
        (json!({"d": null}), json!({"a": {"b": 1, "c": [1, 2]}})),
        (
            json!({"a": {"c": [3]}}),
            json!({"a": {"b": 1, "c": [3]}, "d": "x"}),
        ),
        (json!({"a": "s"}), json!({"a": "s", "d": "x"})),
        (
            json!({"n": {"x": null, "y": 1}}),
            json!({"a": {"b": 1, "c": [1, 2]}, "d": "x", "n": {"y": 1}}),
        ),
        (json!({"zzz": null}), live.clone()),
    ];
    for (patch, want) in cases {
        assert_eq!(merge(&live, patch.clone()).unwrap(), want, "{patch}");
    }
    // Create-style: an empty live object.
    assert_eq!(merge(&json!({}), json!({"a": 1})).unwrap(), json!({"a": 1}));
}

#[test]
fn merge_patch_bad_bodies() {
    for body in [&b"not json"[..], b"[1]", b"null", b"\"x\"", b"3", b"", b"{"] {
        let e =
            apply_patch(PatchType::Merge, &node(), body, &BuiltinLists::new("Node")).unwrap_err();
        assert_eq!(e.status_code(), 400, "{:?}", String::from_utf8_lossy(body));
        assert!(e.to_string().starts_with("Invalid JSON Patch"), "{e}");
    }
}

// ----- JSON patch -----

#[test]
fn json_patch_operations_table() {
    let live = json!({"metadata": {"labels": {"a": "1", "example.com/x": "y"}}, "list": [1, 2, 3]});
    let cases = vec![
        (
            json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"}]),
            json!({"metadata": {"labels": {"a": "1", "b": "2", "example.com/x": "y"}}, "list": [1, 2, 3]}),
        ),
        (
            json!([{"op": "add", "path": "/list/-", "value": 4}]),
            json!({"metadata": {"labels": {"a": "1", "example.com/x": "y"}}, "list": [1, 2, 3, 4]}),
        ),
        (
            json!([{"op": "add", "path": "/list/0", "value": 0}]),
            json!({"metadata": {"labels": {"a": "1", "example.com/x": "y"}}, "list": [0, 1, 2, 3]}),
        ),
        (
            json!([{"op": "remove", "path": "/metadata/labels/example.com~1x"}]),
            json!({"metadata": {"labels": {"a": "1"}}, "list": [1, 2, 3]}),
        ),
        (
            json!([{"op": "replace", "path": "/list/1", "value": 20}]),
            json!({"metadata": {"labels": {"a": "1", "example.com/x": "y"}}, "list": [1, 20, 3]}),
        ),
        (
            json!([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/z"}]),
            json!({"metadata": {"labels": {"z": "1", "example.com/x": "y"}}, "list": [1, 2, 3]}),
        ),
        (
            json!([{"op": "copy", "from": "/list", "path": "/copy"}]),
            json!({"metadata": {"labels": {"a": "1", "example.com/x": "y"}}, "list": [1, 2, 3], "copy": [1, 2, 3]}),
        ),
        (
            json!([
                {"op": "test", "path": "/metadata/labels/a", "value": "1"},
                {"op": "replace", "path": "/metadata/labels/a", "value": "2"}
            ]),
            json!({"metadata": {"labels": {"a": "2", "example.com/x": "y"}}, "list": [1, 2, 3]}),
        ),
        // evanphx/json-patch: testing a missing path against null succeeds.
        (
            json!([{"op": "test", "path": "/nope", "value": null}]),
            live.clone(),
        ),
        (json!([]), live.clone()),
    ];
    for (patch, want) in cases {
        assert_eq!(jsonp(&live, patch.clone()).unwrap(), want, "{patch}");
    }
}

#[test]
fn json_patch_failures_table() {
    let live = json!({"spec": {"replicas": 1}, "list": [1]});
    // (patch, status, substring)
    let cases = vec![
        (
            json!([{"op": "test", "path": "/spec/replicas", "value": 2}]),
            422,
            "json patch operation 0 (test) failed: testing value /spec/replicas failed: test failed",
        ),
        (
            json!([
                {"op": "add", "path": "/spec/x", "value": 1},
                {"op": "test", "path": "/spec/missing", "value": 1}
            ]),
            422,
            "operation 1 (test) failed",
        ),
        (
            json!([{"op": "remove", "path": "/spec/missing"}]),
            422,
            "remove operation does not apply: doc is missing path: \"/spec/missing\"",
        ),
        (
            json!([{"op": "replace", "path": "/spec/missing", "value": 1}]),
            422,
            "replace operation does not apply: doc is missing key: /spec/missing",
        ),
        (
            json!([{"op": "add", "path": "/nope/deeper", "value": 1}]),
            422,
            "add operation does not apply: doc is missing path: \"/nope/deeper\"",
        ),
        (
            json!([{"op": "add", "path": "/list/5", "value": 1}]),
            422,
            "add operation does not apply",
        ),
        (
            json!([{"op": "move", "from": "/nope", "path": "/x"}]),
            422,
            "move operation does not apply: doc is missing from path: /nope",
        ),
        (
            json!([{"op": "copy", "from": "/nope", "path": "/x"}]),
            422,
            "copy operation does not apply: doc is missing from path: /nope",
        ),
        (
            json!([{"op": "move", "from": "/spec", "path": "/spec/inner"}]),
            422,
            "cannot move /spec into its own child",
        ),
        (
            json!([{"op": "frobnicate", "path": "/x"}]),
            422,
            "Unexpected kind: frobnicate",
        ),
        (
            json!([{"path": "/x"}]),
            422,
            "operation 0 (unknown) failed: Unexpected kind: unknown",
        ),
        (
            json!([{"op": "add", "value": 1}]),
            422,
            "operation missing path field",
        ),
        (
            json!([{"op": "add", "path": "no-slash", "value": 1}]),
            422,
            "invalid operation",
        ),
        (
            json!([{"op": "replace", "path": "", "value": 5}]),
            422,
            "not a JSON object",
        ),
        (
            json!({"op": "add"}),
            400,
            "cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            json!([1]),
            400,
            "cannot unmarshal number into Go value of type jsonpatch.Operation",
        ),
    ];
    for (patch, status, want) in cases {
        assert_refused(
            &patch.to_string(),
            jsonp(&live, patch.clone()),
            status,
            want,
        );
    }
    let e = apply_patch(PatchType::Json, &live, b"[{", &BuiltinLists::new("")).unwrap_err();
    assert_eq!(e.status_code(), 400);
}

#[test]
fn json_patch_depth_limit() {
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({ "d": deep });
    }
    assert_eq!(value_depth(&deep), 100);
    assert_eq!(value_depth(&json!([])), 1);
    let live = json!({"a": {}});
    // 2 path segments + 100 levels is fine...
    let ok = jsonp(
        &live,
        json!([{"op": "add", "path": "/a/b", "value": deep.clone()}]),
    )
    .unwrap();
    assert_eq!(value_depth(&ok), 102);
    // ...but copying it under itself again would go past the limit.
    let e = jsonp(
            &ok,
            json!([{"op": "copy", "from": "/a", "path": "/a/b/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/x"}]),
        )
        .unwrap_err();
    assert_eq!(e.status_code(), 422);
    assert!(e.to_string().contains("nested more than 128 levels"), "{e}");
}

#[test]
fn json_patch_operation_limit() {
    let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
        .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
        .collect();
    let e = jsonp(&json!({"a": 1}), Value::Array(ops.clone())).unwrap_err();
    assert_eq!(e.status_code(), 413);
    assert_eq!(
        e.to_string(),
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    assert!(jsonp(&json!({"a": 1}), Value::Array(ops[1..].to_vec())).is_ok());
}

// ----- strategic merge patch -----

#[test]
fn smp_kubectl_cordon_uncordon() {
    let n = node();
    let cordoned = smp(&n, json!({"spec": {"unschedulable": true}})).unwrap();
    assert_eq!(cordoned["spec"]["unschedulable"], json!(true));
    let uncordoned = smp(&cordoned, json!({"spec": {"unschedulable": null}})).unwrap();
    assert_eq!(uncordoned, n);
    // Uncordoning an uncordoned node is a no-op.
    assert_eq!(
        smp(&n, json!({"spec": {"unschedulable": null}})).unwrap(),
        n
    );
}

#[test]
fn smp_kubectl_label_and_annotate() {
    let n = node();
    let out = smp(
        &n,
        json!({"metadata": {"labels": {"new": "v", "pool": null}, "annotations": {"a": "b"}}}),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"kubernetes.io/hostname": "n1", "new": "v"})
    );
    assert_eq!(out["metadata"]["annotations"], json!({"a": "b"}));
}

#[test]
fn smp_conditions_merge_by_type() {
    let n = node();
    let out = smp(
        &n,
        json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": null, "message": "down"},
            {"type": "Updating", "status": "True"}
        ]}}),
    )
    .unwrap();
    let conds = &out["status"]["conditions"];
    assert_eq!(names(conds), ["MemoryPressure", "Ready", "Updating"]);
    assert_eq!(
        conds[1],
        json!({"type": "Ready", "status": "False", "message": "down"})
    );
    assert_eq!(
        conds[0],
        json!({"type": "MemoryPressure", "status": "False"})
    );
    // kube-apiserver's order: patch elements keep the patch order and are interleaved with
    // the server-only ones by live position; an element new to the server wins every
    // comparison, so a new first patch element goes first.
    let out = smp(
        &n,
        json!({"status": {"conditions": [
            {"type": "Updating", "status": "True"},
            {"type": "Ready", "status": "False"}
        ]}}),
    )
    .unwrap();
    assert_eq!(
        names(&out["status"]["conditions"]),
        ["Updating", "MemoryPressure", "Ready"]
    );
    // Only updating existing elements keeps the live order.
    let out = smp(
        &n,
        json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
    )
    .unwrap();
    assert_eq!(
        names(&out["status"]["conditions"]),
        ["MemoryPressure", "Ready"]
    );
    // Addresses merge by type too.
    let out = smp(
        &n,
        json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}}),
    )
    .unwrap();
    assert_eq!(out["status"]["addresses"].as_array().unwrap().len(), 2);
}

#[test]
fn smp_patch_directives_in_lists() {
    let conditions = "/status/conditions";
    assert_smp_results(
        &node(),
        vec![
            // $patch: delete removes the element with that key.
            (
                json!({"status": {"conditions": [{"type": "MemoryPressure", "$patch": "delete"}]}}),
                conditions,
                json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]),
            ),
            // $patch: replace replaces the whole list.
            (
                json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "Only", "status": "True"}]}}),
                conditions,
                json!([{"type": "Only", "status": "True"}]),
            ),
            // $patch: replace with nothing else empties the list.
            (
                json!({"status": {"conditions": [{"$patch": "replace"}]}}),
                conditions,
                json!([]),
            ),
            // $patch: merge is the default (accepted).
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "False", "$patch": "merge"}]}}),
                conditions,
                json!([
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "False", "reason": "KubeletReady"}
                ]),
            ),
        ],
    );
}

#[test]
fn smp_patch_directives_in_maps() {
    let labels = "/metadata/labels";
    assert_smp_results(
        &node(),
        vec![
            (
                json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}}),
                labels,
                json!({"only": "this"}),
            ),
            (
                json!({"metadata": {"labels": {"$patch": "delete"}}}),
                labels,
                json!({}),
            ),
            (
                json!({"metadata": {"labels": {"$patch": "merge", "x": "y"}}}),
                labels,
                json!({"kubernetes.io/hostname": "n1", "pool": "a", "x": "y"}),
            ),
            // A directive in a map the live object lacks.
            (
                json!({"metadata": {"annotations": {"$patch": "replace", "a": "b"}}}),
                "/metadata/annotations",
                json!({"a": "b"}),
            ),
        ],
    );
}

#[test]
fn smp_primitive_lists() {
    let n = node();
    let finalizers = "/metadata/finalizers";
    assert_smp_results(
        &n,
        vec![
            // Finalizers are a set: union, ordered like kube-apiserver does.
            (
                json!({"metadata": {"finalizers": ["x/two", "x/three"]}}),
                finalizers,
                json!(["x/one", "x/two", "x/three"]),
            ),
            (
                json!({"metadata": {"finalizers": ["x/three", "x/two"]}}),
                finalizers,
                json!(["x/three", "x/one", "x/two"]),
            ),
            // $deleteFromPrimitiveList.
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/one", "x/nope"]}}),
                finalizers,
                json!(["x/two"]),
            ),
            // With $setElementOrder, as kubectl sends.
            (
                json!({"metadata": {
                    "$setElementOrder/finalizers": ["x/two", "x/new"],
                    "$deleteFromPrimitiveList/finalizers": ["x/one"],
                    "finalizers": ["x/new"]
                }}),
                finalizers,
                json!(["x/two", "x/new"]),
            ),
        ],
    );
    // Deleting from a list the object does not have is a no-op.
    let out = smp(
        &pod(),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    )
    .unwrap();
    assert_eq!(out, pod());
    // podCIDRs is a set as well.
    let out = smp(&n, json!({"spec": {"podCIDRs": ["10.0.1.0/24"]}})).unwrap();
    assert_eq!(out["spec"]["podCIDRs"].as_array().unwrap().len(), 2);
}

#[test]
fn smp_taints_are_atomic_like_kube_apiserver() {
    let n = node();
    let out = smp(
        &n,
        json!({"spec": {"taints": [{"key": "bootc.dev/updating", "effect": "NoSchedule"}]}}),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["taints"],
        json!([{"key": "bootc.dev/updating", "effect": "NoSchedule"}])
    );
}

#[test]
fn smp_kubectl_apply_with_set_element_order() {
    // What `kubectl apply` sends after changing container b's image, adding container d,
    // deleting container c and reordering env.
    let p = pod();
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "d"}],
            "containers": [
                {"$setElementOrder/env": [{"name": "Y"}, {"name": "X"}], "name": "a"},
                {"image": "b:2", "name": "b"},
                {"image": "d:1", "name": "d"},
                {"$patch": "delete", "name": "c"}
            ]
        }
    });
    let out = smp(&p, patch).unwrap();
    let containers = &out["spec"]["containers"];
    assert_eq!(names(containers), ["b", "a", "d"]);
    assert_eq!(containers[0]["image"], json!("b:2"));
    assert_eq!(containers[1]["image"], json!("a:1"));
    assert_eq!(names(&containers[1]["env"]), ["Y", "X"]);
    assert_eq!(containers[1]["ports"], p["spec"]["containers"][0]["ports"]);
    assert_eq!(containers[2], json!({"name": "d", "image": "d:1"}));
    assert!(!has_directive(&out));
    assert_eq!(
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        json!("{}")
    );
}

#[test]
fn smp_set_element_order_interleaves_server_only_items() {
    let p = pod();
    // Only c and a are named; b (server-only, live index 1) is placed before c (index 2).
    let out = smp(
        &p,
        json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}}),
    )
    .unwrap();
    assert_eq!(names(&out["spec"]["containers"]), ["b", "c", "a"]);
    let out = smp(
        &p,
        json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "c"}]}}),
    )
    .unwrap();
    assert_eq!(names(&out["spec"]["containers"]), ["a", "b", "c"]);
    // A set-order for a list the object lacks, with the list, orders the new list.
    let out = smp(
        &p,
        json!({"spec": {"$setElementOrder/initContainers": [{"name": "y"}, {"name": "x"}],
                             "initContainers": [{"name": "x"}, {"name": "y"}]}}),
    )
    .unwrap();
    assert_eq!(names(&out["spec"]["initContainers"]), ["y", "x"]);
}

#[test]
fn smp_nested_lists_in_containers() {
    let p = pod();
    let out = smp(
            &p,
            json!({"spec": {"containers": [{
                "name": "a",
                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
                "env": [{"name": "X", "value": null, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
            }]}}),
        )
        .unwrap();
    let a = &out["spec"]["containers"][0];
    assert_eq!(a["name"], json!("a"));
    assert_eq!(
        a["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}])
    );
    assert_eq!(
        a["env"][0],
        json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    );
    assert_eq!(names(&out["spec"]["containers"]), ["a", "b", "c"]);
    // Tolerations are atomic.
    let out = smp(
        &p,
        json!({"spec": {"tolerations": [{"key": "t2", "operator": "Exists"}]}}),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["tolerations"],
        json!([{"key": "t2", "operator": "Exists"}])
    );
    // Volumes merge by name.
    let out = smp(
        &p,
        json!({"spec": {"volumes": [{"name": "v2", "emptyDir": {}}]}}),
    )
    .unwrap();
    assert_eq!(names(&out["spec"]["volumes"]), ["v2", "v1"]);
}

#[test]
fn smp_workload_pod_template_paths() {
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}}
        }
    });
    let out = smp(
        &d,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:2"}]}}}}),
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:2"}])
    );
    // $retainKeys: switching the strategy drops rollingUpdate.
    let out = smp(
            &d,
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}}),
        )
        .unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let out = smp(&d, json!({"spec": {"strategy": {"$retainKeys": ["type"]}}})).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "RollingUpdate"}));
}

#[test]
fn smp_owner_references_by_uid() {
    let live = json!({"kind": "Pod", "metadata": {"ownerReferences": [
        {"uid": "1", "kind": "ReplicaSet", "name": "rs"}
    ]}});
    let out = smp(
            &live,
            json!({"metadata": {"ownerReferences": [{"uid": "1", "controller": true}, {"uid": "2", "kind": "X", "name": "x"}]}}),
        )
        .unwrap();
    let refs = out["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 2);
    assert_eq!(
        refs[0],
        json!({"uid": "1", "kind": "ReplicaSet", "name": "rs", "controller": true})
    );
    assert_eq!(refs[1]["uid"], json!("2"));
}

#[test]
fn smp_errors_table() {
    let n = node();
    // (status, substring, the patches refused with it)
    let cases = vec![
        (
            422,
            "does not contain declared merge key: type",
            vec![
                json!({"status": {"conditions": [{"status": "True"}]}}),
                json!({"status": {"conditions": [{"$patch": "delete"}]}}),
            ],
        ),
        (
            422,
            "lists of lists are not supported",
            vec![json!({"metadata": {"finalizers": [["a"]]}})],
        ),
        (
            422,
            "list element types are not identical",
            vec![
                json!({"metadata": {"finalizers": [1]}}),
                json!({"status": {"conditions": ["Ready"]}}),
            ],
        ),
        (
            400,
            "unknown patch type: explode in map",
            vec![json!({"metadata": {"labels": {"$patch": "explode"}}})],
        ),
        (
            400,
            "unknown patch type: 1",
            vec![json!({"status": {"conditions": [{"type": "Ready", "$patch": 1}]}})],
        ),
        (
            400,
            "invalid patch format of retainKeys",
            vec![
                json!({"spec": {"$retainKeys": "type"}}),
                json!({"spec": {"$retainKeys": ["a"], "b": 1}}),
            ],
        ),
        (
            400,
            "invalid patch format of setElementOrder list",
            vec![
                json!({"spec": {"$setElementOrder/x": "a"}}),
                json!({"spec": {"$setElementOrderx": []}}),
            ],
        ),
        (
            400,
            "invalid patch format of primitive list",
            vec![
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
                json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
            ],
        ),
    ];
    for (status, want, patches) in cases {
        for patch in patches {
            assert_refused(&patch.to_string(), smp(&n, patch.clone()), status, want);
        }
    }
    for body in [&b"[]"[..], b"null", b"nope", b"1"] {
        let e =
            apply_patch(PatchType::Strategic, &n, body, &BuiltinLists::new("Node")).unwrap_err();
        assert_eq!(e.status_code(), 400);
    }
    let e = apply_patch(PatchType::Strategic, &n, b"[]", &BuiltinLists::new("Node")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
}

#[test]
fn smp_type_changes_and_top_level_directives() {
    let n = node();
    let out = smp(&n, json!({"spec": "replaced"})).unwrap();
    assert_eq!(out["spec"], json!("replaced"));
    let out = smp(&n, json!({"spec": {"podCIDRs": "x"}})).unwrap();
    assert_eq!(out["spec"]["podCIDRs"], json!("x"));
    let out = smp(
        &n,
        json!({"$patch": "replace", "kind": "Node", "metadata": {"name": "n1"}}),
    )
    .unwrap();
    assert_eq!(out, json!({"kind": "Node", "metadata": {"name": "n1"}}));
    let out = smp(&json!({}), json!({"kind": "Node"})).unwrap();
    assert_eq!(out, json!({"kind": "Node"}));
}

// ----- server-side apply -----

#[test]
fn apply_creates_from_empty_live() {
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {a: b, gone: null}\ndata:\n  k: v\n";
    let out = ssa(&json!({}), body, &BuiltinLists::new("ConfigMap")).unwrap();
    assert_eq!(
        out,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}})
    );
    // JSON bodies are YAML too.
    let out = ssa(
        &json!({}),
        r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}}"#,
        &BuiltinLists::new("ConfigMap"),
    )
    .unwrap();
    assert_eq!(out["data"]["k"], json!("v"));
}

#[test]
fn apply_merges_into_live_object() {
    let n = node();
    let body = r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    pool: b
  finalizers: [x/three]
spec:
  unschedulable: true
  taints:
  - key: only
    effect: NoExecute
status:
  conditions:
  - type: Ready
    status: "False"
  - type: Updating
    status: "True"
"#;
    let out = ssa(&n, body, &BuiltinLists::new("Node")).unwrap();
    assert_eq!(out["metadata"]["labels"]["pool"], json!("b"));
    // Fields the applied configuration omits are kept (no field-manager tracking).
    assert_eq!(
        out["metadata"]["labels"]["kubernetes.io/hostname"],
        json!("n1")
    );
    assert_eq!(
        out["metadata"]["finalizers"],
        json!(["x/one", "x/two", "x/three"])
    );
    assert_eq!(out["spec"]["unschedulable"], json!(true));
    assert_eq!(out["spec"]["podCIDRs"], n["spec"]["podCIDRs"]);
    assert_eq!(
        out["spec"]["taints"],
        json!([{"key": "only", "effect": "NoExecute"}])
    );
    let conds = &out["status"]["conditions"];
    assert_eq!(names(conds), ["MemoryPressure", "Ready", "Updating"]);
    assert_eq!(
        conds[1],
        json!({"type": "Ready", "status": "False", "reason": "KubeletReady"})
    );
    // null removes a field.
    let out = ssa(
        &n,
        "apiVersion: v1\nkind: Node\nspec:\n  podCIDRs: null\n",
        &BuiltinLists::new("Node"),
    )
    .unwrap();
    assert!(out["spec"].get("podCIDRs").is_none());
}

#[test]
fn apply_refusals_table() {
    let n = node();
    let lists = BuiltinLists::new("Node");
    // (body, status, substring)
    let cases = vec![
        (
            "apiVersion: v2\nkind: Node\n",
            400,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
        ),
        (
            "kind: Node\n",
            400,
            "Specified patch version: , expected: v1",
        ),
        (
            "apiVersion: v1\nkind: Pod\n",
            400,
            "Incorrect kind specified in apply patch. Specified patch kind: Pod, expected: Node",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata:\n  managedFields: [{manager: x}]\n",
            400,
            "metadata.managedFields must be nil",
        ),
        ("a: [\n", 400, "error decoding YAML"),
        ("- 1\n- 2\n", 400, "must be an object"),
        ("", 400, "error decoding YAML"),
        ("a: 1\n---\nb: 2\n", 400, "error decoding YAML"),
        (
            "apiVersion: v1\nkind: Node\nstatus:\n  conditions: [Ready]\n",
            422,
            "is not an object",
        ),
    ];
    for (body, status, want) in cases {
        assert_refused(&format!("{body:?}"), ssa(&n, body, &lists), status, want);
    }
    // Empty managedFields are fine.
    assert!(
        ssa(
            &n,
            "apiVersion: v1\nkind: Node\nmetadata:\n  managedFields: []\n",
            &lists
        )
        .is_ok()
    );
}

fn crd_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "images": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "hosts": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name", "zone"],
                        "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "zone": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
                        }}
                    },
                    "args": {"type": "array", "items": {"type": "string"}},
                    "atomicList": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                    "badMap": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}},
                    "byName": {"type": "object", "additionalProperties": {
                        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}
                    }}
                }
            },
            "status": {"type": "object", "properties": {"conditions": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object"}
            }}}
        }
    })
}

#[test]
fn schema_lists_table() {
    let schema = crd_schema();
    let lists = SchemaLists(&schema);
    let cases: Vec<(&[&str], ListKind)> = vec![
        (&["spec", "images"], ListKind::Set),
        (
            &["spec", "hosts"],
            ListKind::Map(vec!["name".into(), "zone".into()]),
        ),
        (&["spec", "hosts", "tags"], ListKind::Set),
        (&["spec", "args"], ListKind::Atomic),
        (&["spec", "atomicList"], ListKind::Atomic),
        (&["spec", "badMap"], ListKind::Atomic),
        (&["spec", "byName", "anything"], ListKind::Set),
        (&["spec", "unknown"], ListKind::Atomic),
        (&["spec", "hosts", "name", "deeper"], ListKind::Atomic),
        (
            &["status", "conditions"],
            ListKind::Map(vec!["type".into()]),
        ),
        (&["metadata", "finalizers"], ListKind::Set),
        (
            &["metadata", "ownerReferences"],
            ListKind::Map(vec!["uid".into()]),
        ),
        (&["metadata", "managedFields"], ListKind::Atomic),
        (&[], ListKind::Atomic),
    ];
    for (path, want) in cases {
        assert_eq!(lists.list_kind(path), want, "{path:?}");
    }
    assert_eq!(
        SchemaLists(&json!(null)).list_kind(&["a"]),
        ListKind::Atomic
    );
}

#[test]
fn apply_custom_resource_with_schema_lists() {
    let schema = crd_schema();
    let lists = SchemaLists(&schema);
    let live = json!({
        "apiVersion": "example.com/v1", "kind": "Pool",
        "metadata": {"name": "p", "finalizers": ["f1"]},
        "spec": {
            "images": ["a"],
            "hosts": [{"name": "h1", "zone": "z1", "tags": ["t1"]}, {"name": "h1", "zone": "z2"}],
            "args": ["x", "y"]
        }
    });
    let body = r#"
apiVersion: example.com/v1
kind: Pool
metadata:
  name: p
  finalizers: [f2]
spec:
  images: [b, a]
  hosts:
  - {name: h1, zone: z1, tags: [t2], weight: 3}
  - {name: h2, zone: z1}
  args: [z]
"#;
    let out = ssa(&live, body, &lists).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
    assert_eq!(out["spec"]["images"], json!(["a", "b"]));
    assert_eq!(
        out["spec"]["hosts"],
        json!([
            {"name": "h1", "zone": "z1", "tags": ["t1", "t2"], "weight": 3},
            {"name": "h1", "zone": "z2"},
            {"name": "h2", "zone": "z1"}
        ])
    );
    assert_eq!(out["spec"]["args"], json!(["z"]));
}

#[test]
fn builtin_lists_table() {
    let by = |k: &str| ListKind::Map(vec![k.to_string()]);
    let cases: Vec<(&str, &[&str], ListKind)> = vec![
        ("Node", &["metadata", "finalizers"], ListKind::Set),
        ("Node", &["metadata", "ownerReferences"], by("uid")),
        ("Node", &["metadata", "managedFields"], ListKind::Atomic),
        ("Node", &["status", "conditions"], by("type")),
        ("Node", &["status", "addresses"], by("type")),
        ("Node", &["spec", "taints"], ListKind::Atomic),
        ("Node", &["spec", "podCIDRs"], ListKind::Set),
        ("Node", &["status", "images"], ListKind::Atomic),
        ("Pod", &["spec", "containers"], by("name")),
        ("Pod", &["spec", "initContainers"], by("name")),
        ("Pod", &["spec", "containers", "ports"], by("containerPort")),
        ("Pod", &["spec", "containers", "env"], by("name")),
        (
            "Pod",
            &["spec", "initContainers", "volumeMounts"],
            by("mountPath"),
        ),
        ("Pod", &["spec", "containers", "args"], ListKind::Atomic),
        ("Pod", &["spec", "volumes"], by("name")),
        ("Pod", &["spec", "tolerations"], ListKind::Atomic),
        (
            "Pod",
            &["spec", "topologySpreadConstraints"],
            by("topologyKey"),
        ),
        ("Pod", &["status", "conditions"], by("type")),
        ("Pod", &["status", "podIPs"], by("ip")),
        ("Pod", &["status", "containerStatuses"], ListKind::Atomic),
        (
            "Deployment",
            &["spec", "template", "spec", "containers"],
            by("name"),
        ),
        (
            "Deployment",
            &["spec", "template", "spec", "containers", "env"],
            by("name"),
        ),
        (
            "Deployment",
            &["spec", "template", "metadata", "finalizers"],
            ListKind::Set,
        ),
        ("Deployment", &["spec", "containers"], ListKind::Atomic),
        ("Deployment", &["status", "conditions"], by("type")),
        (
            "DaemonSet",
            &["spec", "template", "spec", "volumes"],
            by("name"),
        ),
        ("DaemonSet", &["status", "conditions"], by("type")),
        ("ReplicaSet", &["status", "conditions"], by("type")),
        (
            "StatefulSet",
            &["spec", "template", "spec", "containers"],
            by("name"),
        ),
        (
            "Job",
            &["spec", "template", "spec", "containers"],
            by("name"),
        ),
        (
            "CronJob",
            &[
                "spec",
                "jobTemplate",
                "spec",
                "template",
                "spec",
                "containers",
            ],
            by("name"),
        ),
        (
            "PodTemplate",
            &["template", "spec", "containers"],
            by("name"),
        ),
        ("PodDisruptionBudget", &["status", "conditions"], by("type")),
        ("Namespace", &["status", "conditions"], by("type")),
        (
            "CustomResourceDefinition",
            &["status", "conditions"],
            by("type"),
        ),
        ("Service", &["spec", "ports"], by("port")),
        ("ClusterRoleBinding", &["subjects"], ListKind::Atomic),
        ("Role", &["rules"], ListKind::Atomic),
        ("ConfigMap", &["status", "conditions"], ListKind::Atomic),
        ("Lease", &["metadata", "finalizers"], ListKind::Set),
    ];
    for (kind, path, want) in cases {
        assert_eq!(
            BuiltinLists::new(kind).list_kind(path),
            want,
            "{kind} {path:?}"
        );
    }
}

#[test]
fn normalize_order_matches_kube_apiserver_examples() {
    let v = |s: &[&str]| s.iter().map(|x| json!(x)).collect::<Vec<_>>();
    // (merged, patch order, live, want)
    let cases: [[&[&str]; 4]; 4] = [
        // live [a, b], patch [c] -> [c, a, b]
        [&["a", "b", "c"], &["c"], &["a", "b"], &["c", "a", "b"]],
        // live [a, b], patch [c, a] -> [c, a, b]
        [&["a", "b", "c"], &["c", "a"], &["a", "b"], &["c", "a", "b"]],
        // live [a, b, c], order [c, a]: b (server-only, live index 1) goes before c (index 2).
        [
            &["a", "b", "c"],
            &["c", "a"],
            &["a", "b", "c"],
            &["b", "c", "a"],
        ],
        [&["a", "b", "c"], &["b"], &["a", "b", "c"], &["a", "b", "c"]],
    ];
    for [merged, order, live, want] in cases {
        assert_eq!(
            normalize_order(v(merged), &v(order), &v(live), Ident::Equal),
            v(want),
            "order {order:?} over live {live:?}"
        );
    }
}

// ----- properties -----

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        "[a-z]{0,3}".prop_map(Value::String),
    ]
}

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,3}",
        1 => Just("$patch".to_string()),
        1 => Just("$retainKeys".to_string()),
        1 => Just("$setElementOrder/a".to_string()),
        1 => Just("$deleteFromPrimitiveList/a".to_string()),
        1 => Just("name".to_string()),
        1 => Just("type".to_string()),
        1 => Just("conditions".to_string()),
        1 => Just("finalizers".to_string()),
        1 => Just("containers".to_string()),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        json_leaf(),
        Just(json!("replace")),
        Just(json!("delete")),
        Just(json!("merge")),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(arb_key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects without nulls (a merge patch cannot produce a null in an object).
fn arb_doc() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        "[a-z]{0,3}".prop_map(Value::String),
    ];
    let tree = leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map("[a-d]{1,2}", tree, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// The RFC 7386 merge patch that turns `from` into `to`.
fn merge_diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut patch = Map::new();
            for k in f.keys() {
                if !t.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            for (k, tv) in t {
                match f.get(k) {
                    Some(fv) if fv == tv => {}
                    Some(fv @ Value::Object(_)) if tv.is_object() => {
                        patch.insert(k.clone(), merge_diff(fv, tv));
                    }
                    _ => {
                        patch.insert(k.clone(), tv.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

const ALL_TYPES: [PatchType; 4] = [
    PatchType::Merge,
    PatchType::Json,
    PatchType::Strategic,
    PatchType::Apply,
];

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        for t in ALL_TYPES {
            for kind in ["Node", "Pod", ""] {
                let live = if kind == "Pod" { pod() } else { node() };
                let _ = apply_patch(t, &live, &body, &BuiltinLists::new(kind));
            }
        }
    }

    #[test]
    fn never_panics_on_structured_bodies(patch in arb_json(), live in arb_json()) {
        let body = patch.to_string();
        let schema = crd_schema();
        for t in ALL_TYPES {
            for lists in [&BuiltinLists::new("Node") as &dyn ListSemantics, &SchemaLists(&schema)] {
                for l in [&live, &node(), &json!({})] {
                    if let Ok(out) = apply_patch(t, l, body.as_bytes(), lists) {
                        prop_assert!(!has_directive(&out), "{t:?} {body} -> {out}");
                        prop_assert!(out.is_object());
                    }
                }
            }
        }
    }

    #[test]
    fn never_panics_on_json_patch_ops(
        ops in proptest::collection::vec(
            (prop_oneof![Just("add"), Just("remove"), Just("replace"), Just("move"), Just("copy"), Just("test")],
             "(/[a-c0-9~-]{0,2}){0,3}", "(/[a-c0-9~-]{0,2}){0,3}", arb_json()),
            0..6)
    ) {
        let ops: Vec<Value> = ops.into_iter()
            .map(|(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}))
            .collect();
        let body = Value::Array(ops).to_string();
        let live = json!({"a": {"b": [1, 2, {"c": 3}]}, "c": [], "0": 1});
        let _ = apply_patch(PatchType::Json, &live, body.as_bytes(), &BuiltinLists::new(""));
    }

    #[test]
    fn merge_patch_diff_round_trips(from in arb_doc(), to in arb_doc()) {
        let patch = merge_diff(&from, &to);
        let out = apply_patch(PatchType::Merge, &from, patch.to_string().as_bytes(), &BuiltinLists::new(""))
            .unwrap();
        prop_assert_eq!(out, to);
    }

    #[test]
    fn smp_without_lists_equals_merge_patch(from in arb_doc(), to in arb_doc()) {
        // With only maps and atomic lists, a strategic merge patch is a merge patch.
        let patch = merge_diff(&from, &to);
        let out = apply_patch(PatchType::Strategic, &from, patch.to_string().as_bytes(), &BuiltinLists::new("ConfigMap"))
            .unwrap();
        prop_assert_eq!(out, to);
    }

    #[test]
    fn apply_of_itself_is_identity(doc in arb_doc()) {
        let out = apply_patch(PatchType::Apply, &doc, doc.to_string().as_bytes(), &BuiltinLists::new("ConfigMap"))
            .unwrap();
        prop_assert_eq!(out, doc);
    }
}
