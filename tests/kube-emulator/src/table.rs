//! Server-side printing: the meta.k8s.io `Table` kube-apiserver returns to kubectl for CRDs and built-in kinds.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::jsonpath;

/// The version of meta.k8s.io a client asked its `Table` in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1`.
    V1Beta1,
}

impl TableVersion {
    /// The `apiVersion` of a `Table` (and of the `PartialObjectMetadata` in its rows) in this version.
    pub fn api_version(self) -> &'static str {
        match self {
            TableVersion::V1 => "meta.k8s.io/v1",
            TableVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// Whether an `Accept` header asks for a `Table`, negotiated as kube-apiserver does for a resource endpoint: media
/// ranges by descending `q` (ties keep their order, wildcards after concrete types), and the first one the server can
/// serve (JSON or YAML, optionally as a meta.k8s.io v1/v1beta1 `Table` or `PartialObjectMetadata`) wins.
///
/// `None` means plain objects: a plain media type won, or nothing acceptable was offered (kube-apiserver would answer
/// 406 Not Acceptable then; see [`accept_is_satisfiable`]).
pub fn wants_table(accept: Option<&str>) -> Option<TableVersion> {
    match negotiate(accept) {
        Some(Negotiated::Table(version)) => Some(version),
        _ => None,
    }
}

/// Whether kube-apiserver could answer a resource request with this `Accept` header in JSON or YAML (a missing or
/// empty header accepts anything).
pub fn accept_is_satisfiable(accept: Option<&str>) -> bool {
    negotiate(accept).is_some()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Negotiated {
    Plain,
    Table(TableVersion),
}

fn negotiate(accept: Option<&str>) -> Option<Negotiated> {
    let header = accept.map(str::trim).unwrap_or("");
    if header.is_empty() {
        return Some(Negotiated::Plain);
    }
    struct Clause {
        q: f64,
        kind: String,
        subtype: String,
        params: Vec<(String, String)>,
    }
    let mut clauses: Vec<Clause> = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
        let (kind, subtype) = match media.split_once('/') {
            Some((k, s)) => (k.trim().to_string(), s.trim().to_string()),
            None if media == "*" => ("*".to_string(), "*".to_string()),
            None => continue,
        };
        let mut q = 1.0;
        let mut params = Vec::new();
        for param in pieces {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let k = k.trim().to_string();
            let v = v.trim().trim_matches('"').to_string();
            if k == "q" {
                q = v.parse().unwrap_or(0.0);
            } else {
                params.push((k, v));
            }
        }
        clauses.push(Clause {
            q,
            kind,
            subtype,
            params,
        });
    }
    // goautoneg: higher q first; at equal q, concrete types before wildcards.
    clauses.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    for clause in clauses {
        if clause.q <= 0.0 {
            continue;
        }
        let servable = match (clause.kind.as_str(), clause.subtype.as_str()) {
            ("*", "*") | ("application", "*") => true,
            ("application", sub) => sub == "json" || sub == "yaml",
            _ => false,
        };
        if !servable {
            continue;
        }
        let (mut as_kind, mut group, mut version) = (None, None, None);
        let mut converts = false;
        for (k, v) in &clause.params {
            match k.as_str() {
                "as" => (as_kind, converts) = (Some(v.as_str()), true),
                "g" => (group, converts) = (Some(v.as_str()), true),
                "v" => (version, converts) = (Some(v.as_str()), true),
                _ => {}
            }
        }
        if !converts {
            return Some(Negotiated::Plain);
        }
        let table_version = match (group, version) {
            (Some("meta.k8s.io"), Some("v1")) => TableVersion::V1,
            (Some("meta.k8s.io"), Some("v1beta1")) => TableVersion::V1Beta1,
            _ => continue,
        };
        match as_kind {
            Some("Table") => return Some(Negotiated::Table(table_version)),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") => {
                return Some(Negotiated::Plain);
            }
            _ => continue,
        }
    }
    None
}

/// A function computing a cell of a built-in kind's column from the object and the current time.
pub type CellFn = fn(&Value, DateTime<Utc>) -> Value;

/// One column of a `Table`: its definition, and how its cells are computed.
#[derive(Debug, Clone)]
pub struct Column {
    /// Column header (kubectl upper-cases it).
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date` (CRD columns).
    pub type_: String,
    /// OpenAPI format; `name` marks the column holding the object's name.
    pub format: String,
    /// Human-readable description.
    pub description: String,
    /// 0 for default columns; kubectl shows higher priorities only with `-o wide`.
    pub priority: i32,
    /// A CRD column's JSONPath; `None` (without `compute`) means the object's name.
    pub json_path: Option<String>,
    /// Computes a built-in kind's cell, as kube-apiserver's printers do; takes precedence over `json_path`.
    pub compute: Option<CellFn>,
}

impl Column {
    fn new(name: &str, type_: &str, description: &str) -> Column {
        Column {
            name: name.to_string(),
            type_: type_.to_string(),
            format: String::new(),
            description: description.to_string(),
            priority: 0,
            json_path: None,
            compute: None,
        }
    }

    fn computed(name: &str, type_: &str, description: &str, compute: CellFn) -> Column {
        Column {
            compute: Some(compute),
            ..Column::new(name, type_, description)
        }
    }

    fn wide(mut self) -> Column {
        self.priority = 1;
        self
    }

    /// The column's `TableColumnDefinition`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }

    /// The cell of this column for `obj`, as kube-apiserver computes it.
    pub fn cell(&self, obj: &Value, now: DateTime<Utc>) -> Value {
        if let Some(compute) = self.compute {
            return compute(obj, now);
        }
        match &self.json_path {
            None => Value::String(str_at(obj, &["metadata", "name"]).to_string()),
            Some(path) => crd_cell(path, &self.type_, obj, now),
        }
    }
}

/// A CRD column cell, as the apiextensions table convertor computes it: the first result of the path, printed like
/// `kubectl -o jsonpath` for `string` columns and converted to the column's type otherwise; `null` when the path
/// finds nothing, fails, or the value does not fit the type.
fn crd_cell(path: &str, type_: &str, obj: &Value, now: DateTime<Utc>) -> Value {
    let Ok(results) = jsonpath::find_results(path, obj) else {
        return Value::Null;
    };
    let Some(value) = results.first().and_then(|set| set.first()) else {
        return Value::Null;
    };
    if type_ == "string" {
        return Value::String(jsonpath::go_text(value));
    }
    if value.is_null() {
        return Value::Null;
    }
    match type_ {
        "integer" => match value {
            Value::Number(n) => match n.as_i64() {
                Some(i) => Value::from(i),
                None => Value::from(go_float_to_int(n.as_f64().unwrap_or(f64::NAN))),
            },
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => go_json_float(n.as_f64().unwrap_or(f64::NAN)),
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match value {
            Value::String(s) => Value::String(date_cell(s, now)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Go's `int64(float64)` on amd64: truncation, and the minimum int64 for what does not fit.
fn go_float_to_int(f: f64) -> i64 {
    if f.is_finite() && f > -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18 {
        f as i64
    } else {
        i64::MIN
    }
}

/// A float as Go's encoding/json writes it: integral values without a fraction.
fn go_json_float(f: f64) -> Value {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// A `date` cell: the age of an RFC 3339 timestamp, `<unknown>` for an empty or zero time, `<invalid>` when unparsable.
fn date_cell(s: &str, now: DateTime<Utc>) -> String {
    if s.is_empty() || s == "null" {
        return "<unknown>".to_string();
    }
    match DateTime::parse_from_rfc3339(s) {
        Ok(t) => age(Some(t.with_timezone(&Utc)), now),
        Err(_) => "<invalid>".to_string(),
    }
}

/// kube-apiserver's `translateTimestampSince`: the humanized time since `t`, `<unknown>` when unset or zero.
fn age(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) if !is_zero_time(t) => human_duration(now - t),
        _ => "<unknown>".to_string(),
    }
}

fn is_zero_time(t: DateTime<Utc>) -> bool {
    t.timestamp() == -62_135_596_800 && t.timestamp_subsec_nanos() == 0
}

/// k8s.io/apimachinery's `duration.HumanDuration`: "0s", "45s", "5m3s", "15m", "5h3m", "2d", "3y100d", "<invalid>".
pub fn human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{}h", hours / 24, h);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{}d", hours / 24 / 365, dy);
    }
    format!("{}y", hours / 24 / 365)
}

/// The columns kube-apiserver shows for a CRD version (an element of the CRD's `spec.versions`): Name first, then its
/// `additionalPrinterColumns`, or Age when it has none. Like kube-apiserver, stops at a column whose JSONPath does not
/// parse.
pub fn crd_columns(crd_version: &Value) -> Vec<Column> {
    let mut columns = vec![name_column()];
    let defined = crd_version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .filter(|cols| !cols.is_empty());
    let Some(defined) = defined else {
        columns.push(Column {
            json_path: Some(".metadata.creationTimestamp".to_string()),
            ..Column::new("Age", "date", &docs().creation_timestamp)
        });
        return columns;
    };
    for col in defined {
        let path = str_at(col, &["jsonPath"]).to_string();
        if jsonpath::validate(&path).is_err() {
            break;
        }
        let description = match str_at(col, &["description"]) {
            "" => format!("Custom resource definition column (in JSONPath format): {path}"),
            d => d.to_string(),
        };
        columns.push(Column {
            name: str_at(col, &["name"]).to_string(),
            type_: str_at(col, &["type"]).to_string(),
            format: str_at(col, &["format"]).to_string(),
            description,
            priority: col
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            json_path: Some(path),
            compute: None,
        });
    }
    columns
}

fn name_column() -> Column {
    Column {
        format: "name".to_string(),
        ..Column::new("Name", "string", &docs().name)
    }
}

fn age_column() -> Column {
    Column::computed("Age", "string", &docs().creation_timestamp, |obj, now| {
        Value::String(age(time_at(obj, &["metadata", "creationTimestamp"]), now))
    })
}

/// The columns kube-apiserver's printers give a built-in kind (all of them, wide ones with priority 1): Node, Pod,
/// Namespace, PodDisruptionBudget, Lease, ConfigMap, Secret, ServiceAccount and (core/v1) Event as kube-apiserver
/// prints them; any other kind gets Name and Age.
pub fn builtin_columns(kind: &str) -> Vec<Column> {
    let d = docs();
    match kind {
        "Node" => vec![
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
        ],
        "Pod" => vec![
            name_column(),
            Column::computed(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
                |o, n| Value::String(pod_summary(o, n).ready),
            ),
            Column::computed(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
                |o, n| Value::String(pod_summary(o, n).reason),
            ),
            Column::computed(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                |o, n| Value::String(pod_summary(o, n).restarts),
            ),
            age_column(),
            Column::computed("IP", "string", &d.pod_ip, |o, _| {
                let ip = o
                    .pointer("/status/podIPs/0/ip")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Value::String(none_if_empty(ip))
            })
            .wide(),
            Column::computed("Node", "string", &d.node_name, |o, _| {
                Value::String(none_if_empty(str_at(o, &["spec", "nodeName"])))
            })
            .wide(),
            Column::computed(
                "Nominated Node",
                "string",
                &d.nominated_node_name,
                |o, _| Value::String(none_if_empty(str_at(o, &["status", "nominatedNodeName"]))),
            )
            .wide(),
            Column::computed(
                "Readiness Gates",
                "string",
                &d.readiness_gates,
                pod_readiness_gates,
            )
            .wide(),
        ],
        "Namespace" => vec![
            name_column(),
            Column::computed("Status", "string", "The status of the namespace", |o, _| {
                text(o, &["status", "phase"])
            }),
            age_column(),
        ],
        "PodDisruptionBudget" => vec![
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
        ],
        "Lease" => vec![
            name_column(),
            Column::computed("Holder", "string", &d.holder_identity, |o, _| {
                text(o, &["spec", "holderIdentity"])
            }),
            age_column(),
        ],
        "ConfigMap" => vec![
            name_column(),
            Column::computed("Data", "string", &d.config_map_data, |o, _| {
                Value::from(len_at(o, "data") + len_at(o, "binaryData"))
            }),
            age_column(),
        ],
        "Secret" => vec![
            name_column(),
            Column::computed("Type", "string", &d.secret_type, |o, _| text(o, &["type"])),
            Column::computed("Data", "string", &d.secret_data, |o, _| {
                Value::from(len_at(o, "data"))
            }),
            age_column(),
        ],
        "ServiceAccount" => vec![
            name_column(),
            Column::computed("Secrets", "string", &d.service_account_secrets, |o, _| {
                Value::from(len_at(o, "secrets"))
            }),
            age_column(),
        ],
        "Event" => vec![
            Column::computed("Last Seen", "string", &d.event_last_timestamp, |o, n| {
                Value::String(event_last_seen(o, n))
            }),
            Column::computed("Type", "string", &d.event_type, |o, _| text(o, &["type"])),
            Column::computed("Reason", "string", &d.event_reason, |o, _| {
                text(o, &["reason"])
            }),
            Column::computed("Object", "string", &d.event_involved_object, event_target),
            Column::computed("Subobject", "string", &d.event_field_path, |o, _| {
                text(o, &["involvedObject", "fieldPath"])
            })
            .wide(),
            Column::computed("Source", "string", &d.event_source, event_source).wide(),
            Column::computed("Message", "string", &d.event_message, |o, _| {
                Value::String(str_at(o, &["message"]).trim().to_string())
            }),
            Column::computed("First Seen", "string", &d.event_first_timestamp, |o, n| {
                Value::String(event_first_seen(o, n))
            })
            .wide(),
            Column::computed("Count", "string", &d.event_count, event_count).wide(),
            Column {
                priority: 1,
                ..name_column()
            },
        ],
        _ => vec![name_column(), age_column()],
    }
}

/// Whether `?includeObject=` has a value kube-apiserver accepts (`None`, `Metadata`, `Object`, or empty); others are a
/// 400 Bad Request there.
pub fn valid_include_object(include_object: &str) -> bool {
    matches!(include_object, "" | "None" | "Metadata" | "Object")
}

/// Builds the `Table` kube-apiserver returns for a list (or, with one object, a single GET): one row per object with
/// its cells and, per `include_object` (`None`, `Metadata` (the default, also for `""`), `Object`), no object, a
/// `PartialObjectMetadata`, or the whole object. `list_metadata` becomes the table's `metadata` (`resourceVersion`,
/// `continue`, `remainingItemCount`; empty values are left out).
pub fn to_table(
    version: TableVersion,
    columns: &[Column],
    objects: &[Value],
    include_object: &str,
    list_metadata: Value,
    now: DateTime<Utc>,
) -> Value {
    let mut metadata = Map::new();
    if let Value::Object(given) = list_metadata {
        for (k, v) in given {
            let empty = v.is_null() || v.as_str() == Some("");
            if !empty {
                metadata.insert(k, v);
            }
        }
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| row(version, columns, obj, include_object, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": version.api_version(),
        "metadata": metadata,
        "columnDefinitions": columns.iter().map(Column::definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

fn row(
    version: TableVersion,
    columns: &[Column],
    obj: &Value,
    include_object: &str,
    now: DateTime<Utc>,
) -> Value {
    let cells: Vec<Value> = columns.iter().map(|c| c.cell(obj, now)).collect();
    let object = match include_object {
        "None" => Value::Null,
        "Object" => obj.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": version.api_version(),
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
    };
    let mut row = json!({"cells": cells, "object": object});
    if let Some(conditions) = row_conditions(obj) {
        row["conditions"] = conditions;
    }
    row
}

/// The row conditions kube-apiserver's pod printer sets (`Completed` for a finished pod).
fn row_conditions(obj: &Value) -> Option<Value> {
    if str_at(obj, &["kind"]) != "Pod" || str_at(obj, &["apiVersion"]) != "v1" {
        return None;
    }
    let (reason, message) = match str_at(obj, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

/// The watch event kube-apiserver sends when a client watches with a `Table` `Accept` header:
/// `{"type": …, "object": <Table with one row>}`. kube-apiserver sends the column definitions only in the first event
/// of a watch stream (`include_headers`), and `"columnDefinitions": null` in the following ones; kubectl reuses the
/// last definitions it saw. The table's `metadata.resourceVersion` is the object's. A `Status` object (an `ERROR`
/// event) is passed through unconverted.
pub fn watch_event_table(
    version: TableVersion,
    columns: &[Column],
    event_type: &str,
    object: &Value,
    include_headers: bool,
    include_object: &str,
    now: DateTime<Utc>,
) -> Value {
    if str_at(object, &["kind"]) == "Status" {
        return json!({"type": event_type, "object": object});
    }
    let resource_version = object
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    let mut table = to_table(
        version,
        columns,
        std::slice::from_ref(object),
        include_object,
        json!({"resourceVersion": resource_version}),
        now,
    );
    if !include_headers {
        table["columnDefinitions"] = Value::Null;
    }
    json!({"type": event_type, "object": table})
}

// ---------------------------------------------------------------------------------------------------------------------
// Field access helpers.

fn str_at<'v>(obj: &'v Value, path: &[&str]) -> &'v str {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn text(obj: &Value, path: &[&str]) -> Value {
    Value::String(str_at(obj, path).to_string())
}

fn int_at(obj: &Value, path: &[&str]) -> i64 {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return 0,
        }
    }
    cur.as_i64().unwrap_or(0)
}

fn bool_at(obj: &Value, path: &[&str]) -> bool {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return false,
        }
    }
    cur.as_bool().unwrap_or(false)
}

fn time_at(obj: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(str_at(obj, path))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn len_at(obj: &Value, key: &str) -> i64 {
    match obj.get(key) {
        Some(Value::Object(m)) => m.len() as i64,
        Some(Value::Array(a)) => a.len() as i64,
        _ => 0,
    }
}

fn list_at<'v>(obj: &'v Value, path: &[&str]) -> &'v [Value] {
    let mut cur = obj;
    for key in path {
        match cur.get(key) {
            Some(v) => cur = v,
            None => return &[],
        }
    }
    cur.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "<none>" } else { s }.to_string()
}

fn or_unknown(obj: &Value, path: &[&str]) -> Value {
    match str_at(obj, path) {
        "" => Value::String("<unknown>".to_string()),
        s => Value::String(s.to_string()),
    }
}

/// An IntOrString as `intstr.String()` prints it, `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => Value::String(n.to_string()),
        Some(Value::String(s)) => Value::String(s.clone()),
        _ => Value::String("N/A".to_string()),
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Node printer.

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

// ---------------------------------------------------------------------------------------------------------------------
// Pod printer.

/// The Ready, Status and Restarts cells of a pod, as kube-apiserver's `printPod` computes them.
#[derive(Debug)]
struct PodSummary {
    ready: String,
    reason: String,
    restarts: String,
}

fn pod_summary(pod: &Value, now: DateTime<Utc>) -> PodSummary {
    let init_specs = list_at(pod, &["spec", "initContainers"]);
    let restartable = |name: &str| -> bool {
        init_specs
            .iter()
            .any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
    };
    let mut total = list_at(pod, &["spec", "containers"]).len();
    total += init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let mut restarts: i64 = 0;
    let mut restartable_init_restarts: i64 = 0;
    let mut ready = 0usize;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut last_restartable_init_restart: Option<DateTime<Utc>> = None;
    let later = |cur: Option<DateTime<Utc>>, t: Option<DateTime<Utc>>| match (cur, t) {
        (Some(c), Some(t)) if t > c => Some(t),
        (None, Some(t)) => Some(t),
        (c, _) => c,
    };

    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = phase.to_string();
    if !str_at(pod, &["status", "reason"]).is_empty() {
        reason = str_at(pod, &["status", "reason"]).to_string();
    }
    for c in list_at(pod, &["status", "conditions"]) {
        if str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }

    let mut initializing = false;
    for (i, status) in list_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(status, &["restartCount"]);
        restarts += count;
        let finished = time_at(status, &["lastState", "terminated", "finishedAt"])
            .filter(|_| status.pointer("/lastState/terminated").is_some());
        last_restart = later(last_restart, finished);
        let is_restartable = restartable(str_at(status, &["name"]));
        if is_restartable {
            restartable_init_restarts += count;
            last_restartable_init_restart = later(last_restartable_init_restart, finished);
        }
        let terminated = status
            .pointer("/state/terminated")
            .filter(|t| t.is_object());
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        match terminated {
            Some(t) if int_at(t, &["exitCode"]) == 0 => continue,
            _ if is_restartable && bool_at(status, &["started"]) => {
                if bool_at(status, &["ready"]) {
                    ready += 1;
                }
                continue;
            }
            Some(t) => {
                reason = match str_at(t, &["reason"]) {
                    "" if int_at(t, &["signal"]) != 0 => {
                        format!("Init:Signal:{}", int_at(t, &["signal"]))
                    }
                    "" => format!("Init:ExitCode:{}", int_at(t, &["exitCode"])),
                    r => format!("Init:{r}"),
                };
            }
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{}", init_specs.len()),
        }
        initializing = true;
        break;
    }

