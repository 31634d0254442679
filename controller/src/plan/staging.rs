//! Members that hold no reboot slot: the BootcNode each should have (the target, staged),
//! `maxStaging` holding back nodes that would start a pull, and each node's state.
//!
//! A target reaches at most [`retarget_batch`] members per plan, new BootcNodes and
//! retargeted ones together: a plan's writes are carried out before its slot grants, so
//! a target written to a 10,000-node pool in one plan would hold back every grant until
//! all 10,000 writes were done. In batches, the first nodes stage and take their slots
//! while the rest are still being written.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
use bootc_crds::{DRAIN_FAILED_ANNOTATION, MANAGED_LABEL};

use super::Planner;
use super::actions::{Action, NodeState};
use super::admin_hold;
use super::agent::AgentReport;
use super::holder::{self, Holder};
use super::member::{Member, Tally, wanted_spec, wanted_spec_of};
use super::membership::Members;
use super::settled;
use super::target::Target;
use super::world::NodeView;

mod open;

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

/// The member pass: each member planned with a known target, its actions and state
/// recorded; returns what the gates and the grant need.
pub(super) fn pass<'a>(
    p: &mut Planner<'a>,
    members: &Members<'a>,
    target: &Target,
    held: &BTreeSet<String>,
    conflicted: &BTreeSet<String>,
) -> Tally<'a> {
    let snap = p.snap;
    let rollout = &snap.pool.spec.rollout;
    let staging_limit = p.read(super::limits::staging(rollout, members.len()));
    let budget = p.read(super::limits::budget(rollout, members.len()));
    let mut kept = snap.settled.lock();
    kept.members(members.places());
    // The states are recorded in the members' order: by address, when it is known.
    let names = kept.order(members);
    let against = (target, &snap.pool.spec, snap.pull_secret.hash.as_deref());
    let (taken, sums) = kept.for_members(members, against, snap.now);
    let mut pass = Pass {
        tally: Tally::default(),
        at: 0,
        places: Places {
            staging: 0,
            limit: staging_limit,
            retargets: 0,
            retarget_limit: retarget_batch(budget),
        },
        held,
        conflicted,
    };
    // What the kept entries add up to is taken whole when it is known, and the names
    // are the members' in order: only the members without an entry are visited.
    pass.tally.in_name_order = names.is_some();
    let (replayed, summed) = match (names, sums) {
        (Some(names), Some(sums)) if open::takes(&names, sums, members) => {
            let replayed = open::pass(p, &mut pass, (members, taken, sums), names, target);
            (replayed, true)
        }
        (names, _) => {
            if let Some(names) = names {
                p.states.follow(names);
            }
            let replayed = every(p, &mut pass, members, taken, target);
            p.states.unfollow();
            (replayed, false)
        }
    };
    kept.replayed(replayed);
    if !summed {
        kept.sum();
    }
    pass.tally
}

/// Whether `view` pulls the target now (`maxStaging`), planned in full.
fn pulls(view: &NodeView, target: &Target) -> bool {
    view.bootc.as_ref().is_some_and(|b| {
        b.spec().desired_image == target.image && !AgentReport::of(b).needs_no_pull(&target.digest)
    })
}

/// The pass over every member, a kept entry used where there is one; returns how many
/// were.
fn every<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    members: &Members<'a>,
    taken: &mut [Option<settled::Entry>],
    target: &Target,
) -> usize {
    // Whether each member pulls the target now (`maxStaging`), and how many do.
    let pulling: Vec<bool> = members
        .iter()
        .zip(taken.iter())
        .map(|(v, entry)| match entry {
            Some(entry) => entry.outcome().staging,
            None => pulls(v, target),
        })
        .collect();
    pass.places.staging = pulling.iter().filter(|p| **p).count();
    // What is found settled now is kept in place, for the next plan.
    let mut replayed = 0;
    let places = members.iter().zip(taken.iter_mut()).zip(pulling);
    for (at, ((view, entry), pulling)) in places.enumerate() {
        pass.at = at;
        match entry {
            Some(entry) => {
                pass.tally.drifted += usize::from(entry.drifted());
                let (unreported, since) = entry.health();
                pass.tally.health.add(unreported, since);
                replay(p, pass, view, entry.outcome());
                replayed += 1;
            }
            None => *entry = planned(p, pass, (view, pulling), target),
        }
    }
    replayed
}

