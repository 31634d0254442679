//! `BootcNode`: the one object through which the controller and a node's agent talk.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::{
    ARCHITECTURE_MAX_LEN, BOOT_ID_MAX_LEN, DIGEST_MAX_LEN, DRAIN_MESSAGE_MAX_LEN,
    PROGRESS_STEP_MAX_LEN, SHORT_DIGEST_LEN, UNIT_NAME_MAX_LEN, VERSION_MAX_LEN, unit_items,
};
use crate::image_ref::{IMAGE_PIN_PATTERN, REF_MAX_LEN};
use crate::pool::{RebootPolicy, SecretRef, SignaturePolicy};

/// What the controller wants a node to run. Written by the controller only; the agent on
/// the node of the same name reads it.
// Each printer column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "node.bootc.dev",
    version = "v1alpha1",
    kind = "BootcNode",
    plural = "bootcnodes",
    shortname = "bn",
    category = "bootc",
    status = "BootcNodeStatus",
    derive = "PartialEq",
    doc = "The bootc state of one Node (same name), owned by its BootcNodePool: spec is written by the controller, status by the node's agent.",
    printcolumn(
        name = "Booted",
        type_ = "string",
        json_path = ".status.booted.shortDigest",
        description = "Short digest of the image the node runs"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.booted.version",
        description = "Version label of the image the node runs"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Idle\")].reason",
        description = "Idle, Staging, Staged or Rebooting"
    ),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress.summary",
        description = "How far staging has got: percent of bytes, or the step"
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Degraded\")].status",
        description = "Whether the agent reports an error"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Staged",
        type_ = "string",
        json_path = ".status.staged.shortDigest",
        description = "Short digest of the staged image",
        priority = "1"
    ),
    printcolumn(
        name = "Desired Image",
        type_ = "string",
        json_path = ".spec.desiredImage",
        description = "Image the node should run",
        priority = "1"
    ),
    printcolumn(
        name = "Booted Image",
        type_ = "string",
        json_path = ".status.booted.image",
        description = "Image the node runs",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodeSpec {
    /// The image the node should run, always pinned: registry/repo@sha256:<64 hex>.
    #[schemars(
        length(max = REF_MAX_LEN),
        regex(pattern = IMAGE_PIN_PATTERN),
        transform = crate::rules::image_pin
    )]
    pub desired_image: String,

    /// Staged: pull desiredImage and keep it staged (locked, so an unplanned reboot does
    /// not apply it). Booted: the node holds a reboot slot and may reboot into it.
    #[serde(default)]
    pub desired_image_state: DesiredImageState,

    /// Whether the agent may soft-reboot (copied from the pool).
    #[serde(default)]
    pub reboot_policy: RebootPolicy,

    /// Whether the agent stages with bootc's `--enforce-container-sigpolicy` (copied
    /// from the pool's image.signaturePolicy).
    #[serde(default)]
    pub signature_policy: SignaturePolicy,

    /// The pool's pull Secret, which the agent writes to the host's /run/ostree/auth.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretRef>,

    /// Hash of the pull Secret's content; changes when the Secret does, so the agent
    /// rewrites the host's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub pull_secret_hash: Option<String>,

    /// systemd units whose state the agent reports in status.health (copied from the
    /// pool's spec.health.units).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = crate::pool::MAX_HEALTH_UNITS), transform = unit_items)]
    pub health_units: Vec<String>,
}

impl BootcNodeSpec {
    /// `desired_image`, staged, with every policy at its default and no pull Secret or
    /// health unit.
    pub fn staged(desired_image: impl Into<String>) -> Self {
        BootcNodeSpec {
            desired_image: desired_image.into(),
            desired_image_state: DesiredImageState::Staged,
            reboot_policy: RebootPolicy::default(),
            signature_policy: SignaturePolicy::default(),
            pull_secret_ref: None,
            pull_secret_hash: None,
            health_units: Vec::new(),
        }
    }
}

/// How far the node should go with desiredImage.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DesiredImageState {
    /// Pull and stage only.
    #[default]
    Staged,
    /// Reboot into it (only with the reboot-slot annotation).
    Booted,
}

/// What the node runs, as its agent last saw it (written by the agent), and what holds up
/// its drain (written by the controller).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodeStatus {
    /// The metadata.generation of the spec this status answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The deployment the host is running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted: Option<BootedImage>,

    /// The deployment staged for the next boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<StagedImage>,

    /// The previous deployment, which a rollback would boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<ImageStatus>,

    /// The last reboot the agent started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reboot: Option<LastReboot>,

    /// Version of bootc on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = VERSION_MAX_LEN))]
    pub bootc_version: Option<String>,

    /// Version of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = VERSION_MAX_LEN))]
    pub agent_version: Option<String>,

    /// Idle and Degraded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = crate::bounds::conditions
    )]
    pub conditions: Vec<Condition>,

    /// Set by the controller while the node's drain cannot go on: the pod and what
    /// refuses its eviction (a PodDisruptionBudget, a drain setting). Cleared when the
    /// drain moves again or ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_blocked: Option<DrainBlocked>,

    /// Set (true) by the controller while an admin holds the node with the label
    /// node.bootc.dev/hold=true: it is not moved to a new target nor given a reboot slot.
    /// Removed when the hold is lifted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<bool>,

    /// How far the current staging has got, from bootc's progress reports; written at
    /// most every few seconds while staging, removed when staging ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<StagingProgress>,

    /// The state of spec.healthUnits in the running boot, as the agent last read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<NodeHealth>,

    /// The booted system beyond its image, as bootc reports it (drift), and the host's
    /// own update timer. Whether a soft reboot can switch to a deployment is in each
    /// image's softRebootCapable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostState>,
}

