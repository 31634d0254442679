//! The agent's decisions as a pure function: from what the BootcNode asks, what the host reports and what the agent last did, the next host action and the state to report.

use std::time::Duration;

use bootc_crds::ImageRef;
use bootc_crds::conditions::{idle, node_degraded};
use bootc_crds::image_ref::{Digest, runs_digest};
use bootc_crds::node::DesiredImageState;
use bootc_crds::pool::{RebootPolicy, SignaturePolicy};
use bootc_pool_common::backoff::Backoff;
use chrono::{DateTime, Utc};

/// How long a failed command (or API request) waits before it is tried again: 10 s,
/// doubling up to 5 minutes.
pub const BACKOFF: Backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
/// How long a requested reboot may take to happen before it is requested again. A
/// request that did not take is not a reboot: asking again keeps "one reboot per approval".
pub const REBOOT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// One deployment slot of the host (booted, staged or rollback).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slot {
    /// The image reference bootc tracks (may carry a manifest-list digest).
    pub image: String,
    /// The per-architecture manifest digest bootc reports.
    pub image_digest: String,
    /// Whether a soft reboot can switch to this deployment.
    pub soft_reboot_capable: bool,
    /// Whether the deployment is locked (staged with `--download-only`).
    pub download_only: bool,
    /// Whether bootc fetched it under the host's container signature policy (its image
    /// reference's `signature` is `containerPolicy`: staged with
    /// `--enforce-container-sigpolicy`).
    pub policy_checked: bool,
}

impl Slot {
    /// The digest-matching rule: the per-architecture digest, or the digest inside the
    /// tracked reference (a manifest-list digest), equals `target`.
    pub fn is(&self, target: &Digest) -> bool {
        runs_digest(&self.image, &self.image_digest, target)
    }
}

/// What the host reports, reduced to what decisions need.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostFacts {
    /// The running deployment.
    pub booted: Option<Slot>,
    /// The deployment staged for the next boot.
    pub staged: Option<Slot>,
    /// The previous deployment.
    pub rollback: Option<Slot>,
    /// Whether `bootc rollback` has queued the rollback deployment for the next boot.
    pub rollback_queued: bool,
    /// The kernel's boot ID (changes with every full reboot).
    pub boot_id: String,
    /// systemd's `SoftRebootsCount` (grows with every soft reboot).
    pub soft_reboots: u64,
    /// Whether the host's systemd can soft-reboot at all.
    pub can_soft_reboot: bool,
}

/// What the BootcNode asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// `spec.desiredImage`, as written (checked here before anything uses it).
    pub image: String,
    /// `spec.desiredImageState`.
    pub state: DesiredImageState,
    /// `spec.rebootPolicy`.
    pub reboot_policy: RebootPolicy,
    /// `spec.signaturePolicy`.
    pub signature_policy: SignaturePolicy,
    /// Whether the BootcNode carries the reboot-slot annotation.
    pub holds_slot: bool,
}

/// A reboot the agent started (reported as `status.lastReboot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebootRecord {
    /// The digest the reboot was for.
    pub digest: String,
    /// The boot ID before the reboot.
    pub boot_id: String,
    /// `SoftRebootsCount` before the reboot.
    pub soft_reboots: u64,
    /// When it was requested.
    pub time: DateTime<Utc>,
}

impl RebootRecord {
    /// True when the host has rebooted (fully or softly) since this record.
    pub fn happened(&self, host: &HostFacts) -> bool {
        host.boot_id != self.boot_id || host.soft_reboots > self.soft_reboots
    }
}

/// The last command that failed, for backoff and the Degraded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The image the failing command worked on.
    pub image: String,
    /// The command's stderr (or why it could not run).
    pub message: String,
    /// Failures in a row.
    pub attempts: u32,
    /// When the last one happened.
    pub at: DateTime<Utc>,
    /// `Degraded`'s reason when the agent's own check failed (the command succeeded but
    /// the host did not show what it should); `None`: read from the message
    /// ([`failure_condition`]).
    pub reason: Option<&'static str>,
}

impl Failure {
    /// `Degraded`'s reason and message for this failure.
    pub fn condition(&self) -> (&'static str, String) {
        match self.reason {
            Some(reason) => (reason, self.message.clone()),
            None => failure_condition(&self.message),
        }
    }
}