/// A member without a kept entry, planned in full: its entry when it is settled now.
fn planned<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    (view, pulling): (&'a NodeView, bool),
    target: &Target,
) -> Option<settled::Entry> {
    let drifted = pass.tally.planned_in_full(view);
    let quiet = settled::reports_nothing(view, pass.held.contains(&*view.name));
    member(p, pass, (view, pulling), target)
        .filter(|_| quiet)
        .and_then(|o| settled::entry(view, o, drifted))
}

/// A settled member's part of the plan, as [`member`] found it when it was kept.
fn replay<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    view: &'a NodeView,
    outcome: &settled::Outcome,
) {
    let name = &view.name;
    // A kept outcome is of a member with its Node, Ready as it was then; a holder is
    // counted among the holders alone.
    if let Some(slot) = &outcome.slot {
        pass.tally.holders += 1;
        if let Some(why) = &slot.unhealthy {
            pass.tally
                .unhealthy
                .push(holder::Unhealthy::kept(name, why));
        }
        if let Some(wake) = slot.wake {
            p.requeue_at(wake);
        }
    } else if !view.node.as_ref().is_some_and(|info| info.ready) {
        pass.tally.unavailable += 1;
    }
    pass.tally.listed(view);
    if let Some(degraded) = &outcome.degraded {
        p.degrade(name, &degraded.0, &degraded.1);
    }
    if outcome.candidate && !pass.conflicted.contains(&**name) {
        pass.tally.candidates.push(pass.at, view);
    }
    if outcome.on_target_degraded {
        pass.tally.on_target_degraded.push(String::from(&**name));
    }
    p.states.insert(name, outcome.state);
}

/// What the member pass keeps while it goes.
struct Pass<'a, 'h> {
    tally: Tally<'a>,
    /// The place among the members of the member being planned.
    at: usize,
    places: Places,
    held: &'h BTreeSet<String>,
    conflicted: &'h BTreeSet<String>,
}

/// Staging places (`maxStaging`) and the retarget batch, as the pass uses them up.
struct Places {
    /// Members pulling the target now.
    staging: usize,
    /// `maxStaging` resolved (`None`: no limit).
    limit: Option<usize>,
    /// Members given a new image so far, and the most one plan may.
    retargets: usize,
    retarget_limit: usize,
}

impl Places {
    /// A member that would start pulling has a place.
    fn free(&self) -> bool {
        self.limit.is_none_or(|limit| self.staging < limit)
    }

    /// Its batch has not come yet.
    fn batch_full(&self) -> bool {
        self.retargets >= self.retarget_limit
    }

    fn take(&mut self) {
        self.staging += 1;
        self.retargets += 1;
    }
}

