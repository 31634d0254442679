use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use super::*;

const POOLS_CRD: &str = include_str!("../../../../crds/node.bootc.dev_bootcnodepools.yaml");
const NODES_CRD: &str = include_str!("../../../../crds/node.bootc.dev_bootcnodes.yaml");

fn crd_version(yaml: &str) -> Value {
    let crd: Value = serde_yaml_ng::from_str(yaml).unwrap();
    crd["spec"]["versions"][0].clone()
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-01-01T01:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn pool(status: Option<Value>) -> Value {
    let mut obj = json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "workers", "creationTimestamp": "2025-01-01T00:55:00Z", "resourceVersion": "42"},
        "spec": {"image": {"ref": "quay.io/example/os:latest"}},
    });
    if let Some(status) = status {
        obj["status"] = status;
    }
    obj
}

#[test]
fn human_duration_table() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (800 * 86400, "2y70d"),
        (3000 * 86400, "8y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(TimeDelta::seconds(secs)), want, "{secs}s");
    }
}

#[test]
fn wants_table_table() {
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let cases = [
        (Some(kubectl), Some(TableVersion::V1)),
        (
            Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json"),
            Some(TableVersion::V1Beta1),
        ),
        (Some("application/json"), None),
        (None, None),
        (Some("*/*"), None),
        (
            Some("application/json;as=Table;v=v2;g=meta.k8s.io,application/json"),
            None,
        ),
        (
            Some("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"),
            None,
        ),
        (
            Some("application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io"),
            Some(TableVersion::V1),
        ),
        (
            Some(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            ),
            Some(TableVersion::V1Beta1),
        ),
        (
            Some(
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json",
            ),
            None,
        ),
        (
            Some("application/yaml;as=Table;v=v1;g=meta.k8s.io"),
            Some(TableVersion::V1),
        ),
    ];
    for (accept, want) in cases {
        assert_eq!(wants_table(accept), want, "{accept:?}");
    }
    assert!(accept_is_satisfiable(Some(kubectl)));
    assert!(accept_is_satisfiable(None));
    assert!(!accept_is_satisfiable(Some(
        "application/vnd.kubernetes.protobuf"
    )));
    assert!(!accept_is_satisfiable(Some(
        "application/json;as=Table;v=v9;g=meta.k8s.io"
    )));
}

#[test]
fn crd_columns_of_our_crds() {
    let pools = crd_columns(&crd_version(POOLS_CRD));
    let names: Vec<&str> = pools.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Name", "Target", "Nodes", "Updated", "Updating", "Staging", "Pulled", "Degraded",
            "UpToDate", "Age"
        ]
    );
    assert_eq!(pools[0].format, "name");
    assert!(
        pools[0]
            .description
            .starts_with("Name must be unique within a namespace.")
    );
    assert_eq!(pools[2].type_, "integer");
    assert_eq!(pools[9].type_, "date");
    assert_eq!(
        pools[9].description,
        "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"
    );
    let nodes = crd_columns(&crd_version(NODES_CRD));
    let names: Vec<&str> = nodes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Booted",
            "Version",
            "State",
            "Progress",
            "Degraded",
            "Age",
            "Staged",
            "Desired Image",
            "Booted Image"
        ]
    );

    let bare = crd_columns(&json!({"name": "v1"}));
    assert_eq!(bare.len(), 2);
    assert_eq!(bare[1].name, "Age");
    assert_eq!(bare[1].type_, "date");
    assert!(
        bare[1]
            .description
            .starts_with("CreationTimestamp is a timestamp")
    );

    let broken = crd_columns(&json!({"additionalPrinterColumns": [
        {"name": "A", "type": "string", "jsonPath": ".a"},
        {"name": "B", "type": "string", "jsonPath": ".b["},
        {"name": "C", "type": "string", "jsonPath": ".c"},
    ]}));
    assert_eq!(
        broken.len(),
        2,
        "stops at the unparsable column, as kube-apiserver does"
    );
}

#[test]
fn pool_rows() {
    let columns = crd_columns(&crd_version(POOLS_CRD));
    let full = pool(Some(json!({
        "targetShortDigest": "abc123",
        "nodeCount": 3,
        "updatedCount": 2,
        "updatingCount": 1,
        "stagingCount": 4,
        "stagingPercent": 55,
        "degradedCount": 0,
        "conditions": [{"type": "UpToDate", "status": "False"}, {"type": "Degraded", "status": "False"}],
    })));
    let cases = [
        (
            full,
            json!(["workers", "abc123", 3, 2, 1, 4, 55, 0, "False", "5m"]),
        ),
        (
            pool(None),
            json!([
                "workers", null, null, null, null, null, null, null, null, "5m"
            ]),
        ),
        (
            pool(Some(
                json!({"nodeCount": 2.0, "targetShortDigest": 7, "conditions": null}),
            )),
            json!(["workers", "7", 2, null, null, null, null, null, null, "5m"]),
        ),
        (
            pool(Some(json!({"nodeCount": "3", "targetShortDigest": null}))),
            json!([
                "workers",
                "<no value>",
                null,
                null,
                null,
                null,
                null,
                null,
                null,
                "5m"
            ]),
        ),
    ];
    for (obj, want) in cases {
        let cells: Vec<Value> = columns.iter().map(|c| c.cell(&obj, now())).collect();
        assert_eq!(Value::Array(cells), want, "{obj}");
    }
}

