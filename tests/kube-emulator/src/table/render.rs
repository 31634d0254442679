//! Building `Table`s: the one kube-apiserver returns for a list or a single object, and the one-row `Table` of each
//! event of a watch.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::TableVersion;
use super::columns::Column;
use super::fields::str_at;

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

/// How the events of one watch are rendered as `Table`s: the meta.k8s.io version asked for, the resource's columns
/// and `includeObject` (as for [`to_table`]).
#[derive(Debug, Clone, Copy)]
pub struct TableFormat<'a> {
    /// The meta.k8s.io version of the `Table`s.
    pub version: TableVersion,
    /// The watched resource's columns.
    pub columns: &'a [Column],
    /// `?includeObject=`.
    pub include_object: &'a str,
}

/// The watch event kube-apiserver sends when a client watches with a `Table` `Accept` header:
/// `{"type": …, "object": <Table with one row>}`. kube-apiserver sends the column definitions only in the first event
/// of a watch stream (`include_headers`), and `"columnDefinitions": null` in the following ones; kubectl reuses the
/// last definitions it saw. The table's `metadata.resourceVersion` is the object's. A `Status` object (an `ERROR`
/// event) is passed through unconverted.
pub fn watch_event_table(
    format: TableFormat<'_>,
    event_type: &str,
    object: &Value,
    include_headers: bool,
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
        format.version,
        format.columns,
        std::slice::from_ref(object),
        format.include_object,
        json!({"resourceVersion": resource_version}),
        now,
    );
    if !include_headers {
        table["columnDefinitions"] = Value::Null;
    }
    json!({"type": event_type, "object": table})
}
