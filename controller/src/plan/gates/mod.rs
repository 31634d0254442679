//! The rollout's gates. A gate reads its own part of the spec and of the last status,
//! looks at what the member pass found ([`Facts`]), and says whether it is closed: a
//! [`Verdict`] with what it closes (new slots, approvals, both), its typed reason, its
//! message, when to look again and whether the wait is deliberate (never a stall).
//!
//! [`GATES`] is the one list of gates, in order of precedence: the first verdict that
//! holds back the pool gives the `UpToDate` reason, and `status.gates` lists them in this
//! order. Granting ([`super::slots`]), approving ([`super::holder::approve`]), the
//! conditions ([`super::status`]) and stall detection ([`super::progress`]) read only
//! the [`Judgement`]; no other code knows a gate.
//!
//! Adding a gate: a file here with its `check`, and its place in [`GATES`].

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::pool::{
    AlertGateStatus, CanaryStatus, GatePhase, GateReason, GateVerdict, MAX_GATE_VERDICTS,
    MAX_VERDICT_NODES, VERDICT_MESSAGE_MAX_LEN,
};

use super::actions::NodeState;
use super::candidates::Candidates;
use super::failure::RollingBack;
use super::membership::Members;
use super::target::Target;
use super::world::{NodeView, Snapshot};

mod alert;
mod blocking_pods;
mod budget;
mod canary;
mod cordon;
mod halt;
mod hold;
pub mod ordering;
mod pause;
mod rollback;
mod window;

/// A gate: judges the plan's facts, given what the gates before it said.
type Check = fn(&Facts<'_>, &mut Judgement) -> Option<Verdict>;

/// Every gate, in order of precedence.
const GATES: [Check; 11] = [
    pause::check,
    window::check,
    halt::check,
    alert::check,
    ordering::check,
    canary::check,
    rollback::check,
    blocking_pods::check,
    hold::check,
    cordon::check,
    budget::check,
];

/// What the gates look at: the snapshot, the target, the members and their states, and
/// what the member pass counted.
pub(super) struct Facts<'a> {
    pub snap: &'a Snapshot,
    /// `None` while there is no target to roll out.
    pub target: Option<&'a Target>,
    pub members: &'a Members<'a>,
    pub states: &'a super::states::States,
    /// The members an admin holds.
    pub held: &'a BTreeSet<String>,
    /// Slot holders now.
    pub holders: usize,
    /// Slots in use: the holders, and members without a slot that are NotReady.
    pub taken: usize,
    /// Staged, Ready members without a slot, as the member pass found them.
    pub candidates: &'a Candidates<'a>,
    /// Members using a slot (holding one, or NotReady), in member order.
    pub slot_users: &'a [&'a NodeView],
    /// Members cordoned by someone else, in member order.
    pub cordoned: &'a [&'a NodeView],
    /// Slot holders that are unhealthy, with why.
    pub unhealthy: &'a [super::holder::Unhealthy<'a>],
    /// Members that booted the target and report Degraded.
    pub on_target_degraded: &'a [String],
    /// The target is marked failed: the pool rolls back.
    pub rolling_back: Option<&'a RollingBack>,
}

impl Facts<'_> {
    /// The member waits for its update: it lacks the target, holds no slot and is not
    /// degraded.
    fn waits_for_update(&self, name: &str) -> bool {
        matches!(
            self.states.get(name),
            Some(NodeState::Pending | NodeState::Staging | NodeState::Staged)
        )
    }
}

/// A closed gate's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verdict {
    pub reason: GateReason,
    pub closes: GatePhase,
    pub message: String,
    /// When to plan again to see whether it opened.
    pub look_again: Option<Duration>,
    /// Waiting on purpose: never a stall.
    pub deliberate: bool,
    /// The nodes it holds back; empty: the whole pool.
    pub nodes: BTreeSet<String>,
    /// With new slots closed for the pool, how many it still lets through (the canary's
    /// first nodes); `None`: none.
    pub admits: Option<usize>,
    /// The `UpToDate` reason it gives when it is the first to hold back the pool.
    pub up_to_date: Option<&'static str>,
}

impl Verdict {
    /// A verdict closing `closes` for the whole pool.
    fn pool(reason: GateReason, closes: GatePhase, message: String) -> Self {
        Verdict {
            reason,
            closes,
            message,
            look_again: None,
            deliberate: false,
            nodes: BTreeSet::new(),
            admits: None,
            up_to_date: None,
        }
    }

    /// A deliberate verdict closing new slots for `nodes`; none when `nodes` is empty.
    fn nodes(reason: GateReason, nodes: BTreeSet<String>, message: String) -> Option<Self> {
        (!nodes.is_empty()).then(|| Verdict {
            deliberate: true,
            nodes,
            ..Verdict::pool(reason, GatePhase::Slots, message)
        })
    }

    fn deliberate(mut self) -> Self {
        self.deliberate = true;
        self
    }

    fn up_to_date(mut self, reason: &'static str) -> Self {
        self.up_to_date = Some(reason);
        self
    }

