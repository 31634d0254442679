//! Condition types and reasons written by the controller (pools) and the agent (nodes).

/// Pool condition: every node runs the target.
pub const UP_TO_DATE: &str = "UpToDate";
/// Pool and node condition: something needs an admin's attention.
pub const DEGRADED: &str = "Degraded";
/// Pool condition: the rollout is advancing (False/`Stalled` when it is not).
pub const PROGRESSING: &str = "Progressing";
/// Node condition: the agent has nothing to do.
pub const IDLE: &str = "Idle";

/// Reasons of the pool's `UpToDate` condition.
pub mod up_to_date {
    /// True: every node runs the target.
    pub const ALL_UPDATED: &str = "AllUpdated";
    /// False: nodes are being updated.
    pub const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
    /// False: work is left but `rollout.paused` is set.
    pub const PAUSED: &str = "Paused";
    /// False: work is left but no maintenance window is open.
    pub const OUTSIDE_MAINTENANCE_WINDOW: &str = "OutsideMaintenanceWindow";
}

/// Reasons of the pool's `Degraded` condition, in order of precedence (first wins).
pub mod pool_degraded {
    /// The spec cannot be acted on; nothing is rolled out.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// A node is selected by this pool and owned by another.
    pub const NODE_CONFLICT: &str = "NodeConflict";
    /// Too many unhealthy nodes hold reboot slots; no new approvals.
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    /// The tag could not be resolved; the last good target is kept.
    pub const TAG_RESOLUTION_ERROR: &str = "TagResolutionError";
    /// One or more nodes report Degraded.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// False: nothing is wrong.
    pub const HEALTHY: &str = "Healthy";
    /// Every reason that sets `Degraded=True`, highest precedence first.
    pub const PRECEDENCE: [&str; 5] = [
        INVALID_SPEC,
        NODE_CONFLICT,
        ROLLOUT_HALTED,
        TAG_RESOLUTION_ERROR,
        NODE_DEGRADED,
    ];
}

/// Reasons of the pool's `Progressing` condition.
pub mod progressing {
    /// True: a node advanced recently, or there is nothing to do.
    pub const ADVANCING: &str = "Advancing";
    /// False: work remains and no node has advanced for 10 minutes.
    pub const STALLED: &str = "Stalled";
}

/// Reasons of the node's `Idle` condition.
pub mod idle {
    /// True: booted is desired.
    pub const IDLE: &str = "Idle";
    /// False: pulling the desired image.
    pub const STAGING: &str = "Staging";
    /// False: the desired image is staged, waiting for approval.
    pub const STAGED: &str = "Staged";
    /// False: rebooting into the desired image.
    pub const REBOOTING: &str = "Rebooting";
}

/// Reasons of the node's `Degraded` condition.
pub mod node_degraded {
    /// True: a host command failed; the message carries its stderr.
    pub const ERROR: &str = "Error";
    /// True: the host rebooted for this approval but came back on another image.
    pub const REBOOT_DID_NOT_APPLY: &str = "RebootDidNotApply";
    /// False: nothing is wrong.
    pub const HEALTHY: &str = "Healthy";
}
