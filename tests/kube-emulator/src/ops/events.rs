//! Events as kube-apiserver serves them: one store seen through two APIs, core/v1
//! `events` and `events.k8s.io/v1` `events`. An Event written through either is
//! readable, listable and watchable through both, converted as kube-apiserver converts
//! them (`note` is `message`, `regarding` is `involvedObject`, `reportingController` is
//! `reportingComponent`, the `deprecated*` fields are `source`, `firstTimestamp`,
//! `lastTimestamp` and `count`). Here each write is mirrored into the other API's
//! store, with the same name, namespace and uid.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Inner;
use crate::registry::{ResourceKey, ResourceType};

/// The core/v1 and events.k8s.io/v1 names of the same fields, in that order.
const RENAMED: [(&str, &str); 8] = [
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("related", "related"),
];

/// Fields both APIs name alike.
const SAME: [&str; 6] = [
    "reason",
    "type",
    "action",
    "reportingInstance",
    "eventTime",
    "series",
];

/// Whether `t` is one of the two Event APIs; the other one's store key.
fn other_api(t: &ResourceType) -> Option<(ResourceKey, bool)> {
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "events") => Some((ResourceKey::new("events.k8s.io", "events"), true)),
        ("events.k8s.io", "events") => Some((ResourceKey::new("", "events"), false)),
        _ => None,
    }
}

/// `event` as the other API shows it: `from_core` when `event` is a core/v1 Event.
fn converted(event: &Value, from_core: bool) -> Value {
    let mut out = Map::new();
    let (api_version, kind) = if from_core {
        ("events.k8s.io/v1", "Event")
    } else {
        ("v1", "Event")
    };
    out.insert("apiVersion".into(), api_version.into());
    out.insert("kind".into(), kind.into());
    let mut metadata = event.get("metadata").cloned().unwrap_or_default();
    if let Some(m) = metadata.as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    out.insert("metadata".into(), metadata);
    for (core, events) in RENAMED {
        let (from, to) = if from_core {
            (core, events)
        } else {
            (events, core)
        };
        if let Some(v) = event.get(from).filter(|v| !v.is_null()) {
            out.insert(to.into(), v.clone());
        }
    }
    for field in SAME {
        if let Some(v) = event.get(field).filter(|v| !v.is_null()) {
            out.insert(field.into(), v.clone());
        }
    }
    Value::Object(out)
}

impl Inner {
    /// Mirrors a stored Event into the other Event API.
    pub(super) fn mirror_event(&mut self, t: &ResourceType, ns: &str, event: &Arc<Value>) {
        let Some((key, from_core)) = other_api(t) else {
            return;
        };
        let name = event
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mirror = converted(event, from_core);
        if self.store.get(&key, ns, name).is_some() {
            self.store.replace(&key, mirror);
        } else {
            self.store.insert(&key, mirror);
        }
    }

    /// Removes the other Event API's view of a removed Event.
    pub(super) fn mirror_event_removal(&mut self, t: &ResourceType, ns: &str, event: &Value) {
        let Some((key, _)) = other_api(t) else {
            return;
        };
        if let Some(name) = event.pointer("/metadata/name").and_then(Value::as_str) {
            self.store.remove(&key, ns, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_convert_both_ways_as_kube_apiserver_does() {
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
            "note": "node n1 rebooted", "reason": "NodeUpdated", "type": "Normal",
            "action": "Update", "regarding": {"kind": "BootcNodePool", "name": "workers"},
            "reportingController": "bootc-pool-controller", "reportingInstance": "pod-1",
            "eventTime": "2026-11-27T10:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-27T10:01:00.000000Z"},
        });
        let core = converted(&events, false);
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "e1", "namespace": "default", "uid": "u1"},
                "message": "node n1 rebooted", "reason": "NodeUpdated", "type": "Normal",
                "action": "Update", "involvedObject": {"kind": "BootcNodePool", "name": "workers"},
                "reportingComponent": "bootc-pool-controller", "reportingInstance": "pod-1",
                "eventTime": "2026-11-27T10:00:00.000000Z",
                "series": {"count": 2, "lastObservedTime": "2026-11-27T10:01:00.000000Z"},
            })
        );
        let mut back = events.clone();
        back["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        assert_eq!(converted(&core, true), back);
        let legacy = json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2"},
            "message": "m", "source": {"component": "kubelet"}, "count": 3,
            "firstTimestamp": "2026-11-27T09:00:00Z", "lastTimestamp": "2026-11-27T09:05:00Z",
        });
        assert_eq!(
            converted(&legacy, true),
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
                "note": "m", "deprecatedSource": {"component": "kubelet"}, "deprecatedCount": 3,
                "deprecatedFirstTimestamp": "2026-11-27T09:00:00Z",
                "deprecatedLastTimestamp": "2026-11-27T09:05:00Z",
            })
        );
    }
}
