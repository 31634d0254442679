//! What a plan returns: the actions to carry out, the events to record, each member's
//! state, and the complete status to write.

use std::collections::BTreeMap;
use std::time::Duration;

use bootc_crds::node::{BootcNodeSpec, DrainBlocked};
use bootc_crds::pool::BootcNodePoolStatus;

use super::target::Target;
use super::world::Progress;

/// A change to make. Actions of one node are carried out in order; the first failure
/// stops the rest of that node's actions.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the BootcNode (owned by the pool).
    Create {
        /// Node name.
        node: String,
        /// Its spec.
        spec: BootcNodeSpec,
    },
    /// Add the managed label to the Node.
    Label {
        /// Node name.
        node: String,
    },
    /// Remove the managed label from the Node.
    Unlabel {
        /// Node name.
        node: String,
    },
    /// Replace the BootcNode's spec and annotations (only the keys given; `None`
    /// removes), with its `resourceVersion` as a precondition.
    Update {
        /// Node name.
        node: String,
        /// The precondition.
        resource_version: Option<String>,
        /// The new spec.
        spec: BootcNodeSpec,
        /// Annotations to set (`Some`) or remove (`None`).
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Mark the Node unschedulable.
    Cordon {
        /// Node name.
        node: String,
    },
    /// Mark the Node schedulable.
    Uncordon {
        /// Node name.
        node: String,
    },
    /// Start draining the Node (no-op when a drain runs).
    StartDrain {
        /// Node name.
        node: String,
    },
    /// Stop a running drain and forget it.
    CancelDrain {
        /// Node name.
        node: String,
    },
    /// Forget a finished drain (its outcome was acted on).
    ForgetDrain {
        /// Node name.
        node: String,
    },
    /// Delete the BootcNode.
    Delete {
        /// Node name.
        node: String,
    },
    /// Write (`Some`) or clear (`None`) what holds up the node's drain in its BootcNode's
    /// `status.drainBlocked`.
    SetDrainBlocked {
        /// Node name.
        node: String,
        /// The pod and what refuses its eviction, and since when.
        blocked: Option<DrainBlocked>,
    },
    /// Write (`true`) or remove (`false`) the BootcNode's `status.held`.
    SetHeld {
        /// Node name.
        node: String,
        /// An admin holds the node.
        held: bool,
    },
    /// Record a Kubernetes Event on the pool.
    Event(PlannedEvent),
    /// Put the controller's finalizer on the pool, so that deleting it waits for the
    /// clean-up.
    AddFinalizer,
    /// Take the finalizer off: the clean-up after a deletion is done.
    RemoveFinalizer,
}

impl Action {
    /// The node the action is about (`None` for events).
    pub fn node(&self) -> Option<&str> {
        match self {
            Action::Create { node, .. }
            | Action::Label { node }
            | Action::Unlabel { node }
            | Action::Update { node, .. }
            | Action::Cordon { node }
            | Action::Uncordon { node }
            | Action::StartDrain { node }
            | Action::CancelDrain { node }
            | Action::ForgetDrain { node }
            | Action::Delete { node }
            | Action::SetDrainBlocked { node, .. }
            | Action::SetHeld { node, .. } => Some(node),
            Action::Event(e) => e.node.as_deref(),
            Action::AddFinalizer | Action::RemoveFinalizer => None,
        }
    }

    /// The action's name in metrics and logs (one of [`ACTION_KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Label { .. } => "label",
            Action::Unlabel { .. } => "unlabel",
            Action::Update { .. } => "update",
            Action::Cordon { .. } => "cordon",
            Action::Uncordon { .. } => "uncordon",
            Action::StartDrain { .. } => "start_drain",
            Action::CancelDrain { .. } => "cancel_drain",
            Action::ForgetDrain { .. } => "forget_drain",
            Action::Delete { .. } => "delete",
            Action::SetDrainBlocked { .. } => "set_drain_blocked",
            Action::SetHeld { .. } => "set_held",
            Action::Event(_) => "event",
            Action::AddFinalizer => "add_finalizer",
            Action::RemoveFinalizer => "remove_finalizer",
        }
    }
}