/// One member node (and whether it pulls the target now), with a known target; its
/// outcome when it is settled (see [`settled`]).
fn member<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    (view, pulling): (&'a NodeView, bool),
    target: &Target,
) -> Option<settled::Outcome> {
    let name = &view.name;
    let info = view.node.as_ref()?;
    let held = pass.held.contains(&**name);
    // A new node pulls the target: it needs a staging place. A held one gets no
    // BootcNode until the hold is lifted.
    let placed = pass.places.free();
    let later = view.bootc.is_none() && !held && placed && pass.places.batch_full();
    // A node joining is labelled in the plan that creates its BootcNode.
    let labelled = info.labels().contains_key(MANAGED_LABEL);
    if !labelled && !later {
        p.actions.push(Action::Label {
            node: String::from(&**name),
        });
    }
    if !info.ready {
        // NotReady nodes are unavailable whether or not they hold a slot.
        pass.tally.unavailable += 1;
    }
    let Some(bootc) = &view.bootc else {
        create(
            p,
            pass,
            name.clone(),
            target,
            Placed::of(later, held, placed),
        );
        return None;
    };
    if bootc.deleting() {
        p.states.insert(name, NodeState::Pending);
        return None;
    }
    let agent = AgentReport::of(bootc);
    let mut spec = wanted_spec_of(
        &p.snap.pool.spec,
        p.snap.pull_secret.hash.as_deref(),
        target,
        bootc.spec(),
    );
    let mut annotations: BTreeMap<String, Option<String>> = BTreeMap::new();
    let retargeted = bootc.spec().desired_image != target.image;
    if retargeted && held {
        admin_hold::keep_image(spec.to_mut(), bootc);
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
        pulling,
    };
    if bootc.holds_slot() {
        let holder = Holder {
            node,
            spec,
            annotations,
        };
        return holds(p, pass, holder).filter(|_| labelled);
    }
    waiting(p, pass, &node, (spec, annotations)).filter(|_| labelled)
}

/// A member holding a reboot slot; its outcome when it is settled: approved to reboot,
/// nothing written for it, the spec's times read without a problem, and the time
/// bearing on it only at fixed moments (see [`holder::Timing`]).
fn holds<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    holder: Holder<'_, 'a>,
) -> Option<settled::Outcome> {
    pass.tally.holders += 1;
    if !holder.node.info.ready {
        // Counted once: a holder is unavailable anyway.
        pass.tally.unavailable -= 1;
    }
    let rollout = &p.snap.pool.spec.rollout;
    let approved = !holder.node.retargeted
        && holder.node.bootc.spec().desired_image_state == DesiredImageState::Booted;
    let read_cleanly = super::limits::reboot_timeout(rollout).1.is_none()
        && super::limits::soak(rollout).1.is_none();
    let pulling = holder.node.pulling;
    let (actions, unhealthy) = (p.actions.len(), pass.tally.unhealthy.len());
    p.timing = holder::Timing::default();
    let state = holder::plan(p, &mut pass.tally, holder);
    let timing = std::mem::take(&mut p.timing);
    let quiet = p.actions.len() == actions && !timing.floating;
    if !(approved && read_cleanly && quiet) {
        return None;
    }
    let why = pass
        .tally
        .unhealthy
        .get(unhealthy)
        .map(holder::Unhealthy::why);
    Some(settled::Outcome::of_holder(state, pulling, why, timing))
}

/// Whether a member without a BootcNode gets one in this plan.
enum Placed {
    /// Yes.
    Now,
    /// It has a staging place, but its batch comes in a later plan.
    Later,
    /// No: it is held, or no staging place is free.
    Waits,
}

impl Placed {
    /// Its batch comes `later`; it is `held`; a staging place is free (`placed`).
    fn of(later: bool, held: bool, placed: bool) -> Self {
        if later {
            Placed::Later
        } else if !held && placed {
            Placed::Now
        } else {
            Placed::Waits
        }
    }
}

/// A member without a BootcNode: created when it has a staging place and its batch has
/// come (a held node gets none); pending either way.
fn create(
    p: &mut Planner<'_>,
    pass: &mut Pass<'_, '_>,
    name: Arc<str>,
    target: &Target,
    placed: Placed,
) {
    if matches!(placed, Placed::Later) {
        p.requeue_in(RETARGET_RECHECK);
    } else if matches!(placed, Placed::Now) {
        pass.places.take();
        let spec = wanted_spec(
            &p.snap.pool.spec,
            p.snap.pull_secret.hash.as_deref(),
            target,
            None,
        );
        p.actions.push(Action::Create {
            node: String::from(&*name),
            spec,
        });
    }
    p.states.insert(&name, NodeState::Pending);
}