    let initialized = list_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == "Initialized" && str_at(c, &["status"]) == "True");
    if !initializing || initialized {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for status in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(status, &["restartCount"]);
            let finished = time_at(status, &["lastState", "terminated", "finishedAt"])
                .filter(|_| status.pointer("/lastState/terminated").is_some());
            last_restart = later(last_restart, finished);
            let terminated = status
                .pointer("/state/terminated")
                .filter(|t| t.is_object());
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match str_at(t, &["reason"]) {
                    "" if int_at(t, &["signal"]) != 0 => {
                        format!("Signal:{}", int_at(t, &["signal"]))
                    }
                    "" => format!("ExitCode:{}", int_at(t, &["exitCode"])),
                    r => r.to_string(),
                };
            } else if bool_at(status, &["ready"])
                && status
                    .pointer("/state/running")
                    .is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = list_at(pod, &["status", "conditions"])
                .iter()
                .any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting && str_at(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".to_string();
    }

    let mut restarts_text = restarts.to_string();
    if restarts != 0
        && let Some(t) = last_restart.filter(|t| !is_zero_time(*t))
    {
        restarts_text = format!("{restarts} ({} ago)", human_duration(now - t));
    }
    PodSummary {
        ready: format!("{ready}/{total}"),
        reason,
        restarts: restarts_text,
    }
}

