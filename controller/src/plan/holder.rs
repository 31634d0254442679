//! Members that hold a reboot slot: cordon, drain, approval, the wait for the node to come
//! back on the target (healthy, Ready, heard from by its kubelet, soaked), and the
//! release of the slot; a retarget revokes the approval; a drain that timed out frees the
//! slot and marks the node.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use bootc_crds::node::{BootcNodeSpec, DesiredImageState};
use bootc_crds::pool::RebootPolicy;
use bootc_crds::{
    APPROVED_AT_ANNOTATION, BACK_AT_ANNOTATION, DRAIN_FAILED_ANNOTATION, Digest,
    WAS_CORDONED_ANNOTATION,
};
use chrono::{DateTime, Utc};

use super::actions::{Action, NodeState, events};
use super::agent::{AgentReport, KUBELET_RECHECK, kubelet_reported_since_reboot};
use super::boot_health::{self, BootHealth};
use super::gates::Judgement;
use super::member::{Drained, Member, Tally, release};
use super::world::{BootcView, DrainView, NodeInfo};
use super::{Planner, stamp};

mod timing;
mod unhealthy;
pub(super) use timing::Timing;
use timing::{after, just_after};
pub(super) use unhealthy::{Unhealthy, Why};

/// A slot holder: the member, the spec it should have, and annotation changes so far.
pub(super) struct Holder<'n, 'a> {
    pub node: Member<'n, 'a>,
    /// The spec it should have: its own, borrowed, until something in it changes.
    pub spec: Cow<'a, BootcNodeSpec>,
    pub annotations: BTreeMap<String, Option<String>>,
}

impl Holder<'_, '_> {
    fn name(&self) -> String {
        String::from(&*self.node.view.name)
    }

    /// Uncordons the node, unless it was cordoned before the slot was granted.
    fn uncordon(&self, p: &mut Planner<'_>) {
        let was_cordoned = self
            .node
            .bootc
            .annotations()
            .contains_key(WAS_CORDONED_ANNOTATION);
        if self.node.info.unschedulable && !was_cordoned {
            p.actions.push(Action::Uncordon { node: self.name() });
        }
    }

    /// Writes the spec and annotations, with the BootcNode's version as precondition.
    fn update(self, p: &mut Planner<'_>) {
        p.actions.push(Action::Update {
            node: self.name(),
            resource_version: self.node.bootc.resource_version(),
            spec: self.spec.into_owned(),
            annotations: self.annotations,
        });
    }
}

/// Plans one slot holder; returns the state it is given.
pub(super) fn plan<'a>(
    p: &mut Planner<'_>,
    tally: &mut Tally<'a>,
    holder: Holder<'_, 'a>,
) -> NodeState {
    let name = std::sync::Arc::clone(&holder.node.view.name);
    let state = if holder.node.retargeted {
        retargeted(p, holder)
    } else if holder.node.bootc.spec().desired_image_state == DesiredImageState::Staged {
        granted(p, tally, holder)
    } else {
        approved(p, tally, holder)
    };
    p.states.insert(&name, state);
    state
}

/// The target moved (a new image or a rollback): the approval for the old digest is
/// revoked by the spec change; the slot is freed once the node is not mid-reboot.
fn retargeted(p: &mut Planner<'_>, mut holder: Holder<'_, '_>) -> NodeState {
    let name = holder.name();
    if p.snap.drains.contains_key(&name) {
        p.actions.push(Action::CancelDrain { node: name.clone() });
    }
    let node = &holder.node;
    if may_be_rebooting(node.bootc, node.info, node.agent) {
        // A held node kept its spec: there may be nothing to write.
        if *holder.spec != *node.bootc.spec() || !holder.annotations.is_empty() {
            holder.update(p);
        }
        return NodeState::Rebooting;
    }
    holder.uncordon(p);
    holder.annotations.extend(release());
    // Without a slot nothing is approved (a held node kept its old spec).
    holder.spec.to_mut().desired_image_state = DesiredImageState::Staged;
    holder.update(p);
    NodeState::Pending
}