#[test]
fn date_and_typed_cells() {
    let col = |type_: &str, path: &str| Column {
        json_path: Some(path.to_string()),
        ..Column::new("X", type_, "")
    };
    let obj = json!({"t": "2025-01-01T00:00:00Z", "bad": "yesterday", "empty": "", "zero": "0001-01-01T00:00:00Z",
            "n": 1.5, "i": 7, "b": true, "m": {"k": "v"}, "l": ["a", 1]});
    let cases = [
        (col("date", ".t"), json!("60m")),
        (col("date", ".bad"), json!("<invalid>")),
        (col("date", ".empty"), json!("<unknown>")),
        (col("date", ".zero"), json!("<unknown>")),
        (col("date", ".i"), Value::Null),
        (col("number", ".n"), json!(1.5)),
        (col("number", ".i"), json!(7)),
        (col("integer", ".n"), json!(1)),
        (col("boolean", ".b"), json!(true)),
        (col("boolean", ".i"), Value::Null),
        (col("string", ".b"), json!("true")),
        (col("string", ".m"), json!("map[k:v]")),
        (col("string", ".l"), json!("[a 1]")),
        (col("string", ".l[*]"), json!("a")),
        (col("string", ".l[9]"), Value::Null),
        (col("other", ".i"), Value::Null),
        (Column::new("Name", "string", ""), json!("")),
    ];
    for (column, want) in cases {
        assert_eq!(column.cell(&obj, now()), want, "{column:?}");
    }
}

#[test]
fn table_document() {
    let columns = crd_columns(&crd_version(POOLS_CRD));
    let table = to_table(
        TableVersion::V1,
        &columns,
        &[pool(None)],
        "",
        json!({"resourceVersion": "42", "continue": ""}),
        now(),
    );
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["metadata"], json!({"resourceVersion": "42"}));
    assert_eq!(table["columnDefinitions"].as_array().unwrap().len(), 10);
    assert_eq!(
        table["columnDefinitions"][2],
        json!({"name": "Nodes", "type": "integer", "format": "", "description": "Nodes in the pool", "priority": 0})
    );
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "workers");
    assert!(table["rows"][0].get("conditions").is_none());

    let beta = to_table(
        TableVersion::V1Beta1,
        &columns,
        &[pool(None)],
        "Object",
        json!({}),
        now(),
    );
    assert_eq!(beta["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(beta["rows"][0]["object"]["kind"], "BootcNodePool");
    let none = to_table(
        TableVersion::V1,
        &columns,
        &[pool(None)],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(none["rows"][0]["object"], Value::Null);
    let empty = to_table(
        TableVersion::V1,
        &columns,
        &[],
        "Metadata",
        json!({}),
        now(),
    );
    assert_eq!(empty["rows"], json!([]));
    assert!(valid_include_object("Metadata") && !valid_include_object("All"));
}

#[test]
fn watch_events() {
    let columns = crd_columns(&crd_version(POOLS_CRD));
    let format = TableFormat {
        version: TableVersion::V1,
        columns: &columns,
        include_object: "",
    };
    let first = watch_event_table(format, "ADDED", &pool(None), true, now());
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "Table");
    assert_eq!(
        first["object"]["metadata"],
        json!({"resourceVersion": "42"})
    );
    assert_eq!(first["object"]["rows"].as_array().unwrap().len(), 1);
    assert!(first["object"]["columnDefinitions"].is_array());
    let next = watch_event_table(format, "MODIFIED", &pool(None), false, now());
    assert_eq!(next["object"]["columnDefinitions"], Value::Null);
    assert_eq!(next["object"]["rows"][0]["cells"][0], "workers");
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410});
    let error = watch_event_table(format, "ERROR", &status, false, now());
    assert_eq!(error, json!({"type": "ERROR", "object": status}));
}

