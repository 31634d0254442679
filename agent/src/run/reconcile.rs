//! One reconcile pass: write the pull secret if it changed, read the host, decide, and
//! act — start or cancel staging, unlock and reboot — then report.

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::conditions::node_degraded;
use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use chrono::Utc;
use kube::ResourceExt;
use tokio::time::Instant;
use tracing::{info, warn};

use super::Agent;
use super::status::current_phase;
use crate::bootc_status::{BootEntry, BootcHost, ImageSignature};
use crate::host::{BootIdentity, Host, HostError};
use crate::machine::{self, Decision, Desired, HostAction, HostFacts, Phase, Slot, Unlock};

/// A reboot the decision asked for.
struct Reboot {
    unlock: Unlock,
    soft: bool,
    record: machine::RebootRecord,
}

impl<H: Host + 'static> Agent<H> {
    pub(super) async fn reconcile(&mut self) {
        self.last_poll = Instant::now();
        self.retry_at = None;
        self.keep_timer().await;
        let Some(node) = self.node.clone() else {
            return;
        };
        self.sync_credentials(&node).await;
        let now = Utc::now();
        if self.host_retry.wait(now).is_some() {
            return;
        }
        let Some((status, identity)) = self.read_host(&node.spec.health_units).await else {
            if self.host_lost {
                // Going down: nothing to report, and nothing wrong with the node.
                return;
            }
            // Report what is known, marked degraded; decide again after the backoff.
            let message = self.host_retry.message().unwrap_or_default().to_owned();
            let phase = current_phase(node.status.as_ref());
            self.report(
                &node,
                None,
                phase,
                Some((node_degraded::ERROR, message)),
                now,
            )
            .await;
            return;
        };
        let facts = facts(&status, &identity);
        self.memory.staging = self.staging.as_ref().map(|s| s.image.clone());
        let decision = machine::decide(&desired(&node), &facts, &self.memory, now);
        self.retry_at = decision.retry_after.map(|d| Instant::now() + d);
        self.cancel_unwanted_staging(&decision.action).await;
        let Decision {
            phase,
            degraded,
            action,
            ..
        } = decision;
        // The decision's own reason first (it is about the approved work), then the
        // host's update timer, then the pull secret.
        let degraded = degraded
            .or_else(|| {
                self.timer_retry
                    .message()
                    .map(|m| (node_degraded::UPDATE_TIMER_NOT_MASKED, m.to_owned()))
            })
            .or_else(|| {
                self.credentials_retry
                    .message()
                    .map(|m| (node_degraded::ERROR, m.to_owned()))
            });
        match action {
            HostAction::Wait => {}
            HostAction::Stage { image, policy } if self.staging.is_none() => {
                self.start_staging(image, policy);
            }
            HostAction::Lock { image } if self.staging.is_none() => self.start_locking(image),
            // The command in flight is for this image (the others were cancelled).
            HostAction::Stage { .. } | HostAction::Lock { .. } => {}
            HostAction::Reboot {
                unlock,
                soft,
                record,
            } => {
                let reboot = Reboot {
                    unlock,
                    soft,
                    record,
                };
                self.reboot(&node, &status, reboot, degraded.clone()).await;
                return;
            }
        }
        self.report(&node, Some(&status), phase, degraded, now)
            .await;
    }

    /// Cancels a staging command for another image than `action` stages (or when none
    /// is wanted any more).
    async fn cancel_unwanted_staging(&mut self, action: &HostAction) {
        let wanted = match action {
            HostAction::Stage { image, .. } | HostAction::Lock { image } => Some(image.as_str()),
            HostAction::Wait | HostAction::Reboot { .. } => None,
        };
        if self
            .staging
            .as_ref()
            .is_some_and(|s| Some(s.image.as_str()) != wanted)
        {
            self.cancel_staging().await;
        }
    }

    /// Reads the host, and the health `units` in its boot; `None` (and a retry) when
    /// the host cannot be read (its units' states alone do not stop the pass).
    async fn read_host(&mut self, units: &[String]) -> Option<(BootcHost, BootIdentity)> {
        let host = std::sync::Arc::clone(&self.host);
        let read = async move {
            let status = host.status().await?;
            let identity = host.identity().await?;
            Ok::<_, HostError>((status, identity))
        };
        match self.with_progress(read).await {
            Ok(read) => {
                self.host_retry.clear();
                self.read_health(units, &read.1).await;
                (!self.host_lost).then_some(read)
            }
            Err(e) if e.connection_lost() => {
                self.host_lost = true;
                None
            }
            Err(e) => {
                let message = format!("cannot read the host: {}", error_chain(&e));
                warn!(error = %message, "host read failed; will retry");
                self.host_retry.fail(message, Utc::now());
                None
            }
        }
    }

    /// Reboots for an approval, in an order that a kill between any two steps leaves
    /// safe: record `lastReboot` (the approval this reboot uses), then unlock, then
    /// reboot. A record that cannot be written stops it before the host changes; a
    /// failed unlock stops it before the reboot; both are retried.
    async fn reboot(
        &mut self,
        node: &BootcNode,
        status: &BootcHost,
        reboot: Reboot,
        degraded: Option<(&'static str, String)>,
    ) {
        let Reboot {
            unlock,
            soft,
            record,
        } = reboot;
        let image = node.spec.desired_image.clone();
        let now = Utc::now();
        // The record must be on the object before the deployment is unlocked: it is what
        // keeps a restarted agent from rebooting twice for one approval, and what tells
        // the controller that this boot is the one before the reboot. It is written on
        // condition that the approval read is still current: a controller that revoked it
        // in the meantime (a new target) has freed the slot.
        let previous = self.memory.last_reboot.replace(record);
        if !self.record_reboot(node, status, degraded, now).await {
            self.memory.last_reboot = previous;
            return;
        }
        if let Err((message, reason)) = self.unlock_checked(unlock, &image).await {
            // The record stays: the deployment may have been unlocked all the same.
            warn!(%image, error = %message, "unlocking the staged deployment failed");
            self.record_failure_as(&image, message, now, reason);
            let degraded = self
                .memory
                .failure
                .as_ref()
                .map(machine::Failure::condition);
            self.report(node, Some(status), Phase::Rebooting, degraded, now)
                .await;
            return;
        }
        info!(%image, soft, "rebooting");
        if let Err(e) = self.host.reboot(soft).await {
            // The request may have been cut off by the reboot itself; the record stays,
            // and the decision asks again only when the reboot is overdue.
            let message = error_chain(&e);
            warn!(%image, error = %message, "the reboot request failed");
            self.record_failure(&image, message, now);
        }
    }
}

