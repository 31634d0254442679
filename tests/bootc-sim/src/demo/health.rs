//! Every BootcNode and BootcNodePool version the API stores, read for `Degraded=True`:
//! the demo injects no fault, so a node that reports one (a reboot read as an error, say)
//! or a pool that halts (nodes down in their own reboots counted unhealthy) fails it.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

/// The Degraded reports seen so far; stops following when dropped.
pub(super) struct DegradedWatch {
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl DegradedWatch {
    /// Follows every change the API stores from now on.
    pub(super) fn start(handle: &kube_emulator::Handle) -> DegradedWatch {
        let mut events = handle.events();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    // Only on a loaded machine; the watch checks what it reads.
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                if !matches!(event.key.plural.as_str(), "bootcnodes" | "bootcnodepools") {
                    continue;
                }
                if let Some(report) = degraded(&event.object) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(report);
                }
            }
        });
        DegradedWatch { seen, task }
    }

    /// An error naming every Degraded report seen, if any.
    pub(super) fn check(&self) -> Result<(), String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.is_empty() {
            return Ok(());
        }
        let mut reports = seen.clone();
        reports.dedup();
        Err(format!(
            "Degraded reported during a rollout without faults:\n  {}",
            reports.join("\n  ")
        ))
    }
}

impl Drop for DegradedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `NODE: REASON: MESSAGE` when `object` says `Degraded=True`.
fn degraded(object: &Value) -> Option<String> {
    let condition = object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Degraded" && c["status"] == "True")?;
    Some(format!(
        "{}: {}: {}",
        object.pointer("/metadata/name")?.as_str()?,
        condition["reason"].as_str().unwrap_or("-"),
        condition["message"].as_str().unwrap_or("")
    ))
}

#[cfg(test)]
mod tests {
    use super::degraded;
    use serde_json::json;

    #[test]
    fn only_a_true_degraded_condition_counts() {
        let node = |status: &str| {
            json!({"metadata": {"name": "n1"}, "status": {"conditions": [
                {"type": "Idle", "status": "False", "reason": "Rebooting", "message": ""},
                {"type": "Degraded", "status": status, "reason": "Error", "message": "boom"},
            ]}})
        };
        assert_eq!(degraded(&node("True")).as_deref(), Some("n1: Error: boom"));
        assert_eq!(degraded(&node("False")), None);
        assert_eq!(degraded(&json!({"metadata": {"name": "n1"}})), None);
    }
}