#[test]
fn builtin_rows() {
    let t = "2025-01-01T00:00:00Z";
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "Node",
            json!({"metadata": {"name": "n1", "creationTimestamp": t,
                    "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "infra"}},
                    "spec": {"unschedulable": true},
                    "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                        "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Fedora CoreOS"},
                        "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}]}}),
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane,infra,worker",
                "60m",
                "v1.33.0",
                "10.0.0.1",
                "<none>",
                "Fedora CoreOS",
                "<unknown>",
                "<unknown>"
            ]),
        ),
        (
            "Node",
            json!({"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
            json!([
                "n2",
                "NotReady",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]),
        ),
        (
            "Node",
            json!({"metadata": {"name": "n3"}}),
            json!([
                "n3",
                "Unknown",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]),
        ),
        (
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "creationTimestamp": t},
                    "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
                    "status": {"phase": "Running", "podIPs": [{"ip": "10.1.0.5"}],
                        "conditions": [{"type": "Ready", "status": "False"}],
                        "containerStatuses": [
                            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2025-01-01T00:50:00Z"}}},
                            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
            json!([
                "p",
                "1/2",
                "CrashLoopBackOff",
                "2 (10m ago)",
                "60m",
                "10.1.0.5",
                "n1",
                "<none>",
                "<none>"
            ]),
        ),
        (
            "Pod",
            json!({"metadata": {"name": "p", "creationTimestamp": t, "deletionTimestamp": t},
                    "spec": {"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "x"}]},
                    "status": {"phase": "Running", "conditions": [{"type": "x", "status": "True"}],
                        "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}}]}}),
            json!([
                "p",
                "1/1",
                "Terminating",
                "0",
                "60m",
                "<none>",
                "<none>",
                "<none>",
                "1/1"
            ]),
        ),
        (
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}],
                    "initContainers": [{"name": "i1"}, {"name": "side", "restartPolicy": "Always"}]},
                    "status": {"phase": "Pending", "initContainerStatuses": [
                        {"name": "i1", "restartCount": 0, "state": {"running": {}}},
                        {"name": "side", "restartCount": 0, "state": {"waiting": {}}}]}}),
            json!([
                "p",
                "0/2",
                "Init:0/2",
                "0",
                "<unknown>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ]),
        ),
        (
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
                    "status": {"phase": "Succeeded", "containerStatuses": [
                        {"name": "a", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}),
            json!([
                "p",
                "0/1",
                "Completed",
                "0",
                "<unknown>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ]),
        ),
        (
            "Namespace",
            json!({"metadata": {"name": "default", "creationTimestamp": t}, "status": {"phase": "Active"}}),
            json!(["default", "Active", "60m"]),
        ),
        (
            "PodDisruptionBudget",
            json!({"metadata": {"name": "pdb", "creationTimestamp": t}, "spec": {"minAvailable": "50%"},
                    "status": {"disruptionsAllowed": 1}}),
            json!(["pdb", "50%", "N/A", 1, "60m"]),
        ),
        (
            "PodDisruptionBudget",
            json!({"metadata": {"name": "pdb"}, "spec": {"maxUnavailable": 1}}),
            json!(["pdb", "N/A", "1", 0, "<unknown>"]),
        ),
        (
            "Lease",
            json!({"metadata": {"name": "l", "creationTimestamp": t}, "spec": {"holderIdentity": "ctrl-1"}}),
            json!(["l", "ctrl-1", "60m"]),
        ),
        (
            "Lease",
            json!({"metadata": {"name": "l", "creationTimestamp": t}, "spec": {}}),
            json!(["l", "", "60m"]),
        ),
        (
            "ConfigMap",
            json!({"metadata": {"name": "c", "creationTimestamp": t}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}}),
            json!(["c", 3, "60m"]),
        ),
        (
            "Secret",
            json!({"metadata": {"name": "s", "creationTimestamp": t}, "type": "Opaque", "data": {"a": "MQ=="}}),
            json!(["s", "Opaque", 1, "60m"]),
        ),
        (
            "Event",
            json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Drained", "message": " drained \n",
                    "involvedObject": {"kind": "Node", "name": "n1"}, "source": {"component": "bootc-controller"},
                    "firstTimestamp": t, "lastTimestamp": "2025-01-01T00:59:00Z", "count": 0}),
            json!([
                "60s",
                "Normal",
                "Drained",
                "node/n1",
                "",
                "bootc-controller",
                "drained",
                "60m",
                1,
                "e1"
            ]),
        ),
        (
            "Widget",
            json!({"metadata": {"name": "w", "creationTimestamp": t}}),
            json!(["w", "60m"]),
        ),
    ];
    for (kind, obj, want) in cases {
        let columns = builtin_columns(kind);
        let cells: Vec<Value> = columns.iter().map(|c| c.cell(&obj, now())).collect();
        assert_eq!(Value::Array(cells), want, "{kind}: {obj}");
    }
    let node_cols = builtin_columns("Node");
    assert_eq!(
        node_cols[4].description,
        "Kubelet Version reported by the node."
    );
    assert_eq!(node_cols.iter().filter(|c| c.priority == 1).count(), 5);
    let finished = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Succeeded"}});
    let table = to_table(
        TableVersion::V1,
        &builtin_columns("Pod"),
        &[finished],
        "None",
        json!({}),
        now(),
    );
    assert_eq!(table["rows"][0]["conditions"][0]["type"], "Completed");
    assert_eq!(table["rows"][0]["conditions"][0]["reason"], "Succeeded");
}
