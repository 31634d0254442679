//! What the agent reads from bootc's document: which deployment runs a digest, and the
//! images it reports in `BootcNode.status`.

use bootc_crds::bounds::{ARCHITECTURE_MAX_LEN, SHORT_DIGEST_LEN, VERSION_MAX_LEN, truncate};
use bootc_crds::image_ref::{Digest, runs_digest};
use bootc_crds::node::{BootedImage, ImageStatus, StagedImage};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{BootEntry, BootcHost};

impl BootEntry {
    /// True when this deployment is the image with digest `target`, by the one matching
    /// rule of the workspace, [`runs_digest`]: its per-architecture `imageDigest` is
    /// `target`, or the reference bootc tracks carries `@target` (a manifest-list digest).
    /// A plain ostree deployment matches nothing.
    pub fn matches(&self, target: &Digest) -> bool {
        self.image
            .as_ref()
            .is_some_and(|img| runs_digest(&img.image.image, &img.image_digest.to_string(), target))
    }

    /// The per-architecture digest, for an image based deployment.
    pub fn image_digest(&self) -> Option<&Digest> {
        self.image.as_ref().map(|img| &img.image_digest)
    }

    /// The reference bootc tracks, for an image based deployment.
    pub fn image_ref(&self) -> Option<&str> {
        self.image.as_ref().map(|img| img.image.image.as_str())
    }

    /// What the agent reports for this deployment; `None` for a plain ostree deployment
    /// (no image). The timestamp is kept to the second, and dropped when it is not valid
    /// RFC 3339.
    pub fn to_image_status(&self) -> Option<ImageStatus> {
        let img = self.image.as_ref()?;
        let image_digest = img.image_digest.to_string();
        let hex = image_digest
            .strip_prefix("sha256:")
            .unwrap_or(&image_digest);
        Some(ImageStatus {
            image: img.image.image.clone(),
            short_digest: hex.get(..SHORT_DIGEST_LEN).map(str::to_owned),
            image_digest,
            // Free text from the image: cut to the status schema's bounds, so that an odd
            // label cannot get the whole status write refused.
            version: img.version.clone().map(|v| truncate(v, VERSION_MAX_LEN)),
            timestamp: img.build_time().and_then(|t| to_kube_time(&t)),
            architecture: img
                .architecture
                .clone()
                .map(|a| truncate(a, ARCHITECTURE_MAX_LEN)),
            soft_reboot_capable: self.soft_reboot_capable.unwrap_or(false),
            incompatible: self.incompatible,
        })
    }
}

/// Builds the API's `Time` (k8s-openapi's, which the agent crate does not name) from a
/// UTC instant through its own deserialiser; `None` if it refuses. Fractions of a second
/// are dropped, as the API server would drop them: a status compared with the one read
/// back must not differ in what the API cannot store.
pub(super) fn to_kube_time<T: DeserializeOwned>(t: &DateTime<Utc>) -> Option<T> {
    serde_json::from_value(Value::String(t.to_rfc3339_opts(SecondsFormat::Secs, true))).ok()
}

impl BootcHost {
    /// The booted, staged and rollback deployments as the agent reports them in
    /// `BootcNode.status`. `booted.since` is left `None` (the agent knows when it first
    /// saw a digest booted); an entry without an image is reported as `None`.
    pub fn report(
        &self,
    ) -> (
        Option<BootedImage>,
        Option<StagedImage>,
        Option<ImageStatus>,
    ) {
        let booted = self
            .status
            .booted
            .as_ref()
            .and_then(BootEntry::to_image_status)
            .map(|image| BootedImage { image, since: None });
        let staged = self.status.staged.as_ref().and_then(|entry| {
            entry.to_image_status().map(|image| StagedImage {
                image,
                download_only: entry.download_only.unwrap_or(false),
            })
        });
        let rollback = self
            .status
            .rollback
            .as_ref()
            .and_then(BootEntry::to_image_status);
        (booted, staged, rollback)
    }

    /// True when a deployment is staged and bootc says a soft reboot can switch to it.
    /// An older bootc that does not report `softRebootCapable` gives false.
    pub fn soft_reboot_capable_staged(&self) -> bool {
        self.status
            .staged
            .as_ref()
            .is_some_and(|e| e.soft_reboot_capable == Some(true))
    }

    /// True when a deployment is staged and locked (`--download-only`). An older bootc
    /// that does not report `downloadOnly` gives false.
    pub fn staged_download_only(&self) -> bool {
        self.status
            .staged
            .as_ref()
            .is_some_and(|e| e.download_only == Some(true))
    }
}