/// Whether a node approved to reboot may be in that reboot now, so that its slot must not
/// be freed nor the node let go: its agent says it is rebooting, its Node is NotReady, or
/// its agent recorded a reboot for the approved image and the kubelet has not reported
/// since. In that last case the Node's `Ready` is left over from before the reboot, and
/// its NotReady (the host going down, or its kubelet starting again) may still come: a
/// slot freed then would be taken by another node while this one goes down.
///
/// An approval the agent has not recorded is not a reboot under way: it is revoked by a
/// spec write conditional on the BootcNode's version, and the agent records its reboot
/// with the same condition, so exactly one of the two is written.
pub(super) fn may_be_rebooting(
    bootc: &BootcView,
    info: &NodeInfo,
    agent: &AgentReport<'_>,
) -> bool {
    let spec = bootc.spec();
    if spec.desired_image_state != DesiredImageState::Booted {
        return false;
    }
    if agent.rebooting() || !info.ready {
        return true;
    }
    let Some(approved) = bootc_crds::image_ref::digest_in(&spec.desired_image) else {
        return false;
    };
    let soft_possible = spec.reboot_policy == RebootPolicy::AllowSoftReboot;
    let recorded = agent.last_reboot().filter(|r| approved.is(&r.digest));
    recorded.is_some() && !kubelet_reported_since_reboot(info, recorded, &approved, soft_possible)
}

/// Whether a node leaving the pool (or a pool being deleted) must keep its BootcNode for
/// now: it may be in the reboot it was approved for ([`may_be_rebooting`]) and
/// `rebootTimeoutSeconds` have not passed since the approval. Let go mid-reboot, it would
/// go down uncordoned and outside every budget.
pub(super) fn finishing_reboot(p: &mut Planner<'_>, bootc: &BootcView, info: &NodeInfo) -> bool {
    let agent = AgentReport::of(bootc);
    if !may_be_rebooting(bootc, info, &agent) {
        return false;
    }
    let deadline = Deadline::of(p, bootc);
    if deadline.overdue {
        return false;
    }
    deadline.look_again(p);
    true
}

/// Granted, not yet approved: cordon, drain, then (once the gates have said) approve; on
/// a drain timeout, free the slot and mark the node.
fn granted<'a>(
    p: &mut Planner<'_>,
    tally: &mut Tally<'a>,
    mut holder: Holder<'_, 'a>,
) -> NodeState {
    let name = holder.name();
    if !holder.node.info.unschedulable {
        p.actions.push(Action::Cordon { node: name.clone() });
        p.actions.push(Action::StartDrain { node: name.clone() });
        return NodeState::Rebooting;
    }
    match p.snap.drains.get(&name) {
        None => p.actions.push(Action::StartDrain { node: name.clone() }),
        Some(DrainView::Running { .. }) => {}
        Some(DrainView::Drained) => tally.drained.push(Drained {
            node: name.clone(),
            resource_version: holder.node.bootc.resource_version(),
            image: holder.node.target.image.clone(),
            spec: holder.spec.into_owned(),
            annotations: holder.annotations,
        }),
        Some(DrainView::TimedOut { message }) => {
            let message = message.clone();
            let digest = holder.node.target.digest.to_string();
            holder.uncordon(p);
            holder.annotations.extend(release());
            holder
                .annotations
                .insert(DRAIN_FAILED_ANNOTATION.to_owned(), Some(digest));
            holder.update(p);
            p.actions.push(Action::ForgetDrain { node: name.clone() });
            p.node_event(
                &name,
                true,
                events::DRAIN_FAILED,
                format!("node {name}: drain timed out ({message}); uncordoned and its slot freed"),
            );
            p.degrade(&name, "DrainTimeout", &message);
            return NodeState::Degraded;
        }
    }
    NodeState::Rebooting
}

/// The reboot timeout: how long since the approval, and whether it has run out.
struct Deadline {
    approved_at: Option<DateTime<Utc>>,
    /// How long since the approval (zero without one, or for one in the future).
    since: Duration,
    timeout: Duration,
    overdue: bool,
}

