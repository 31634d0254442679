//! The registry exchange of a resolution: a client per credential set, the digest of a
//! tag (HEAD, GET fallback) and the version label of a new digest.

use std::time::Instant;

use bootc_crds::image_ref::{DEFAULT_REGISTRY, DEFAULT_TAG, Digest, ImageRef};
use chrono::Utc;
use oci_client::client::{ClientConfig, ClientProtocol, linux_amd64_resolver};
use oci_client::manifest::ImageIndexEntry;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::cache::{IDLE_EVICTION, Resolved, Resolver, lock};
use super::error::{FailureContext, classify, error_chain};
use super::{Credentials, ResolveError, VERSION_LABEL};

/// Most digest → version answers kept.
const VERSION_CACHE_MAX: usize = 4096;

/// For an index, the linux/amd64 entry, else the first (used for the version label only).
fn amd64_or_first(manifests: &[ImageIndexEntry]) -> Option<String> {
    linux_amd64_resolver(manifests).or_else(|| manifests.first().map(|m| m.digest.clone()))
}

impl Resolver {
    /// The client for `credentials`, built on first use.
    fn client(&self, credentials: Option<&Credentials>) -> Result<Client, String> {
        let key = credentials.map(Credentials::fingerprint);
        let mut clients = lock(&self.inner.clients);
        let now = Instant::now();
        clients.retain(|k, (_, used)| k.is_none() || now.duration_since(*used) < IDLE_EVICTION);
        if let Some((client, used)) = clients.get_mut(&key) {
            *used = now;
            return Ok(client.clone());
        }
        let mut insecure = self.inner.options.insecure_registries.clone();
        if insecure.iter().any(|r| r == DEFAULT_REGISTRY) {
            // oci-client addresses docker.io as index.docker.io.
            insecure.push("index.docker.io".to_owned());
        }
        let timeout = self.inner.options.timeout;
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure),
            platform_resolver: Some(Box::new(amd64_or_first)),
            read_timeout: Some(timeout),
            connect_timeout: Some(timeout),
            user_agent: concat!("bootc-pool-controller/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config)
            .map_err(|e| format!("cannot build the registry client: {}", error_chain(&e)))?;
        clients.insert(key, (client.clone(), now));
        Ok(client)
    }

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
        let client = self
            .client(credentials)
            .map_err(|detail| ResolveError::Other {
                reference: reference.to_string(),
                detail,
            })?;
        let auth = match credentials {
            Some(c) => RegistryAuth::Basic(c.username().to_owned(), c.password().to_owned()),
            None => RegistryAuth::Anonymous,
        };
        let digest = self.digest(&client, &auth, &ctx).await?;
        let version = self.version(&client, &auth, reference, &digest).await;
        Ok(Resolved {
            image: reference.pin(&digest),
            digest,
            version,
            resolved_at: Utc::now(),
        })
    }

    /// The digest the tag points to, within the timeout.
    async fn digest(
        &self,
        client: &Client,
        auth: &RegistryAuth,
        ctx: &FailureContext<'_>,
    ) -> Result<Digest, ResolveError> {
        let reference = ctx.reference;
        let tag = reference.tag().unwrap_or(DEFAULT_TAG);
        let oci_ref = Reference::with_tag(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            tag.to_owned(),
        );
        let timeout = self.inner.options.timeout;
        let digest = tokio::time::timeout(timeout, client.fetch_manifest_digest(&oci_ref, auth))
            .await
            .map_err(|_| ResolveError::Timeout {
                registry: reference.registry().to_owned(),
                after: timeout,
            })?
            .map_err(|e| match classify(&e, ctx) {
                ResolveError::Timeout { registry, .. } => ResolveError::Timeout {
                    registry,
                    after: timeout,
                },
                other => other,
            })?;
        digest.parse().map_err(|e| ResolveError::Other {
            reference: reference.to_string(),
            detail: format!("the registry answered with digest {digest:?}: {e}"),
        })
    }

    /// The version label of `digest`, from the cache or the image config.
    async fn version(
        &self,
        client: &Client,
        auth: &RegistryAuth,
        reference: &ImageRef,
        digest: &Digest,
    ) -> Option<String> {
        if let Some(v) = lock(&self.inner.versions).get(digest) {
            return v.clone();
        }
        let oci_ref = Reference::with_digest(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            digest.to_string(),
        );
        let fetched = tokio::time::timeout(
            self.inner.options.timeout,
            client.pull_manifest_and_config(&oci_ref, auth),
        )
        .await;
        let version = match fetched {
            // Cut to the status schema's bound, so that an odd label cannot get the
            // pool's whole status write refused.
            Ok(Ok((_, _, config))) => version_label(&config)
                .map(|v| bootc_crds::bounds::truncate(v, bootc_crds::bounds::VERSION_MAX_LEN)),
            Ok(Err(e)) => {
                tracing::warn!(
                    image = %reference.pin(digest),
                    error = %error_chain(&e),
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

/// `config.Labels["org.opencontainers.image.version"]` of an image config document.
pub(super) fn version_label(config: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(config).ok()?;
    v.get("config")?
        .get("Labels")?
        .get(VERSION_LABEL)?
        .as_str()
        .map(str::to_owned)
}
