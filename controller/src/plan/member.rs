//! A member node as one plan sees it, what its BootcNode should carry (the spec: target,
//! reboot and signature policies, pull Secret; the annotations that release a slot), and
//! what the member pass found for the gates and the grant ([`Tally`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
use bootc_crds::pool::BootcNodePoolSpec;
use bootc_crds::{
    APPROVED_AT_ANNOTATION, BACK_AT_ANNOTATION, REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION,
};

use super::agent::AgentReport;
use super::candidates::Candidates;
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
    pub candidates: Candidates<'a>,
    /// Slot holders that are unhealthy, with why.
    pub unhealthy: Vec<super::holder::Unhealthy<'a>>,
    /// Members that booted the target and report Degraded.
    pub on_target_degraded: Vec<String>,
    /// Slot holders drained and ready to be approved, should the gates allow.
    pub drained: Vec<Drained>,
    /// Members whose agent reports `Drifted=True`.
    pub drifted: usize,
    /// The settled members' part of the pool's health (those planned in full are read
    /// once the plan's states are final).
    pub health: super::health::Kept,
    /// The members planned in full, not from a settled outcome, in member order: the
    /// only ones whose reports (`status.held`, `status.drainBlocked`) may need a write.
    pub unsettled: Vec<&'a NodeView>,
    /// Members that use a slot of the budget, in member order: those holding one (their
    /// BootcNode says so) and those whose Node is NotReady.
    pub slot_users: Vec<&'a NodeView>,
    /// Members whose Node is unschedulable while their BootcNode (not being deleted)
    /// holds no slot, in member order: cordoned by someone else.
    pub cordoned: Vec<&'a NodeView>,
    /// The members are in strict name order (the order of their names kept between
    /// plans says so), and so are the candidates.
    pub in_name_order: bool,
}

impl<'a> Tally<'a> {
    /// `view` is planned in full: counted as drifted if its agent says so, and listed
    /// among the unsettled. Returns whether it is drifted.
    pub fn planned_in_full(&mut self, view: &'a NodeView) -> bool {
        let drifted = drifted(view);
        self.drifted += usize::from(drifted);
        self.unsettled.push(view);
        self.listed(view);
        drifted
    }

    /// `view` listed among the slot users and the cordoned, as it is one.
    pub fn listed(&mut self, view: &'a NodeView) {
        if uses_slot(view) {
            self.slot_users.push(view);
        }
        if cordoned(view) {
            self.cordoned.push(view);
        }
    }
}

/// Whether the member uses a slot of the budget: its BootcNode holds one, or its Node is
/// NotReady.
pub(super) fn uses_slot(view: &NodeView) -> bool {
    view.bootc.as_ref().is_some_and(BootcView::holds_slot)
        || view.node.as_ref().is_some_and(|n| !n.ready)
}

/// Whether the member's Node is unschedulable while its BootcNode (not being deleted)
/// holds no slot: the controller did not cordon it.
pub(super) fn cordoned(view: &NodeView) -> bool {
    view.node.as_ref().is_some_and(|n| n.unschedulable)
        && (view.bootc.as_ref()).is_some_and(|b| !b.deleting() && !b.holds_slot())
}

/// Whether the member's agent reports `Drifted=True`.
fn drifted(member: &NodeView) -> bool {
    member
        .bootc
        .as_ref()
        .and_then(|b| b.status())
        .is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == bootc_crds::conditions::DRIFTED && c.status == "True")
        })
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
    /// It counts among the members pulling the target (`maxStaging`).
    pub pulling: bool,
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

