//! `BootcNodePool`: which nodes run which image, and how fast they may move to it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::{
    DIGEST_MAX_LEN, NAME_MAX_LEN, NAMESPACE_MAX_LEN, SECRET_KEY_MAX_LEN, SHORT_DIGEST_LEN,
    VERSION_MAX_LEN,
};
use crate::image_ref::{IMAGE_REF_PATTERN, REF_MAX_LEN};

mod degraded;
mod gates;
mod history;
mod windows;
pub use degraded::*;
pub use gates::*;
pub use history::*;
pub use windows::*;

/// Most maintenance windows in one pool.
pub const MAX_MAINTENANCE_WINDOWS: usize = 32;
/// Most `deployHistory` entries a pool's status keeps (the maximum of `history.limit`).
pub const MAX_HISTORY: i32 = 20;

/// Desired state of a pool of nodes that run one bootc image. A pool written for
/// bootc-operator's v1alpha1 API is read as docs/compatibility.md says: where the two
/// differ, and what to write instead.
// Each printer column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "node.bootc.dev",
    version = "v1alpha1",
    kind = "BootcNodePool",
    plural = "bootcnodepools",
    shortname = "bnp",
    category = "bootc",
    status = "BootcNodePoolStatus",
    derive = "PartialEq",
    doc = "A pool of nodes that run one bootc image: the nodes its nodeSelector matches are moved to the image in image.ref, at most rollout.maxUnavailable of them rebooting at a time.",
    printcolumn(
        name = "Target",
        type_ = "string",
        json_path = ".status.targetShortDigest",
        description = "Short digest of the image the pool is rolling out"
    ),
    printcolumn(
        name = "Nodes",
        type_ = "integer",
        json_path = ".status.nodeCount",
        description = "Nodes in the pool"
    ),
    printcolumn(
        name = "Updated",
        type_ = "integer",
        json_path = ".status.updatedCount",
        description = "Nodes running the target"
    ),
    printcolumn(
        name = "Updating",
        type_ = "integer",
        json_path = ".status.updatingCount",
        description = "Nodes staging, staged or rebooting"
    ),
    printcolumn(
        name = "Staging",
        type_ = "integer",
        json_path = ".status.stagingCount",
        description = "Nodes pulling the target"
    ),
    printcolumn(
        name = "Pulled",
        type_ = "integer",
        json_path = ".status.stagingPercent",
        description = "Percent of the target's bytes the staging nodes have fetched",
        priority = "1"
    ),
    printcolumn(
        name = "Degraded",
        type_ = "integer",
        json_path = ".status.degradedCount",
        description = "Nodes reporting Degraded"
    ),
    printcolumn(
        name = "UpToDate",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpToDate\")].status",
        description = "Whether every node runs the target"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodePoolSpec {
    /// Selects the Nodes of this pool. A node belongs to at most one pool: a node selected
    /// by two pools stays with the pool that owns its BootcNode and the other pool reports
    /// Degraded with reason NodeConflict. An empty selector selects every node.
    #[schemars(transform = crate::bounds::label_selector)]
    pub node_selector: LabelSelector,

    /// The image the pool's nodes run.
    pub image: ImageSpec,

    /// How fast the pool moves to a new image.
    #[serde(default)]
    pub rollout: RolloutSpec,

    /// How a node is taken out of service for its reboot.
    #[serde(default)]
    pub disruption: DisruptionSpec,

    /// A kubernetes.io/dockerconfigjson Secret with credentials for the image's registry,
    /// used by the controller to resolve tags and by the agents to pull. Unset means
    /// anonymous access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretRef>,

    /// How much deployment history the pool's status keeps.
    #[serde(default)]
    pub history: HistorySpec,

    /// Where the pool's rollout events (RolloutStarted, RolledBack, RolloutHalted,
    /// RolloutCompleted) are sent. Unset sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<NotificationsSpec>,

    /// What must hold for the rollout to go on: no matching alert firing, and each updated
    /// node's named systemd units active after its reboot. Unset checks only that updated
    /// nodes come back Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthSpec>,
}

/// The image a pool runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Image reference: registry/repo:tag (followed: re-resolved every
    /// resolveIntervalSeconds), registry/repo@sha256:<64 hex> (pinned), or
    /// registry/repo:tag@sha256:<64 hex> (pinned; the digest wins). The registry defaults
    /// to docker.io and single-segment names to library/, as docker does.
    #[schemars(
        length(min = 1, max = REF_MAX_LEN),
        regex(pattern = IMAGE_REF_PATTERN),
        transform = crate::rules::image_ref
    )]
    pub r#ref: String,

    /// How often, in seconds, a tag is re-resolved to a digest.
    #[serde(default = "default_resolve_interval")]
    #[schemars(range(min = 30))]
    pub resolve_interval_seconds: i64,

    /// Default: each node stages the image without checking signatures (bootc's own
    /// default). Enforce: each node stages it with bootc's
    /// `--enforce-container-sigpolicy`, so the node's `/etc/containers/policy.json`
    /// decides whether the image may be staged; a node whose policy refuses it reports
    /// Degraded (SignaturePolicyRejected) and stages nothing.
    #[serde(default)]
    pub signature_policy: SignaturePolicy,
}

