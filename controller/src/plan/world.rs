//! What one plan looks at: the pool, its nodes as the caches hold them, the drains, what
//! the registry said about the pool's reference, the pull Secret, the rollout's last
//! progress, and the time. The reconcile shell gathers these; nothing here decides.

use std::collections::BTreeMap;
use std::time::Duration;

use bootc_crds::node::{BootcNodeSpec, BootcNodeStatus};
use bootc_crds::pool::{BootcNodePoolSpec, BootcNodePoolStatus};
use bootc_crds::{Digest, ImageRef};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The image a pool rolls out, pinned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// `registry/repo@sha256:<hex>`.
    pub image: String,
    /// Its digest.
    pub digest: Digest,
}

impl Target {
    /// The target of a reference that carries a digest; `None` for a tag alone.
    pub fn from_ref(reference: &str) -> Option<Target> {
        let parsed = ImageRef::parse(reference).ok()?;
        Some(Target {
            image: parsed.pinned()?,
            digest: parsed.digest()?.clone(),
        })
    }
}

/// The pool being planned.
#[derive(Debug, Clone)]
pub struct PoolView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The spec.
    pub spec: BootcNodePoolSpec,
    /// The status as last written.
    pub status: Option<BootcNodePoolStatus>,
    /// `metadata.deletionTimestamp` is set: the pool is being deleted.
    pub deleting: bool,
    /// The pool carries the controller's finalizer ([`super::FINALIZER`]).
    pub finalized: bool,
}

/// What the plan needs of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeInfo {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `status.nodeInfo.bootID`, as the kubelet reports it.
    pub boot_id: Option<String>,
    /// When the `Ready` condition last changed.
    pub ready_since: Option<DateTime<Utc>>,
    /// When the kubelet last posted the `Ready` condition (`lastHeartbeatTime`).
    pub heartbeat: Option<DateTime<Utc>>,
}

impl NodeInfo {
    /// An admin holds the node: its [`bootc_crds::HOLD_LABEL`] label is `true`. A held
    /// node is not moved to a new target nor given a reboot slot.
    pub fn held(&self) -> bool {
        self.labels
            .get(bootc_crds::HOLD_LABEL)
            .is_some_and(|v| v == "true")
    }
}

/// What the plan needs of a BootcNode.
#[derive(Debug, Clone, PartialEq)]
pub struct BootcView {
    /// The pool named in its controller owner reference.
    pub owner: Option<String>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.resourceVersion`, the precondition of every write.
    pub resource_version: Option<String>,
    /// The controller's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The spec.
    pub spec: BootcNodeSpec,
    /// The agent's status.
    pub status: Option<BootcNodeStatus>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

/// One node name, with its Node and BootcNode when they exist.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// The name shared by the Node and its BootcNode.
    pub name: String,
    /// The Node, `None` when it is gone.
    pub node: Option<NodeInfo>,
    /// The BootcNode of the same name.
    pub bootc: Option<BootcView>,
}

/// Where a node's drain is, as the drainer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainView {
    /// Evicting.
    Running {
        /// Why it cannot go on for now: the pod and the disruption budget (or setting)
        /// that refuses its eviction, as the drain last met it.
        blocked: Option<String>,
    },
    /// Every pod that had to go is gone.
    Drained,
    /// `drainTimeoutSeconds` passed with pods left.
    TimedOut {
        /// What was left and why.
        message: String,
    },
}

/// What the registry said about the pool's reference in this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing was asked: the reference carries a digest, or the spec is invalid.
    NotAsked,
    /// The tag resolved.
    Resolved {
        /// The tag's digest, pinned.
        target: Target,
        /// The image's version label.
        version: Option<String>,
        /// When the registry answered (whole seconds, as the status keeps it).
        at: DateTime<Utc>,
    },
    /// The tag could not be resolved.
    Failed {
        /// Why, for an admin.
        message: String,
        /// When to ask again.
        retry_after: Duration,
    },
}

/// The pool's pull Secret as the shell read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullSecretView {
    /// The hash of its content, given to every BootcNode so that agents rewrite the
    /// host's credentials when it changes; `None` without a Secret or when unreadable.
    pub hash: Option<String>,
    /// Why it cannot be used (missing, unreadable, malformed), naming it but never its
    /// content.
    pub problem: Option<String>,
}

/// When the rollout last advanced, as the previous plan left it; the shell keeps it
/// between reconciles and gives it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Progress {
    /// A fingerprint of every member's state at that time.
    pub fingerprint: u64,
    /// When the members' states last changed.
    pub since: DateTime<Utc>,
}

/// What the pool's alert gate (`spec.health.alerts`) said for this plan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GateView {
    /// The pool has no alert gate, or it was not asked.
    #[default]
    NotConfigured,
    /// No matching alert fires.
    Open {
        /// When the answer was obtained.
        checked: DateTime<Utc>,
    },
    /// Matching alerts fire.
    Firing {
        /// The alerts, each as `name{label="value", …}`, at most a few.
        alerts: Vec<String>,
        /// How many matched in all.
        count: usize,
        /// When the answer was obtained.
        checked: DateTime<Utc>,
    },
    /// The URL could not be asked, or its answer could not be read.
    Unreachable {
        /// Why, naming the URL.
        error: String,
        /// When it was tried.
        checked: DateTime<Utc>,
    },
}

/// Another pool, as far as `spec.rollout.after` needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolSummary {
    /// Its `spec.rollout.after`.
    pub after: Vec<String>,
    /// Its status says every node runs its target (`UpToDate=True`) for its current spec.
    pub up_to_date: bool,
    /// Its status says its rollout is halted (`Degraded`, `RolloutHalted`).
    pub halted: bool,
}

/// Everything one plan looks at.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The pool.
    pub pool: PoolView,
    /// What the registry said about the pool's reference.
    pub lookup: Lookup,
    /// The pull Secret.
    pub pull_secret: PullSecretView,
    /// The other pools' selectors, by name (for conflicts).
    pub other_pools: Vec<(String, LabelSelector)>,
    /// Every other pool by name, for `spec.rollout.after` (waiting and cycles).
    pub pools: BTreeMap<String, PoolSummary>,
    /// What the alert gate said.
    pub gate: GateView,
    /// Every Node this pool's selector matches and every BootcNode it owns (with its
    /// Node), by name.
    pub nodes: Vec<NodeView>,
    /// Drains known to the drainer, by node.
    pub drains: BTreeMap<String, DrainView>,
    /// When the rollout last advanced, from the previous plan; `None` at first.
    pub progress: Option<Progress>,
    /// The time of the plan.
    pub now: DateTime<Utc>,
}