/// What the agent remembers between decisions (its last report and its own failures).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Memory {
    /// `status.lastReboot`.
    pub last_reboot: Option<RebootRecord>,
    /// The last failed command, if the one after it has not succeeded yet.
    pub failure: Option<Failure>,
    /// The image of the agent's staging command still running, if any. While it runs,
    /// a staged deployment of that image that is not `downloadOnly` is the half-way
    /// state of `bootc switch` then `bootc upgrade --download-only` (bootc without
    /// `switch --download-only`): still staging, not staged.
    pub staging: Option<String>,
    /// The image the agent last staged, successfully, under the host's signature
    /// policy (`--enforce-container-sigpolicy`). Its deployment counts as checked even
    /// when bootc does not show `signature: containerPolicy`, so that such a bootc is
    /// not asked to stage it again and again.
    pub enforced: Option<String>,
}

/// How a staged deployment is made the next boot's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlock {
    /// `bootc upgrade --from-downloaded`: the staged deployment is locked.
    FromDownloaded,
    /// Nothing: the staged deployment is already unlocked (or the rollback queued).
    AlreadyUnlocked,
    /// `bootc rollback`: the desired image is the rollback deployment.
    Rollback,
}

/// The next thing to do on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAction {
    /// Nothing; wait for a change (or `retry_after`).
    Wait,
    /// Lock the desired image's deployment, staged unlocked with no approval (by a
    /// hand-made `bootc switch`, a staging cut off between its two commands, bootc's
    /// own timer): `bootc upgrade --download-only`, which every bootc with download-only
    /// has and which locks a deployment already staged. Never `switch --download-only`
    /// of the same image: bootc answers it "Image specification is unchanged" and
    /// leaves the deployment unlocked (bootc issue #2425).
    Lock {
        /// The desired image (`registry/repo@sha256:<hex>`) whose deployment is locked.
        image: String,
    },
    /// Pull and stage this canonical pin, locked.
    Stage {
        /// `registry/repo@sha256:<hex>`.
        image: String,
        /// Whether the host's container signature policy must accept it.
        policy: SignaturePolicy,
    },
    /// Record, unlock, and reboot, in that order: the approval a reboot uses is on the
    /// object before the host changes, and the host reboots only into an unlocked
    /// deployment.
    Reboot {
        /// How the deployment becomes the next boot's.
        unlock: Unlock,
        /// Soft reboot (systemd) instead of a full one.
        soft: bool,
        /// What to report as `lastReboot` before unlocking.
        record: RebootRecord,
    },
}

/// The `Idle` condition's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Booted is desired.
    Idle,
    /// Pulling the desired image.
    Staging,
    /// The desired image is staged; waiting for approval.
    Staged,
    /// Rebooting into the desired image.
    Rebooting,
}

impl Phase {
    /// The `Idle` condition's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Phase::Idle => idle::IDLE,
            Phase::Staging => idle::STAGING,
            Phase::Staged => idle::STAGED,
            Phase::Rebooting => idle::REBOOTING,
        }
    }
}

/// A decision: what to do and what to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The state to report.
    pub phase: Phase,
    /// `Degraded=True` with this reason and message, or healthy.
    pub degraded: Option<(&'static str, String)>,
    /// What to do now.
    pub action: HostAction,
    /// When to decide again even if nothing changes (backoff, reboot timeout).
    pub retry_after: Option<Duration>,
}

fn remaining(since: DateTime<Utc>, wait: Duration, now: DateTime<Utc>) -> Option<Duration> {
    let elapsed = (now - since).to_std().unwrap_or(Duration::ZERO);
    wait.checked_sub(elapsed).filter(|d| !d.is_zero())
}

/// Report `phase`, do nothing, healthy.
fn waiting(phase: Phase) -> Decision {
    Decision {
        phase,
        degraded: None,
        action: HostAction::Wait,
        retry_after: None,
    }
}

/// Decides the next step. Pure: the same inputs always give the same decision.
pub fn decide(
    desired: &Desired,
    host: &HostFacts,
    memory: &Memory,
    now: DateTime<Utc>,
) -> Decision {
    let target = match checked_target(desired) {
        Ok(target) => target,
        Err(refused) => return *refused,
    };
    let Some(digest) = target.digest() else {
        // is_pin() guarantees a digest; stay put rather than guess.
        return waiting(Phase::Idle);
    };
    let situation = Situation {
        desired,
        host,
        memory,
        now,
        digest,
    };
    if situation.on(&host.booted) {
        return waiting(Phase::Idle);
    }
    if let Some(refused) = situation.reboot_did_not_apply() {
        return refused;
    }
    let staged = situation.staged();
    if staged && situation.half_staged() {
        // Keep the staging command running (the agent starts none while one runs).
        return Decision {
            action: HostAction::Stage {
                image: desired.image.clone(),
                policy: desired.signature_policy,
            },
            ..waiting(Phase::Staging)
        };
    }
    if staged && situation.unlocked_unapproved() {
        // Staged unlocked with no approval (a `switch` whose lock failed or was cut off by
        // a reboot, or bootc staging on its own): an unplanned reboot would apply it.
        // Lock it, with the failure's backoff; `Staged` is reported once it is locked.
        return situation.lock();
    }
    if staged || situation.on(&host.rollback) {
        return situation.reboot_into(staged);
    }
    situation.stage()
}

