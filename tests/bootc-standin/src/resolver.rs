//! "Pulling": asking a real (loopback, plain-HTTP) registry what an image reference
//! points at, with the credentials bootc would use.
//!
//! - this file: [`ImageResolver`], [`HttpResolver`] and what a pull reads (manifest, manifest
//!   list entry, config);
//! - `auth`: the auth file bootc would use ([`AUTH_PATHS`], [`auth_file`]);
//! - `session`: one conversation with a registry (challenges, tokens, redirects, error
//!   messages).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;
use crate::reference::{Reference, is_sha256_digest};

mod auth;
mod session;

use auth::credentials;
pub use auth::{AUTH_PATHS, auth_file};
use session::Session;

/// The label whose value becomes the image's version (as bootc reads it).
pub const VERSION_LABEL: &str = "org.opencontainers.image.version";
/// The label that names a simulated image's kernel; equal kernels allow a soft reboot.
pub const KERNEL_LABEL: &str = "dev.bootc-pool.sim.kernel";

const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// What a pull learned about an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    /// The reference as given to `switch` (tag or digest form); bootc tracks it as is.
    pub image: String,
    /// The per-architecture manifest digest (`sha256:<hex>`).
    pub digest: String,
    /// The `org.opencontainers.image.version` label.
    #[serde(default)]
    pub version: Option<String>,
    /// The config's `created` time (RFC 3339).
    #[serde(default)]
    pub created: Option<String>,
    /// The config's architecture (`amd64`, `arm64`, …).
    pub architecture: String,
    /// The `dev.bootc-pool.sim.kernel` label.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The sizes of its layers, as its manifest lists them (for progress reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<u64>,
}

/// Finds out what an image reference points at.
pub trait ImageResolver {
    /// Resolves `image` (a `registry` transport reference) to its per-architecture
    /// manifest and config.
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error>;
}

/// The architecture name the OCI image spec uses for this machine.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Asks the registry over plain HTTP (loopback registries only), with the credentials
/// of the first existing auth file of [`AUTH_PATHS`] under `root`.
#[derive(Debug, Clone)]
pub struct HttpResolver {
    root: PathBuf,
    timeout: Duration,
    architecture: String,
}

impl HttpResolver {
    /// A resolver reading credentials under `root` (`/` on a real host) and picking this
    /// machine's architecture from manifest lists.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HttpResolver {
            root: root.into(),
            timeout: Duration::from_secs(30),
            architecture: host_architecture().to_owned(),
        }
    }

    /// Changes the per-request timeout (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Changes which architecture is picked from a manifest list.
    pub fn with_architecture(mut self, architecture: &str) -> Self {
        architecture.clone_into(&mut self.architecture);
        self
    }
}

fn is_index(media_type: &str, doc: &Value) -> bool {
    media_type.contains("index")
        || media_type.contains("manifest.list")
        || doc.get("manifests").is_some()
}

impl ImageResolver for HttpResolver {
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error> {
        let r = Reference::parse(image)?;
        if !r.is_loopback() {
            return Err(Error::Pull {
                image: image.to_owned(),
                message: format!(
                    "registry {} is not on loopback: the bootc stand-in pulls over plain HTTP from 127.0.0.1, localhost or [::1] only",
                    r.registry
                ),
            });
        }
        let mut session = Session {
            image,
            authority: r.registry.clone(),
            creds: credentials(&self.root, &r.registry, image)?,
            auth_header: None,
            timeout: self.timeout,
        };
        let manifest = self.manifest(&mut session, &r)?;
        let config = session.config(&r, &manifest)?;
        let layers = manifest
            .doc
            .get("layers")
            .and_then(Value::as_array)
            .map(|layers| {
                layers
                    .iter()
                    .filter_map(|l| l.get("size").and_then(Value::as_u64))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ImageInfo {
            layers,
            ..image_info(image, manifest.digest, &config)
        })
    }
}

/// The per-architecture manifest an image reference leads to.
pub(super) struct Manifest {
    /// Its digest.
    digest: String,
    /// The manifest document.
    doc: Value,
    /// What was read first (`reading manifest REF in REGISTRY/REPO`), for messages.
    what: String,
}

impl HttpResolver {
    /// The manifest `r` names; for a manifest list or index, the entry for linux and this
    /// resolver's architecture.
    fn manifest(&self, session: &mut Session<'_>, r: &Reference) -> Result<Manifest, Error> {
        let (resp, what) = session.get_manifest(r, r.manifest_reference())?;
        let mut doc = session.json(&resp, &what, "manifest")?;
        let media_type = resp
            .header("content-type")
            .map(str::to_owned)
            .or_else(|| {
                doc.get("mediaType")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let mut digest = resp
            .header("docker-content-digest")
            .map(str::to_owned)
            .or_else(|| r.digest.clone());
        if is_index(&media_type, &doc) {
            let chosen = self.platform_entry(&doc).ok_or_else(|| {
                session.err(format!(
                    "{what}: no image found in manifest list for architecture {}, OS linux",
                    self.architecture
                ))
            })?;
            let (resp, what) = session.get_manifest(r, &chosen)?;
            doc = session.json(&resp, &what, "manifest")?;
            digest = Some(chosen);
        }
        let digest = digest
            .filter(|d| is_sha256_digest(d))
            .ok_or_else(|| session.err(format!("{what}: the registry sent no sha256 digest")))?;
        Ok(Manifest { digest, doc, what })
    }

    /// The digest of the linux entry for this resolver's architecture in a manifest list.
    fn platform_entry(&self, index: &Value) -> Option<String> {
        index
            .get("manifests")
            .and_then(Value::as_array)?
            .iter()
            .find(|m| {
                let p = m.get("platform");
                p.and_then(|p| p.get("os")).and_then(Value::as_str) == Some("linux")
                    && p.and_then(|p| p.get("architecture"))
                        .and_then(Value::as_str)
                        == Some(self.architecture.as_str())
            })
            .and_then(|m| m.get("digest").and_then(Value::as_str))
            .map(str::to_owned)
    }
}

/// An image config's `created` time as bootc prints it: bootc parses it into
/// a UTC time and prints that back with as many fraction digits as it needs
/// (none, 3, 6 or 9), so Go's trimmed `.99393043Z` comes out as
/// `.993930430Z`. A time that does not parse is left out, as bootc does.
fn bootc_timestamp(created: &str) -> Option<String> {
    let time = chrono::DateTime::parse_from_rfc3339(created).ok()?;
    Some(
        time.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

/// What the stand-in keeps of an image: its digest and what its config says.
fn image_info(image: &str, digest: String, config: &Value) -> ImageInfo {
    let label = |k: &str| {
        config
            .get("config")
            .and_then(|c| c.get("Labels"))
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let created = config
        .get("created")
        .and_then(Value::as_str)
        .and_then(bootc_timestamp);
    ImageInfo {
        image: image.to_owned(),
        digest,
        version: label(VERSION_LABEL),
        created,
        architecture: config
            .get("architecture")
            .and_then(Value::as_str)
            .unwrap_or(host_architecture())
            .to_owned(),
        kernel: label(KERNEL_LABEL),
        layers: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
