//! The controller's decisions for one pool, as a pure function of a snapshot and `now`:
//! membership, node classification, reboot slots, and the pool status to report.
//!
//! The reconciler builds a [`Snapshot`] from its caches, calls [`plan`], and carries out
//! the returned actions in order, stopping a node's actions at its first failure. Every
//! step is safe to repeat: a crash between two actions leaves a state that the next plan
//! continues from. The order of actions per node is what keeps the invariants:
//!
//! - a slot is granted (annotation, with the prior cordon state, written with a
//!   `resourceVersion` precondition) before the Node is cordoned, and released only after
//!   it is uncordoned, so a cordoned-for-update node always holds a slot;
//! - the reboot is approved (`desiredImageState: Booted`) only after the drain finished;
//! - slots are never reused within one plan: a freed slot is granted on the next one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bootc_crds::conditions::{self, pool_degraded, progressing, up_to_date};
use bootc_crds::node::{BootcNodeSpec, BootcNodeStatus, DesiredImageState};
use bootc_crds::pool::{BootcNodePoolSpec, BootcNodePoolStatus};
use bootc_crds::{
    APPROVED_AT_ANNOTATION, DRAIN_FAILED_ANNOTATION, Digest, ImageRef, MANAGED_LABEL,
    REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION,
};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};

/// The image a pool rolls out, pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    Running,
    /// Every pod that had to go is gone.
    Drained,
    /// `drainTimeoutSeconds` passed with pods left.
    TimedOut {
        /// What was left and why.
        message: String,
    },
}

/// Everything one plan looks at.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The pool.
    pub pool: PoolView,
    /// The pinned target, or why there is none (a problem the admin must fix or a tag
    /// that could not be resolved; the message goes into `Degraded`).
    pub target: Result<Target, TargetProblem>,
    /// The other pools' selectors, by name (for conflicts).
    pub other_pools: Vec<(String, LabelSelector)>,
    /// Every Node this pool's selector matches and every BootcNode it owns (with its
    /// Node), by name.
    pub nodes: Vec<NodeView>,
    /// A problem with the target that does not stop the rollout of the last good one
    /// (a tag that could not be resolved again, a pull Secret that cannot be read).
    pub target_error: Option<String>,
    /// The hash of the pull Secret's content, given to every BootcNode so that agents
    /// rewrite the host's credentials when it changes.
    pub pull_secret_hash: Option<String>,
    /// Drains known to the drainer, by node.
    pub drains: BTreeMap<String, DrainView>,
    /// Outside every maintenance window: when the next one opens (`None` inside a
    /// window or without windows). No new slot is granted while this is set.
    pub window_closed_until: Option<Option<DateTime<Utc>>>,
    /// When the rollout last advanced (a node changed state), as the reconciler
    /// remembers it; `None` when unknown.
    pub last_progress: Option<DateTime<Utc>>,
    /// The time of the plan.
    pub now: DateTime<Utc>,
}

/// Why a pool has no target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetProblem {
    /// The spec is invalid: every problem, with its field path.
    InvalidSpec(Vec<String>),
    /// The tag could not be resolved (nothing is rolled out; the last target is kept).
    Resolution(String),
}

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
    /// Record a Kubernetes Event on the pool.
    Event(PlannedEvent),
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
            | Action::Delete { node } => Some(node),
            Action::Event(_) => None,
        }
    }
}

/// A Kubernetes Event to record on the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
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
    /// A drain timed out.
    pub const DRAIN_FAILED: &str = "DrainFailed";
    /// A node is selected by more than one pool.
    pub const NODE_CONFLICT: &str = "NodeConflict";
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

/// The result of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// The status to report (written only when it differs from the current one).
    pub status: BootcNodePoolStatus,
    /// Each member's state.
    pub states: BTreeMap<String, NodeState>,
    /// When to plan again even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// True when `status.booted` (or `staged`) runs `digest`, by the matching rule of
/// ARCHITECTURE §2.4: the per-architecture digest, or the digest in the tracked reference.
pub fn runs(image: Option<&bootc_crds::node::ImageStatus>, digest: &Digest) -> bool {
    image.is_some_and(|i| {
        i.image_digest == digest.to_string()
            || ImageRef::parse(&i.image)
                .ok()
                .and_then(|r| r.digest().cloned())
                .is_some_and(|d| &d == digest)
    })
}

use bootc_crds::conditions::from_time;

fn parse_stamp(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The agent's view of one node.
struct Agent<'a> {
    status: Option<&'a BootcNodeStatus>,
    /// The agent has answered the current spec.
    current: bool,
}

impl<'a> Agent<'a> {
    fn of(bootc: &'a BootcView) -> Self {
        let status = bootc.status.as_ref();
        let current = status
            .and_then(|s| s.observed_generation)
            .zip(bootc.generation)
            .is_some_and(|(seen, generation)| seen >= generation);
        Agent { status, current }
    }

