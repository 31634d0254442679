//! What one plan looks at: the pool, its nodes as the caches hold them, the drains, what
//! the registry said about the pool's reference, the pull Secret, the rollout's last
//! progress, and the time. The reconcile shell gathers these; nothing here decides.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::node::{BootcNode, BootcNodeSpec, BootcNodeStatus};
use bootc_crds::pool::{BootcNodePoolSpec, BootcNodePoolStatus};
use bootc_crds::{
    APPROVED_AT_ANNOTATION, BACK_AT_ANNOTATION, Digest, ImageRef, REBOOT_SLOT_ANNOTATION,
};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;

use super::parse_stamp;

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
    /// The spec, but for `pullSecretRef`: the shell gives the Secret the BootcNodes name
    /// there (the controller's copy, [`PullSecretView::copy`]), not the pool's source.
    pub spec: BootcNodePoolSpec,
    /// The status as last written.
    pub status: Option<BootcNodePoolStatus>,
    /// `metadata.deletionTimestamp` is set: the pool is being deleted.
    pub deleting: bool,
    /// The pool carries the controller's finalizer ([`super::FINALIZER`]).
    pub finalized: bool,
}

/// What the plan needs of a Node: the facts read from it, and the cached object itself
/// for its labels (shared, not copied).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeInfo {
    /// The Node, as the cache holds it.
    pub node: Arc<Node>,
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
    /// The pods of `spec.disruption.blockingPods` running on the node.
    pub blocking_pods: BlockingPods,
    /// Its zone label ([`super::ZONE_LABEL`]), read once with the other facts
    /// ([`NodeInfo::zone_of`]): the grant order reads it for every candidate, and a
    /// settled member's kept outcome shares it.
    pub zone: Option<Arc<str>>,
}

/// The pods that keep a node from rebooting (`spec.disruption.blockingPods`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BlockingPods {
    /// None runs on the node (or the pool names none).
    #[default]
    None,
    /// These run on it, as `namespace/name`.
    Running(Vec<String>),
    /// They could not be listed: why (the node counts as blocked).
    Unknown(String),
}

impl NodeInfo {
    /// The zone label of `node`, as [`NodeInfo::zone`] keeps it.
    pub fn zone_of(node: &Node) -> Option<Arc<str>> {
        node.labels()
            .get(super::ZONE_LABEL)
            .map(|z| Arc::from(z.as_str()))
    }

    /// Labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        self.node.labels()
    }

    /// An admin holds the node: its [`bootc_crds::HOLD_LABEL`] label is `true`. A held
    /// node is not moved to a new target nor given a reboot slot.
    pub fn held(&self) -> bool {
        self.labels()
            .get(bootc_crds::HOLD_LABEL)
            .is_some_and(|v| v == "true")
    }
}

/// What the plan needs of a BootcNode: the cached object itself, shared rather than
/// copied (a plan of a 10,000-node pool would otherwise copy every member's spec, status
/// and annotations), and the pool it belongs to. What the controller's annotations say
/// is read once, when the view is made: the shell makes a view when its object changes
/// and keeps it while it stays the same, and every plan asked each member whether it
/// holds a slot, and each holder when it was approved.
#[derive(Debug, Clone)]
pub struct BootcView {
    /// The pool named in its controller owner reference.
    pub owner: Option<String>,
    object: Arc<BootcNode>,
    /// What its annotations say, as read when the view was made (`None` once a test
    /// changed the object: read again at each ask).
    marks: Option<Marks>,
}

/// What a BootcNode's annotations say, as read. Kept small: every view holds one, and
/// the shell moves thousands of views; the time stamps, which only slot holders carry,
/// are boxed.
#[derive(Debug, Clone)]
struct Marks {
    /// It holds a reboot slot ([`REBOOT_SLOT_ANNOTATION`]).
    holds_slot: bool,
    /// Its time stamps, when it has either.
    stamps: Option<Box<Stamps>>,
}

/// A BootcNode's time stamps (`None` when missing or not a time).
#[derive(Debug, Clone, Copy)]
struct Stamps {
    /// When its reboot slot was granted ([`REBOOT_SLOT_ANNOTATION`]).
    granted_at: Option<DateTime<Utc>>,
    /// When its reboot was approved ([`APPROVED_AT_ANNOTATION`]).
    approved_at: Option<DateTime<Utc>>,
    /// When the controller first saw it back on the target ([`BACK_AT_ANNOTATION`]).
    back_at: Option<DateTime<Utc>>,
}

