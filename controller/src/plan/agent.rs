//! What a node's agent and kubelet report, read the way the plan needs it: which image
//! is booted, staged or in the rollback slot, whether the agent has answered the current
//! spec, and whether the kubelet has reported since the node's reboot.

use std::time::Duration;

use bootc_crds::Digest;
use bootc_crds::conditions::{self, from_time};
use bootc_crds::node::{BootcNodeStatus, ImageStatus, LastReboot};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::world::{BootcView, NodeInfo};

/// True when `image` (a BootcNode's `status.booted`, `staged` or `rollback`) runs
/// `digest`, by the one matching rule of [`bootc_crds::image_ref::runs_digest`].
pub fn runs(image: Option<&ImageStatus>, digest: &Digest) -> bool {
    image.is_some_and(|i| bootc_crds::image_ref::runs_digest(&i.image, &i.image_digest, digest))
}

/// The agent's view of one node.
pub(super) struct AgentReport<'a> {
    pub(super) status: Option<&'a BootcNodeStatus>,
    /// The agent has answered the current spec.
    pub(super) current: bool,
}

impl<'a> AgentReport<'a> {
    pub(super) fn of(bootc: &'a BootcView) -> Self {
        let status = bootc.status();
        let current = status
            .and_then(|s| s.observed_generation)
            .zip(bootc.generation())
            .is_some_and(|(seen, generation)| seen >= generation);
        AgentReport { status, current }
    }

    pub(super) fn condition(&self, type_: &str) -> Option<&'a Condition> {
        self.status?.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `Degraded=True` for the current spec: its reason and message.
    pub(super) fn degraded(&self) -> Option<(&'a str, &'a str)> {
        if !self.current {
            return None;
        }
        self.condition(conditions::DEGRADED)
            .filter(|c| c.status == "True")
            .map(|c| (c.reason.as_str(), c.message.as_str()))
    }

    pub(super) fn rebooting(&self) -> bool {
        self.condition(conditions::IDLE)
            .is_some_and(|c| c.reason == conditions::idle::REBOOTING)
    }

    pub(super) fn booted(&self, digest: &Digest) -> bool {
        runs(
            self.status
                .and_then(|s| s.booted.as_ref())
                .map(|b| &b.image),
            digest,
        )
    }

    pub(super) fn staged(&self, digest: &Digest) -> bool {
        runs(
            self.status
                .and_then(|s| s.staged.as_ref())
                .map(|s| &s.image),
            digest,
        )
    }

    /// The target is ready to boot: staged, or (the rollback-slot fast path) the
    /// rollback deployment, which the agent reports as `Staged` without pulling.
    pub(super) fn ready_to_boot(&self, digest: &Digest) -> bool {
        let in_rollback = runs(self.status.and_then(|s| s.rollback.as_ref()), digest)
            && self
                .condition(conditions::IDLE)
                .is_some_and(|c| c.reason == conditions::idle::STAGED);
        self.current && (self.staged(digest) || in_rollback)
    }

    /// The record the agent wrote before its last reboot.
    pub(super) fn last_reboot(&self) -> Option<&'a LastReboot> {
        self.status?.last_reboot.as_ref()
    }

    /// The boot ID the agent recorded before its last reboot.
    pub(super) fn last_reboot_boot_id(&self) -> Option<&'a str> {
        self.status?
            .last_reboot
            .as_ref()
            .map(|r| r.boot_id.as_str())
    }

    /// The target is already on the host (booted, staged, or in the rollback slot):
    /// asking for it starts no pull.
    pub(super) fn needs_no_pull(&self, digest: &Digest) -> bool {
        // Staged first: the members planned in full with the target asked for are mostly
        // slot holders, which have staged it (those running it are mostly settled).
        self.staged(digest)
            || self.booted(digest)
            || runs(self.status.and_then(|s| s.rollback.as_ref()), digest)
    }

    pub(super) fn booted_since(&self) -> Option<DateTime<Utc>> {
        self.status?
            .booted
            .as_ref()?
            .since
            .as_ref()
            .and_then(from_time)
    }
}

/// How soon a plan looks again for the kubelet's first report after a reboot.
pub(super) const KUBELET_RECHECK: Duration = Duration::from_secs(2);

/// Whether the kubelet has reported since the node's reboot for `digest`, so that its
/// `Ready` is about the new boot and not left over from before it: the Node's boot ID is
/// not the one the agent recorded before rebooting (a full reboot), or the `Ready`
/// heartbeat is no older than the reboot (a soft reboot keeps the boot ID; both times
/// come from the node's own clock). Without the agent's record of a reboot for this
/// digest there is nothing to wait for, and a Node that reports neither a boot ID nor a
/// heartbeat gives nothing to judge by. A boot ID other than the recorded one counts only
/// with a heartbeat no older than the record (or none at all): one older is left over
/// from a boot before the recorded one. When only full reboots are allowed
/// (`soft_possible` false) and the Node reports a boot ID, only a new boot ID counts: a
/// heartbeat is kept at whole seconds, and one left over from before a reboot in the same
/// second would otherwise pass for the new boot's.
pub(super) fn kubelet_reported_since_reboot(
    info: &NodeInfo,
    last: Option<&LastReboot>,
    digest: &Digest,
    soft_possible: bool,
) -> bool {
    let Some(last) = last.filter(|r| digest.is(&r.digest)) else {
        return true;
    };
    let boot_id = info.boot_id.as_deref().filter(|id| !id.is_empty());
    if boot_id.is_none() && info.heartbeat.is_none() {
        return true;
    }
    let rebooted = from_time(&last.time);
    let heartbeat_since = info
        .heartbeat
        .zip(rebooted)
        .is_some_and(|(heartbeat, rebooted)| heartbeat >= rebooted);
    // A heartbeat from before the record is from an earlier boot, whatever its boot ID:
    // a Node that did not report through two reboots still shows the boot before the
    // first, which is not the one recorded before the second.
    let heartbeat_before = info
        .heartbeat
        .zip(rebooted)
        .is_some_and(|(heartbeat, rebooted)| heartbeat < rebooted);
    let new_boot = boot_id.is_some_and(|id| !same_boot_id(id, &last.boot_id)) && !heartbeat_before;
    new_boot || (heartbeat_since && (soft_possible || boot_id.is_none()))
}

/// Whether two boot IDs name the same boot: the kernel's and the agent's spellings may
/// differ in dashes and case. Compared without copying either.
pub(super) fn same_boot_id(a: &str, b: &str) -> bool {
    fn normal(id: &str) -> impl Iterator<Item = u8> + '_ {
        id.bytes()
            .filter(|b| *b != b'-')
            .map(|b| b.to_ascii_lowercase())
    }
    normal(a).eq(normal(b))
}
