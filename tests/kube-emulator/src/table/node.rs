//! The Node printer: the columns of `kubectl get nodes` and how their cells are computed.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::columns::{Column, age_column, name_column};
use super::docs::docs;
use super::fields::{bool_at, list_at, or_unknown, str_at, text};

/// Name, Status, Roles, Age, Version; wide: addresses, OS image, kernel and container runtime.
pub(super) fn columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed("Status", "string", "The status of the node", node_status),
        Column::computed("Roles", "string", "The roles of the node", node_roles),
        age_column(),
        Column::computed("Version", "string", &d.kubelet_version, |o, _| {
            text(o, &["status", "nodeInfo", "kubeletVersion"])
        }),
        Column::computed("Internal-IP", "string", &d.addresses, |o, _| {
            node_address(o, "InternalIP")
        })
        .wide(),
        Column::computed("External-IP", "string", &d.addresses, |o, _| {
            node_address(o, "ExternalIP")
        })
        .wide(),
        Column::computed("OS-Image", "string", &d.os_image, |o, _| {
            or_unknown(o, &["status", "nodeInfo", "osImage"])
        })
        .wide(),
        Column::computed("Kernel-Version", "string", &d.kernel_version, |o, _| {
            or_unknown(o, &["status", "nodeInfo", "kernelVersion"])
        })
        .wide(),
        Column::computed(
            "Container-Runtime",
            "string",
            &d.container_runtime,
            |o, _| or_unknown(o, &["status", "nodeInfo", "containerRuntimeVersion"]),
        )
        .wide(),
    ]
}

fn node_status(obj: &Value, _: DateTime<Utc>) -> Value {
    // The last Ready condition wins, as in the printer's condition map.
    let ready = list_at(obj, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(obj, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    Value::String(status.join(","))
}

fn node_roles(obj: &Value, _: DateTime<Utc>) -> Value {
    let mut roles = BTreeSet::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    if roles.is_empty() {
        return Value::String("<none>".to_string());
    }
    Value::String(roles.into_iter().collect::<Vec<_>>().join(","))
}

fn node_address(obj: &Value, kind: &str) -> Value {
    let address = list_at(obj, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == kind)
        .map(|a| str_at(a, &["address"]));
    Value::String(address.unwrap_or("<none>").to_string())
}