impl Marks {
    /// What `object`'s annotations say.
    fn of(object: &BootcNode) -> Self {
        let annotations = object.annotations();
        let read = |key: &str| annotations.get(key).and_then(|s| parse_stamp(s));
        let stamps = Stamps {
            granted_at: read(REBOOT_SLOT_ANNOTATION),
            approved_at: read(APPROVED_AT_ANNOTATION),
            back_at: read(BACK_AT_ANNOTATION),
        };
        let any =
            stamps.granted_at.is_some() || stamps.approved_at.is_some() || stamps.back_at.is_some();
        Marks {
            holds_slot: annotations.contains_key(REBOOT_SLOT_ANNOTATION),
            stamps: any.then(|| Box::new(stamps)),
        }
    }

    fn stamps(&self) -> Stamps {
        self.stamps.as_deref().copied().unwrap_or(Stamps {
            granted_at: None,
            approved_at: None,
            back_at: None,
        })
    }
}

/// Two views of the same object are the same view, whatever they have read of it.
impl PartialEq for BootcView {
    fn eq(&self, other: &Self) -> bool {
        self.owner == other.owner && self.object == other.object
    }
}

impl BootcView {
    /// The view of `object`, which belongs to the pool `owner`.
    pub fn new(object: Arc<BootcNode>, owner: Option<String>) -> Self {
        BootcView {
            owner,
            marks: Some(Marks::of(&object)),
            object,
        }
    }

    /// When its reboot slot was granted ([`REBOOT_SLOT_ANNOTATION`]; `None` when missing
    /// or not a time).
    pub fn granted_at(&self) -> Option<DateTime<Utc>> {
        self.stamps().granted_at
    }

    /// When its reboot was approved ([`APPROVED_AT_ANNOTATION`]; `None` when missing or
    /// not a time).
    pub fn approved_at(&self) -> Option<DateTime<Utc>> {
        self.stamps().approved_at
    }

    /// When the controller first saw it back on the target ([`BACK_AT_ANNOTATION`];
    /// `None` when missing or not a time).
    pub fn back_at(&self) -> Option<DateTime<Utc>> {
        self.stamps().back_at
    }

    fn stamps(&self) -> Stamps {
        match &self.marks {
            Some(marks) => marks.stamps(),
            None => Marks::of(&self.object).stamps(),
        }
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.object.metadata.generation
    }

    /// `metadata.resourceVersion`, the precondition of every write.
    pub fn resource_version(&self) -> Option<String> {
        self.object.metadata.resource_version.clone()
    }

    /// The controller's annotations.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        self.object.annotations()
    }

    /// The spec.
    pub fn spec(&self) -> &BootcNodeSpec {
        &self.object.spec
    }

    /// The agent's status.
    pub fn status(&self) -> Option<&BootcNodeStatus> {
        self.object.status.as_ref()
    }

    /// `metadata.deletionTimestamp` is set.
    pub fn deleting(&self) -> bool {
        self.object.metadata.deletion_timestamp.is_some()
    }

    /// It holds a reboot slot ([`REBOOT_SLOT_ANNOTATION`]).
    pub fn holds_slot(&self) -> bool {
        match &self.marks {
            Some(marks) => marks.holds_slot,
            None => Marks::of(&self.object).holds_slot,
        }
    }

    /// The object, as the cache shares it.
    pub(crate) fn object(&self) -> &Arc<BootcNode> {
        &self.object
    }
}

#[cfg(test)]
impl NodeInfo {
    /// The facts of a Node with these labels.
    pub(crate) fn with_labels(labels: BTreeMap<String, String>) -> Self {
        let mut node = Node::default();
        node.metadata.labels = Some(labels);
        NodeInfo {
            zone: NodeInfo::zone_of(&node),
            node: Arc::new(node),
            ..NodeInfo::default()
        }
    }

    /// The labels, to change; the zone is read again once the change is made.
    pub(crate) fn labels_mut(&mut self) -> LabelsMut<'_> {
        LabelsMut(self)
    }
}

/// A node's labels being changed ([`NodeInfo::labels_mut`]): the facts read from them
/// are read again when it is dropped.
#[cfg(test)]
pub(crate) struct LabelsMut<'i>(&'i mut NodeInfo);

#[cfg(test)]
impl std::ops::Deref for LabelsMut<'_> {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        self.0.labels()
    }
}

#[cfg(test)]
impl std::ops::DerefMut for LabelsMut<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        Arc::make_mut(&mut self.0.node).labels_mut()
    }
}

#[cfg(test)]
impl Drop for LabelsMut<'_> {
    fn drop(&mut self) {
        self.0.zone = NodeInfo::zone_of(&self.0.node);
    }
}

