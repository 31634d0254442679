//! Objects as a watch delivers them from a real cluster, for the `decode` cases: a Node as
//! its kubelet keeps it (its images, addresses, resources, conditions, system facts, and
//! the `managedFields` of the clients that wrote it), and a BootcNode of the fixed pools
//! with the `managedFields` an API server adds for the controller and the agent.

use serde_json::{Value, json};

use crate::world::{self, State};

/// Node `i` as its kubelet keeps it.
pub fn node(i: usize) -> Value {
    let name = format!("node-{i:05}");
    let images: Vec<Value> = (0..40)
        .map(|k| {
            json!({"names": [format!("registry.example/team-{k}/app@sha256:{k:064x}"),
                             format!("registry.example/team-{k}/app:v1.{k}.0")],
                   "sizeBytes": 10_000_000 + k * 1_000})
        })
        .collect();
    let time = "2026-11-22T11:58:00Z";
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": time, "lastTransitionTime": time})
    };
    let managed = |manager: &str, fields: Value| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": time,
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    let resources = json!({"cpu": "16", "ephemeral-storage": "203056560Ki",
                           "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                           "memory": "65842236Ki", "pods": "110"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("0b6e7c7a-5d1f-4f3e-9a57-{i:012}"),
            "resourceVersion": format!("{}", 1_000_000 + i),
            "creationTimestamp": "2026-10-01T08:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.4xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
                "role": "worker", (bootc_crds::MANAGED_LABEL): "",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{i:017x}\"}}"),
            },
            "managedFields": [
                managed("kubelet", json!({"f:metadata": {"f:annotations": {".": {},
                    "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                    "f:labels": {".": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {},
                                 "f:kubernetes.io/os": {}}}})),
                managed("kubelet", json!({"f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}},
                    "f:conditions": {"k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {},
                    "f:message": {}, "f:reason": {}, "f:status": {}}}, "f:images": {},
                    "f:nodeInfo": {"f:bootID": {}}}})),
                managed("kube-controller-manager", json!({"f:metadata": {"f:annotations": {
                    "f:node.alpha.kubernetes.io/ttl": {}}}, "f:spec": {"f:podCIDR": {},
                    "f:podCIDRs": {".": {}, "v:\"10.244.3.0/24\"": {}}}})),
                managed("bootc-pool-controller", json!({"f:metadata": {"f:labels": {
                    "f:node.bootc.dev/managed": {}}}})),
            ]
        },
        "spec": {"podCIDR": "10.244.3.0/24", "podCIDRs": ["10.244.3.0/24"],
                 "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)},
                          {"type": "Hostname", "address": name}],
            "allocatable": resources,
            "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": format!("{i:08x}-1c2d-4e5f-8a9b-0c1d2e3f4a5b"),
                "containerRuntimeVersion": "cri-o://1.33.1", "kernelVersion": "6.12.9-200.fc41.x86_64",
                "kubeProxyVersion": "", "kubeletVersion": "v1.33.2",
                "machineID": format!("{i:032x}"), "operatingSystem": "linux",
                "osImage": "Fedora CoreOS 42", "systemUUID": format!("ec2{i:029x}"),
            },
            "runtimeHandlers": [{"name": "crun", "features": {"recursiveReadOnlyMounts": true,
                                                               "userNamespaces": true}}],
        }
    })
}

/// The BootcNodes of `size` staged members of the fixed pools, as an API server sends
/// them.
pub fn bootc_nodes(size: usize) -> Vec<Value> {
    let (_, bootcs) = world::objects(size, State::AllStaged);
    bootcs.iter().map(bootc_node).collect()
}

fn bootc_node(bootc: &bootc_crds::node::BootcNode) -> Value {
    let mut value = serde_json::to_value(bootc).expect("a BootcNode serializes");
    value["metadata"]["managedFields"] = json!([
        {"manager": "bootc-pool-controller", "operation": "Update",
         "apiVersion": "node.bootc.dev/v1alpha1", "time": "2026-11-22T11:58:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:ownerReferences": {".": {},
             "k:{\"uid\":\"pool-uid\"}": {}}}, "f:spec": {".": {}, "f:desiredImage": {},
             "f:desiredImageState": {}}}},
        {"manager": "bootc-pool-agent", "operation": "Update",
         "apiVersion": "node.bootc.dev/v1alpha1", "time": "2026-11-22T11:58:00Z",
         "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {".": {}, "f:agentVersion": {}, "f:booted": {".": {},
             "f:image": {}}, "f:conditions": {}, "f:observedGeneration": {}, "f:staged": {}}}},
    ]);
    value
}

/// Pod `i` of a Deployment as the API server keeps it: two containers, three volumes,
/// the status the kubelet wrote, the `managedFields` of its writers.
pub fn pod(i: usize) -> Value {
    let time = "2026-11-22T11:58:00Z";
    let container = |name: &str| {
        json!({"name": name, "image": format!("registry.example/shop/{name}:v1.4.2"),
               "imagePullPolicy": "IfNotPresent",
               "args": ["--listen=:8080", "--metrics=:9090", "--log-format=json"],
               "env": [{"name": "MODE", "value": "production"},
                       {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
               "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"},
                         {"containerPort": 9090, "name": "metrics", "protocol": "TCP"}],
               "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                                  "periodSeconds": 10, "timeoutSeconds": 1},
               "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                             "limits": {"memory": "512Mi"}},
               "terminationMessagePath": "/dev/termination-log",
               "terminationMessagePolicy": "File",
               "volumeMounts": [{"name": "cache", "mountPath": "/cache"},
                                {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                 "readOnly": true}]})
    };
    let status = |name: &str| {
        json!({"name": name, "ready": true, "started": true, "restartCount": 0,
               "image": format!("registry.example/shop/{name}:v1.4.2"),
               "imageID": format!("registry.example/shop/{name}@sha256:{i:064x}"),
               "containerID": format!("cri-o://{i:064x}"),
               "state": {"running": {"startedAt": time}}})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("web-7d9f8c6b5-{i:05}"), "generateName": "web-7d9f8c6b5-",
            "namespace": "shop", "uid": format!("9e1c2f4a-1b2c-4d5e-8f90-{i:012}"),
            "resourceVersion": format!("{}", 2_000_000 + i),
            "creationTimestamp": time,
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-7d9f8c6b5", "uid": "rs-uid",
                                 "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": time, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {
                     "f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
                     "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time,
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {},
                                           "f:phase": {}, "f:podIP": {}}}}
            ]
        },
        "spec": {
            "nodeName": format!("node-{:05}", i % 100),
            "containers": [container("web"), container("proxy")],
            "volumes": [
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "config", "configMap": {"name": "web", "defaultMode": 420}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
            ],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0, "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccountName": "web", "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": format!("10.244.{}.{}", i / 250, i % 250),
            "qosClass": "Burstable", "startTime": time,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": time},
                {"type": "Ready", "status": "True", "lastTransitionTime": time},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": time},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": time}
            ],
            "containerStatuses": [status("proxy"), status("web")]
        }
    })
}
