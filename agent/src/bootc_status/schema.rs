//! The types of bootc's `BootcHost` document, after bootc's published schema
//! (`host-v1.schema.json`): every field bootc added later is optional, and unknown keys
//! are kept (`extra`) so that the document re-serialises without loss.

use std::collections::BTreeMap;
use std::fmt;

use bootc_crds::image_ref::{Digest, digest_in};
use chrono::{DateTime, Utc};
use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `null` means the same as an absent key (the default).
pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `imageDigest` as a checked [`Digest`]; anything but `sha256:<64 hex>` is an error.
mod digest_serde {
    use super::{Deserialize, Deserializer, Digest, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Digest, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(d)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e| serde::de::Error::custom(format_args!("imageDigest {s:?}: {e}")))
    }
}

/// bootc's `BootcHost` document: what the host runs, has staged and can roll back to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootcHost {
    /// `org.containers.bootc/v1` or `org.containers.bootc/v1alpha1`.
    pub api_version: String,
    /// Always `BootcHost`.
    pub kind: String,
    /// Object metadata (bootc writes `name: host`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: HostMetadata,
    /// What the host is configured to track.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: HostSpec,
    /// The deployments on the host.
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: HostStatus,
    /// Keys this code does not know, kept for re-serialisation.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Kubernetes-style object metadata as bootc writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostMetadata {
    /// Object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Object namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The host's configuration: the image it tracks and which deployment boots next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostSpec {
    /// The tracked image; `None` on a host that is not (yet) image based.
    #[serde(default)]
    pub image: Option<ImageReference>,
    /// Which deployment boots next, when bootc says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<BootOrder>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `spec.bootOrder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootOrder {
    /// The staged (or else the booted) deployment boots next.
    Default,
    /// The rollback deployment boots next.
    Rollback,
    /// A value a newer bootc may write, kept as written.
    Other(String),
}

impl BootOrder {
    /// The value as bootc writes it.
    pub fn as_str(&self) -> &str {
        match self {
            BootOrder::Default => "default",
            BootOrder::Rollback => "rollback",
            BootOrder::Other(s) => s,
        }
    }
}

impl Serialize for BootOrder {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BootOrder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "default" => BootOrder::Default,
            "rollback" => BootOrder::Rollback,
            _ => BootOrder::Other(s),
        })
    }
}

