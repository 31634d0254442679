//! The columns kube-apiserver's printers give built-in kinds; those of the kinds with printers of their own (Node,
//! Pod, Event) come from their modules, the simpler ones are here.

use serde_json::Value;

use super::columns::{Column, age_column, name_column};
use super::docs::docs;
use super::fields::{int_at, int_or_string, len_at, text};
use super::{event, node, pod};

/// The columns kube-apiserver's printers give a built-in kind (all of them, wide ones with priority 1): Node, Pod,
/// Namespace, PodDisruptionBudget, Lease, ConfigMap, Secret, ServiceAccount and (core/v1) Event as kube-apiserver
/// prints them; any other kind gets Name and Age.
pub fn builtin_columns(kind: &str) -> Vec<Column> {
    match kind {
        "Node" => node::columns(),
        "Pod" => pod::columns(),
        "Namespace" => namespace_columns(),
        "PodDisruptionBudget" => pdb_columns(),
        "Lease" => lease_columns(),
        "ConfigMap" => config_map_columns(),
        "Secret" => secret_columns(),
        "ServiceAccount" => service_account_columns(),
        "Event" => event::columns(),
        _ => vec![name_column(), age_column()],
    }
}

/// Name, Status (the phase), Age.
fn namespace_columns() -> Vec<Column> {
    vec![
        name_column(),
        Column::computed("Status", "string", "The status of the namespace", |o, _| {
            text(o, &["status", "phase"])
        }),
        age_column(),
    ]
}

/// Name, Min Available, Max Unavailable, Allowed Disruptions, Age.
fn pdb_columns() -> Vec<Column> {
    vec![
        name_column(),
        Column::computed(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
            |o, _| int_or_string(o.pointer("/spec/minAvailable")),
        ),
        Column::computed(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
            |o, _| int_or_string(o.pointer("/spec/maxUnavailable")),
        ),
        Column::computed(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
            |o, _| Value::from(int_at(o, &["status", "disruptionsAllowed"])),
        ),
        age_column(),
    ]
}

/// Name, Holder, Age.
fn lease_columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed("Holder", "string", &d.holder_identity, |o, _| {
            text(o, &["spec", "holderIdentity"])
        }),
        age_column(),
    ]
}

/// Name, Data (the number of keys), Age.
fn config_map_columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed("Data", "string", &d.config_map_data, |o, _| {
            Value::from(len_at(o, "data") + len_at(o, "binaryData"))
        }),
        age_column(),
    ]
}

/// Name, Type, Data (the number of keys), Age.
fn secret_columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed("Type", "string", &d.secret_type, |o, _| text(o, &["type"])),
        Column::computed("Data", "string", &d.secret_data, |o, _| {
            Value::from(len_at(o, "data"))
        }),
        age_column(),
    ]
}

/// Name, Secrets (their number), Age.
fn service_account_columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed("Secrets", "string", &d.service_account_secrets, |o, _| {
            Value::from(len_at(o, "secrets"))
        }),
        age_column(),
    ]
}