impl<H: Host + 'static> Agent<H> {
    /// Unlocks as `unlock` says; right before `upgrade --from-downloaded`, reads the
    /// status again and unlocks only when the staged deployment is still `image` (else
    /// `StagingNotLocked`). The error: its message, and `Degraded`'s reason when it is
    /// not read from the message.
    async fn unlock_checked(
        &self,
        unlock: Unlock,
        image: &str,
    ) -> Result<(), (String, Option<&'static str>)> {
        let failed = |e: HostError| (error_chain(&e), None);
        if unlock == Unlock::FromDownloaded {
            let status = self.host.status().await.map_err(failed)?;
            let target = bootc_crds::ImageRef::parse(image)
                .ok()
                .and_then(|r| r.digest().cloned());
            let Some(target) = target else {
                return Err((format!("{image:?} carries no digest to check"), None));
            };
            machine::check_unlockable(slot(&status.status.staged).as_ref(), image, &target)
                .map_err(|m| (m, Some(node_degraded::STAGING_NOT_LOCKED)))?;
        }
        self.host.unlock(unlock).await.map_err(failed)
    }
}

/// What the BootcNode asks for.
fn desired(node: &BootcNode) -> Desired {
    Desired {
        image: node.spec.desired_image.clone(),
        state: node.spec.desired_image_state,
        reboot_policy: node.spec.reboot_policy,
        signature_policy: node.spec.signature_policy,
        holds_slot: node
            .annotations()
            .get(REBOOT_SLOT_ANNOTATION)
            .is_some_and(|v| !v.is_empty()),
    }
}

/// One slot of the host's report, reduced to what decisions need (`None` when empty or
/// not an image).
pub(super) fn slot(entry: &Option<BootEntry>) -> Option<Slot> {
    entry.as_ref().and_then(|e| {
        let image = e.image.as_ref()?;
        Some(Slot {
            image: image.image.image.clone(),
            image_digest: image.image_digest.to_string(),
            soft_reboot_capable: e.soft_reboot_capable.unwrap_or(false),
            download_only: e.download_only.unwrap_or(false),
            policy_checked: image.image.signature == Some(ImageSignature::ContainerPolicy),
        })
    })
}

/// The host's report reduced to what decisions need.
pub fn facts(status: &BootcHost, identity: &BootIdentity) -> HostFacts {
    HostFacts {
        booted: slot(&status.status.booted),
        staged: slot(&status.status.staged),
        rollback: slot(&status.status.rollback),
        rollback_queued: status.status.rollback_queued,
        boot_id: identity.boot_id.clone(),
        soft_reboots: identity.soft_reboots,
        can_soft_reboot: identity.can_soft_reboot,
    }
}