/// Whether the nodes' container signature policy decides what they may stage.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SignaturePolicy {
    /// No signature check: bootc stages the image as it does by default.
    #[default]
    Default,
    /// bootc stages with `--enforce-container-sigpolicy`: the host's
    /// `/etc/containers/policy.json` must accept the image, and must not accept
    /// anything by default.
    Enforce,
}

/// Rollout pacing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// Most nodes cordoned for the update or rebooting at once: an integer (at least 1) or
    /// a percentage of the pool ("25%", rounded down, but at least one node). 0 is
    /// refused: to grant no reboot slot, set paused.
    #[serde(default = "default_max_unavailable")]
    #[schemars(transform = crate::budget::schema)]
    pub max_unavailable: IntOrString,

    /// When true, no new reboot slot is granted; nodes already holding one finish (they
    /// are drained, approved and rebooted), and staging and tag resolution go on.
    #[serde(default)]
    pub paused: bool,

    /// Most nodes pulling the new image at once: an integer (at least 1) or a percentage of
    /// the pool. Unset means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::budget::schema)]
    pub max_staging: Option<IntOrString>,

    /// Seconds to wait for a node's drain before giving up: the node is marked Degraded
    /// (DrainTimeout), uncordoned and its reboot slot freed. Unset or 0 means wait forever
    /// (as for kubectl drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub drain_timeout_seconds: Option<i64>,

    /// Seconds from a node's reboot approval until it must be back, Ready and on the
    /// target; a node past it is unhealthy (RebootTimeout) and counts toward
    /// haltAfterUnhealthy.
    #[serde(default = "default_reboot_timeout")]
    #[schemars(range(min = 1))]
    pub reboot_timeout_seconds: i64,

    /// Number of unhealthy nodes holding reboot slots at which no new reboot slot is
    /// granted (the pool reports Degraded with reason RolloutHalted).
    #[serde(default = "default_halt_after_unhealthy")]
    #[schemars(range(min = 1))]
    pub halt_after_unhealthy: i32,

    /// When set, new reboot slots are granted only inside one of these windows. Staging is
    /// never held back by windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_MAINTENANCE_WINDOWS))]
    pub maintenance_windows: Vec<MaintenanceWindow>,

    /// Seconds a node that came back on the target keeps its reboot slot (soak time)
    /// before the slot goes to the next node.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub post_reboot_delay_seconds: i64,

    /// When set, each new target first goes to a few nodes (the canary), then the pool
    /// waits soakSeconds with all of them healthy and no alert gate closed before the
    /// other nodes get reboot slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanarySpec>,

    /// What happens when haltAfterUnhealthy is reached. Halt: no new reboot slot is
    /// granted until an admin acts. Rollback: the target digest is marked failed in deployHistory
    /// and every node that booted it is rolled back, through bootc's rollback deployment
    /// (no pull) and under the same maxUnavailable, to the image the pool ran before; the
    /// failed digest is not tried again until the spec changes.
    #[serde(default)]
    pub on_failure: FailurePolicy,

    /// Pools that must be up to date (every node on their target) and not halted before
    /// this pool grants reboot slots for its target; staging goes on meanwhile. A pool
    /// that waits on itself through a cycle grants none and reports OrderingCycle.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_AFTER),
        extend("x-kubernetes-list-type" = "set"),
        transform = gates::name_items
    )]
    pub after: Vec<String>,
}