impl Deadline {
    fn of(p: &mut Planner<'_>, bootc: &BootcView) -> Self {
        let approved_at = bootc.approved_at();
        let timeout = p.read(super::limits::reboot_timeout(&p.snap.pool.spec.rollout));
        let now = p.snap.now;
        let since = approved_at.map_or(Duration::ZERO, |t| {
            (now - t).to_std().unwrap_or(Duration::ZERO)
        });
        let overdue = approved_at.is_some() && since > timeout;
        match approved_at {
            // Overdue once `since` passes the timeout, and from then on.
            Some(t) if t <= now && !overdue => p.changes_at(just_after(after(t, timeout))),
            Some(t) if t <= now => {}
            // An approval in the future counts from now: that moves.
            Some(_) => p.changes_at(None),
            None => {}
        }
        Deadline {
            approved_at,
            since,
            timeout,
            overdue,
        }
    }

    /// Plans again a second after the timeout runs out (not overdue yet).
    fn look_again(&self, p: &mut Planner<'_>) {
        let at = (self.approved_at)
            .filter(|t| *t <= p.snap.now)
            .and_then(|t| after(t, self.timeout + Duration::from_secs(1)));
        match at {
            Some(at) => p.requeue_at(at),
            None => {
                p.requeue_in(self.timeout.saturating_sub(self.since) + Duration::from_secs(1));
            }
        }
    }
}

/// What the agent reports of the target, read once per holder: it recorded a reboot
/// into it, and it runs it.
#[derive(Clone, Copy)]
struct OnTarget {
    recorded: bool,
    booted: bool,
}

impl OnTarget {
    fn of(agent: &AgentReport<'_>, digest: &Digest) -> Self {
        OnTarget {
            recorded: agent.last_reboot().is_some_and(|r| digest.is(&r.digest)),
            booted: agent.booted(digest),
        }
    }
}

/// Whether the holder is in the reboot it was approved for: its agent recorded a reboot
/// for the target, and the host does not yet run the target with its kubelet reporting
/// from that boot, or it does but its Node turned NotReady no later than
/// [`KUBELET_START_GRACE`] after the agent saw the target booted (a kubelet starting
/// reports NotReady before Ready, and may start after the agent). NotReady then (on the
/// way down, while down, while the kubelet starts again) is the update itself, bounded by
/// rebootTimeoutSeconds, and the holder keeps its slot; NotReady at any other time makes
/// the holder unhealthy.
fn in_own_reboot(
    agent: &AgentReport<'_>,
    info: &super::world::NodeInfo,
    on_target: OnTarget,
    kubelet_back: bool,
) -> bool {
    let OnTarget { recorded, booted } = on_target;
    if !recorded {
        return false;
    }
    if !(kubelet_back && agent.current && booted) {
        return true;
    }
    // Back on the target: the times are read only now, as they cost more than the flags.
    let down_since_back = info
        .ready_since
        .zip(agent.booted_since())
        .is_some_and(|(down, booted)| down > booted + KUBELET_START_GRACE);
    !down_since_back
}

/// While the agent's record of the reboot may not have reached this view: until when a
/// holder that went NotReady after its approval, before its agent is seen to record a
/// reboot into the target or to run it, is taken for going down in that reboot. The
/// agent records the reboot before it reboots, but Nodes and BootcNodes reach the
/// controller through two watches, and the Node's NotReady can come first. `None` when
/// the NotReady is not that (it began before the approval, the agent already runs the
/// target, or [`RECORD_LAG_GRACE`] has passed): then it is unhealthy.
fn record_unseen_until(
    info: &NodeInfo,
    on_target: OnTarget,
    deadline: &Deadline,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if on_target.recorded || on_target.booted {
        return None;
    }
    let down = info.ready_since?;
    if down < deadline.approved_at? {
        return None;
    }
    let until = down + RECORD_LAG_GRACE;
    (now < until).then_some(until)
}

/// How long a holder's NotReady may come before its agent's record of the reboot
/// ([`record_unseen_until`]).
const RECORD_LAG_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// How long after the agent saw the target booted a NotReady is still taken for the
/// kubelet starting: the two start independently, and a Node's conditions keep whole
/// seconds.
const KUBELET_START_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// Drained holders approved to reboot, unless a gate closes approvals for them: then each
/// waits, cordoned and drained, for it to open (a reboot not yet begun is not started
/// under a firing alert).
pub(super) fn approve(p: &mut Planner<'_>, drained: Vec<Drained>, gates: &Judgement) {
    // Every approval of the plan is stamped with its time: written once.
    let at = stamp(p.snap.now);
    for mut d in drained {
        if gates.approval_closed(&d.node) {
            continue;
        }
        let name = d.node;
        d.spec.desired_image_state = DesiredImageState::Booted;
        d.annotations
            .insert(APPROVED_AT_ANNOTATION.to_owned(), Some(at.clone()));
        p.actions.push(Action::Update {
            node: name.clone(),
            resource_version: d.resource_version,
            spec: d.spec,
            annotations: d.annotations,
        });
        p.actions.push(Action::ForgetDrain { node: name.clone() });
        let image = d.image;
        p.node_event(
            &name,
            false,
            events::REBOOT_APPROVED,
            format!("node {name} drained; approved to reboot into {image}"),
        );
    }
}

