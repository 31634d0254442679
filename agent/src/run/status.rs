//! The status writes: compose the status from the host and the decision, and write it
//! (a merge patch as the agent's field manager) only when it differs from the object's.

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::{BootcNode, BootcNodeStatus};
use bootc_pool_common::error_chain;
use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{Agent, FIELD_MANAGER};
use crate::bootc_status::BootcHost;
use crate::host::Host;
use crate::machine::Phase;
use crate::report::{self, Inputs};

impl<H: Host + 'static> Agent<H> {
    /// Writes the status when it differs from the object's; false when a write failed.
    pub(super) async fn report(
        &mut self,
        node: &BootcNode,
        host: Option<&BootcHost>,
        phase: Phase,
        degraded: Option<(&str, String)>,
        now: DateTime<Utc>,
    ) -> bool {
        let write = Write {
            phase,
            degraded,
            now,
            on_version: None,
        };
        self.write_status(node, host, write).await
    }

    /// Records the reboot `memory.last_reboot` holds, on condition that `node` is still
    /// the object's current version: an approval revoked (or any change) since `node`
    /// was read makes the write fail with a conflict, and nothing is unlocked. The
    /// controller revokes with the same kind of condition, so of a revocation and a
    /// record, exactly one is written. False when the record was not written.
    pub(super) async fn record_reboot(
        &mut self,
        node: &BootcNode,
        host: &BootcHost,
        degraded: Option<(&str, String)>,
        now: DateTime<Utc>,
    ) -> bool {
        let Some(version) = node.metadata.resource_version.as_deref() else {
            warn!("the BootcNode has no resourceVersion; not recording a reboot");
            return false;
        };
        let write = Write {
            phase: Phase::Rebooting,
            degraded,
            now,
            on_version: Some(version),
        };
        self.write_status(node, Some(host), write).await
    }

    /// The status to report, from the object last seen (or `node`) and the host.
    fn compose(
        &self,
        node: &BootcNode,
        host: Option<&BootcHost>,
        phase: Phase,
        degraded: Option<(&str, String)>,
        now: DateTime<Utc>,
    ) -> BootcNodeStatus {
        let held = self.node.as_ref().unwrap_or(node);
        report::compose(&Inputs {
            previous: held.status.as_ref(),
            generation: held.metadata.generation,
            host,
            desired: &node.spec.desired_image,
            phase,
            degraded,
            last_reboot: self.memory.last_reboot.as_ref(),
            agent_version: &self.options.agent_version,
            bootc_version: self.bootc_version.as_deref(),
            progress: self.progress.current(),
            health_units: &node.spec.health_units,
            health: self.health.current(),
            timer_masked: Some(self.timer_masked),
            now,
        })
    }

    async fn write_status(
        &mut self,
        node: &BootcNode,
        host: Option<&BootcHost>,
        write: Write<'_>,
    ) -> bool {
        let Write {
            phase,
            degraded,
            now,
            on_version,
        } = write;
        let mut status = self.compose(node, host, phase, degraded.clone(), now);
        let previous = self.node.as_ref().unwrap_or(node).status.clone();
        // A write that happens anyway carries bootc's latest progress report.
        if phase == Phase::Staging
            && previous.as_ref() != Some(&status)
            && self.progress.due().is_some()
        {
            self.progress.take(now);
            status = self.compose(node, host, phase, degraded, now);
        }
        let previous = previous.as_ref();
        if previous == Some(&status) && on_version.is_none() {
            self.mark_ready();
            return true;
        }
        if self.api_retry.wait(now).is_some() {
            return false;
        }
        let mut body = report::merge_patch(&status);
        if let Some(version) = on_version {
            body["metadata"] = serde_json::json!({ "resourceVersion": version });
        }
        match self.patch_own_status(body).await {
            Ok(updated) => {
                debug!(phase = ?phase, "status written");
                self.api_retry.clear();
                self.keep_answer(updated);
                self.mark_ready();
                true
            }
            Err(kube::Error::Api(e)) if e.code == 409 && on_version.is_some() => {
                // The object moved on (its new version is on its way through the
                // watch), or the server refused for another reason: decide again soon
                // either way, from whatever is newest then.
                info!("the BootcNode changed since the approval was read; deciding again");
                self.retry_at = Some(Instant::now() + CONFLICT_RETRY);
                false
            }
            Err(e) => {
                let message = error_chain(&e);
                warn!(error = %message, "status write failed; will retry");
                self.api_retry.fail(message, now);
                false
            }
        }
    }
}

impl<H: Host + 'static> Agent<H> {
    /// Merge-patches the BootcNode's status with `body`, as the agent's field manager.
    pub(super) async fn patch_own_status(
        &self,
        body: serde_json::Value,
    ) -> Result<BootcNode, kube::Error> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.nodes
            .patch_status(&self.options.node_name, &params, &Patch::Merge(body))
            .await
    }

    /// Keeps the answer to one of the agent's own status writes. It can carry a change
    /// made since the decision (an approval written between our read and this write).
    /// The watch will deliver it only as an older version than this one, or as this very
    /// one, neither of which wakes us: decide again now, from this object.
    pub(super) fn keep_answer(&mut self, updated: BootcNode) {
        self.versions.wrote(&updated);
        if self.node.as_ref().is_some_and(|old| moved(old, &updated)) {
            debug!("the BootcNode changed since it was read; deciding again");
            self.retry_at = Some(Instant::now());
        }
        self.node = Some(updated);
    }
}

/// Whether `new` asks something else of the agent than `old`: its spec or its slot.
fn moved(old: &BootcNode, new: &BootcNode) -> bool {
    old.spec != new.spec
        || old.annotations().get(REBOOT_SLOT_ANNOTATION)
            != new.annotations().get(REBOOT_SLOT_ANNOTATION)
}

impl<H> Agent<H> {
    /// Writes the readiness marker once: the node's status has been reported.
    fn mark_ready(&mut self) {
        if self.ready {
            return;
        }
        let Some(dir) = &self.options.ready_dir else {
            self.ready = true;
            return;
        };
        match crate::ready::mark(dir) {
            Ok(()) => {
                info!("first status reported; ready");
                self.ready = true;
            }
            Err(e) => warn!(error = %e, "cannot write the readiness marker; will retry"),
        }
    }
}

/// How soon a reboot record refused with a conflict is decided again.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// One status write: the phase and reason to report, and the object version it is
/// conditional on (`None`: unconditional).
struct Write<'a> {
    phase: Phase,
    degraded: Option<(&'a str, String)>,
    now: DateTime<Utc>,
    on_version: Option<&'a str>,
}

/// The phase the object reports, for when the host cannot be read.
pub(super) fn current_phase(status: Option<&BootcNodeStatus>) -> Phase {
    let reason = status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == bootc_crds::conditions::IDLE)
            .map(|c| c.reason.as_str())
    });
    match reason {
        Some(r) if r == Phase::Staging.reason() => Phase::Staging,
        Some(r) if r == Phase::Staged.reason() => Phase::Staged,
        Some(r) if r == Phase::Rebooting.reason() => Phase::Rebooting,
        _ => Phase::Idle,
    }
}