/// `spec.desiredImage` as an image reference, when it is a canonical pin; else the
/// decision that refuses it (nothing reaches a command line unless it is a canonical pin).
fn checked_target(desired: &Desired) -> Result<ImageRef, Box<Decision>> {
    let refuse = |message: String| {
        Box::new(Decision {
            degraded: Some((node_degraded::ERROR, message)),
            ..waiting(Phase::Idle)
        })
    };
    match ImageRef::parse(&desired.image) {
        Ok(r) if r.is_pin() && r.pinned().as_deref() == Some(desired.image.as_str()) => Ok(r),
        Ok(_) => Err(refuse(format!(
            "spec.desiredImage {:?} is not a canonical pin registry/repo@sha256:<hex>; nothing was done",
            desired.image
        ))),
        Err(e) => Err(refuse(format!(
            "spec.desiredImage {:?} is not a valid image reference: {e}; nothing was done",
            desired.image
        ))),
    }
}

/// One decision's inputs, with the desired image's digest.
struct Situation<'a> {
    desired: &'a Desired,
    host: &'a HostFacts,
    memory: &'a Memory,
    now: DateTime<Utc>,
    digest: &'a Digest,
}

impl Situation<'_> {
    /// Whether `slot` holds the desired image.
    fn on(&self, slot: &Option<Slot>) -> bool {
        slot.as_ref().is_some_and(|s| s.is(self.digest))
    }

    /// The desired image is staged unlocked while the agent's own staging of it still
    /// runs: `switch` has staged it, `upgrade --download-only` has not locked it yet.
    /// Neither `Staged` to report nor a deployment to reboot into.
    fn half_staged(&self) -> bool {
        self.memory.staging.as_deref() == Some(self.desired.image.as_str())
            && self.host.staged.as_ref().is_some_and(|s| !s.download_only)
    }

    /// The desired image is staged, and under the host's signature policy when the
    /// BootcNode asks for it: a deployment staged without the check (before the pool
    /// asked for it) is staged again, with it, before it may be booted.
    fn staged(&self) -> bool {
        self.on(&self.host.staged)
            && match self.desired.signature_policy {
                SignaturePolicy::Default => true,
                SignaturePolicy::Enforce => {
                    self.host.staged.as_ref().is_some_and(|s| s.policy_checked)
                        || self.memory.enforced.as_deref() == Some(self.desired.image.as_str())
                }
            }
    }

    /// Whether the node holds an approval to reboot into the desired image.
    fn approved(&self) -> bool {
        self.desired.state == DesiredImageState::Booted && self.desired.holds_slot
    }

    /// The staged deployment is unlocked and nothing approves a reboot into it.
    fn unlocked_unapproved(&self) -> bool {
        !self.approved() && self.host.staged.as_ref().is_some_and(|s| !s.download_only)
    }

    /// The last reboot, when it was for the desired image.
    fn reboot_for_target(&self) -> Option<&RebootRecord> {
        self.memory
            .last_reboot
            .as_ref()
            .filter(|r| r.digest == self.digest.to_string())
    }

    /// The last failure, when it was for the desired image.
    fn failure(&self) -> Option<&Failure> {
        if self.reached() {
            return None;
        }
        self.memory
            .failure
            .as_ref()
            .filter(|f| f.image == self.desired.image)
    }

    /// The desired state shows on the host (booted; or staged and locked when only
    /// staging is asked): what the host shows wins over a past failure to get it there
    /// (the command that did it may not have reported yet, or was stopped once its work
    /// showed). A failed unlock, with the image staged and a reboot asked, still counts.
    fn reached(&self) -> bool {
        self.on(&self.host.booted)
            || (self.desired.state == DesiredImageState::Staged
                && self.staged()
                && self.host.staged.as_ref().is_some_and(|s| s.download_only))
    }

    /// `Degraded` from the last failure for the desired image.
    fn degraded(&self) -> Option<(&'static str, String)> {
        self.failure().map(Failure::condition)
    }

    /// How long the last failure's backoff still runs.
    fn backing_off(&self) -> Option<Duration> {
        self.failure()
            .and_then(|f| remaining(f.at, BACKOFF.delay(f.attempts), self.now))
    }

    /// At most one reboot per approval: the host rebooted for this digest and came back
    /// on something else. Report it and do nothing more until the desired image changes.
    fn reboot_did_not_apply(&self) -> Option<Decision> {
        self.reboot_for_target()
            .filter(|record| record.happened(self.host))?;
        let booted = self
            .host
            .booted
            .as_ref()
            .map_or("nothing", |s| s.image.as_str());
        Some(Decision {
            degraded: Some((
                node_degraded::REBOOT_DID_NOT_APPLY,
                format!(
                    "the host rebooted into {booted} instead of {}; it will not be rebooted again for this image",
                    self.desired.image
                ),
            )),
            ..waiting(if self.on(&self.host.staged) {
                Phase::Staged
            } else {
                Phase::Staging
            })
        })
    }

    /// The desired image is staged (`staged`) or the rollback deployment: reboot into it
    /// once approved, unless a reboot is already under way or backing off.
    fn reboot_into(&self, staged: bool) -> Decision {
        let degraded = self.degraded();
        if !self.approved() {
            return Decision {
                degraded,
                ..waiting(Phase::Staged)
            };
        }
        let host = self.host;
        let slot = if staged { &host.staged } else { &host.rollback };
        let capable = slot.as_ref().is_some_and(|s| s.soft_reboot_capable);
        let unlock = match (staged, slot.as_ref().is_some_and(|s| s.download_only)) {
            (true, true) => Unlock::FromDownloaded,
            (true, false) => Unlock::AlreadyUnlocked,
            (false, _) if host.rollback_queued => Unlock::AlreadyUnlocked,
            (false, _) => Unlock::Rollback,
        };
        // A reboot already requested for this digest that has not happened yet: wait for
        // it, and ask again only when it is overdue. A reboot is requested only after the
        // unlock, so while the deployment is still locked (or the rollback not queued)
        // the record is of an attempt that stopped before it: that waits only for the
        // failure's backoff.
        let requested = self
            .reboot_for_target()
            .filter(|_| unlock == Unlock::AlreadyUnlocked)
            .and_then(|record| remaining(record.time, REBOOT_REQUEST_TIMEOUT, self.now));
        if let Some(wait) = requested.or_else(|| self.backing_off()) {
            return Decision {
                degraded,
                retry_after: Some(wait),
                ..waiting(Phase::Rebooting)
            };
        }
        Decision {
            phase: Phase::Rebooting,
            degraded,
            action: HostAction::Reboot {
                unlock,
                soft: self.desired.reboot_policy == RebootPolicy::AllowSoftReboot
                    && capable
                    && host.can_soft_reboot,
                record: RebootRecord {
                    digest: self.digest.to_string(),
                    boot_id: host.boot_id.clone(),
                    soft_reboots: host.soft_reboots,
                    time: self.now,
                },
            },
            retry_after: None,
        }
    }

    /// The desired image is nowhere on the host: stage it, unless backing off.
    fn stage(&self) -> Decision {
        self.staging_step(HostAction::Stage {
            image: self.desired.image.clone(),
            policy: self.desired.signature_policy,
        })
    }

    /// The desired image is staged unlocked with no approval: lock it, unless backing
    /// off. Still `Staging`: it is not staged as the agent stages until it is locked.
    fn lock(&self) -> Decision {
        self.staging_step(HostAction::Lock {
            image: self.desired.image.clone(),
        })
    }

    /// `action` (staging or locking), reported as `Staging`, unless the last failure's
    /// backoff still runs.
    fn staging_step(&self, action: HostAction) -> Decision {
        let degraded = self.degraded();
        if let Some(wait) = self.backing_off() {
            return Decision {
                degraded,
                retry_after: Some(wait),
                ..waiting(Phase::Staging)
            };
        }
        Decision {
            phase: Phase::Staging,
            degraded,
            action,
            retry_after: None,
        }
    }
}

mod failure;
mod verify;

pub use failure::failure_condition;
pub use verify::{check_locked, check_unlockable};

#[cfg(test)]
mod tests;
