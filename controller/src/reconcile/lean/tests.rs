//! Lean decoding against a full decode: a lean Node must be the full Node with what plans
//! do not read taken off, and a lean BootcNode the full one without `managedFields`.

use bootc_crds::node::BootcNode;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus, Volume};
use kube::Resource;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::Lean;
use crate::reconcile::cache::{node_boot_id, node_fingerprint, node_unschedulable};

/// What plans read of a fully decoded Node, taken off it the long way: the test's own
/// statement of what a lean Node keeps.
fn stripped(mut node: Node) -> Node {
    node.metadata.managed_fields = None;
    node.metadata.annotations = None;
    if let Some(spec) = node.spec.as_mut() {
        spec.pod_cidr = None;
        spec.pod_cidrs = None;
        spec.provider_id = None;
        spec.config_source = None;
    }
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.addresses = None;
        status.capacity = None;
        status.allocatable = None;
        status.daemon_endpoints = None;
        status.config = None;
        status.features = None;
        status.runtime_handlers = None;
        if let Some(info) = status.node_info.as_mut() {
            *info = k8s_openapi::api::core::v1::NodeSystemInfo {
                boot_id: std::mem::take(&mut info.boot_id),
                ..Default::default()
            };
        }
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| c.type_ == "Ready");
        }
    }
    node
}

fn lean_node(value: &Value) -> Result<Node, serde_json::Error> {
    let text = serde_json::to_vec(value).unwrap();
    serde_json::from_slice::<Lean<Node>>(&text).map(|Lean(n)| n)
}

fn full_node(value: &Value) -> Result<Node, serde_json::Error> {
    let text = serde_json::to_vec(value).unwrap();
    serde_json::from_slice::<Node>(&text)
}

/// A Node as a kubelet and a few other clients leave it.
fn kubelets_node() -> Value {
    let images: Vec<Value> = (0..40)
        .map(|i| {
            json!({"names": [format!("registry.example/app-{i}@sha256:{i:064}"),
                                  format!("registry.example/app-{i}:v{i}")],
                        "sizeBytes": 1_000_000 + i})
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1", "uid": "u-1", "resourceVersion": "42",
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"role": "worker", "kubernetes.io/hostname": "n1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
                     ".": {}, "f:status": {}}}, "f:images": {}}}},
                {"manager": "bootc-pool-controller", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}}
            ]
        },
        "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"],
                 "providerID": "p://n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2026-01-02T03:04:05Z"},
                {"type": "DiskPressure", "status": "False"}
            ],
            "nodeInfo": {
                "bootID": "b-1", "machineID": "m", "systemUUID": "u", "kernelVersion": "6.1",
                "osImage": "Debian", "containerRuntimeVersion": "c", "kubeletVersion": "v1.33",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
            },
            "addresses": [{"type": "InternalIP", "address": "10.1.2.3"}],
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "phase": "Running"
        }
    })
}

