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
