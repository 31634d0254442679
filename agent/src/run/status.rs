//! The status writes: compose the status from the host and the decision, and write it
//! (a merge patch as the agent's field manager) only when it differs from the object's.

use bootc_crds::node::{BootcNode, BootcNodeStatus};
use bootc_pool_common::error_chain;
use chrono::{DateTime, Utc};
use kube::api::{Patch, PatchParams};
use tracing::{debug, warn};

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
        let held = self.node.as_ref().unwrap_or(node);
        let previous = held.status.as_ref();
        let status = report::compose(&Inputs {
            previous,
            generation: held.metadata.generation,
            host,
            desired: &node.spec.desired_image,
            phase,
            degraded,
            last_reboot: self.memory.last_reboot.as_ref(),
            agent_version: &self.options.agent_version,
            bootc_version: self.bootc_version.as_deref(),
            now,
        });
        if previous == Some(&status) {
            return true;
        }
        if self.api_retry.wait(now).is_some() {
            return false;
        }
        let patch = Patch::Merge(report::merge_patch(&status));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match self
            .nodes
            .patch_status(&self.options.node_name, &params, &patch)
            .await
        {
            Ok(updated) => {
                debug!(phase = ?phase, "status written");
                self.api_retry.clear();
                self.versions.wrote(&updated);
                self.node = Some(updated);
                true
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