    fn condition(&self, type_: &str) -> Option<&'a Condition> {
        self.status?.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `Degraded=True` for the current spec: its message.
    fn degraded(&self) -> Option<String> {
        if !self.current {
            return None;
        }
        self.condition(conditions::DEGRADED)
            .filter(|c| c.status == "True")
            .map(|c| format!("{}: {}", c.reason, c.message))
    }

    fn rebooting(&self) -> bool {
        self.condition(conditions::IDLE)
            .is_some_and(|c| c.reason == conditions::idle::REBOOTING)
    }

    fn booted(&self, digest: &Digest) -> bool {
        runs(
            self.status
                .and_then(|s| s.booted.as_ref())
                .map(|b| &b.image),
            digest,
        )
    }

    fn staged(&self, digest: &Digest) -> bool {
        runs(
            self.status
                .and_then(|s| s.staged.as_ref())
                .map(|s| &s.image),
            digest,
        )
    }

    /// The target is ready to boot: staged, or (the rollback-slot fast path) the
    /// rollback deployment, which the agent reports as `Staged` without pulling.
    fn ready_to_boot(&self, digest: &Digest) -> bool {
        let in_rollback = runs(self.status.and_then(|s| s.rollback.as_ref()), digest)
            && self
                .condition(conditions::IDLE)
                .is_some_and(|c| c.reason == conditions::idle::STAGED);
        self.current && (self.staged(digest) || in_rollback)
    }

    /// The record the agent wrote before its last reboot.
    fn last_reboot(&self) -> Option<&'a bootc_crds::node::LastReboot> {
        self.status?.last_reboot.as_ref()
    }

    /// The boot ID the agent recorded before its last reboot.
    fn last_reboot_boot_id(&self) -> Option<&'a str> {
        self.status?
            .last_reboot
            .as_ref()
            .map(|r| r.boot_id.as_str())
    }

    /// The target is already on the host (booted, staged, or in the rollback slot):
    /// asking for it starts no pull.
    fn needs_no_pull(&self, digest: &Digest) -> bool {
        self.booted(digest)
            || self.staged(digest)
            || runs(self.status.and_then(|s| s.rollback.as_ref()), digest)
    }

    fn booted_since(&self) -> Option<DateTime<Utc>> {
        self.status?
            .booted
            .as_ref()?
            .since
            .as_ref()
            .and_then(from_time)
    }
}

/// How soon a plan looks again for the kubelet's first report after a reboot.
const KUBELET_RECHECK: Duration = Duration::from_secs(2);

/// Whether the kubelet has reported since the node's reboot for `digest`, so that its
/// `Ready` is about the new boot and not left over from before it: the Node's boot ID is
/// not the one the agent recorded before rebooting (a full reboot), or the `Ready`
/// heartbeat is no older than the reboot (a soft reboot keeps the boot ID; both times
/// come from the node's own clock). Without the agent's record of a reboot for this
/// digest there is nothing to wait for, and a Node that reports neither a boot ID nor a
/// heartbeat gives nothing to judge by.
fn kubelet_reported_since_reboot(
    info: &NodeInfo,
    last: Option<&bootc_crds::node::LastReboot>,
    digest: &Digest,
) -> bool {
    let Some(last) = last.filter(|r| r.digest == digest.to_string()) else {
        return true;
    };
    let boot_id = info.boot_id.as_deref().filter(|id| !id.is_empty());
    if boot_id.is_none() && info.heartbeat.is_none() {
        return true;
    }
    let normal = |id: &str| id.replace('-', "").to_ascii_lowercase();
    let new_boot = boot_id.is_some_and(|id| normal(id) != normal(&last.boot_id));
    let heartbeat_since = info
        .heartbeat
        .zip(from_time(&last.time))
        .is_some_and(|(heartbeat, rebooted)| heartbeat >= rebooted);
    new_boot || heartbeat_since
}

/// Per-plan bookkeeping.
struct Planner<'a> {
    snap: &'a Snapshot,
    actions: Vec<Action>,
    states: BTreeMap<String, NodeState>,
    /// Slot holders that are unhealthy, with why.
    unhealthy: Vec<String>,
    /// Nodes whose agent or drain reports a problem, with the message.
    degraded: Vec<String>,
    conflicts: Vec<String>,
    holders: usize,
    unavailable: usize,
    candidates: Vec<&'a NodeView>,
    requeue: Option<Duration>,
    approved: usize,
    /// Nodes pulling the target now (for `maxStaging`), and the limit.
    staging: usize,
    staging_limit: Option<usize>,
}

impl Planner<'_> {
    fn requeue_in(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }

    fn event(&mut self, warning: bool, reason: &'static str, message: String) {
        self.actions.push(Action::Event(PlannedEvent {
            warning,
            reason,
            message,
        }));
    }
}