/// [`wanted_spec`] of a member's current spec, borrowing it when it already is what the
/// member should have (as it is for nearly every member between rollouts): no copy of
/// every member's spec per plan.
pub(super) fn wanted_spec_of<'s>(
    pool: &BootcNodePoolSpec,
    hash: Option<&str>,
    target: &Target,
    current: &'s BootcNodeSpec,
) -> Cow<'s, BootcNodeSpec> {
    let units = pool.health.as_ref().map_or(&[][..], |h| h.units.as_slice());
    let hash_kept = match (&pool.pull_secret_ref, hash) {
        (None, _) => current.pull_secret_hash.is_none(),
        (Some(_), Some(hash)) => current.pull_secret_hash.as_deref() == Some(hash),
        (Some(_), None) => true,
    };
    let wanted = current.desired_image == target.image
        && current.reboot_policy == pool.disruption.reboot_policy
        && current.signature_policy == pool.image.signature_policy
        && current.health_units == units
        && current.pull_secret_ref == pool.pull_secret_ref
        && hash_kept;
    if wanted {
        Cow::Borrowed(current)
    } else {
        Cow::Owned(wanted_spec(pool, hash, target, Some(current)))
    }
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
    use bootc_crds::pool::{BootcNodePoolSpec, RebootPolicy, SecretRef, SignaturePolicy};

    use super::{Target, wanted_spec, wanted_spec_of};

    const A: &str =
        "quay.io/os/node@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str =
        "quay.io/os/node@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn pool(units: bool, secret: bool, policies: bool) -> BootcNodePoolSpec {
        let mut spec = serde_json::json!({
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": B},
        });
        if units {
            spec["health"] = serde_json::json!({"units": ["kubelet.service"]});
        }
        if secret {
            spec["pullSecretRef"] = serde_json::json!({"name": "pull", "namespace": "ns"});
        }
        if policies {
            spec["disruption"] = serde_json::json!({"rebootPolicy": "AllowSoftReboot"});
            spec["image"]["signaturePolicy"] = serde_json::json!("Enforce");
        }
        serde_json::from_value(spec).unwrap()
    }

    /// Every combination of a member's current spec against every pool shape: the spec
    /// borrowed is the one `wanted_spec` builds, and it is borrowed exactly when that is
    /// the current spec unchanged.
    #[test]
    fn the_borrowed_spec_is_the_wanted_spec_and_borrowed_only_when_unchanged() {
        let target = Target::from_ref(B).unwrap();
        let mut seen = (0, 0);
        for bits in 0..(1u32 << 11) {
            let bit = |i: u32| bits & (1 << i) != 0;
            let pool = pool(bit(0), bit(1), bit(2));
            let hash = bit(3).then_some("h1");
            let current = BootcNodeSpec {
                desired_image: if bit(4) { A } else { B }.to_owned(),
                desired_image_state: if bit(5) {
                    DesiredImageState::Booted
                } else {
                    DesiredImageState::Staged
                },
                reboot_policy: if bit(6) {
                    RebootPolicy::AllowSoftReboot
                } else {
                    RebootPolicy::RebootOnly
                },
                signature_policy: if bit(7) {
                    SignaturePolicy::Enforce
                } else {
                    SignaturePolicy::Default
                },
                pull_secret_ref: bit(8).then(|| SecretRef {
                    name: "pull".to_owned(),
                    namespace: "ns".to_owned(),
                }),
                pull_secret_hash: bit(9).then(|| "h1".to_owned()),
                health_units: if bit(10) {
                    vec!["kubelet.service".to_owned()]
                } else {
                    Vec::new()
                },
            };
            let expected = wanted_spec(&pool, hash, &target, Some(&current));
            let got = wanted_spec_of(&pool, hash, &target, &current);
            assert_eq!(*got, expected, "case {bits:011b}");
            match got {
                Cow::Borrowed(_) => {
                    assert_eq!(
                        expected, current,
                        "case {bits:011b}: borrowed a changed spec"
                    );
                    seen.0 += 1;
                }
                Cow::Owned(_) => {
                    assert_ne!(
                        expected, current,
                        "case {bits:011b}: copied an unchanged spec"
                    );
                    seen.1 += 1;
                }
            }
        }
        assert!(seen.0 > 0 && seen.1 > 0, "both ways taken: {seen:?}");
    }
}