#[cfg(test)]
impl BootcView {
    /// A view of a BootcNode made of these parts.
    pub(crate) fn of_parts(
        owner: Option<&str>,
        generation: Option<i64>,
        resource_version: Option<String>,
        annotations: BTreeMap<String, String>,
        spec: BootcNodeSpec,
        status: Option<BootcNodeStatus>,
    ) -> Self {
        let mut object = BootcNode::new("", spec);
        object.metadata.generation = generation;
        object.metadata.resource_version = resource_version;
        object.metadata.annotations = Some(annotations);
        object.status = status;
        BootcView::new(Arc::new(object), owner.map(str::to_owned))
    }

    /// The object, to change (a copy of its own if it is shared); its annotations are
    /// read again at each ask.
    pub(crate) fn object_mut(&mut self) -> &mut BootcNode {
        self.marks = None;
        Arc::make_mut(&mut self.object)
    }
}

/// One node name, with its Node and BootcNode when they exist.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// The name shared by the Node and its BootcNode.
    pub name: Arc<str>,
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
    /// The Secret the pool's BootcNodes name: the controller's copy in the install's
    /// namespace; `None` when the pool names no Secret or one the controller may not read.
    pub copy: Option<bootc_crds::pool::SecretRef>,
    /// The pool names a Secret in a namespace the controller may not read: why, and how
    /// an admin allows it (`Degraded`, `PullSecretNotAllowed`).
    pub not_allowed: Option<String>,
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

/// Pools' selectors by name, shared between snapshots (see [`Snapshot::pool_selectors`]).
pub type PoolSelectors = Arc<Vec<(String, LabelSelector)>>;

/// Pools' summaries by name, shared between snapshots (see [`Snapshot::pools`]).
pub type PoolSummaries = Arc<BTreeMap<String, PoolSummary>>;

/// The views of a snapshot as the shell that keeps them between reconciles numbers
/// them (`to`), and those it read again since the views numbered `from`: every view not
/// at a place in `changed` is the very view (the same name, objects and readiness) at
/// the same place there. `from` is `None` when the views were read whole, or a view
/// joined or left. A plan whose last snapshot's views were numbered `from` looks at the
/// places in `changed` alone instead of comparing every view; any other plan compares
/// them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewChanges {
    /// The number of these views.
    pub to: u64,
    /// The number of the views the changes are counted from.
    pub from: Option<u64>,
    /// The places read again since, ascending.
    pub changed: Vec<usize>,
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
    /// Every pool not being deleted, by name, with its selector (for conflicts): this
    /// pool among them unless it is being deleted. One list shared by every pool's
    /// snapshot; [`Snapshot::other_pools`] leaves this pool out.
    pub pool_selectors: PoolSelectors,
    /// Every pool by name (this one among them), for `spec.rollout.after` (waiting and
    /// cycles). Shared by every pool's snapshot.
    pub pools: PoolSummaries,
    /// What the alert gate said.
    pub gate: GateView,
    /// Every Node this pool's selector matches and every BootcNode it owns (with its
    /// Node), by name.
    pub nodes: Vec<NodeView>,
    /// Which of `nodes` the reconcile shell read again since the views it handed out
    /// before, when it knows; `None` otherwise (then the plan compares every view).
    pub changes: Option<ViewChanges>,
    /// Drains known to the drainer, by node.
    pub drains: BTreeMap<String, DrainView>,
    /// When the rollout last advanced, from the previous plan; `None` at first.
    pub progress: Option<Progress>,
    /// The time of the plan.
    pub now: DateTime<Utc>,
    /// What the pool's earlier plans found for its settled members (see
    /// [`super::settled`]); the plan is the same with it or without it.
    pub settled: super::Settled,
}

impl Snapshot {
    /// The other pools' selectors, by name: every pool's not being deleted but this one's.
    pub fn other_pools(&self) -> impl Iterator<Item = &(String, LabelSelector)> {
        self.pool_selectors
            .iter()
            .filter(|(name, _)| *name != self.pool.name)
    }

    /// `pool` and `nodes` alone at `now`: nothing asked of the registry, no pull Secret,
    /// no other pool, no alert gate, no drain and no earlier progress.
    pub fn of(pool: PoolView, nodes: Vec<NodeView>, now: DateTime<Utc>) -> Snapshot {
        Snapshot {
            pool,
            lookup: Lookup::NotAsked,
            pull_secret: PullSecretView::default(),
            pool_selectors: Arc::default(),
            pools: Arc::default(),
            gate: GateView::NotConfigured,
            nodes,
            changes: None,
            drains: BTreeMap::new(),
            progress: None,
            now,
            settled: super::Settled::default(),
        }
    }
}