/// A member without a slot: its spec (held back by `maxStaging` when it would start a
/// pull) and its state; a staged, Ready, unconflicted node becomes a slot candidate. Its
/// outcome when nothing is written for it and it asks for the target (settled, but for
/// its label, which the caller knows).
fn waiting<'a>(
    p: &mut Planner<'a>,
    pass: &mut Pass<'a, '_>,
    node: &Member<'_, 'a>,
    (mut spec, mut annotations): (Cow<'a, BootcNodeSpec>, BTreeMap<String, Option<String>>),
) -> Option<settled::Outcome> {
    let Member {
        view,

        bootc,
        agent,
        target,
        retargeted,
        held,
        ..
    } = *node;
    let name: &str = &view.name;
    if spec.desired_image_state == DesiredImageState::Booted {
        // Approval without a slot (a release that was cut short): take it back.
        spec.to_mut().desired_image_state = DesiredImageState::Staged;
    }
    // maxStaging: a node that would start pulling waits, its desiredImage unchanged,
    // until a staging place frees. A held node kept its image and pulls nothing.
    if retargeted && !held && !agent.needs_no_pull(&target.digest) {
        let limited = !pass.places.free();
        let later = !limited && pass.places.batch_full();
        if later {
            // The writes of this plan wake the pool again; in case they do not:
            p.requeue_in(RETARGET_RECHECK);
        }
        if limited || later {
            let spec = spec.to_mut();
            spec.desired_image = bootc.spec().desired_image.clone();
            spec.desired_image_state = bootc.spec().desired_image_state;
            if spec.desired_image_state == DesiredImageState::Booted {
                spec.desired_image_state = DesiredImageState::Staged;
            }
            annotations.remove(DRAIN_FAILED_ANNOTATION);
        } else {
            pass.places.take();
        }
    }
    let changed = matches!(spec, Cow::Owned(ref s) if s != bootc.spec());
    let writes = changed || !annotations.is_empty();
    if writes {
        p.actions.push(Action::Update {
            node: String::from(name),
            resource_version: bootc.resource_version(),
            spec: spec.into_owned(),
            annotations,
        });
    }
    let (state, degraded, candidate) = state_of(node);
    if let Some((reason, message)) = &degraded {
        p.degrade(name, reason, message);
    }
    if candidate && !pass.conflicted.contains(name) {
        pass.tally.candidates.push(pass.at, view);
    }
    let on_target_degraded =
        state == NodeState::Degraded && !retargeted && agent.booted(&target.digest);
    if on_target_degraded {
        pass.tally.on_target_degraded.push(String::from(name));
    }
    p.states.insert(&view.name, state);
    (!writes && !retargeted).then(|| settled::Outcome {
        state,
        staging: node.pulling,
        candidate,
        on_target_degraded,
        degraded: degraded.map(Box::new),
        slot: None,
    })
}

/// The state of a member without a slot; why it is degraded (reason and message), if it
/// is; and whether it is a slot candidate (staged and Ready: the gates and other pools'
/// claims may yet hold it back).
fn state_of(node: &Member<'_, '_>) -> (NodeState, Option<(String, String)>, bool) {
    let Member {
        info,
        bootc,
        agent,
        target,
        retargeted,
        ..
    } = *node;
    let drain_failed = bootc
        .annotations()
        .get(DRAIN_FAILED_ANNOTATION)
        .is_some_and(|d| target.digest.is(d));
    if drain_failed {
        let message = format!(
            "its drain for {} timed out; remove its {DRAIN_FAILED_ANNOTATION} annotation to try again",
            target.digest
        );
        (
            NodeState::Degraded,
            Some(("DrainTimeout".to_owned(), message)),
            false,
        )
    } else if let Some((reason, message)) = agent.degraded().filter(|_| !retargeted) {
        let degraded = (reason.to_owned(), message.to_owned());
        (NodeState::Degraded, Some(degraded), false)
    } else if retargeted {
        (NodeState::Pending, None, false)
    } else if agent.booted(&target.digest) {
        (NodeState::UpToDate, None, false)
    } else if agent.ready_to_boot(&target.digest) {
        (NodeState::Staged, None, info.ready)
    } else {
        (NodeState::Staging, None, false)
    }
}
