//! The registry exchange of a resolution: the digest of a tag (HEAD, GET fallback) and
//! the version label of a new digest, every document read up to a cap.

use bootc_crds::image_ref::{DEFAULT_TAG, Digest, ImageRef};
use chrono::Utc;
use oci_client::client::linux_amd64_resolver;
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, ImageIndexEntry,
    OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE,
};
use serde::Deserialize;
use sha2::Digest as _;

use super::cache::{Resolved, Resolver, lock};
use super::error::FailureContext;
use super::session::Session;
use super::{Credentials, ResolveError, VERSION_LABEL};

/// The largest manifest (or index) read; registries commonly refuse to store larger ones.
pub(super) const MAX_MANIFEST: usize = 4 << 20;
/// The largest image config read, for its version label.
pub(super) const MAX_CONFIG: usize = 8 << 20;
/// Most digest → version answers kept.
const VERSION_CACHE_MAX: usize = 4096;
/// The manifest types asked for.
const MANIFEST_MEDIA_TYPES: [&str; 4] = [
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
];

/// A manifest or an index, as much of it as the version label needs.
#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    manifests: Option<Vec<ImageIndexEntry>>,
    #[serde(default)]
    config: Option<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
}

/// For an index, the linux/amd64 entry, else the first (used for the version label only).
fn amd64_or_first(manifests: &[ImageIndexEntry]) -> Option<String> {
    linux_amd64_resolver(manifests).or_else(|| manifests.first().map(|m| m.digest.clone()))
}

/// `sha256:<hex>` of `data`.
fn sha256(data: &[u8]) -> String {
    let hash = sha2::Sha256::digest(data);
    let mut text = String::from("sha256:");
    for b in hash {
        text.push_str(&format!("{b:02x}"));
    }
    text
}

impl Resolver {
    /// One registry exchange for a tag: HEAD (GET fallback) for the digest, then the
    /// version label when the digest is new.
    pub(super) async fn fetch(
        &self,
        reference: &ImageRef,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, ResolveError> {
        let ctx = FailureContext {
            reference,
            with_credentials: credentials.is_some(),
            insecure: self
                .inner
                .options
                .insecure_registries
                .iter()
                .any(|r| r == reference.registry()),
        };
        let http = self
            .inner
            .http
            .as_ref()
            .map_err(|detail| ctx.other(detail.clone()))?;
        let mut session = Session::new(http, &ctx, credentials);
        let timeout = self.inner.options.timeout;
        let digest = tokio::time::timeout(timeout, digest(&mut session, &ctx))
            .await
            .map_err(|_| ResolveError::Timeout {
                registry: reference.registry().to_owned(),
                after: timeout,
            })?
            .map_err(|e| match e {
                ResolveError::Timeout { registry, .. } => ResolveError::Timeout {
                    registry,
                    after: timeout,
                },
                other => other,
            })?;
        let version = self.version(&mut session, reference, &digest).await;
        Ok(Resolved {
            image: reference.pin(&digest),
            digest,
            version,
            resolved_at: Utc::now(),
        })
    }

    /// The version label of `digest`, from the cache or the image config.
    async fn version(
        &self,
        session: &mut Session<'_>,
        reference: &ImageRef,
        digest: &Digest,
    ) -> Option<String> {
        if let Some(v) = lock(&self.inner.versions).get(digest) {
            return v.clone();
        }
        let fetched = tokio::time::timeout(
            self.inner.options.timeout,
            config_of(session, &digest.to_string()),
        )
        .await;
        let version = match fetched {
            // Cut to the status schema's bound, so that an odd label cannot get the
            // pool's whole status write refused.
            Ok(Ok(config)) => version_label(&String::from_utf8_lossy(&config))
                .map(|v| bootc_crds::bounds::truncate(v, bootc_crds::bounds::VERSION_MAX_LEN)),
            Ok(Err(e)) => {
                tracing::warn!(
                    image = %reference.pin(digest),
                    error = %e,
                    "cannot read the image config for its version label"
                );
                return None;
            }
            Err(_) => {
                tracing::warn!(image = %reference.pin(digest), "timed out reading the image config");
                return None;
            }
        };
        let mut versions = lock(&self.inner.versions);
        if versions.len() >= VERSION_CACHE_MAX {
            versions.clear();
        }
        versions.insert(digest.clone(), version.clone());
        version
    }
}

/// The digest the tag points to: the `Docker-Content-Digest` of a HEAD, else the hash of
/// the manifest a GET brings.
async fn digest(
    session: &mut Session<'_>,
    ctx: &FailureContext<'_>,
) -> Result<Digest, ResolveError> {
    let reference = ctx.reference;
    let path = format!("manifests/{}", reference.tag().unwrap_or(DEFAULT_TAG));
    let accept = MANIFEST_MEDIA_TYPES.join(", ");
    let header = |headers: &http::HeaderMap| {
        headers
            .get("docker-content-digest")
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
    };
    let digest = match session
        .head(&path, &accept)
        .await?
        .as_ref()
        .and_then(header)
    {
        Some(digest) => digest,
        None => {
            let answer = session
                .get(&path, &accept, MAX_MANIFEST, "a manifest")
                .await?;
            let digest = sha256(&answer.body);
            if let Some(said) = header(&answer.headers)
                && said.starts_with("sha256:")
                && said != digest
            {
                return Err(ctx.other(format!(
                    "the registry said the manifest has digest {said}, but it hashes to {digest}"
                )));
            }
            digest
        }
    };
    digest
        .parse()
        .map_err(|e| ctx.other(format!("the registry answered with digest {digest:?}: {e}")))
}

/// The image config of the manifest (or index: its linux/amd64 entry, else its first)
/// with `digest`, each document checked against its digest.
async fn config_of(session: &mut Session<'_>, digest: &str) -> Result<Vec<u8>, ResolveError> {
    let mut digest = digest.to_owned();
    let accept = MANIFEST_MEDIA_TYPES.join(", ");
    // An index, then the manifest it names.
    for _ in 0..2 {
        let body = checked(
            session,
            &format!("manifests/{digest}"),
            &accept,
            MAX_MANIFEST,
            "a manifest",
            &digest,
        )
        .await?;
        let manifest: Manifest = serde_json::from_slice(&body)
            .map_err(|e| session.other(format!("manifest {digest} is not one: {e}")))?;
        if let Some(config) = manifest.config {
            return checked(
                session,
                &format!("blobs/{}", config.digest),
                "",
                MAX_CONFIG,
                "an image config",
                &config.digest,
            )
            .await;
        }
        match manifest.manifests.as_deref().and_then(amd64_or_first) {
            Some(entry) => digest = entry,
            None => break,
        }
    }
    Err(session.other(format!("manifest {digest} names no image config")))
}

/// The document at `path`, which must hash to `digest`.
async fn checked(
    session: &mut Session<'_>,
    path: &str,
    accept: &str,
    max: usize,
    what: &str,
    digest: &str,
) -> Result<Vec<u8>, ResolveError> {
    let body = session.get(path, accept, max, what).await?.body;
    let actual = sha256(&body);
    if digest.starts_with("sha256:") && actual != digest {
        return Err(session.other(format!("{path} hashes to {actual}, not {digest}")));
    }
    Ok(body)
}

/// `config.Labels["org.opencontainers.image.version"]` of an image config document.
pub(super) fn version_label(config: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(config).ok()?;
    v.get("config")?
        .get("Labels")?
        .get(VERSION_LABEL)?
        .as_str()
        .map(str::to_owned)
}
