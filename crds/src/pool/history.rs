//! `status.deployHistory`: what the pool's nodes have run, and which of it the
//! controller itself rolled out.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FAILED_REASON_MAX_LEN;
use crate::bounds::{DIGEST_MAX_LEN, VERSION_MAX_LEN};
use crate::image_ref::REF_MAX_LEN;

/// How a digest came into the pool's history. `Observed < Targeted`: an entry that was
/// ever targeted stays targeted.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum HistoryOrigin {
    /// Only nodes reported it: audited, never rolled back to. Entries written before
    /// origins were recorded read as Observed.
    #[default]
    Observed,
    /// The controller made it the pool's targetDigest: a rollback may go back to it.
    Targeted,
}

/// What the pool's nodes have run: one entry per digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeployHistoryEntry {
    /// The digest booted (sha256:<hex>).
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub digest: String,

    /// The pinned image, registry/repo@sha256:<hex>.
    #[schemars(length(max = REF_MAX_LEN))]
    pub image: String,

    /// The image's version label, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = VERSION_MAX_LEN))]
    pub version: Option<String>,

    /// The most nodes seen booted on this digest at once.
    pub node_count: i32,

    /// When the first node was seen booted on this digest (as the agents report it,
    /// bounded by the controller's clock).
    pub first_deployed: Time,

    /// When the last node was seen booted on this digest (as the agents report it,
    /// bounded by the controller's clock).
    pub last_deployed: Time,

    /// Targeted when the controller made this digest the pool's target; Observed when
    /// only nodes reported it (kept for the audit, never rolled back to).
    #[serde(default)]
    pub origin: HistoryOrigin,

    /// True when a rollout of this digest reached haltAfterUnhealthy with
    /// onFailure: Rollback: the pool rolled back and does not target this digest again
    /// until its spec changes (metadata.generation passes failedGeneration).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,

    /// Why the digest failed: the unhealthy nodes and what was wrong with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = FAILED_REASON_MAX_LEN))]
    pub failed_reason: Option<String>,

    /// When the digest was marked failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_time: Option<Time>,

    /// The pool's metadata.generation when the digest was marked failed; a later spec
    /// clears the mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_generation: Option<i64>,
}
