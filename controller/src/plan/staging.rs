//! Members that hold no reboot slot: the BootcNode each should have (the target, staged),
//! `maxStaging` holding back nodes that would start a pull, and each node's state.
//!
//! A target reaches at most [`retarget_batch`] members per plan, new BootcNodes and
//! retargeted ones together: a plan's writes are carried out before its slot grants, so
//! a target written to a 10,000-node pool in one plan would hold back every grant until
//! all 10,000 writes were done. In batches, the first nodes stage and take their slots
//! while the rest are still being written.

use std::collections::BTreeMap;

use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
use bootc_crds::{DRAIN_FAILED_ANNOTATION, MANAGED_LABEL, REBOOT_SLOT_ANNOTATION};

use super::Planner;
use super::actions::{Action, NodeState};
use super::admin_hold;
use super::agent::AgentReport;
use super::holder::{self, Holder};
use super::member::{Member, wanted_spec};
use super::target::Target;
use super::world::NodeView;

/// How many members one plan may give a new image, by creating their BootcNode or
/// changing its `desiredImage` (in member order, by name): one wave's worth (the reboot
/// budget), at least [`RETARGET_BATCH_MIN`] and at most [`RETARGET_BATCH_MAX`]; the rest
/// wait for a later plan.
pub fn retarget_batch(budget: usize) -> usize {
    budget.clamp(RETARGET_BATCH_MIN, RETARGET_BATCH_MAX)
}

/// The smallest batch, so that a large pool with a small budget is not written a few
/// nodes per plan.
pub const RETARGET_BATCH_MIN: usize = 100;

/// The largest batch, which bounds what one plan writes before its grants.
pub const RETARGET_BATCH_MAX: usize = 500;

/// When to plan again while members wait for their new image, should no write wake the
/// pool before.
const RETARGET_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// `maxStaging` resolved against the pool's size (`None`: no limit), and how many
/// members pull the target now.
pub(super) fn count_staging(p: &mut Planner<'_>, members: &[&NodeView], target: &Target) {
    let limit = super::limits::staging(&p.snap.pool.spec.rollout, members.len());
    p.staging_limit = p.read(limit);
    let budget = super::limits::budget(&p.snap.pool.spec.rollout, members.len());
    p.retarget_limit = retarget_batch(p.read(budget));
    p.staging = members
        .iter()
        .filter(|v| {
            v.bootc.as_ref().is_some_and(|b| {
                b.spec().desired_image == target.image
                    && !AgentReport::of(b).needs_no_pull(&target.digest)
            })
        })
        .count();
}

/// One member node, with a known target.
pub(super) fn member<'a>(p: &mut Planner<'a>, view: &'a NodeView, target: &Target) {
    let name = view.name.clone();
    let Some(info) = &view.node else { return };
    let held = p.held.contains(&name);
    // A new node pulls the target: it needs a staging place. A held one gets no
    // BootcNode until the hold is lifted.
    let placed = p.staging_limit.is_none_or(|limit| p.staging < limit);
    let later = view.bootc.is_none() && !held && placed && p.retargets >= p.retarget_limit;
    // A node joining is labelled in the plan that creates its BootcNode.
    if !info.labels().contains_key(MANAGED_LABEL) && !later {
        p.actions.push(Action::Label { node: name.clone() });
    }
    if !info.ready {
        // NotReady nodes are unavailable whether or not they hold a slot.
        p.unavailable += 1;
    }
    let Some(bootc) = &view.bootc else {
        create(p, name, target, held, placed, later);
        return;
    };
    if bootc.deleting() {
        p.states.insert(name, NodeState::Pending);
        return;
    }
    let agent = AgentReport::of(bootc);
    let mut spec = wanted_spec(
        &p.snap.pool.spec,
        p.snap.pull_secret.hash.as_deref(),
        target,
        Some(bootc.spec()),
    );
    let mut annotations: BTreeMap<String, Option<String>> = BTreeMap::new();
    let retargeted = bootc.spec().desired_image != target.image;
    if retargeted && held {
        admin_hold::keep_image(&mut spec, bootc);
    } else if retargeted && bootc.annotations().contains_key(DRAIN_FAILED_ANNOTATION) {
        annotations.insert(DRAIN_FAILED_ANNOTATION.to_owned(), None);
    }
    let node = Member {
        view,
        info,
        bootc,
        agent: &agent,
        target,
        retargeted,
        held,
    };
    if bootc.annotations().contains_key(REBOOT_SLOT_ANNOTATION) {
        p.holders += 1;
        if !info.ready {
            // Counted once: a holder is unavailable anyway.
            p.unavailable -= 1;
        }
        holder::plan(
            p,
            Holder {
                node,
                spec,
                annotations,
            },
        );
        return;
    }
    waiting(p, &node, spec, annotations);
}