fn wanted_spec(
    pool: &BootcNodePoolSpec,
    hash: Option<&str>,
    target: &Target,
    current: Option<&BootcNodeSpec>,
) -> BootcNodeSpec {
    let mut spec = current.cloned().unwrap_or(BootcNodeSpec {
        desired_image: target.image.clone(),
        desired_image_state: DesiredImageState::Staged,
        reboot_policy: pool.disruption.reboot_policy,
        pull_secret_ref: None,
        pull_secret_hash: None,
    });
    if spec.desired_image != target.image {
        spec.desired_image = target.image.clone();
        spec.desired_image_state = DesiredImageState::Staged;
    }
    spec.reboot_policy = pool.disruption.reboot_policy;
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
fn release() -> BTreeMap<String, Option<String>> {
    [
        REBOOT_SLOT_ANNOTATION,
        WAS_CORDONED_ANNOTATION,
        APPROVED_AT_ANNOTATION,
    ]
    .into_iter()
    .map(|k| (k.to_owned(), None))
    .collect()
}

/// Plans one pool.
pub fn plan(snap: &Snapshot) -> Plan {
    let pool = &snap.pool;
    let mut p = Planner {
        snap,
        actions: Vec::new(),
        states: BTreeMap::new(),
        unhealthy: Vec::new(),
        degraded: Vec::new(),
        conflicts: Vec::new(),
        holders: 0,
        unavailable: 0,
        candidates: Vec::new(),
        requeue: None,
        approved: 0,
        staging: 0,
        staging_limit: None,
    };
    let invalid = match &snap.target {
        Err(TargetProblem::InvalidSpec(problems)) => Some(problems.clone()),
        _ => None,
    };
    let target = snap.target.as_ref().ok();
    let selector = &pool.spec.node_selector;

    let mut members: Vec<&NodeView> = Vec::new();
    for view in &snap.nodes {
        let owned = view
            .bootc
            .as_ref()
            .is_some_and(|b| b.owner.as_deref() == Some(pool.name.as_str()));
        let matches = invalid.is_none()
            && view
                .node
                .as_ref()
                .is_some_and(|n| bootc_crds::selector::matches(selector, &n.labels));
        let others: Vec<&str> = snap
            .other_pools
            .iter()
            .filter(|(_, s)| {
                view.node
                    .as_ref()
                    .is_some_and(|n| bootc_crds::selector::matches(s, &n.labels))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        if invalid.is_some() {
            // Nothing is rolled out under an invalid spec; owned nodes are kept as they are.
            if owned {
                members.push(view);
            }
            continue;
        }
        if owned && !matches {
            leave(&mut p, view, &others);
            continue;
        }
        if !matches {
            continue;
        }
        let foreign_owner = view
            .bootc
            .as_ref()
            .and_then(|b| b.owner.clone())
            .filter(|o| o != &pool.name);
        if foreign_owner.is_some() || !others.is_empty() {
            let mut pools: BTreeSet<&str> = others.iter().copied().collect();
            if let Some(o) = foreign_owner.as_deref() {
                pools.insert(o);
            }
            pools.insert(pool.name.as_str());
            p.conflicts.push(format!(
                "node {} is selected by pools {}",
                view.name,
                pools.into_iter().collect::<Vec<_>>().join(" and ")
            ));
            if !owned {
                continue;
            }
        }
        members.push(view);
    }
    let conflicted: BTreeSet<String> = p
        .conflicts
        .iter()
        .filter_map(|c| c.strip_prefix("node ").and_then(|r| r.split(' ').next()))
        .map(str::to_owned)
        .collect();

    if let (Some(target), None) = (target, &invalid) {
        let size = u32::try_from(members.len()).unwrap_or(u32::MAX);
        p.staging_limit = pool
            .spec
            .rollout
            .max_staging
            .as_ref()
            .and_then(|m| bootc_crds::budget::resolve_budget(Some(m), size, u32::MAX).ok())
            .map(|n| n as usize);
        p.staging = members
            .iter()
            .filter(|v| {
                v.bootc.as_ref().is_some_and(|b| {
                    let agent = Agent::of(b);
                    b.spec.desired_image == target.image && !agent.needs_no_pull(&target.digest)
                })
            })
            .count();
        for view in &members {
            member(&mut p, view, target, conflicted.contains(&view.name));
        }
        grant_slots(&mut p, members.len(), target);
    } else {
        for view in &members {
            p.states.insert(view.name.clone(), NodeState::Pending);
        }
    }
    let status = status(&mut p, &members, invalid.as_deref());
    Plan {
        actions: p.actions,
        status,
        states: p.states,
        requeue_after: p.requeue,
    }
}

/// A node this pool owns but no longer selects (or whose Node is gone).
fn leave(p: &mut Planner<'_>, view: &NodeView, other_pools: &[&str]) {
    let node = view.name.clone();
    if p.snap.drains.contains_key(&node) {
        p.actions.push(Action::CancelDrain { node: node.clone() });
    }
    if let (Some(info), Some(bootc)) = (&view.node, &view.bootc) {
        let held = bootc.annotations.contains_key(REBOOT_SLOT_ANNOTATION);
        let was = bootc.annotations.contains_key(WAS_CORDONED_ANNOTATION);
        if held && !was && info.unschedulable {
            p.actions.push(Action::Uncordon { node: node.clone() });
        }
    }
    if view.bootc.as_ref().is_some_and(|b| !b.deleting) {
        p.actions.push(Action::Delete { node: node.clone() });
    }
    if let Some(info) = &view.node
        && info.labels.contains_key(MANAGED_LABEL)
        && other_pools.is_empty()
    {
        p.actions.push(Action::Unlabel { node });
    }
}

/// A member node with a known target.
fn member<'a>(p: &mut Planner<'a>, view: &'a NodeView, target: &Target, conflicted: bool) {
    let name = view.name.clone();
    let pool = &p.snap.pool.spec;
    let Some(info) = &view.node else { return };
    if !info.labels.contains_key(MANAGED_LABEL) {
        p.actions.push(Action::Label { node: name.clone() });
    }
    if !info.ready {
        // NotReady nodes are unavailable whether or not they hold a slot.
        p.unavailable += 1;
    }
    let Some(bootc) = &view.bootc else {
        // A new node pulls the target: it needs a staging place.
        if p.staging_limit.is_none_or(|limit| p.staging < limit) {
            p.staging += 1;
            p.actions.push(Action::Create {
                node: name.clone(),
                spec: wanted_spec(pool, p.snap.pull_secret_hash.as_deref(), target, None),
            });
        }
        p.states.insert(name, NodeState::Pending);
        return;
    };
    if bootc.deleting {
        p.states.insert(name, NodeState::Pending);
        return;
    }
    let agent = Agent::of(bootc);
    let spec = wanted_spec(
        pool,
        p.snap.pull_secret_hash.as_deref(),
        target,
        Some(&bootc.spec),
    );
    let retargeted = bootc.spec.desired_image != target.image;
    let holder = bootc.annotations.contains_key(REBOOT_SLOT_ANNOTATION);
    let was_cordoned = bootc.annotations.contains_key(WAS_CORDONED_ANNOTATION);
    let mut annotations: BTreeMap<String, Option<String>> = BTreeMap::new();
    let drain_failed = bootc
        .annotations
        .get(DRAIN_FAILED_ANNOTATION)
        .is_some_and(|d| *d == target.digest.to_string());
    if retargeted && bootc.annotations.contains_key(DRAIN_FAILED_ANNOTATION) {
        annotations.insert(DRAIN_FAILED_ANNOTATION.to_owned(), None);
    }
    let on_target = agent.booted(&target.digest);
    let degraded = agent.degraded();

    if holder {
        p.holders += 1;
        if !info.ready {
            // Counted once: a holder is unavailable anyway.
            p.unavailable -= 1;
        }
        holder_plan(
            p,
            view,
            info,
            bootc,
            &agent,
            target,
            spec,
            annotations,
            retargeted,
            was_cordoned,
        );
        return;
    }

    let mut spec = spec;
    if spec.desired_image_state == DesiredImageState::Booted {
        // Approval without a slot (a release that was cut short): take it back.
        spec.desired_image_state = DesiredImageState::Staged;
    }
    // maxStaging: a node that would start pulling waits, its desiredImage unchanged,
    // until a staging place frees.
    if retargeted && !agent.needs_no_pull(&target.digest) {
        if p.staging_limit.is_some_and(|limit| p.staging >= limit) {
            spec.desired_image = bootc.spec.desired_image.clone();
            spec.desired_image_state = bootc.spec.desired_image_state;
            if spec.desired_image_state == DesiredImageState::Booted {
                spec.desired_image_state = DesiredImageState::Staged;
            }
            annotations.remove(DRAIN_FAILED_ANNOTATION);
        } else {
            p.staging += 1;
        }
    }

    if spec != bootc.spec || !annotations.is_empty() {
        p.actions.push(Action::Update {
            node: name.clone(),
            resource_version: bootc.resource_version.clone(),
            spec,
            annotations,
        });
    }
    let state = if drain_failed {
        p.degraded.push(format!(
            "node {name}: DrainTimeout: its drain for {} timed out; remove its {DRAIN_FAILED_ANNOTATION} annotation to try again",
            target.digest
        ));
        NodeState::Degraded
    } else if let Some(message) = degraded.filter(|_| !retargeted) {
        p.degraded.push(format!("node {name}: {message}"));
        NodeState::Degraded
    } else if retargeted {
        NodeState::Pending
    } else if on_target {
        NodeState::UpToDate
    } else if agent.ready_to_boot(&target.digest) {
        if info.ready && !conflicted {
            p.candidates.push(view);
        }
        NodeState::Staged
    } else {
        NodeState::Staging
    };
    p.states.insert(name, state);
}

#[allow(clippy::too_many_arguments)]
fn holder_plan(
    p: &mut Planner<'_>,
    view: &NodeView,
    info: &NodeInfo,
    bootc: &BootcView,
    agent: &Agent<'_>,
    target: &Target,
    mut spec: BootcNodeSpec,
    mut annotations: BTreeMap<String, Option<String>>,
    retargeted: bool,
    was_cordoned: bool,
) {
    let name = view.name.clone();
    let pool = &p.snap.pool.spec;
    let now = p.snap.now;
    let drain = p.snap.drains.get(&name);
    let uncordon = |p: &mut Planner<'_>| {
        if info.unschedulable && !was_cordoned {
            p.actions.push(Action::Uncordon { node: name.clone() });
        }
    };

    if retargeted {
        // The target moved (a new image or a rollback): the approval for the old digest is
        // revoked by the spec change; the slot is freed once the node is not mid-reboot.
        if drain.is_some() {
            p.actions.push(Action::CancelDrain { node: name.clone() });
        }
        let mid_reboot = bootc.spec.desired_image_state == DesiredImageState::Booted
            && (agent.rebooting() || !info.ready);
        if mid_reboot {
            p.actions.push(Action::Update {
                node: name.clone(),
                resource_version: bootc.resource_version.clone(),
                spec,
                annotations,
            });
            p.states.insert(name, NodeState::Rebooting);
            return;
        }
        uncordon(p);
        annotations.extend(release());
        p.actions.push(Action::Update {
            node: name.clone(),
            resource_version: bootc.resource_version.clone(),
            spec,
            annotations,
        });
        p.states.insert(name, NodeState::Pending);
        return;
    }

    if bootc.spec.desired_image_state == DesiredImageState::Staged {
        // Granted, not yet approved: cordon, drain, approve.
        if !info.unschedulable {
            p.actions.push(Action::Cordon { node: name.clone() });
            p.actions.push(Action::StartDrain { node: name.clone() });
            p.states.insert(name, NodeState::Rebooting);
            return;
        }
        match drain {
            None => p.actions.push(Action::StartDrain { node: name.clone() }),
            Some(DrainView::Running) => {}
            Some(DrainView::Drained) => {
                spec.desired_image_state = DesiredImageState::Booted;
                annotations.insert(APPROVED_AT_ANNOTATION.to_owned(), Some(stamp(now)));
                p.actions.push(Action::Update {
                    node: name.clone(),
                    resource_version: bootc.resource_version.clone(),
                    spec,
                    annotations,
                });
                p.actions.push(Action::ForgetDrain { node: name.clone() });
                p.approved += 1;
                p.event(
                    false,
                    events::REBOOT_APPROVED,
                    format!(
                        "node {name} drained; approved to reboot into {}",
                        target.image
                    ),
                );
            }
            Some(DrainView::TimedOut { message }) => {
                let message = message.clone();
                uncordon(p);
                annotations.extend(release());
                annotations.insert(
                    DRAIN_FAILED_ANNOTATION.to_owned(),
                    Some(target.digest.to_string()),
                );
                p.actions.push(Action::Update {
                    node: name.clone(),
                    resource_version: bootc.resource_version.clone(),
                    spec,
                    annotations,
                });
                p.actions.push(Action::ForgetDrain { node: name.clone() });
                p.event(
                    true,
                    events::DRAIN_FAILED,
                    format!(
                        "node {name}: drain timed out ({message}); uncordoned and its slot freed"
                    ),
                );
                p.degraded
                    .push(format!("node {name}: DrainTimeout: {message}"));
                p.states.insert(name, NodeState::Degraded);
                return;
            }
        }
        p.states.insert(name, NodeState::Rebooting);
        return;
    }

    // Approved: wait for the node to come back on the target, healthy and Ready.
    let degraded = agent.degraded();
    let approved_at = bootc
        .annotations
        .get(APPROVED_AT_ANNOTATION)
        .and_then(|s| parse_stamp(s));
    let reboot_timeout =
        Duration::from_secs(u64::try_from(pool.rollout.reboot_timeout_seconds).unwrap_or(0));
    let overdue =
        approved_at.is_some_and(|t| (now - t).to_std().unwrap_or(Duration::ZERO) > reboot_timeout);
    let kubelet_back = kubelet_reported_since_reboot(info, agent.last_reboot(), &target.digest);
    if let Some(message) = &degraded {
        p.unhealthy.push(format!("node {name}: {message}"));
        p.degraded.push(format!("node {name}: {message}"));
    } else if overdue && !(info.ready && kubelet_back && agent.booted(&target.digest)) {
        let problem = format!(
            "node {name}: RebootTimeout: not back Ready on the target within {}s of its approval",
            pool.rollout.reboot_timeout_seconds
        );
        p.unhealthy.push(problem.clone());
        p.degraded.push(problem);
    } else if !info.ready {
        p.unhealthy.push(format!("node {name}: NotReady"));
    }
    if let Some(t) = approved_at
        && !overdue
    {
        let left = reboot_timeout.saturating_sub((now - t).to_std().unwrap_or(Duration::ZERO));
        p.requeue_in(left + Duration::from_secs(1));
    }
    let back = agent.current && agent.booted(&target.digest) && degraded.is_none() && info.ready;
    if back && !kubelet_back {
        // The agent is back before the kubelet has said anything since the reboot: the
        // Ready seen is the one from before it. A full reboot's new boot ID wakes the
        // plan; a soft reboot's heartbeat does not, so look again shortly.
        p.requeue_in(KUBELET_RECHECK);
    }
    if back && kubelet_back {
        let delay =
            Duration::from_secs(u64::try_from(pool.rollout.post_reboot_delay_seconds).unwrap_or(0));
        // Back since the later of booting the target and turning Ready; both are kept at
        // second precision by the API, so a second is added rather than soak too little.
        let since = agent
            .booted_since()
            .into_iter()
            .chain(info.ready_since)
            .max()
            .unwrap_or(now)
            + chrono::Duration::seconds(1);
        let soaked = (now - since).to_std().unwrap_or(Duration::ZERO);
        if soaked >= delay {
            uncordon(p);
            spec.desired_image_state = DesiredImageState::Staged;
            annotations.extend(release());
            p.actions.push(Action::Update {
                node: name.clone(),
                resource_version: bootc.resource_version.clone(),
                spec,
                annotations,
            });
            let how = match (&info.boot_id, agent.last_reboot_boot_id()) {
                (Some(now), Some(before)) if now.replace('-', "") == before.replace('-', "") => {
                    " after a soft reboot"
                }
                (Some(_), Some(_)) => " after a reboot",
                _ => "",
            };
            p.event(
                false,
                events::NODE_UPDATED,
                format!("node {name} runs {}{how}; slot freed", target.image),
            );
            p.states.insert(name, NodeState::UpToDate);
            return;
        }
        p.requeue_in(delay - soaked);
    }
    p.states.insert(
        name,
        if degraded.is_some() {
            NodeState::Degraded
        } else {
            NodeState::Rebooting
        },
    );
}

/// The label that says which zone a node is in.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The order in which candidates get slots: by name within each zone, zones taken in
/// turn (the first node of every zone, then the second of every zone, …), so that
/// consecutive approvals spread across zones; nodes without a zone form one more zone.
pub fn approval_order<'a>(candidates: &[&'a NodeView]) -> Vec<&'a NodeView> {
    let zone = |v: &NodeView| {
        v.node
            .as_ref()
            .and_then(|n| n.labels.get(ZONE_LABEL).cloned())
            .unwrap_or_default()
    };
    let mut by_zone: BTreeMap<String, Vec<&'a NodeView>> = BTreeMap::new();
    for v in candidates {
        by_zone.entry(zone(v)).or_default().push(v);
    }
    let mut ranked: Vec<(usize, String, &'a NodeView)> = Vec::new();
    for (zone, mut nodes) in by_zone {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for (rank, v) in nodes.into_iter().enumerate() {
            ranked.push((rank, zone.clone(), v));
        }
    }
    ranked.sort_by(|a, b| (a.0, &a.1, &a.2.name).cmp(&(b.0, &b.1, &b.2.name)));
    ranked.into_iter().map(|(_, _, v)| v).collect()
}

