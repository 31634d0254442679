//! The host's `bootc status --format=json --format-version=1` output, parsed into types, and what the agent reports from it.

use std::collections::BTreeMap;
use std::fmt;

use bootc_crds::image_ref::Digest;
use bootc_crds::node::{BootedImage, ImageStatus as ReportedImage, StagedImage};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::{DeserializeOwned, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `kind` of bootc's status document.
pub const KIND: &str = "BootcHost";
/// The current `apiVersion`.
pub const API_VERSION_V1: &str = "org.containers.bootc/v1";
/// The `apiVersion` older bootc releases (and most of bootc's own fixtures) write.
pub const API_VERSION_V1ALPHA1: &str = "org.containers.bootc/v1alpha1";
/// Every `apiVersion` [`parse`] accepts.
pub const SUPPORTED_API_VERSIONS: &[&str] = &[API_VERSION_V1, API_VERSION_V1ALPHA1];

/// Why bootc's status output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The bytes are not one JSON document.
    #[error("bootc status output is not valid JSON")]
    ParseJson(#[source] serde_json::Error),
    /// The document is JSON but not an object.
    #[error("bootc status output is a JSON {found}, not an object")]
    NotAnObject {
        /// The JSON type found (`array`, `string`, …).
        found: &'static str,
    },
    /// `kind` or `apiVersion` is absent.
    #[error("bootc status output has no `{field}`")]
    MissingField {
        /// The missing key.
        field: &'static str,
    },
    /// `kind` is not `BootcHost`.
    #[error("bootc status output has kind {found}, expected \"BootcHost\"")]
    WrongKind {
        /// The value found, as JSON.
        found: String,
    },
    /// `apiVersion` is not one this parser knows.
    #[error(
        "bootc status output has apiVersion {found}, expected \"org.containers.bootc/v1\" or \"org.containers.bootc/v1alpha1\""
    )]
    UnsupportedApiVersion {
        /// The value found, as JSON.
        found: String,
    },
    /// A part of the document does not have the shape the schema gives it: a required
    /// field is missing, a value has the wrong type, or `imageDigest` is not sha256.
    #[error("bootc status output: `{path}` does not match bootc's status schema")]
    DecodeField {
        /// Where in the document, as a dotted path (`status.booted`, `spec`, or `.` for
        /// the whole document).
        path: String,
        /// What exactly is wrong there.
        #[source]
        source: serde_json::Error,
    },
}

/// Parses the output of `bootc status --format=json --format-version=1`.
///
/// Never panics. The types follow bootc's published schema (`host-v1.schema.json`), so
/// that one agent reads every bootc it may meet:
///
/// - `kind` must be `BootcHost`, `apiVersion` `org.containers.bootc/v1` or
///   `org.containers.bootc/v1alpha1`; the fields the schema requires must be there, and
///   `imageDigest` must be a sha256 digest;
/// - every field bootc added after 2025 (`architecture`, `stateroot`, `softRebootCapable`,
///   `composefs`, `downloadOnly`, `usrOverlay`, `readOnly`) is optional, and `null`
///   `metadata`, `spec`, `status` or `otherDeployments` read as empty;
/// - unknown keys are kept (`extra` on each object), so a newer bootc's output parses and
///   re-serialises without loss, and old outputs with `isContainer` parse too;
/// - string enumerations the agent does not act on (`type`, `store`, the `/usr` overlay
///   modes, composefs boot types) are kept as strings, and an image signature of a form
///   this code does not know is kept as [`ImageSignature::Other`].
///
/// The output carries no bootc version (the schema has no such field): ask
/// `bootc --version` for it.
pub fn parse(json: &[u8]) -> Result<Host, StatusError> {
    let value: Value = serde_json::from_slice(json).map_err(StatusError::ParseJson)?;
    let Value::Object(root) = &value else {
        return Err(StatusError::NotAnObject {
            found: json_type(&value),
        });
    };
    match root.get("kind") {
        None => return Err(StatusError::MissingField { field: "kind" }),
        Some(Value::String(kind)) if kind == KIND => {}
        Some(other) => {
            return Err(StatusError::WrongKind {
                found: other.to_string(),
            });
        }
    }
    match root.get("apiVersion") {
        None => {
            return Err(StatusError::MissingField {
                field: "apiVersion",
            });
        }
        Some(Value::String(v)) if SUPPORTED_API_VERSIONS.contains(&v.as_str()) => {}
        Some(other) => {
            return Err(StatusError::UnsupportedApiVersion {
                found: other.to_string(),
            });
        }
    }
    Host::deserialize(&value).map_err(|source| locate_error(&value, source))
}

/// The parts of the document that [`locate_error`] checks on their own.
#[derive(Debug, Clone, Copy)]
enum Part {
    Metadata,
    Spec,
    Reference,
    Status,
    Entry,
    Image,
}

impl Part {
    /// The error of reading `v` as this part, if any.
    fn check(self, v: &Value) -> Option<serde_json::Error> {
        match self {
            Part::Metadata => ObjectMeta::deserialize(v).err(),
            Part::Spec => HostSpec::deserialize(v).err(),
            Part::Reference => ImageReference::deserialize(v).err(),
            Part::Status => HostStatus::deserialize(v).err(),
            Part::Entry => BootEntry::deserialize(v).err(),
            Part::Image => ImageStatus::deserialize(v).err(),
        }
    }
}