/// A member without a BootcNode: created when it has a staging place and its batch has
/// come (a held node gets none); pending either way.
fn create(
    p: &mut Planner<'_>,
    name: String,
    target: &Target,
    held: bool,
    placed: bool,
    later: bool,
) {
    if later {
        p.requeue_in(RETARGET_RECHECK);
    } else if !held && placed {
        p.staging += 1;
        p.retargets += 1;
        let spec = wanted_spec(
            &p.snap.pool.spec,
            p.snap.pull_secret.hash.as_deref(),
            target,
            None,
        );
        p.actions.push(Action::Create {
            node: name.clone(),
            spec,
        });
    }
    p.states.insert(name, NodeState::Pending);
}

/// A member without a slot: its spec (held back by `maxStaging` when it would start a
/// pull) and its state; a staged, Ready, unconflicted node becomes a slot candidate.
fn waiting<'a>(
    p: &mut Planner<'a>,
    node: &Member<'_, 'a>,
    mut spec: BootcNodeSpec,
    mut annotations: BTreeMap<String, Option<String>>,
) {
    let Member {
        view,
        info,
        bootc,
        agent,
        target,
        retargeted,
        held,
    } = *node;
    let name = view.name.clone();
    if spec.desired_image_state == DesiredImageState::Booted {
        // Approval without a slot (a release that was cut short): take it back.
        spec.desired_image_state = DesiredImageState::Staged;
    }
    // maxStaging: a node that would start pulling waits, its desiredImage unchanged,
    // until a staging place frees. A held node kept its image and pulls nothing.
    if retargeted && !held && !agent.needs_no_pull(&target.digest) {
        let limited = p.staging_limit.is_some_and(|limit| p.staging >= limit);
        let later = !limited && p.retargets >= p.retarget_limit;
        if later {
            // The writes of this plan wake the pool again; in case they do not:
            p.requeue_in(RETARGET_RECHECK);
        }
        if limited || later {
            spec.desired_image = bootc.spec().desired_image.clone();
            spec.desired_image_state = bootc.spec().desired_image_state;
            if spec.desired_image_state == DesiredImageState::Booted {
                spec.desired_image_state = DesiredImageState::Staged;
            }
            annotations.remove(DRAIN_FAILED_ANNOTATION);
        } else {
            p.staging += 1;
            p.retargets += 1;
        }
    }
    if &spec != bootc.spec() || !annotations.is_empty() {
        p.actions.push(Action::Update {
            node: name.clone(),
            resource_version: bootc.resource_version(),
            spec,
            annotations,
        });
    }
    let drain_failed = bootc
        .annotations()
        .get(DRAIN_FAILED_ANNOTATION)
        .is_some_and(|d| *d == target.digest.to_string());
    let state = if drain_failed {
        p.degrade(&name, "DrainTimeout", &format!(
            "its drain for {} timed out; remove its {DRAIN_FAILED_ANNOTATION} annotation to try again",
            target.digest
        ));
        NodeState::Degraded
    } else if let Some((reason, message)) = agent.degraded().filter(|_| !retargeted) {
        p.degrade(&name, reason, message);
        NodeState::Degraded
    } else if retargeted {
        NodeState::Pending
    } else if agent.booted(&target.digest) {
        NodeState::UpToDate
    } else if agent.ready_to_boot(&target.digest) {
        let cordoned = info.unschedulable && p.snap.pool.spec.disruption.respect_cordon;
        if info.ready && !held && !cordoned && !p.conflicted.contains(&name) {
            p.candidates.push(view);
        }
        NodeState::Staged
    } else {
        NodeState::Staging
    };
    note(p, node, state);
    p.states.insert(name, state);
}

/// What the gates need of a member without a slot: someone else cordoned it (it is left
/// alone, though it may stage, until uncordoned), or it runs the target and is degraded.
fn note(p: &mut Planner<'_>, node: &Member<'_, '_>, state: NodeState) {
    let name = &node.view.name;
    if state != NodeState::UpToDate
        && node.info.unschedulable
        && p.snap.pool.spec.disruption.respect_cordon
    {
        p.cordoned.insert(name.clone());
    }
    if state == NodeState::Degraded && !node.retargeted && node.agent.booted(&node.target.digest) {
        p.on_target_degraded.push(name.clone());
    }
}