    fn look_again(mut self, after: Duration) -> Self {
        self.look_again = Some(after);
        self
    }

    /// It holds back the whole pool.
    fn whole_pool(&self) -> bool {
        self.nodes.is_empty()
    }

    /// It holds back single nodes on purpose.
    fn holds_nodes_on_purpose(&self) -> bool {
        !self.whole_pool() && self.deliberate
    }

    fn covers(&self, node: &str) -> bool {
        self.whole_pool() || self.nodes.contains(node)
    }

    /// As `status.gates` keeps it: bounded.
    fn to_status(&self) -> GateVerdict {
        let count =
            (!self.nodes.is_empty()).then(|| i32::try_from(self.nodes.len()).unwrap_or(i32::MAX));
        GateVerdict {
            reason: self.reason,
            closes: self.closes,
            message: bootc_crds::bounds::truncate(self.message.clone(), VERDICT_MESSAGE_MAX_LEN),
            deliberate: self.deliberate,
            nodes: self.nodes.iter().take(MAX_VERDICT_NODES).cloned().collect(),
            node_count: count,
        }
    }
}

/// What the gates said in one plan: their verdicts, in order of precedence, and what
/// they keep of their own state in the status.
#[derive(Debug, Default)]
pub(super) struct Judgement {
    pub verdicts: Vec<Verdict>,
    /// When to plan again, for a gate that must be asked again even while open.
    pub look_again: Option<Duration>,
    /// Spec values a gate could not use (each falls back to closing).
    pub spec_problems: Vec<String>,
    /// `status.alertGate`.
    pub alert_gate: Option<AlertGateStatus>,
    /// `status.canary`.
    pub canary: Option<CanaryStatus>,
}

/// Every gate's verdict on `facts`.
pub(super) fn judge(facts: &Facts<'_>) -> Judgement {
    let mut judgement = Judgement::default();
    for check in GATES {
        if let Some(verdict) = check(facts, &mut judgement) {
            if let Some(after) = verdict.look_again {
                judgement.look_again_in(after);
            }
            judgement.verdicts.push(verdict);
        }
    }
    judgement
}

impl Judgement {
    fn look_again_in(&mut self, after: Duration) {
        self.look_again = Some(self.look_again.map_or(after, |d| d.min(after)));
    }

    /// The value read, noting its problem when it had to fall back.
    fn read<T>(&mut self, (value, problem): super::limits::Read<T>) -> T {
        if let Some(problem) = problem
            && !self.spec_problems.contains(&problem)
        {
            self.spec_problems.push(problem);
        }
        value
    }

    /// The verdict with `reason`, if that gate is closed.
    pub fn find(&self, reason: GateReason) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.reason == reason)
    }

    /// How many new slots the gates let through now: `None`, as many as the budget
    /// allows; `Some(0)`, none.
    pub fn slots_admitted(&self) -> Option<usize> {
        self.verdicts
            .iter()
            .filter(|v| v.whole_pool() && v.closes.slots())
            .map(|v| v.admits.unwrap_or(0))
            .min()
    }

    /// A gate keeps `node` from a new slot by itself.
    pub fn holds_back(&self, node: &str) -> bool {
        self.verdicts
            .iter()
            .any(|v| !v.whole_pool() && v.closes.slots() && v.nodes.contains(node))
    }

    /// A gate keeps `node`, drained, from its approval.
    pub fn approval_closed(&self, node: &str) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.closes.approvals() && v.covers(node))
    }

    /// The first verdict holding back the whole pool that names an `UpToDate` reason:
    /// `(reason, message)`.
    pub fn up_to_date(&self) -> Option<(&'static str, &str)> {
        self.verdicts
            .iter()
            .filter(|v| v.whole_pool())
            .find_map(|v| Some((v.up_to_date?, v.message.as_str())))
    }

    /// The first gate holding back the whole pool on purpose.
    pub fn pool_waits_on_purpose(&self) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|v| v.whole_pool() && v.deliberate && v.closes.slots())
    }

    /// The verdicts holding back single nodes on purpose that name `node`.
    pub fn holding_back<'s>(&'s self, node: &'s str) -> impl Iterator<Item = &'s Verdict> {
        self.verdicts
            .iter()
            .filter(move |v| v.holds_nodes_on_purpose() && v.nodes.contains(node))
    }

    /// Whether some verdict holds back single nodes on purpose: without one,
    /// [`Self::holding_back`] names no node.
    pub fn holds_nodes_back(&self) -> bool {
        self.verdicts.iter().any(Verdict::holds_nodes_on_purpose)
    }

    /// `status.gates`.
    pub fn to_status(&self) -> Vec<GateVerdict> {
        self.verdicts
            .iter()
            .take(MAX_GATE_VERDICTS)
            .map(Verdict::to_status)
            .collect()
    }
}

/// `name` and up to four more of `names`, with how many more there are.
fn named(names: &BTreeSet<String>) -> String {
    super::list(names)
}