fn pod_readiness_gates(pod: &Value, _: DateTime<Utc>) -> Value {
    let gates = list_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return Value::String("<none>".to_string());
    }
    let conditions = list_at(pod, &["status", "conditions"]);
    let true_count = gates
        .iter()
        .filter(|g| {
            let wanted = str_at(g, &["conditionType"]);
            conditions
                .iter()
                .find(|c| str_at(c, &["type"]) == wanted)
                .is_some_and(|c| str_at(c, &["status"]) == "True")
        })
        .count();
    Value::String(format!("{true_count}/{}", gates.len()))
}

// ---------------------------------------------------------------------------------------------------------------------
// Event printer.

fn event_first_seen(obj: &Value, now: DateTime<Utc>) -> String {
    match time_at(obj, &["firstTimestamp"]).filter(|t| !is_zero_time(*t)) {
        Some(t) => human_duration(now - t),
        None => age(time_at(obj, &["eventTime"]), now),
    }
}

fn event_last_seen(obj: &Value, now: DateTime<Utc>) -> String {
    if obj.get("series").is_some_and(Value::is_object) {
        return age(time_at(obj, &["series", "lastObservedTime"]), now);
    }
    match time_at(obj, &["lastTimestamp"]).filter(|t| !is_zero_time(*t)) {
        Some(t) => human_duration(now - t),
        None => event_first_seen(obj, now),
    }
}

