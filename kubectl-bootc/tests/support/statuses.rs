//! Statuses as the controller and the agents write them, built from JSON, for the unit
//! tests and the command tests alike. The module that includes this one keeps the clock:
//! its `ago`.

use serde_json::{Value, json};

use super::ago;

/// `sha256:` and 64 times `c`.
pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// `registry.test/os@sha256:ccc…`.
pub fn pin(c: char) -> String {
    format!("registry.test/os@{}", digest(c))
}

/// A condition that last changed `minutes` ago.
pub fn cond(type_: &str, status: &str, reason: &str, message: &str, minutes: i64) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": ago(minutes),
    })
}

/// A pool status: target `c`, counts, conditions.
pub fn pool_status(target: char, counts: [i32; 4], conditions: Value) -> Value {
    let [nodes, updated, updating, degraded] = counts;
    json!({
        "observedGeneration": 1,
        "targetImage": pin(target),
        "targetDigest": digest(target),
        "targetShortDigest": target.to_string().repeat(12),
        "targetVersion": format!("v{target}"),
        "nodeCount": nodes, "updatedCount": updated, "updatingCount": updating,
        "degradedCount": degraded,
        "conditions": conditions,
    })
}

/// An agent's status: booted `booted`, staged `staged` (none for ' '), the Idle reason
/// (from `minutes` ago) and more conditions.
pub fn agent(booted: char, staged: char, idle: &str, minutes: i64, more: &[Value]) -> Value {
    let image = |c: char| json!({"image": pin(c), "imageDigest": digest(c)});
    let mut conditions = vec![cond(
        "Idle",
        if idle == "Idle" { "True" } else { "False" },
        idle,
        "",
        minutes,
    )];
    conditions.extend(more.iter().cloned());
    let mut status = json!({
        "observedGeneration": 1,
        "booted": image(booted),
        "conditions": conditions,
    });
    if staged != ' ' {
        status["staged"] = image(staged);
    }
    status
}

/// `UpToDate=False/RolloutInProgress` (1/3 updated), `Degraded=False/Healthy`.
pub fn in_progress() -> Value {
    json!([
        cond(
            "UpToDate",
            "False",
            "RolloutInProgress",
            "1/3 updated; 1 staged, 1 rebooting",
            5
        ),
        cond("Degraded", "False", "Healthy", "", 60),
    ])
}