/// Every [`Action::kind`], for metrics series that are removed with their pool.
pub const ACTION_KINDS: [&str; 15] = [
    "create",
    "label",
    "unlabel",
    "update",
    "cordon",
    "uncordon",
    "start_drain",
    "cancel_drain",
    "forget_drain",
    "delete",
    "set_drain_blocked",
    "set_held",
    "event",
    "add_finalizer",
    "remove_finalizer",
];

/// A Kubernetes Event to record on the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    /// The node the event is about: it is recorded only once that node's writes before
    /// it succeeded. `None` for events about the pool's status, recorded only once the
    /// status is written.
    pub node: Option<String>,
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// The reason (`RebootApproved`, …).
    pub reason: &'static str,
    /// What happened.
    pub message: String,
}

/// Event reasons.
pub mod events {
    /// The pool's target digest changed.
    pub const TARGET_RESOLVED: &str = "TargetResolved";
    /// A rollout of a new target began.
    pub const ROLLOUT_STARTED: &str = "RolloutStarted";
    /// A node was allowed to reboot.
    pub const REBOOT_APPROVED: &str = "RebootApproved";
    /// A node came back on the target and its slot was freed.
    pub const NODE_UPDATED: &str = "NodeUpdated";
    /// Every node runs the target.
    pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
    /// Too many slot holders are unhealthy; no new approvals.
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    /// The target reached the halt threshold with `onFailure: Rollback`: marked failed,
    /// the pool rolls back.
    pub const TARGET_FAILED: &str = "TargetFailed";
    /// A drain timed out.
    pub const DRAIN_FAILED: &str = "DrainFailed";
    /// A drain is held up: a disruption budget (or a drain setting) refuses an eviction.
    pub const DRAIN_BLOCKED: &str = "DrainBlocked";
    /// A node is selected by more than one pool.
    pub const NODE_CONFLICT: &str = "NodeConflict";
    /// A write or a drain step the plan asked for failed (recorded by the shell).
    pub const ACTION_FAILED: &str = "ActionFailed";
}

/// How the plan sees each member node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeState {
    /// Not yet asked for the target (no BootcNode, or an older desired image).
    Pending,
    /// Pulling the target.
    Staging,
    /// The target is staged; waiting for a slot.
    Staged,
    /// Holds a slot: cordoned, draining, or rebooting.
    Rebooting,
    /// Runs the target.
    UpToDate,
    /// Its agent reports an error, or its drain timed out.
    Degraded,
}

impl NodeState {
    /// How many states there are.
    pub const COUNT: usize = 6;

    /// Every state, in the order of [`NodeState::index`].
    pub const ALL: [NodeState; NodeState::COUNT] = [
        NodeState::Pending,
        NodeState::Staging,
        NodeState::Staged,
        NodeState::Rebooting,
        NodeState::UpToDate,
        NodeState::Degraded,
    ];

    /// Its place among the states (`0..COUNT`).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The result of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// Where the new reboot slots' actions begin in `actions` (their length when none):
    /// everything before them (slots released, nodes uncordoned) is done before any of
    /// them starts.
    pub grants_from: usize,
    /// How many slots the actions before `grants_from` free, which the grants count on:
    /// when one of those actions fails, the grants must wait for the next plan.
    pub releases: usize,
    /// The status to report (written only when it differs from the current one).
    pub status: BootcNodePoolStatus,
    /// Each member's state, by name.
    pub states: super::states::States,
    /// When to plan again even if nothing changes (a window opening, a soak ending,
    /// the next tag resolution, a stall beginning, …).
    pub requeue_after: Option<Duration>,
    /// The target rolled out, when there is one (for the shell's metrics).
    pub target: Option<Target>,
    /// When the rollout last advanced: the shell keeps it for the next plan.
    pub progress: Progress,
    /// The pool's health beyond the status (for the shell's metrics).
    pub health: super::health::Health,
}