fn event_count(obj: &Value, _: DateTime<Utc>) -> Value {
    if obj.get("series").is_some_and(Value::is_object) {
        return Value::from(int_at(obj, &["series", "count"]));
    }
    match int_at(obj, &["count"]) {
        0 => Value::from(1),
        n => Value::from(n),
    }
}

fn event_target(obj: &Value, _: DateTime<Utc>) -> Value {
    let kind = str_at(obj, &["involvedObject", "kind"]).to_lowercase();
    match str_at(obj, &["involvedObject", "name"]) {
        "" => Value::String(kind),
        name => Value::String(format!("{kind}/{name}")),
    }
}

fn event_source(obj: &Value, _: DateTime<Utc>) -> Value {
    let first_non_empty = |a: &str, b: &str| if a.is_empty() { b } else { a }.to_string();
    let component = first_non_empty(
        str_at(obj, &["source", "component"]),
        str_at(obj, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        str_at(obj, &["source", "host"]),
        str_at(obj, &["reportingInstance"]),
    );
    if instance.is_empty() {
        Value::String(component)
    } else {
        Value::String(format!("{component}, {instance}"))
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Column descriptions: the API field documentation kube-apiserver's printers use (SwaggerDoc), taken from k8s-openapi.

#[derive(Debug, Default)]
struct Docs {
    name: String,
    creation_timestamp: String,
    kubelet_version: String,
    os_image: String,
    kernel_version: String,
    container_runtime: String,
    addresses: String,
    pod_ip: String,
    node_name: String,
    nominated_node_name: String,
    readiness_gates: String,
    holder_identity: String,
    config_map_data: String,
    secret_type: String,
    secret_data: String,
    service_account_secrets: String,
    event_last_timestamp: String,
    event_first_timestamp: String,
    event_type: String,
    event_reason: String,
    event_involved_object: String,
    event_field_path: String,
    event_source: String,
    event_message: String,
    event_count: String,
}

fn field_doc<T: JsonSchema>(field: &str) -> String {
    let mut generator = SchemaGenerator::default();
    let schema = T::json_schema(&mut generator);
    schema
        .as_value()
        .pointer(&format!("/properties/{field}/description"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::api::core::v1::{
            ConfigMap, Event, NodeStatus, NodeSystemInfo, ObjectReference, PodSpec, PodStatus,
            Secret, ServiceAccount,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        Docs {
            name: field_doc::<ObjectMeta>("name"),
            creation_timestamp: field_doc::<ObjectMeta>("creationTimestamp"),
            kubelet_version: field_doc::<NodeSystemInfo>("kubeletVersion"),
            os_image: field_doc::<NodeSystemInfo>("osImage"),
            kernel_version: field_doc::<NodeSystemInfo>("kernelVersion"),
            container_runtime: field_doc::<NodeSystemInfo>("containerRuntimeVersion"),
            addresses: field_doc::<NodeStatus>("addresses"),
            pod_ip: field_doc::<PodStatus>("podIP"),
            node_name: field_doc::<PodSpec>("nodeName"),
            nominated_node_name: field_doc::<PodStatus>("nominatedNodeName"),
            readiness_gates: field_doc::<PodSpec>("readinessGates"),
            holder_identity: field_doc::<LeaseSpec>("holderIdentity"),
            config_map_data: field_doc::<ConfigMap>("data"),
            secret_type: field_doc::<Secret>("type"),
            secret_data: field_doc::<Secret>("data"),
            service_account_secrets: field_doc::<ServiceAccount>("secrets"),
            event_last_timestamp: field_doc::<Event>("lastTimestamp"),
            event_first_timestamp: field_doc::<Event>("firstTimestamp"),
            event_type: field_doc::<Event>("type"),
            event_reason: field_doc::<Event>("reason"),
            event_involved_object: field_doc::<Event>("involvedObject"),
            event_field_path: field_doc::<ObjectReference>("fieldPath"),
            event_source: field_doc::<Event>("source"),
            event_message: field_doc::<Event>("message"),
            event_count: field_doc::<Event>("count"),
        }
    })
}

#[cfg(test)]
mod tests;