/// Grants free slots to staged, healthy nodes, in [`approval_order`].
fn grant_slots(p: &mut Planner<'_>, pool_size: usize, target: &Target) {
    let rollout = &p.snap.pool.spec.rollout;
    let size = u32::try_from(pool_size).unwrap_or(u32::MAX);
    let budget = bootc_crds::budget::resolve_budget(Some(&rollout.max_unavailable), size, 1)
        .unwrap_or(1) as usize;
    let halt_at = usize::try_from(rollout.halt_after_unhealthy).unwrap_or(0);
    if halt_at > 0 && p.unhealthy.len() >= halt_at {
        return;
    }
    if rollout.paused {
        return;
    }
    if let Some(next) = p.snap.window_closed_until {
        if let Some(next) = next {
            let wait = (next - p.snap.now).to_std().unwrap_or(Duration::ZERO);
            p.requeue_in(wait + Duration::from_millis(10));
        }
        return;
    }
    let in_use = p.holders + p.unavailable;
    let free = budget.saturating_sub(in_use);
    let candidates = approval_order(&p.candidates);
    let now = p.snap.now;
    for view in candidates.into_iter().take(free) {
        let (Some(info), Some(bootc)) = (&view.node, &view.bootc) else {
            continue;
        };
        // One write per node: a spec update planned for it is folded into the grant.
        let mut annotations = BTreeMap::new();
        if let Some(i) = p
            .actions
            .iter()
            .position(|a| matches!(a, Action::Update { node, .. } if *node == view.name))
            && let Action::Update {
                annotations: planned,
                ..
            } = p.actions.remove(i)
        {
            annotations = planned;
        }
        annotations.insert(REBOOT_SLOT_ANNOTATION.to_owned(), Some(stamp(now)));
        if info.unschedulable {
            annotations.insert(WAS_CORDONED_ANNOTATION.to_owned(), Some(String::new()));
        }
        p.actions.push(Action::Update {
            node: view.name.clone(),
            resource_version: bootc.resource_version.clone(),
            spec: wanted_spec(
                &p.snap.pool.spec,
                p.snap.pull_secret_hash.as_deref(),
                target,
                Some(&bootc.spec),
            ),
            annotations,
        });
        if !info.unschedulable {
            p.actions.push(Action::Cordon {
                node: view.name.clone(),
            });
        }
        p.actions.push(Action::StartDrain {
            node: view.name.clone(),
        });
        p.states.insert(view.name.clone(), NodeState::Rebooting);
    }
}