/// Approved: wait for the node to come back on the target, healthy, Ready and heard from
/// by its kubelet since the reboot; after the soak the slot is released.
fn approved<'a>(
    p: &mut Planner<'_>,
    tally: &mut Tally<'a>,
    mut holder: Holder<'_, 'a>,
) -> NodeState {
    let view = holder.node.view;
    let name: &str = &view.name;
    let node = &holder.node;
    let (info, agent, digest) = (node.info, node.agent, &node.target.digest);
    let now = p.snap.now;
    let degraded = agent.degraded();
    let deadline = Deadline::of(p, holder.node.bootc);
    let soft_possible = node.bootc.spec().reboot_policy == RebootPolicy::AllowSoftReboot;
    let on_target = OnTarget::of(agent, digest);
    let kubelet_back =
        kubelet_reported_since_reboot(info, agent.last_reboot(), digest, soft_possible);
    if let Some((reason, message)) = degraded {
        tally.unhealthy.push(Unhealthy {
            node: name,
            why: Why::Degraded(Cow::Borrowed(reason), Cow::Borrowed(message)),
        });
        p.degrade(name, reason, message);
    } else if deadline.overdue && !(info.ready && kubelet_back && on_target.booted) {
        let problem = format!(
            "not back Ready on the target within {}s of its approval",
            p.snap.pool.spec.rollout.reboot_timeout_seconds
        );
        p.degrade(name, "RebootTimeout", &problem);
        tally.unhealthy.push(Unhealthy {
            node: name,
            why: Why::Found("RebootTimeout", problem),
        });
    } else if !info.ready && !in_own_reboot(agent, info, on_target, kubelet_back) {
        match record_unseen_until(info, on_target, &deadline, now) {
            Some(until) => {
                p.changes_at(Some(until));
                p.requeue_at(until);
            }
            None => tally.unhealthy.push(Unhealthy {
                node: name,
                why: Why::NotReady,
            }),
        }
    }
    if deadline.approved_at.is_some() && !deadline.overdue {
        deadline.look_again(p);
    }
    let back = agent.current && on_target.booted && degraded.is_none() && info.ready;
    if back && !kubelet_back {
        // The agent is back before the kubelet has said anything since the reboot: the
        // Ready seen is the one from before it. A full reboot's new boot ID wakes the
        // plan; a soft reboot's heartbeat does not, so look again shortly.
        p.requeue_in(KUBELET_RECHECK);
    }
    let back = if back && kubelet_back {
        back_on_target(p, tally, &mut holder)
    } else {
        Back::NotYet
    };
    if back == Back::Soaked {
        release_slot(p, tally, holder);
        return NodeState::UpToDate;
    }
    let sick = back == Back::Sick;
    let state = if degraded.is_some() || sick {
        NodeState::Degraded
    } else {
        NodeState::Rebooting
    };
    if !holder.annotations.is_empty() {
        // The controller saw the node back for the first time: its own clock says when.
        holder.update(p);
    }
    state
}