/// How a node reboots into a new image.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RebootPolicy {
    /// Always a full reboot.
    #[default]
    RebootOnly,
    /// A soft reboot when the staged deployment allows it, else a full reboot.
    AllowSoftReboot,
}

/// Drain options, as `kubectl drain` has them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainSpec {
    /// Grace period in seconds given to each evicted pod; unset uses the pod's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub grace_period_seconds: Option<i64>,

    /// Evict pods that use emptyDir volumes (their data is lost).
    #[serde(default = "default_true")]
    pub delete_empty_dir_data: bool,

    /// Evict pods that no controller manages (they are not recreated).
    #[serde(default)]
    pub force: bool,

    /// Only pods matching this selector are evicted; unset evicts all pods except
    /// DaemonSet and mirror pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::bounds::label_selector)]
    pub pod_selector: Option<LabelSelector>,
}

/// A reference to a Secret in a namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = NAME_MAX_LEN))]
    pub name: String,

    /// Namespace of the Secret.
    #[schemars(length(min = 1, max = NAMESPACE_MAX_LEN))]
    pub namespace: String,
}

/// Schema pattern for a Secret's data key.
pub const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// Where a pool's rollout events are sent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationsSpec {
    /// An HTTP(S) endpoint that receives each rollout event as a JSON POST; a
    /// Slack-compatible incoming webhook shows its one-line text field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

/// A webhook that receives a pool's rollout events.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSpec {
    /// The Secret key that holds the webhook's URL (a URL often embeds a token). It is
    /// read each time an event is sent, so a rotated URL is used at once.
    pub secret_ref: SecretKeyRef,
}

/// A key of a Secret in a namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = NAME_MAX_LEN))]
    pub name: String,

    /// Namespace of the Secret.
    #[schemars(length(min = 1, max = NAMESPACE_MAX_LEN))]
    pub namespace: String,

    /// The key in the Secret's data whose value is used.
    #[serde(default = "default_secret_key")]
    #[schemars(
        length(min = 1, max = SECRET_KEY_MAX_LEN),
        regex(pattern = SECRET_KEY_PATTERN),
        transform = crate::rules::secret_key
    )]
    pub key: String,
}

/// Deployment history settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistorySpec {
    /// How many deployHistory entries (one per digest) the status keeps, newest first.
    #[serde(default = "default_history_limit")]
    #[schemars(range(min = 1, max = MAX_HISTORY))]
    pub limit: i32,
}

