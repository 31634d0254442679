//! PodDisruptionBudgets: their status, kept current as pods change, and the `pods/eviction` subresource that honours them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::ops::{Inner, WriteOptions, now};
use crate::registry::{ResourceKey, ResourceType};
use crate::selectors::LabelSelector;

/// A pod counts as healthy when Ready and not being deleted.
fn healthy(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// An int-or-percent of `total`, rounded up as the disruption controller does.
fn scaled(value: &Value, total: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let p: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((p * total + 99) / 100)
        }
        _ => None,
    }
}

/// The numbers a budget's status reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdbBudget {
    /// Pods the budget selects (not being deleted).
    pub expected: i64,
    /// Of those, Ready ones.
    pub current_healthy: i64,
    /// How many must stay Ready.
    pub desired_healthy: i64,
    /// How many may be evicted now.
    pub disruptions_allowed: i64,
}

/// Computes a budget over the pods of its namespace (policy/v1: a missing selector selects
/// no pods, an empty one selects all).
pub fn budget(pdb: &Value, pods: &[Arc<Value>]) -> PdbBudget {
    let selector = pdb
        .pointer("/spec/selector")
        .map_or_else(
            || Ok(LabelSelector::nothing()),
            LabelSelector::from_label_selector_json,
        )
        .unwrap_or_else(|_| LabelSelector::nothing());
    let selected: Vec<&Arc<Value>> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none() && selector.matches_object(p)
        })
        .collect();
    let expected = selected.len() as i64;
    let current_healthy = selected.iter().filter(|p| healthy(p)).count() as i64;
    let spec = &pdb["spec"];
    let desired_healthy =
        if let Some(min) = spec.get("minAvailable").and_then(|v| scaled(v, expected)) {
            min
        } else if let Some(max) = spec.get("maxUnavailable").and_then(|v| scaled(v, expected)) {
            (expected - max).max(0)
        } else {
            1
        };
    PdbBudget {
        expected,
        current_healthy,
        desired_healthy,
        disruptions_allowed: (current_healthy - desired_healthy).max(0),
    }
}

/// Recomputes the status of every budget in `ns`, writing only what changed.
pub fn refresh_budgets(inner: &mut Inner, ns: &str) {
    let pdb_key = ResourceKey::new("policy", "poddisruptionbudgets");
    let pdbs = inner.store.list(&pdb_key, Some(ns));
    if pdbs.is_empty() {
        return;
    }
    let pods = inner.store.list(&ResourceKey::new("", "pods"), Some(ns));
    for pdb in pdbs {
        let b = budget(&pdb, &pods);
        let allowed = b.disruptions_allowed > 0;
        let old_condition = pdb
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionAllowed"))
            .cloned();
        let status_word = if allowed { "True" } else { "False" };
        let condition = match old_condition {
            Some(c) if c["status"] == status_word => c,
            _ => json!({
                "type": "DisruptionAllowed",
                "status": status_word,
                "reason": if allowed { "SufficientPods" } else { "InsufficientPods" },
                "message": "",
                "lastTransitionTime": now(),
                "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            }),
        };
        let status = json!({
            "observedGeneration": pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "disruptionsAllowed": b.disruptions_allowed,
            "currentHealthy": b.current_healthy,
            "desiredHealthy": b.desired_healthy,
            "expectedPods": b.expected,
            "conditions": [condition],
        });
        if pdb.get("status") != Some(&status) {
            let mut updated = (*pdb).clone();
            updated["status"] = status;
            inner.store.replace(&pdb_key, updated);
        }
    }
}

/// `POST pods/NAME/eviction`: deletes the pod unless a budget forbids it (429).
pub fn evict(
    inner: &mut Inner,
    ns: &str,
    name: &str,
    eviction: &Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let pods_type = inner
        .registry
        .find("", "v1", "pods")
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    let Some(pod) = inner.store.get(&pods_type.key(), ns, name) else {
        return Err(ApiError::not_found(&pods_type, name));
    };
    if let Some(body_name) = eviction.pointer("/metadata/name").and_then(Value::as_str)
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in Eviction object: {name} vs {body_name}"
        )));
    }
    let success = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(success);
    }
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !matches!(phase, "Succeeded" | "Failed") {
        check_budget(inner, &pods_type, ns, &pod)?;
    }
    let options = eviction
        .get("deleteOptions")
        .cloned()
        .unwrap_or(Value::Null);
    inner.delete(&pods_type, Some(ns), name, &options, opts.dry_run)?;
    Ok(success)
}

/// Whether the budget covering `pod` (at most one may) lets it go: 429 when it does not.
fn check_budget(
    inner: &Inner,
    pods_type: &ResourceType,
    ns: &str,
    pod: &Value,
) -> Result<(), ApiError> {
    let pdbs: Vec<Arc<Value>> = inner
        .store
        .list(
            &ResourceKey::new("policy", "poddisruptionbudgets"),
            Some(ns),
        )
        .into_iter()
        .filter(|pdb| {
            pdb.pointer("/spec/selector")
                .map_or_else(
                    || Ok(LabelSelector::nothing()),
                    LabelSelector::from_label_selector_json,
                )
                .is_ok_and(|s| s.matches_object(pod))
        })
        .collect();
    if pdbs.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    if let Some(pdb) = pdbs.first() {
        let pods = inner.store.list(&pods_type.key(), Some(ns));
        let b = budget(pdb, &pods);
        let pod_ok = if healthy(pod) {
            b.disruptions_allowed > 0
        } else {
            // IfHealthyBudget: an unhealthy pod may go while the budget is met.
            b.current_healthy >= b.desired_healthy
        };
        if !pod_ok {
            let pdb_name = pdb
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut e = ApiError::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            );
            e.details = Some(json!({"causes": [{
                "reason": "DisruptionBudget",
                "message": format!("The disruption budget {pdb_name} needs {} healthy pods and has {} currently", b.desired_healthy, b.current_healthy),
            }]}));
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, app: &str, ready: bool) -> Arc<Value> {
        Arc::new(json!({
            "metadata": {"name": name, "labels": {"app": app}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
    }

    #[test]
    fn budgets() {
        let pods = vec![
            pod("a", "web", true),
            pod("b", "web", true),
            pod("c", "web", false),
            pod("d", "db", true),
        ];
        let pdb = |spec: Value| json!({"spec": spec});
        let sel = json!({"matchLabels": {"app": "web"}});
        let cases = [
            (json!({"selector": sel, "minAvailable": 2}), (3, 2, 2, 0)),
            (json!({"selector": sel, "minAvailable": 1}), (3, 2, 1, 1)),
            (json!({"selector": sel, "maxUnavailable": 1}), (3, 2, 2, 0)),
            (json!({"selector": sel, "maxUnavailable": 0}), (3, 2, 3, 0)),
            (
                json!({"selector": sel, "minAvailable": "50%"}),
                (3, 2, 2, 0),
            ),
            (
                json!({"selector": sel, "maxUnavailable": "50%"}),
                (3, 2, 1, 1),
            ),
            (json!({"selector": {}, "minAvailable": 1}), (4, 3, 1, 2)),
        ];
        for (spec, (expected, healthy, desired, allowed)) in cases {
            let b = budget(&pdb(spec.clone()), &pods);
            assert_eq!(
                (
                    b.expected,
                    b.current_healthy,
                    b.desired_healthy,
                    b.disruptions_allowed
                ),
                (expected, healthy, desired, allowed),
                "{spec}"
            );
        }
    }
}