/// The holder is back on the target, Ready and heard from by its kubelet since the
/// reboot: judges its units and `postRebootDelaySeconds`, both counted from when it has
/// been back ([`back_since`]). The first time the controller sees it back, the moment is
/// stamped in [`BACK_AT_ANNOTATION`].
fn back_on_target<'a>(
    p: &mut Planner<'_>,
    tally: &mut Tally<'a>,
    holder: &mut Holder<'_, 'a>,
) -> Back {
    let name = holder.name();
    let now = p.snap.now;
    let since = back_since(holder, now);
    let back_for = (now - since).to_std().unwrap_or(Duration::ZERO);
    // A moment `d` after the return, when that stays put as the time goes.
    let fixed = |d| after(since, d).filter(|_| since < now);
    match boot_health::judge(boot_health::units(&p.snap.pool.spec), holder.node.agent) {
        BootHealth::Healthy => {
            let delay = p.read(super::limits::soak(&p.snap.pool.spec.rollout));
            if back_for >= delay {
                return Back::Soaked;
            }
            let end = fixed(delay);
            p.changes_at(end);
            match end {
                Some(end) => p.requeue_at(end),
                None => p.requeue_in(delay - back_for),
            }
            Back::Waiting
        }
        BootHealth::Failed(why) => {
            p.degrade(&name, "UnhealthyUnits", &why);
            tally.unhealthy.push(Unhealthy {
                node: &holder.node.view.name,
                why: Why::Found("UnhealthyUnits", why),
            });
            Back::Sick
        }
        BootHealth::Waiting(why) => {
            let limit = boot_health::timeout(&p.snap.pool.spec);
            if back_for < limit {
                let end = fixed(limit);
                p.changes_at(end);
                let grace = Duration::from_millis(10);
                match end.and_then(|end| after(end, grace)) {
                    Some(at) => p.requeue_at(at),
                    None => p.requeue_in(limit - back_for + grace),
                }
                return Back::Waiting;
            }
            let problem = format!(
                "its units were not all active within {}s of its return: {why}",
                limit.as_secs()
            );
            p.degrade(&name, "BootHealthTimeout", &problem);
            tally.unhealthy.push(Unhealthy {
                node: &holder.node.view.name,
                why: Why::Found("BootHealthTimeout", problem),
            });
            Back::Sick
        }
    }
}

/// Where a holder approved to reboot stands once back on the target.
#[derive(PartialEq)]
enum Back {
    /// Not back yet (or not heard from by its kubelet since the reboot).
    NotYet,
    /// Back, its units not judged yet or the soak not over.
    Waiting,
    /// Back, a unit failed or its units were not active in time.
    Sick,
    /// Back, healthy and soaked: the slot can go.
    Soaked,
}

/// Since when the holder has been back: when the controller first saw it back
/// ([`BACK_AT_ANNOTATION`], kept in whole seconds, so a second is added rather than count
/// too much), stamped now if it was not yet; or later, when its Node turned Ready again
/// since then (by the kubelet's clock, never later than now). A node clock can make the
/// wait longer, never shorter. Read as now, it is no fixed moment: it is `now` exactly
/// then, and only then.
fn back_since(holder: &mut Holder<'_, '_>, now: DateTime<Utc>) -> DateTime<Utc> {
    let seen = holder
        .node
        .bootc
        .back_at()
        .map(|t| t + chrono::Duration::seconds(1));
    let seen = seen.unwrap_or_else(|| {
        holder
            .annotations
            .insert(BACK_AT_ANNOTATION.to_owned(), Some(stamp(now)));
        now
    });
    let ready = holder
        .node
        .info
        .ready_since
        .map(|t| (t + chrono::Duration::seconds(1)).min(now));
    ready.map_or(seen, |r| r.max(seen))
}

/// The node runs the target and has soaked: uncordon, release the slot, say so.
fn release_slot(p: &mut Planner<'_>, tally: &mut Tally<'_>, mut holder: Holder<'_, '_>) {
    let name = holder.name();
    let view = holder.node.view;
    let image = holder.node.target.image.clone();
    let how = match (
        &holder.node.info.boot_id,
        holder.node.agent.last_reboot_boot_id(),
    ) {
        (Some(now), Some(before)) if super::agent::same_boot_id(now, before) => {
            " after a soft reboot"
        }
        (Some(_), Some(_)) => " after a reboot",
        _ => "",
    };
    holder.uncordon(p);
    holder.spec.to_mut().desired_image_state = DesiredImageState::Staged;
    holder.annotations.extend(release());
    holder.update(p);
    // Free for this plan's grants: they start only once this release is written (and
    // not at all if it fails; see `Plan::releases`).
    tally.holders -= 1;
    p.releases += 1;
    p.node_event(
        &name,
        false,
        events::NODE_UPDATED,
        format!("node {name} runs {image}{how}; slot freed"),
    );
    p.states.insert(&view.name, NodeState::UpToDate);
}