/// Observed state of a pool; written by the controller only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodePoolStatus {
    /// The metadata.generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The image the pool is moving to, pinned: registry/repo@sha256:<hex>.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = REF_MAX_LEN))]
    pub target_image: Option<String>,

    /// The digest of targetImage (sha256:<hex>); may be a manifest-list digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub target_digest: Option<String>,

    /// The first 12 hex characters of targetDigest, for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = SHORT_DIGEST_LEN))]
    pub target_short_digest: Option<String>,

    /// The target image's org.opencontainers.image.version label, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = VERSION_MAX_LEN))]
    pub target_version: Option<String>,

    /// When the tag was last resolved (tag refs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resolved_time: Option<Time>,

    /// When the tag will next be resolved (tag refs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_resolve_time: Option<Time>,

    /// Nodes in the pool.
    #[serde(default)]
    pub node_count: i32,

    /// Nodes booted on the target.
    #[serde(default)]
    pub updated_count: i32,

    /// Nodes staging, staged or rebooting toward the target.
    #[serde(default)]
    pub updating_count: i32,

    /// Nodes with the target staged, waiting for a reboot slot.
    #[serde(default)]
    pub staged_count: i32,

    /// Nodes pulling the target now.
    #[serde(default)]
    pub staging_count: i32,

    /// How much of the target's bytes the staging nodes have fetched, in percent of
    /// what they report in all; absent while no node reports progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub staging_percent: Option<i32>,

    /// Nodes reporting Degraded or found unhealthy by the controller.
    #[serde(default)]
    pub degraded_count: i32,

    /// degradedCount by reason: for each reason, how many degraded nodes have it (the
    /// node's own Degraded reason, or the one the controller found), most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_DEGRADED_REASONS),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["reason"])
    )]
    pub degraded_by_reason: Vec<DegradedReason>,

    /// Nodes whose agent reports Drifted: the booted system is not the image it claims
    /// (a writable /usr overlay, local changes). Counted apart: drift does not stop a
    /// rollout, the next image's boot replaces a transient overlay.
    #[serde(default)]
    pub drifted_count: i32,

    /// Nodes an admin holds with the label node.bootc.dev/hold=true (`kubectl bootc hold
    /// NODE`): while held, a node is not moved to a new target nor given a reboot slot (one
    /// that already holds a slot finishes its update). Held nodes count neither as
    /// unavailable nor as degraded; one that lacks the target keeps UpToDate False.
    #[serde(default)]
    pub held_count: i32,

    /// Nodes someone else cordoned, left alone while spec.disruption.respectCordon is true.
    #[serde(default)]
    pub cordoned_count: i32,

    /// Where the canary of the current target is (with spec.rollout.canary only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStatus>,

    /// The alert gate as last asked (with spec.health.alerts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_gate: Option<AlertGateStatus>,

    /// The gates closed now, in order of precedence: each with its reason, what it closes
    /// and what it waits for (`kubectl bootc why POOL` prints them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_GATE_VERDICTS))]
    pub gates: Vec<GateVerdict>,

    /// One entry per digest the pool's nodes have booted, newest lastDeployed first, at
    /// most spec.history.limit entries. Recomputed from what the agents report, so it is
    /// the same however often the controller runs. Only entries with origin Targeted are
    /// ever rolled back to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_HISTORY))]
    pub deploy_history: Vec<DeployHistoryEntry>,

    /// UpToDate, Degraded and Progressing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = crate::bounds::conditions
    )]
    pub conditions: Vec<Condition>,
}

fn default_resolve_interval() -> i64 {
    300
}

fn default_max_unavailable() -> IntOrString {
    IntOrString::Int(1)
}

fn default_reboot_timeout() -> i64 {
    1800
}

fn default_halt_after_unhealthy() -> i32 {
    2
}

fn default_true() -> bool {
    true
}

fn default_history_limit() -> i32 {
    5
}

fn default_secret_key() -> String {
    "url".into()
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec {
            max_unavailable: default_max_unavailable(),
            paused: false,
            max_staging: None,
            drain_timeout_seconds: None,
            reboot_timeout_seconds: default_reboot_timeout(),
            halt_after_unhealthy: default_halt_after_unhealthy(),
            maintenance_windows: Vec::new(),
            post_reboot_delay_seconds: 0,
            canary: None,
            on_failure: FailurePolicy::Halt,
            after: Vec::new(),
        }
    }
}

impl Default for DrainSpec {
    fn default() -> Self {
        DrainSpec {
            grace_period_seconds: None,
            delete_empty_dir_data: true,
            force: false,
            pod_selector: None,
        }
    }
}

impl Default for HistorySpec {
    fn default() -> Self {
        HistorySpec {
            limit: default_history_limit(),
        }
    }
}