/// Finds the innermost known part of the document that fails on its own, so that the
/// error says where the problem is (serde_json's messages carry no path).
fn locate_error(root: &Value, whole: serde_json::Error) -> StatusError {
    let at = |pointer: &str| root.pointer(pointer).filter(|v| !v.is_null());
    // Innermost first: the first part that fails is the one to name.
    let mut parts: Vec<(String, String, Part)> = Vec::new();
    for slot in ["booted", "staged", "rollback"] {
        for (key, part) in [
            ("image", Part::Image),
            ("cachedUpdate", Part::Image),
            ("", Part::Entry),
        ] {
            let (path, pointer) = if key.is_empty() {
                (format!("status.{slot}"), format!("/status/{slot}"))
            } else {
                (
                    format!("status.{slot}.{key}"),
                    format!("/status/{slot}/{key}"),
                )
            };
            parts.push((path, pointer, part));
        }
    }
    if let Some(Value::Array(items)) = at("/status/otherDeployments") {
        for i in 0..items.len() {
            parts.push((
                format!("status.otherDeployments[{i}]"),
                format!("/status/otherDeployments/{i}"),
                Part::Entry,
            ));
        }
    }
    for (path, part) in [
        ("status", Part::Status),
        ("spec.image", Part::Reference),
        ("spec", Part::Spec),
        ("metadata", Part::Metadata),
    ] {
        parts.push((
            path.to_string(),
            format!("/{}", path.replace('.', "/")),
            part,
        ));
    }
    for (path, pointer, part) in parts {
        if let Some(source) = at(&pointer).and_then(|v| part.check(v)) {
            return StatusError::DecodeField { path, source };
        }
    }
    StatusError::DecodeField {
        path: ".".to_string(),
        source: whole,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `null` means the same as an absent key (the default).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
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
pub struct Host {
    /// `org.containers.bootc/v1` or `org.containers.bootc/v1alpha1`.
    pub api_version: String,
    /// Always `BootcHost`.
    pub kind: String,
    /// Object metadata (bootc writes `name: host`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
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
pub struct ObjectMeta {
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
    pub image: Option<ImageStatus>,
    /// The last update bootc fetched metadata for (`bootc upgrade --check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_update: Option<ImageStatus>,
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
pub struct ImageStatus {
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

impl ImageStatus {
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
        let (_, digest) = self.image.rsplit_once('@')?;
        digest.parse().ok()
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

impl BootEntry {
    /// True when this deployment is the image with digest `target` (ARCHITECTURE §2.4):
    /// its per-architecture `imageDigest` is `target`, or the reference bootc tracks
    /// carries `@target` (a manifest-list digest). A plain ostree deployment matches
    /// nothing.
    pub fn matches(&self, target: &Digest) -> bool {
        self.image.as_ref().is_some_and(|img| {
            img.image_digest == *target || img.image.digest().as_ref() == Some(target)
        })
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
    pub fn to_image_status(&self) -> Option<ReportedImage> {
        let img = self.image.as_ref()?;
        Some(ReportedImage {
            image: img.image.image.clone(),
            image_digest: img.image_digest.to_string(),
            version: img.version.clone(),
            timestamp: img.build_time().and_then(|t| to_kube_time(&t)),
            architecture: img.architecture.clone(),
            soft_reboot_capable: self.soft_reboot_capable.unwrap_or(false),
            incompatible: self.incompatible,
        })
    }
}

/// Builds the API's `Time` (k8s-openapi's, which the agent crate does not name) from a
/// UTC instant through its own deserialiser; `None` if it refuses. Fractions of a second
/// are dropped, as the API server would drop them: a status compared with the one read
/// back must not differ in what the API cannot store.
fn to_kube_time<T: DeserializeOwned>(t: &DateTime<Utc>) -> Option<T> {
    serde_json::from_value(Value::String(t.to_rfc3339_opts(SecondsFormat::Secs, true))).ok()
}

impl Host {
    /// The booted, staged and rollback deployments as the agent reports them in
    /// `BootcNode.status`. `booted.since` is left `None` (the agent knows when it first
    /// saw a digest booted); an entry without an image is reported as `None`.
    pub fn report(
        &self,
    ) -> (
        Option<BootedImage>,
        Option<StagedImage>,
        Option<ReportedImage>,
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

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST_A: &str =
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn unparseable_timestamp_is_dropped_not_fatal() {
        let doc = format!(
            r#"{{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost",
            "status":{{"booted":{{"incompatible":false,"pinned":false,
            "image":{{"image":{{"image":"q.io/a/b:1","transport":"registry"}},
            "imageDigest":"{DIGEST_A}","timestamp":"yesterday"}}}}}}}}"#
        );
        let host = parse(doc.as_bytes()).unwrap();
        let (booted, _, _) = host.report();
        let booted = booted.unwrap();
        assert_eq!(booted.image.timestamp, None);
        assert_eq!(booted.image.image_digest, DIGEST_A);
    }

    #[test]
    fn kube_time_keeps_the_instant() {
        let t = DateTime::parse_from_rfc3339("2023-10-14T21:22:15.42+02:00")
            .unwrap()
            .with_timezone(&Utc);
        let reported = ReportedImage {
            timestamp: to_kube_time(&t),
            ..ReportedImage::default()
        };
        let json = serde_json::to_value(&reported).unwrap();
        assert_eq!(json["timestamp"], "2023-10-14T19:22:15Z");
    }
}
