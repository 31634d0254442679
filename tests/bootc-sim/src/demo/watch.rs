//! Watching a phase: the nodes shown until the pool reports every node updated on a
//! digest, with none cordoned or holding a slot.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::display::{Display, Row, rows};
use super::processes::Parts;
use super::{GROUP, POOL, REFRESH};

/// The live view of the rollout.
pub(super) struct Watch<'a> {
    pub(super) handle: &'a kube_emulator::Handle,
    pub(super) display: Display,
    /// How many nodes the pool must report updated.
    pub(super) nodes: usize,
    /// Follows every stored change, so the most slots held at once is counted on each
    /// (the display samples only every refresh).
    pub(super) checker: host_sim::cluster::Invariants,
}

impl<'a> Watch<'a> {
    /// Starts following every stored change now; shows `nodes` nodes against `budget`.
    pub(super) fn new(
        handle: &'a kube_emulator::Handle,
        budget: usize,
        nodes: usize,
        started: Instant,
    ) -> Self {
        let checker = host_sim::cluster::Invariants::follow(
            handle.clone(),
            budget,
            std::collections::BTreeSet::new(),
        );
        Watch {
            handle,
            display: Display::new(budget, started),
            nodes,
            checker,
        }
    }

    /// The most reboot slots held at once, over every stored change so far.
    pub(super) async fn max_slots(&self) -> Result<usize, String> {
        let report = self
            .checker
            .try_settled(std::time::Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?;
        Ok(report.max_slots_seen)
    }

    /// Shows the nodes until the pool reports every node updated on `digest` with no node
    /// cordoned or holding a slot; fails when the controller exits or `timeout` passes.
    pub(super) async fn until(
        &mut self,
        parts: &mut Parts,
        digest: &str,
        timeout: Duration,
        phase: &str,
    ) -> Result<(), String> {
        let names: Vec<String> = parts
            .all_nodes()
            .iter()
            .map(|n| n.name().to_owned())
            .collect();
        let deadline = Instant::now() + timeout;
        let mut tick = tokio::time::interval(REFRESH);
        loop {
            tick.tick().await;
            let pool = self
                .handle
                .get(GROUP, "bootcnodepools", "", POOL)
                .unwrap_or(Value::Null);
            let rows = rows(self.handle, &names);
            let done = self.done(&pool, digest, &rows);
            self.display.show(phase, &pool, rows);
            if done {
                return Ok(());
            }
            if let Some(controller) = parts.controller.as_mut()
                && let Ok(Some(status)) = controller.child.try_wait()
            {
                return Err(format!(
                    "the controller exited ({status}); its log: {}",
                    controller.log.display()
                ));
            }
            if Instant::now() >= deadline {
                return Err(self.timed_out(phase, timeout, pool.get("status")));
            }
        }
    }

    /// Whether the pool reports every node updated on `digest` (`UpToDate=AllUpdated`)
    /// and every node is Ready, schedulable and without a slot.
    fn done(&self, pool: &Value, digest: &str, rows: &[Row]) -> bool {
        let status = pool.get("status");
        status
            .and_then(|s| s.get("targetDigest"))
            .and_then(Value::as_str)
            == Some(digest)
            && status
                .and_then(|s| s.get("updatedCount"))
                .and_then(Value::as_u64)
                == Some(self.nodes as u64)
            && status
                .and_then(|s| s.get("conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "UpToDate"))
                .is_some_and(|c| c["reason"] == "AllUpdated")
            && rows.iter().all(|r| r.ready && !r.cordoned && !r.slot)
    }

    /// The timeout's message: the nodes not done, the pool's status.
    fn timed_out(&self, phase: &str, timeout: Duration, status: Option<&Value>) -> String {
        let stuck: Vec<String> = self
            .display
            .last
            .iter()
            .filter(|r| !r.ready || r.cordoned || r.slot || r.state != "Idle")
            .map(|r| {
                format!(
                    "{} ({}, booted {}{}{})",
                    r.name,
                    r.state,
                    r.booted,
                    if r.cordoned { ", cordoned" } else { "" },
                    if r.slot { ", holds a slot" } else { "" }
                )
            })
            .collect();
        format!(
            "timed out {phase} after {} s; nodes not done: {}; pool status: {}",
            timeout.as_secs(),
            if stuck.is_empty() {
                "none".to_owned()
            } else {
                stuck.join("; ")
            },
            status.map(Value::to_string).unwrap_or_default()
        )
    }
}