fn condition(
    previous: Option<&BootcNodePoolStatus>,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Option<Condition> {
    let previous = previous.map_or(&[][..], |p| p.conditions.as_slice());
    conditions::next(previous, type_, status, reason, message, generation, now)
}

fn reason_of<'a>(status: Option<&'a BootcNodePoolStatus>, type_: &str) -> Option<&'a str> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.as_str())
}

/// No node advancing for this long while work remains is a stall.
pub const STALL_AFTER: Duration = Duration::from_secs(600);

fn up_message_for_stall(degraded: &[String], unhealthy: &[String]) -> String {
    if !unhealthy.is_empty() {
        list(unhealthy)
    } else if !degraded.is_empty() {
        list(degraded)
    } else {
        "check the nodes' agents and the pool's conditions".to_owned()
    }
}

/// At most this many problems are listed in a condition message.
const LISTED: usize = 5;

fn list(items: &[String]) -> String {
    let mut out = items
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > LISTED {
        out.push_str(&format!("; and {} more", items.len() - LISTED));
    }
    out
}

fn status(
    p: &mut Planner<'_>,
    members: &[&NodeView],
    invalid: Option<&[String]>,
) -> BootcNodePoolStatus {
    let snap = p.snap;
    let pool = &snap.pool;
    let previous = pool.status.as_ref();
    let now = snap.now;
    let generation = pool.generation;
    let count = |s: NodeState| p.states.values().filter(|v| **v == s).count();
    let nodes = members.len();
    let updated = count(NodeState::UpToDate);
    let updating = count(NodeState::Rebooting);
    let staged = count(NodeState::Staged);
    let degraded_nodes = count(NodeState::Degraded);
    let as_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);

    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;
    if let Ok(target) = &snap.target {
        status.target_image = Some(target.image.clone());
        status.target_digest = Some(target.digest.to_string());
        status.target_short_digest = Some(target.digest.short().to_owned());
    }
    status.node_count = as_i32(nodes);
    status.updated_count = as_i32(updated);
    status.updating_count = as_i32(updating);
    status.staged_count = as_i32(staged);
    status.degraded_count = as_i32(degraded_nodes);

    let halt_at = usize::try_from(pool.spec.rollout.halt_after_unhealthy).unwrap_or(0);
    let halted = halt_at > 0 && p.unhealthy.len() >= halt_at;
    let (degraded_reason, degraded_message) = if let Some(problems) = invalid {
        (
            pool_degraded::INVALID_SPEC,
            format!("invalid spec, nothing is rolled out: {}", list(problems)),
        )
    } else if !p.conflicts.is_empty() {
        (
            pool_degraded::NODE_CONFLICT,
            format!(
                "{}; those nodes are not updated until one pool lets go",
                list(&p.conflicts)
            ),
        )
    } else if halted {
        (
            pool_degraded::ROLLOUT_HALTED,
            format!(
                "{} slot holders are unhealthy (haltAfterUnhealthy {}): {}; no new reboots are approved",
                p.unhealthy.len(),
                halt_at,
                list(&p.unhealthy)
            ),
        )
    } else if let Err(TargetProblem::Resolution(message)) = &snap.target {
        (pool_degraded::TAG_RESOLUTION_ERROR, message.clone())
    } else if let Some(message) = &snap.target_error {
        (pool_degraded::TAG_RESOLUTION_ERROR, message.clone())
    } else if !p.degraded.is_empty() {
        (pool_degraded::NODE_DEGRADED, list(&p.degraded))
    } else {
        (pool_degraded::HEALTHY, String::new())
    };
    let healthy = degraded_reason == pool_degraded::HEALTHY;

    let all_updated = snap.target.is_ok() && invalid.is_none() && updated == nodes;
    let breakdown = {
        let mut parts = Vec::new();
        for (n, what) in [
            (staged, "staged"),
            (updating, "rebooting"),
            (count(NodeState::Staging), "staging"),
            (count(NodeState::Pending), "pending"),
            (degraded_nodes, "degraded"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        format!("{updated}/{nodes} updated; {}", parts.join(", "))
    };
    let (up_reason, up_message) = if all_updated {
        (
            up_to_date::ALL_UPDATED,
            format!("{updated}/{nodes} nodes run the target"),
        )
    } else if pool.spec.rollout.paused {
        (up_to_date::PAUSED, format!("paused: {breakdown}"))
    } else if let Some(next) = snap.window_closed_until {
        let when = next.map_or_else(
            || "no maintenance window ever opens".to_owned(),
            |t| format!("the next maintenance window opens at {}", stamp(t)),
        );
        (
            up_to_date::OUTSIDE_MAINTENANCE_WINDOW,
            format!("outside the maintenance windows, {when}: {breakdown}"),
        )
    } else {
        (up_to_date::ROLLOUT_IN_PROGRESS, breakdown)
    };

    // Events on transitions.
    let old_digest = previous.and_then(|s| s.target_digest.clone());
    if let Ok(target) = &snap.target
        && old_digest.as_deref() != Some(target.digest.to_string().as_str())
    {
        p.event(
            false,
            events::TARGET_RESOLVED,
            format!("target is now {}", target.image),
        );
        if !all_updated {
            p.event(
                false,
                events::ROLLOUT_STARTED,
                format!("rolling out {} to {nodes} nodes", target.image),
            );
        }
    }
    let old_up = reason_of(previous, conditions::UP_TO_DATE);
    if all_updated && old_up != Some(up_to_date::ALL_UPDATED) && old_up.is_some() {
        p.event(
            false,
            events::ROLLOUT_COMPLETE,
            format!(
                "all {nodes} nodes run {}",
                status.target_image.clone().unwrap_or_default()
            ),
        );
    }
    let old_degraded = reason_of(previous, conditions::DEGRADED);
    if degraded_reason != old_degraded.unwrap_or(pool_degraded::HEALTHY) {
        if degraded_reason == pool_degraded::ROLLOUT_HALTED {
            p.event(true, events::ROLLOUT_HALTED, degraded_message.clone());
        }
        if degraded_reason == pool_degraded::NODE_CONFLICT {
            p.event(true, events::NODE_CONFLICT, degraded_message.clone());
        }
    }

    // Progressing: whether a node advanced in the last STALL_AFTER while work remains.
    let stalled_for = snap
        .last_progress
        .map(|t| (now - t).to_std().unwrap_or(Duration::ZERO));
    let (progressing, progress_reason, progress_message) = if all_updated {
        (
            true,
            progressing::COMPLETE,
            "every node runs the target".to_owned(),
        )
    } else if stalled_for.is_some_and(|d| d >= STALL_AFTER) && !pool.spec.rollout.paused {
        (
            false,
            progressing::STALLED,
            format!(
                "no node has advanced for {} minutes: {}",
                stalled_for.unwrap_or_default().as_secs() / 60,
                up_message_for_stall(&p.degraded, &p.unhealthy)
            ),
        )
    } else {
        if let Some(d) = stalled_for {
            p.requeue_in(STALL_AFTER.saturating_sub(d) + Duration::from_millis(10));
        }
        (
            true,
            progressing::ADVANCING,
            "nodes are advancing".to_owned(),
        )
    };
    status.conditions = [
        condition(
            previous,
            conditions::UP_TO_DATE,
            all_updated,
            up_reason,
            up_message,
            generation,
            now,
        ),
        condition(
            previous,
            conditions::PROGRESSING,
            progressing,
            progress_reason,
            progress_message,
            generation,
            now,
        ),
        condition(
            previous,
            conditions::DEGRADED,
            !healthy,
            degraded_reason,
            degraded_message,
            generation,
            now,
        ),
    ]
    .into_iter()
    .flatten()
    .chain(
        previous
            .into_iter()
            .flat_map(|s| s.conditions.iter())
            .filter(|c| {
                c.type_ != conditions::UP_TO_DATE
                    && c.type_ != conditions::DEGRADED
                    && c.type_ != conditions::PROGRESSING
            })
            .cloned(),
    )
    .collect();
    status
}

#[cfg(test)]
mod tests;