#[test]
fn a_lean_node_keeps_what_plans_read() {
    let value = kubelets_node();
    let node = lean_node(&value).unwrap();
    let full = full_node(&value).unwrap();
    assert_eq!(node_fingerprint(&node), node_fingerprint(&full));
    assert_eq!(node.metadata.labels.as_ref().unwrap()["role"], "worker");
    assert_eq!(node.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(node.metadata.uid.as_deref(), Some("u-1"));
    assert!(node_unschedulable(&node));
    assert!(bootc_pool_common::node::node_ready(&node));
    assert_eq!(node_boot_id(&node), Some("b-1"));
    let status = node.status.as_ref().unwrap();
    assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
    let info = status.node_info.as_ref().unwrap();
    assert_eq!(info.kernel_version, "");
    assert_eq!(info.machine_id, "");
    assert!(status.images.is_none() && status.addresses.is_none());
    assert!(node.metadata.annotations.is_none());
    assert!(node.metadata.managed_fields.is_none());
    assert_eq!(node, stripped(full));
}

#[test]
fn a_wrong_type_fails_where_it_is_kept_and_not_where_it_is_skipped() {
    let mut value = kubelets_node();
    value["status"]["images"] = json!("not a list");
    value["metadata"]["annotations"] = json!(7);
    value["metadata"]["managedFields"] = json!({"not": "a list"});
    assert!(full_node(&value).is_err());
    assert_eq!(
        lean_node(&value).unwrap(),
        stripped(full_node(&kubelets_node()).unwrap())
    );
    for (at, wrong) in [
        ("/metadata/labels", json!(5)),
        ("/spec/unschedulable", json!("yes")),
        ("/status/conditions", json!({"type": "Ready"})),
        ("/status/nodeInfo/bootID", json!(1)),
    ] {
        let mut value = kubelets_node();
        *value.pointer_mut(at).unwrap() = wrong;
        assert!(full_node(&value).is_err(), "{at}");
        assert!(lean_node(&value).is_err(), "{at}");
    }
}

#[test]
fn a_lean_object_is_addressed_as_its_kind() {
    assert_eq!(Lean::<Node>::url_path(&(), None), Node::url_path(&(), None));
    assert_eq!(Lean::<Node>::kind(&()), "Node");
    assert_eq!(
        Lean::<BootcNode>::url_path(&(), None),
        BootcNode::url_path(&(), None)
    );
    assert_eq!(
        Lean::<BootcNode>::api_version(&()),
        BootcNode::api_version(&())
    );
    let value = bootc_value(true, false, true);
    let bootc: BootcNode = serde_json::from_value(value).unwrap();
    // Sent as the object itself, with its kind.
    assert_eq!(
        serde_json::to_value(Lean(bootc.clone())).unwrap(),
        serde_json::to_value(bootc).unwrap()
    );
}

fn bootc_value(annotations: bool, managed: bool, status: bool) -> Value {
    let mut value = json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": "n1", "resourceVersion": "7", "uid": "u",
                     "ownerReferences": [{"apiVersion": "node.bootc.dev/v1alpha1",
                                          "kind": "BootcNodePool", "name": "p", "uid": "pu",
                                          "controller": true}]},
        "spec": {"desiredImage": format!("registry.example/os@sha256:{:064}", 1),
                 "desiredImageState": "Booted"},
    });
    if annotations {
        value["metadata"]["annotations"] = json!({"node.bootc.dev/slot": "granted"});
    }
    if managed {
        value["metadata"]["managedFields"] = json!([{"manager": "agent", "operation": "Update",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:booted": {}}}}]);
    }
    if status {
        value["status"] = json!({"observedGeneration": 2, "agentVersion": "0.1",
                                 "conditions": [{"type": "Ready", "status": "True",
                                                 "reason": "Staged", "message": "",
                                                 "lastTransitionTime": "2026-01-02T03:04:05Z"}]});
    }
    value
}

#[test]
fn a_lean_bootc_node_is_the_full_one_without_managed_fields() {
    for bits in 0..8 {
        let value = bootc_value(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let text = serde_json::to_vec(&value).unwrap();
        let mut full: BootcNode = serde_json::from_slice(&text).unwrap();
        let Lean(lean) = serde_json::from_slice::<Lean<BootcNode>>(&text).unwrap();
        assert_eq!(full.metadata.managed_fields.is_some(), bits & 2 != 0);
        full.metadata.managed_fields = None;
        assert_eq!(lean, full, "case {bits}");
    }
    let mut value = bootc_value(true, true, false);
    value.as_object_mut().unwrap().remove("spec");
    let text = serde_json::to_vec(&value).unwrap();
    assert!(serde_json::from_slice::<BootcNode>(&text).is_err());
    assert!(serde_json::from_slice::<Lean<BootcNode>>(&text).is_err());
}

/// Some of `parts`, each present or not.
fn some_of(parts: Vec<(&'static str, Value)>) -> impl Strategy<Value = Value> {
    let n = parts.len();
    proptest::collection::vec(any::<bool>(), n).prop_map(move |present| {
        Value::Object(
            parts
                .iter()
                .zip(present)
                .filter(|(_, p)| *p)
                .map(|((k, v), _)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    })
}

fn node_values() -> impl Strategy<Value = Value> {
    let full = kubelets_node();
    let metadata = some_of(
        full["metadata"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (leak(k), v.clone()))
            .chain([
                ("deletionTimestamp", json!("2026-01-03T00:00:00Z")),
                ("finalizers", json!(["f"])),
                ("generation", json!(3)),
            ])
            .collect(),
    );
    let spec = some_of(object_parts(&full["spec"]));
    let info = some_of(object_parts(&full["status"]["nodeInfo"]));
    let conditions = proptest::sample::subsequence(
        full["status"]["conditions"].as_array().unwrap().clone(),
        0..=3,
    );
    let status = (some_of(object_parts(&full["status"])), info, conditions).prop_map(
        |(mut status, info, conditions)| {
            if status.get("nodeInfo").is_some() {
                status["nodeInfo"] = info;
            }
            if status.get("conditions").is_some() {
                status["conditions"] = Value::Array(conditions);
            }
            status
        },
    );
    (
        metadata,
        proptest::option::of(spec),
        proptest::option::of(status),
    )
        .prop_map(|(metadata, spec, status)| {
            let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": metadata});
            if let Some(spec) = spec {
                node["spec"] = spec;
            }
            if let Some(status) = status {
                node["status"] = status;
            }
            node
        })
}

fn object_parts(value: &Value) -> Vec<(&'static str, Value)> {
    value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (leak(k), v.clone()))
        .collect()
}

/// A key as the `'static` text `some_of` takes (a test's handful of keys).
fn leak(key: &str) -> &'static str {
    Box::leak(key.to_owned().into_boxed_str())
}

proptest! {
    /// Any Node, with any of its parts there or not, decodes lean into what a full
    /// decode keeps once what plans do not read is taken off.
    #[test]
    fn a_lean_node_is_the_full_node_stripped(value in node_values()) {
        let full = full_node(&value).unwrap();
        let fingerprint = node_fingerprint(&full);
        let lean = lean_node(&value).unwrap();
        prop_assert_eq!(node_fingerprint(&lean), fingerprint);
        prop_assert_eq!(lean, stripped(full));
    }
}

/// What a drain and the blocking pods read of a fully decoded Pod, taken the long way:
/// the test's own statement of what a lean Pod keeps.
fn stripped_pod(pod: Pod) -> Pod {
    let mut metadata = pod.metadata;
    metadata.managed_fields = None;
    Pod {
        metadata,
        spec: pod.spec.map(|s| PodSpec {
            node_name: s.node_name,
            volumes: s.volumes.map(|vs| {
                vs.into_iter()
                    .map(|v| Volume {
                        name: v.name,
                        empty_dir: v.empty_dir,
                        ..Volume::default()
                    })
                    .collect()
            }),
            ..PodSpec::default()
        }),
        status: pod.status.map(|s| PodStatus {
            phase: s.phase,
            ..PodStatus::default()
        }),
    }
}

/// A Deployment's pod as the API server keeps it.
fn deployments_pod() -> Value {
    let container = |name: &str| {
        json!({"name": name, "image": format!("registry.example/{name}:v1"),
               "args": ["--listen", ":8080"], "env": [{"name": "MODE", "value": "prod"}],
               "ports": [{"containerPort": 8080, "protocol": "TCP"}],
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
               "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f-abcde", "namespace": "shop", "uid": "pu-1",
            "resourceVersion": "99", "labels": {"app": "web"},
            "annotations": {"kubernetes.io/config.mirror": "x"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-7d9f", "uid": "rs-1", "controller": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
        },
        "spec": {
            "nodeName": "n1",
            "containers": [container("web"), container("sidecar")],
            "volumes": [
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "config", "configMap": {"name": "web"}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "serviceAccountName": "web"
        },
        "status": {
            "phase": "Running", "podIP": "10.244.3.7",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                                   "image": "registry.example/web:v1", "imageID": "x",
                                   "state": {"running": {"startedAt": "2026-01-02T03:04:05Z"}}}]
        }
    })
}

fn lean_pod(value: &Value) -> Result<Pod, serde_json::Error> {
    serde_json::from_slice::<Lean<Pod>>(&serde_json::to_vec(value).unwrap()).map(|Lean(p)| p)
}

fn full_pod(value: &Value) -> Result<Pod, serde_json::Error> {
    serde_json::from_slice::<Pod>(&serde_json::to_vec(value).unwrap())
}

#[test]
fn a_lean_pod_keeps_what_a_drain_reads() {
    let value = deployments_pod();
    let pod = lean_pod(&value).unwrap();
    assert_eq!(pod.metadata.annotations.as_ref().unwrap().len(), 1);
    assert_eq!(
        pod.metadata.owner_references.as_ref().unwrap()[0].kind,
        "ReplicaSet"
    );
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "web");
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    let volumes = spec.volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 3);
    assert!(volumes[0].empty_dir.is_some() && volumes[1].empty_dir.is_none());
    assert!(volumes[1].config_map.is_none() && spec.containers.is_empty());
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
    assert!(pod.metadata.managed_fields.is_none());
    assert_eq!(pod, stripped_pod(full_pod(&value).unwrap()));
}

fn pod_values() -> impl Strategy<Value = Value> {
    let full = deployments_pod();
    let volumes =
        proptest::sample::subsequence(full["spec"]["volumes"].as_array().unwrap().clone(), 0..=3);
    (
        some_of(object_parts(&full["metadata"])),
        proptest::option::of((some_of(object_parts(&full["spec"])), volumes)),
        proptest::option::of(some_of(object_parts(&full["status"]))),
    )
        .prop_map(|(metadata, spec, status)| {
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata});
            if let Some((mut spec, volumes)) = spec {
                if spec.get("volumes").is_some() {
                    spec["volumes"] = Value::Array(volumes);
                }
                pod["spec"] = spec;
            }
            if let Some(status) = status {
                pod["status"] = status;
            }
            pod
        })
}

proptest! {
    /// Any Pod, with any of its parts there or not, decodes lean into what a full decode
    /// keeps once what a drain does not read is taken off.
    #[test]
    fn a_lean_pod_is_the_full_pod_stripped(value in pod_values()) {
        let full = full_pod(&value).unwrap();
        prop_assert_eq!(lean_pod(&value).unwrap(), stripped_pod(full));
    }
}
