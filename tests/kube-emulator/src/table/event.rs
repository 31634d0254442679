//! The (core/v1) Event printer: the columns of `kubectl get events` and how their cells are computed.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::columns::{Column, name_column};
use super::docs::docs;
use super::fields::{int_at, str_at, text, time_at};
use super::time::{age, human_duration, is_zero_time};

/// Last Seen, Type, Reason, Object, Message; wide: Subobject, Source, First Seen, Count and Name.
pub(super) fn columns() -> Vec<Column> {
    let d = docs();
    vec![
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
    ]
}

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