/// The longest `status.host.backend` and `usrOverlay`.
pub const HOST_STATE_MAX_LEN: usize = 64;

/// The booted system as bootc sees it beyond its image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostState {
    /// The booted deployment's backend: ostree or composefs (absent when bootc does not
    /// say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = HOST_STATE_MAX_LEN))]
    pub backend: Option<String>,

    /// bootc's usrOverlay (bootc 1.14 and later): /usr carries a writable overlay
    /// (`bootc usr-overlay`), as ACCESS/PERSISTENCE (readWrite/transient); absent when
    /// there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = HOST_STATE_MAX_LEN))]
    pub usr_overlay: Option<String>,

    /// bootc's incompatible for the booted deployment: it carries local changes bootc
    /// cannot manage (local package layering).
    #[serde(default)]
    pub incompatible: bool,

    /// Whether the host's own update timer (bootc-fetch-apply-updates.timer) is masked,
    /// as the agent last did it; absent before the agent tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_timer_masked: Option<bool>,
}

/// The named units' states in one boot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeHealth {
    /// The boot these states are from: the host's boot ID.
    #[serde(rename = "bootID")]
    #[schemars(length(max = BOOT_ID_MAX_LEN))]
    pub boot_id: String,

    /// systemd's SoftRebootsCount in that boot (a soft reboot keeps the boot ID).
    #[serde(default)]
    pub soft_reboots: i64,

    /// True when every unit is active.
    pub healthy: bool,

    /// Each unit of spec.healthUnits, in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = crate::pool::MAX_HEALTH_UNITS))]
    pub units: Vec<UnitHealth>,
}

/// One unit's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitHealth {
    /// The unit's name.
    #[schemars(length(max = UNIT_NAME_MAX_LEN))]
    pub name: String,

    /// systemd's ActiveState: active, activating, inactive, failed, deactivating,
    /// reloading; not-found when no such unit is loaded.
    #[schemars(length(max = 32))]
    pub active_state: String,

    /// systemd's SubState (e.g. running, exited, dead, failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 32))]
    pub sub_state: String,
}

/// How far a staging has got, as bootc reported it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagingProgress {
    /// The digest being staged (sha256:<hex>).
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub image_digest: String,

    /// Bytes fetched so far (layers already on the host count as fetched).
    #[schemars(range(min = 0))]
    pub bytes_done: i64,

    /// Bytes to fetch in all; 0 until bootc knows.
    #[schemars(range(min = 0))]
    pub bytes_total: i64,

    /// The step bootc is in (`pulling`, `staging`), and its description.
    #[schemars(length(max = PROGRESS_STEP_MAX_LEN))]
    pub step: String,

    /// Steps done of the current task, as bootc counts them.
    #[schemars(range(min = 0))]
    pub steps_done: i64,

    /// Steps of the current task.
    #[schemars(range(min = 0))]
    pub steps_total: i64,

    /// For columns: `42%` while bytes are fetched, then the step.
    #[schemars(length(max = PROGRESS_STEP_MAX_LEN))]
    pub summary: String,

    /// When bootc last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<Time>,
}

/// A drain held up, as the controller last met it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainBlocked {
    /// The pod and what refuses its eviction, as the API server (or the drain) worded
    /// it, e.g. `evicting shop/web-0: Cannot evict pod as it would violate the pod's
    /// disruption budget.`
    #[schemars(length(max = DRAIN_MESSAGE_MAX_LEN))]
    pub message: String,

    /// When the drain was first seen held up by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// One deployment on the host, as bootc reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// The image reference bootc tracks for this deployment (may carry a manifest-list
    /// digest).
    #[schemars(length(max = REF_MAX_LEN))]
    pub image: String,

    /// The per-architecture manifest digest (sha256:<hex>).
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub image_digest: String,

    /// The first 12 hex digits of imageDigest, for columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = SHORT_DIGEST_LEN))]
    pub short_digest: Option<String>,

    /// The image's version label, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = VERSION_MAX_LEN))]
    pub version: Option<String>,

    /// The image's creation time, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Time>,

    /// The image's architecture, when bootc reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = ARCHITECTURE_MAX_LEN))]
    pub architecture: Option<String>,

    /// Whether the host can switch to this deployment with a soft reboot.
    #[serde(default)]
    pub soft_reboot_capable: bool,

    /// Whether bootc flags this deployment as incompatible with the running system.
    #[serde(default)]
    pub incompatible: bool,
}

/// The booted deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootedImage {
    /// The deployment.
    #[serde(flatten)]
    pub image: ImageStatus,

    /// When the agent first saw this digest booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// The staged deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagedImage {
    /// The deployment.
    #[serde(flatten)]
    pub image: ImageStatus,

    /// True while the deployment is locked: a reboot nobody asked for boots the old one.
    #[serde(default)]
    pub download_only: bool,
}

/// A reboot the agent started, so that it never reboots twice for one approval.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastReboot {
    /// The digest the reboot was for.
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub digest: String,

    /// The host's boot ID before the reboot.
    #[serde(rename = "bootID")]
    #[schemars(length(max = BOOT_ID_MAX_LEN))]
    pub boot_id: String,

    /// systemd's SoftRebootsCount before the reboot.
    #[serde(default)]
    pub soft_reboots: i64,

    /// When the reboot was started.
    pub time: Time,
}
