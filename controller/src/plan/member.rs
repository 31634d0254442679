//! A member node as one plan sees it, what its BootcNode should carry (the spec: target,
//! reboot and signature policies, pull Secret; the annotations that release a slot), and
//! what the member pass found for the gates and the grant ([`Tally`]).

use std::collections::BTreeMap;

use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
use bootc_crds::pool::BootcNodePoolSpec;
use bootc_crds::{
    APPROVED_AT_ANNOTATION, BACK_AT_ANNOTATION, REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION,
};

use super::agent::AgentReport;
use super::target::Target;
use super::world::{BootcView, NodeInfo, NodeView};

/// What the member pass found, besides each member's actions and state.
#[derive(Debug, Default)]
pub(super) struct Tally<'a> {
    /// Members holding a reboot slot.
    pub holders: usize,
    /// Members without a slot whose Node is NotReady (they use the budget too).
    pub unavailable: usize,
    /// Staged, Ready members without a slot that no other pool claims, in member order.
    pub candidates: Vec<&'a NodeView>,
    /// Slot holders that are unhealthy, with why.
    pub unhealthy: Vec<String>,
    /// Members that booted the target and report Degraded.
    pub on_target_degraded: Vec<String>,
    /// Slot holders drained and ready to be approved, should the gates allow.
    pub drained: Vec<Drained>,
}

/// A slot holder drained: the approval written if no gate closes approvals for it.
#[derive(Debug)]
pub(super) struct Drained {
    pub node: String,
    pub resource_version: Option<String>,
    /// Its spec and annotations as they are to be written, approval aside.
    pub spec: BootcNodeSpec,
    pub annotations: BTreeMap<String, Option<String>>,
    /// The target, for the event.
    pub image: String,
}

/// A member node as one plan sees it.
pub(super) struct Member<'n, 'a> {
    pub view: &'a NodeView,
    pub info: &'a NodeInfo,
    pub bootc: &'a BootcView,
    pub agent: &'n AgentReport<'a>,
    pub target: &'n Target,
    /// Its BootcNode asks for another image than the target.
    pub retargeted: bool,
    /// An admin holds it: it keeps the image it asks for now and gets no slot.
    pub held: bool,
}

/// The BootcNode spec a member should have: the target (staged, when it changes), the
/// pool's reboot policy, signature policy and pull Secret with its hash.
pub(super) fn wanted_spec(
    pool: &BootcNodePoolSpec,
    hash: Option<&str>,
    target: &Target,
    current: Option<&BootcNodeSpec>,
) -> BootcNodeSpec {
    let mut spec = current.cloned().unwrap_or(BootcNodeSpec {
        desired_image: target.image.clone(),
        desired_image_state: DesiredImageState::Staged,
        reboot_policy: pool.disruption.reboot_policy,
        signature_policy: pool.image.signature_policy,
        pull_secret_ref: None,
        pull_secret_hash: None,
        health_units: Vec::new(),
    });
    if spec.desired_image != target.image {
        spec.desired_image = target.image.clone();
        spec.desired_image_state = DesiredImageState::Staged;
    }
    spec.reboot_policy = pool.disruption.reboot_policy;
    spec.signature_policy = pool.image.signature_policy;
    spec.health_units = pool
        .health
        .as_ref()
        .map(|h| h.units.clone())
        .unwrap_or_default();
    spec.pull_secret_ref = pool.pull_secret_ref.clone();
    if spec.pull_secret_ref.is_none() {
        spec.pull_secret_hash = None;
    } else if let Some(hash) = hash {
        // An unreadable Secret keeps the last hash: the agents keep what they wrote.
        spec.pull_secret_hash = Some(hash.to_owned());
    }
    spec
}

/// The annotations that release a slot.
pub(super) fn release() -> BTreeMap<String, Option<String>> {
    [
        REBOOT_SLOT_ANNOTATION,
        WAS_CORDONED_ANNOTATION,
        APPROVED_AT_ANNOTATION,
        BACK_AT_ANNOTATION,
    ]
    .into_iter()
    .map(|k| (k.to_owned(), None))
    .collect()
}