/// The state of the host's deployments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    /// The deployment staged for the next boot.
    #[serde(default)]
    pub staged: Option<BootEntry>,
    /// The running deployment; `None` when the host is not bootc compatible.
    #[serde(default)]
    pub booted: Option<BootEntry>,
    /// The previous deployment, which a rollback would boot.
    #[serde(default)]
    pub rollback: Option<BootEntry>,
    /// Other (pinned) deployments.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub other_deployments: Vec<BootEntry>,
    /// True when the rollback deployment is queued for the next boot.
    #[serde(default)]
    pub rollback_queued: bool,
    /// The detected kind of system (`bootcHost`), if any.
    #[serde(default, rename = "type")]
    pub host_type: Option<String>,
    /// The overlay on `/usr`, if one is mounted (bootc ≥ 1.14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usr_overlay: Option<FilesystemOverlay>,
    /// True when the physical root is read-only, so nothing can be staged (bootc ≥ 1.16.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Keys this code does not know (old bootc writes `isContainer`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The overlay mounted on `/usr` (`bootc usr-overlay`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemOverlay {
    /// `readOnly` or `readWrite`.
    pub access_mode: String,
    /// `transient` or `persistent`.
    pub persistence: String,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One deployment (a "bootable entry").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootEntry {
    /// The image this deployment came from; `None` for a plain ostree deployment.
    #[serde(default)]
    pub image: Option<DeploymentImage>,
    /// The last update bootc fetched metadata for (`bootc upgrade --check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_update: Option<DeploymentImage>,
    /// True when the deployment has origin changes bootc does not understand.
    pub incompatible: bool,
    /// True when the deployment is pinned (kept from garbage collection).
    pub pinned: bool,
    /// True when, relative to the booted system, a soft reboot can switch to this
    /// deployment (bootc ≥ 1.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_reboot_capable: Option<bool>,
    /// True when the deployment was staged with `--download-only` and is locked: a reboot
    /// that nobody asked for boots the old deployment (bootc ≥ 1.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_only: Option<bool>,
    /// The container storage backend (`ostreeContainer`), if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// ostree details, for an ostree based deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ostree: Option<BootEntryOstree>,
    /// composefs details, for a composefs based deployment (bootc ≥ 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composefs: Option<BootEntryComposefs>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// ostree details of a deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootEntryOstree {
    /// The ostree commit checksum.
    pub checksum: String,
    /// The deployment serial.
    pub deploy_serial: u32,
    /// The stateroot holding `/etc` and `/var` (bootc ≥ 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateroot: Option<String>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// composefs details of a deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootEntryComposefs {
    /// The erofs verity digest.
    pub verity: String,
    /// `Bls` or `Uki`.
    pub boot_type: String,
    /// `grub`, `grub-cc`, `systemd` or `none`.
    pub bootloader: String,
    /// True when fs-verity validation is optional.
    pub missing_verity_allowed: bool,
    /// sha256 of vmlinuz + initrd, for Type 1 entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_digest: Option<String>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The image of a deployment, as bootc fetched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentImage {
    /// The reference bootc tracks (it may carry a manifest-list digest).
    pub image: ImageReference,
    /// The image's version label, if any.
    #[serde(default)]
    pub version: Option<String>,
    /// The image's build time as bootc wrote it (RFC 3339), if any.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The per-architecture manifest digest that was fetched.
    #[serde(with = "digest_serde")]
    pub image_digest: Digest,
    /// The image's architecture (bootc ≥ 1.1.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl DeploymentImage {
    /// The build time, when bootc gave one and it is valid RFC 3339.
    pub fn build_time(&self) -> Option<DateTime<Utc>> {
        let ts = self.timestamp.as_deref()?;
        DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

/// A container image reference with its transport and signature policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageReference {
    /// The reference, in the syntax of its transport (`quay.io/a/b:tag`,
    /// `quay.io/a/b@sha256:…`, or a path for `oci`).
    pub image: String,
    /// The transport: `registry`, `oci`, `containers-storage`, …
    pub transport: String,
    /// How fetches are verified; absent on older bootc output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<ImageSignature>,
    /// Keys this code does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ImageReference {
    /// The digest after the last `@` of the reference, when it is a valid sha256 digest
    /// (for a pool pinned to a manifest list, that list's digest).
    pub fn digest(&self) -> Option<Digest> {
        digest_in(&self.image)
    }
}

/// How bootc verifies an image's signature: a string (`"insecure"`,
/// `"containerPolicy"`) or an object (`{"ostreeRemote": "fedora"}`).
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSignature {
    /// Verify the ostree commit against the named ostree remote.
    OstreeRemote(String),
    /// Defer to `containers-policy.json`.
    ContainerPolicy,
    /// No verification.
    Insecure,
    /// A form this code does not know, kept as written.
    Other(Value),
}

impl Serialize for ImageSignature {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ImageSignature::OstreeRemote(remote) => {
                let mut m = BTreeMap::new();
                m.insert("ostreeRemote", remote);
                m.serialize(s)
            }
            ImageSignature::ContainerPolicy => s.serialize_str("containerPolicy"),
            ImageSignature::Insecure => s.serialize_str("insecure"),
            ImageSignature::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ImageSignature {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(match &v {
            Value::String(s) if s == "insecure" => ImageSignature::Insecure,
            Value::String(s) if s == "containerPolicy" => ImageSignature::ContainerPolicy,
            Value::Object(m) if m.len() == 1 => match m.get("ostreeRemote") {
                Some(Value::String(remote)) => ImageSignature::OstreeRemote(remote.clone()),
                _ => ImageSignature::Other(v),
            },
            _ => ImageSignature::Other(v),
        })
    }
}

impl fmt::Display for ImageSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageSignature::OstreeRemote(remote) => write!(f, "ostreeRemote:{remote}"),
            ImageSignature::ContainerPolicy => f.write_str("containerPolicy"),
            ImageSignature::Insecure => f.write_str("insecure"),
            ImageSignature::Other(v) => write!(f, "{v}"),
        }
    }
}
