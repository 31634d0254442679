//! Tag resolution: turns a pool's `spec.image.ref` into a digest pin (ARCHITECTURE.md §3
//! step 1), and the pull-secret parsing it needs.
//!
//! A digest reference is taken as is, without any request. A tag is resolved through one
//! [`Resolver`] shared by every pool:
//!
//! - **one request per key and interval**: the key is the reference plus a fingerprint of
//!   the credentials; an answer younger than the caller's interval is returned as is;
//! - **coalescing**: every key has an async mutex held for the duration of the registry
//!   exchange; callers that arrive meanwhile wait on it and take the answer produced while
//!   they waited (success or failure), whatever their interval;
//! - **HEAD first**: `oci_client::Client::fetch_manifest_digest` sends `HEAD` and, when the
//!   answer carries no `Docker-Content-Digest` (a registry without HEAD answers 404/405, or
//!   omits the header), falls back to `GET` and hashes the body. A manifest list or OCI
//!   index resolves to the digest of the list itself (§2.4: nodes report per-arch digests
//!   and the controller matches either);
//! - **version label**: `org.opencontainers.image.version` is read from the image config
//!   once per new digest (cached by digest); for an index the linux/amd64 entry, else the
//!   first entry, is used. A failure there never fails the resolution (version `None`,
//!   retried on the next resolution);
//! - **backoff**: after a failure the key is not tried again before
//!   `min(interval, 30 s · 2^(n-1))` (n = consecutive failures) or the registry's
//!   `Retry-After`; callers asking meanwhile get the cached error.
//!
//! Credentials never appear in errors, logs or `Debug` output.
//!
//! Why one `oci_client::Client` per credential set rather than one in total: the client
//! remembers the first credentials it saw for a registry and caches basic-auth "tokens"
//! per registry and repository forever, so a single client would send pool A's pull
//! secret on behalf of pool B (or keep using a rotated-out password). Clients are created
//! lazily, one per distinct credential set (anonymous being one), reused for every request
//! with those credentials and dropped after an hour unused.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bootc_crds::image_ref::{DEFAULT_REGISTRY, Digest, ImageRef};
use chrono::{DateTime, Utc};
use oci_client::client::{ClientConfig, ClientProtocol, linux_amd64_resolver};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::ImageIndexEntry;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};

/// The image config label that carries the version shown as `status.targetVersion`.
pub const VERSION_LABEL: &str = "org.opencontainers.image.version";

/// First backoff step after a failed resolution.
const BACKOFF_BASE: Duration = Duration::from_secs(30);
/// Cache entries and clients unused for this long are dropped.
const IDLE_EVICTION: Duration = Duration::from_secs(3600);
/// Number of entries above which idle ones are looked for.
const PRUNE_ABOVE: usize = 64;
/// Most digest → version answers kept.
const VERSION_CACHE_MAX: usize = 4096;

// ---------------------------------------------------------------------------------------
// Pull secrets
// ---------------------------------------------------------------------------------------

/// A user name and password for one registry, from a pull secret.
///
/// `Debug` shows the user name and the secret's name, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
    source: Option<String>,
}

impl Credentials {
    /// Credentials not tied to a named Secret.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            username: username.into(),
            password: password.into(),
            source: None,
        }
    }

    /// Names the Secret these came from (`namespace/name`), for error messages.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password. Never log it.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The Secret these came from (`namespace/name`), if known.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// A fingerprint of user and password (sha256 hex), used as a cache key.
    fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.username.as_bytes());
        h.update([0u8]);
        h.update(self.password.as_bytes());
        hex(&h.finalize())
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("source", &self.source)
            .finish()
    }
}

/// The credentials of a `kubernetes.io/dockerconfigjson` Secret, by registry.
///
/// `Debug` redacts every password (through [`Credentials`]' `Debug`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryCredentials {
    by_registry: HashMap<String, Credentials>,
}

impl RegistryCredentials {
    /// Names the Secret (`namespace/name`) in every entry, for error messages.
    pub fn with_source(mut self, namespace: &str, name: &str) -> Self {
        let source = format!("{namespace}/{name}");
        for c in self.by_registry.values_mut() {
            c.source = Some(source.clone());
        }
        self
    }

    /// The credentials for `registry` (`host[:port]` as [`ImageRef::registry`] gives it;
    /// docker.io aliases are understood).
    pub fn for_registry(&self, registry: &str) -> Option<Credentials> {
        self.by_registry.get(&normalize_registry(registry)).cloned()
    }

    /// The registries this secret has credentials for (normalised, docker.io for Docker
    /// Hub).
    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.by_registry.keys().map(String::as_str)
    }

    /// True when the secret has no credentials at all.
    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

/// Why a pull secret's `.dockerconfigjson` is unusable. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not parseable as JSON (the message gives the position only).
    #[error(".dockerconfigjson is not JSON: {0}")]
    NotJson(String),
    /// No `auths` object at the top level.
    #[error(".dockerconfigjson has no auths object")]
    NoAuths,
    /// An `auths` entry that is not an object.
    #[error("the auths entry for {registry} is not an object")]
    EntryNotObject {
        /// The key as written.
        registry: String,
    },
    /// `auth` that is not base64 of `user:pass`.
    #[error("auth for {registry} is not base64 user:pass")]
    InvalidAuth {
        /// The key as written.
        registry: String,
    },
    /// An entry with neither `auth` nor `username`/`password`.
    #[error(
        "the auths entry for {registry} has neither auth nor username/password (identity tokens are not supported)"
    )]
    NoCredentials {
        /// The key as written.
        registry: String,
    },
}

/// Parses the content of a `.dockerconfigjson` key:
/// `{"auths": {"HOST[:PORT]": {"auth": "base64(user:pass)"} | {"username", "password"}}}`.
///
/// Keys are normalised (scheme and path dropped; `index.docker.io`,
/// `https://index.docker.io/v1/` and `registry-1.docker.io` become `docker.io`).
pub fn parse_pull_secret(data: &[u8]) -> Result<RegistryCredentials, SecretError> {
    // Parsed as an untyped value: serde_json's syntax errors give a position, never the
    // offending content, so nothing secret ends up in the message.
    let value: serde_json::Value = serde_json::from_slice(data)
        .map_err(|e| SecretError::NotJson(format!("line {} column {}", e.line(), e.column())))?;
    let auths = value
        .get("auths")
        .and_then(serde_json::Value::as_object)
        .ok_or(SecretError::NoAuths)?;
    let mut by_registry = HashMap::new();
    for (key, entry) in auths {
        let entry = entry
            .as_object()
            .ok_or_else(|| SecretError::EntryNotObject {
                registry: key.clone(),
            })?;
        let field = |name: &str| {
            entry
                .get(name)
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let creds = match (field("auth"), field("username"), field("password")) {
            (_, Some(u), Some(p)) => Credentials::new(u, p),
            (Some(auth), _, _) => {
                let invalid = || SecretError::InvalidAuth {
                    registry: key.clone(),
                };
                let decoded = base64_decode(auth).ok_or_else(invalid)?;
                let decoded = String::from_utf8(decoded).map_err(|_| invalid())?;
                let (u, p) = decoded.split_once(':').ok_or_else(invalid)?;
                if u.is_empty() {
                    return Err(invalid());
                }
                Credentials::new(u, p)
            }
            _ => {
                return Err(SecretError::NoCredentials {
                    registry: key.clone(),
                });
            }
        };
        by_registry.insert(normalize_registry(key), creds);
    }
    Ok(RegistryCredentials { by_registry })
}

/// `sha256:<hex>` of a Secret's content, for `BootcNode.spec.pullSecretHash` (71 characters).
pub fn secret_hash(data: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(data)))
}

/// `https://index.docker.io/v1/` → `docker.io`, `http://host:5000/x` → `host:5000`.
fn normalize_registry(key: &str) -> String {
    let s = key.trim();
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or(s).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DEFAULT_REGISTRY.to_owned()
        }
        _ => host,
    }
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Standard base64 (padding optional, also accepts the URL-safe alphabet).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        }))
    }
    let bytes = s.trim().trim_end_matches('=').as_bytes();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c)? << (18 - 6 * i);
        }
        let [_, a, b, c] = n.to_be_bytes();
        out.push(a);
        if chunk.len() > 2 {
            out.push(b);
        }
        if chunk.len() > 3 {
            out.push(c);
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Why a tag could not be resolved. Messages say what an admin can do about it and never
/// contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// 401/403.
    #[error("{}", unauthorized_message(.registry, .repository, *.with_credentials, .secret.as_deref()))]
    Unauthorized {
        /// `host[:port]`.
        registry: String,
        /// The repository.
        repository: String,
        /// Whether credentials were sent.
        with_credentials: bool,
        /// The Secret they came from (`namespace/name`), when known.
        secret: Option<String>,
    },
    /// 404.
    #[error("tag {tag} not found in {repository}")]
    NotFound {
        /// The tag.
        tag: String,
        /// `registry/repository`.
        repository: String,
    },
    /// 429.
    #[error("registry {registry} is rate limiting requests (HTTP 429){}", retry_message(*.retry_after))]
    RateLimited {
        /// `host[:port]`.
        registry: String,
        /// How long the registry asked to wait (the time left of it when the error is
        /// served from the cache), or the backoff when it gave no `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// No answer within the configured timeout.
    #[error("registry {registry} did not answer within {}s", .after.as_secs_f64())]
    Timeout {
        /// `host[:port]`.
        registry: String,
        /// The timeout.
        after: Duration,
    },
    /// Connection refused, DNS failure, reset.
    #[error("cannot reach registry {registry}: {detail}")]
    Connection {
        /// `host[:port]`.
        registry: String,
        /// What the network stack said.
        detail: String,
    },
    /// The registry speaks plain HTTP and is not listed as insecure.
    #[error("registry {registry} speaks plain HTTP; list it in --insecure-registry")]
    Insecure {
        /// `host[:port]`.
        registry: String,
    },
    /// TLS failure (certificate, protocol), or a registry listed as insecure that speaks
    /// HTTPS.
    #[error("TLS with registry {registry} failed: {detail}")]
    Tls {
        /// `host[:port]`.
        registry: String,
        /// What went wrong.
        detail: String,
    },
    /// Anything else (5xx, malformed answers, bad digests).
    #[error("resolving {reference} failed: {detail}")]
    Other {
        /// The reference being resolved.
        reference: String,
        /// What went wrong.
        detail: String,
    },
}

fn unauthorized_message(
    registry: &str,
    repository: &str,
    with_credentials: bool,
    secret: Option<&str>,
) -> String {
    match (with_credentials, secret) {
        (true, Some(secret)) => format!(
            "registry {registry} refused the credentials of pull secret {secret} for {repository}"
        ),
        (true, None) => {
            format!("registry {registry} refused the supplied credentials for {repository}")
        }
        (false, _) => format!(
            "registry {registry} requires credentials for {repository}: set spec.pullSecretRef"
        ),
    }
}

fn retry_message(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!("; retrying in {}s", d.as_secs().max(1)),
        None => String::new(),
    }
}

impl ResolveError {
    /// How long to wait before asking again, when the registry said so (429
    /// `Retry-After`). Other errors are retried after the resolver's backoff; asking
    /// earlier returns the cached error without a request.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ResolveError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A short machine-friendly name of the variant, for metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            ResolveError::Unauthorized { .. } => "unauthorized",
            ResolveError::NotFound { .. } => "not_found",
            ResolveError::RateLimited { .. } => "rate_limited",
            ResolveError::Timeout { .. } => "timeout",
            ResolveError::Connection { .. } => "connection",
            ResolveError::Insecure { .. } => "insecure",
            ResolveError::Tls { .. } => "tls",
            ResolveError::Other { .. } => "other",
        }
    }

    /// The cached error as served to one caller: its own Secret's name, the time left of a
    /// rate limit.
    fn for_caller(&self, credentials: Option<&Credentials>, left: Duration) -> ResolveError {
        let mut e = self.clone();
        match &mut e {
            ResolveError::Unauthorized { secret, .. } => {
                *secret = credentials.and_then(|c| c.source.clone());
            }
            ResolveError::RateLimited { retry_after, .. } => *retry_after = Some(left),
            _ => {}
        }
        e
    }
}

/// Renders an error and its sources, `a: b: c`, skipping repeats.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// What the classifier needs to know about the request.
struct Ctx<'a> {
    reference: &'a ImageRef,
    with_credentials: bool,
    insecure: bool,
}

fn classify(err: &OciDistributionError, ctx: &Ctx<'_>) -> ResolveError {
    let registry = ctx.reference.registry().to_owned();
    let unauthorized = || ResolveError::Unauthorized {
        registry: ctx.reference.registry().to_owned(),
        repository: ctx.reference.name(),
        with_credentials: ctx.with_credentials,
        secret: None,
    };
    let not_found = || ResolveError::NotFound {
        tag: ctx.reference.tag().unwrap_or_default().to_owned(),
        repository: ctx.reference.name(),
    };
    let rate_limited = || ResolveError::RateLimited {
        registry: ctx.reference.registry().to_owned(),
        retry_after: None,
    };
    let other = |detail: String| ResolveError::Other {
        reference: ctx.reference.to_string(),
        detail,
    };
    match err {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => unauthorized(),
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                unauthorized()
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                not_found()
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Toomanyrequests))
            {
                rate_limited()
            } else {
                let msgs: Vec<String> = envelope.errors.iter().map(|e| e.message.clone()).collect();
                other(format!("registry answered: {}", msgs.join("; ")))
            }
        }
        OciDistributionError::ServerError { code, message, .. } => match code {
            401 | 403 => unauthorized(),
            404 => not_found(),
            429 => rate_limited(),
            400 if ctx.insecure && message.contains("HTTPS server") => ResolveError::Tls {
                registry,
                detail: "it speaks HTTPS; remove it from --insecure-registry".to_owned(),
            },
            _ => other(format!(
                "registry answered HTTP {code}: {}",
                truncate(message.trim(), 200)
            )),
        },
        OciDistributionError::RequestError(e) => {
            let detail = error_chain(e);
            // What the network stack said, without the top-level message (it carries the
            // URL, whose host name must not steer the classification).
            let lower = std::error::Error::source(e)
                .map(error_chain)
                .unwrap_or_default()
                .to_ascii_lowercase();
            if e.is_timeout() {
                ResolveError::Timeout {
                    registry,
                    after: Duration::ZERO,
                }
            } else if !ctx.insecure
                && (lower.contains("invalidcontenttype")
                    || lower.contains("corrupt message")
                    || lower.contains("wrong version number"))
            {
                ResolveError::Insecure { registry }
            } else if lower.contains("certificate")
                || lower.contains("handshake")
                || lower.contains("received fatal alert")
                || lower.contains("peer is incompatible")
            {
                ResolveError::Tls { registry, detail }
            } else if e.is_connect() {
                ResolveError::Connection { registry, detail }
            } else if let Some(status) = e.status() {
                match status.as_u16() {
                    401 | 403 => unauthorized(),
                    404 => not_found(),
                    429 => rate_limited(),
                    _ => other(detail),
                }
            } else {
                other(detail)
            }
        }
        e => other(error_chain(e)),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

// ---------------------------------------------------------------------------------------
// Resolver
// ---------------------------------------------------------------------------------------

/// How a [`Resolver`] talks to registries.
#[derive(Debug, Clone)]
pub struct ResolverOptions {
    /// `host[:port]` of registries reached over plain HTTP. Nothing is, by default.
    pub insecure_registries: Vec<String>,
    /// Bound on one registry exchange (connect, HEAD and any fallback GET).
    pub timeout: Duration,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            insecure_registries: Vec::new(),
            timeout: Duration::from_secs(30),
        }
    }
}

/// What a reference resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical pin, `registry/repo@sha256:…`.
    pub image: String,
    /// The digest the reference points to (the index digest for a manifest list).
    pub digest: Digest,
    /// The image's `org.opencontainers.image.version` label, when known (never fetched
    /// for a digest reference).
    pub version: Option<String>,
    /// When the registry gave this answer (now, for a digest reference).
    pub resolved_at: DateTime<Utc>,
}

/// Resolves image references for every pool, with caching, coalescing and backoff (see
/// the module documentation). Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("options", &self.inner.options)
            .field("entries", &lock(&self.inner.entries).len())
            .finish_non_exhaustive()
    }
}

struct Inner {
    options: ResolverOptions,
    /// One client per credential fingerprint (`None` = anonymous), with its last use.
    clients: Mutex<HashMap<Option<String>, (Client, Instant)>>,
    /// One cache entry per key, with its last use.
    entries: Mutex<HashMap<EntryKey, (SharedEntry, Instant)>>,
    /// Digest → version label (`None`: the image has none).
    versions: Mutex<HashMap<Digest, Option<String>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EntryKey {
    reference: String,
    credentials: Option<String>,
}

/// A cache entry; its async mutex is held during the registry exchange, which is what
/// makes concurrent callers of one key wait for a single request.
type SharedEntry = Arc<tokio::sync::Mutex<Entry>>;

#[derive(Default)]
struct Entry {
    last_good: Option<(Resolved, Instant)>,
    failure: Option<Failure>,
}

struct Failure {
    error: ResolveError,
    at: Instant,
    until: Instant,
    count: u32,
}

/// Locks a std mutex, recovering from poisoning (the maps stay consistent: every
/// critical section is a single insert, lookup or retain).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// For an index, the linux/amd64 entry, else the first (used for the version label only).
fn amd64_or_first(manifests: &[ImageIndexEntry]) -> Option<String> {
    linux_amd64_resolver(manifests).or_else(|| manifests.first().map(|m| m.digest.clone()))
}

impl Resolver {
    /// A resolver with no cached answers. Registry clients are built on first use.
    pub fn new(options: ResolverOptions) -> Self {
        Resolver {
            inner: Arc::new(Inner {
                options,
                clients: Mutex::new(HashMap::new()),
                entries: Mutex::new(HashMap::new()),
                versions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &ResolverOptions {
        &self.inner.options
    }

    /// Resolves `reference` (see the module documentation for caching and backoff).
    ///
    /// `credentials` are those of the pool's pull secret for the reference's registry
    /// ([`RegistryCredentials::for_registry`]); `interval` is the pool's
    /// `resolveIntervalSeconds`.
    pub async fn resolve(
        &self,
        reference: &ImageRef,
        credentials: Option<&Credentials>,
        interval: Duration,
    ) -> Result<Resolved, ResolveError> {
        if let Some(digest) = reference.digest() {
            return Ok(Resolved {
                image: reference.pin(digest),
                digest: digest.clone(),
                version: None,
                resolved_at: Utc::now(),
            });
        }
        let arrival = Instant::now();
        let key = EntryKey {
            reference: reference.to_string(),
            credentials: credentials.map(Credentials::fingerprint),
        };
        let entry = self.entry(key);
        let mut entry = entry.lock().await;
        let now = Instant::now();

        // An answer produced while we waited on the lock (coalescing), or still fresh.
        if let Some(f) = &entry.failure {
            if f.at >= arrival || now < f.until {
                let left = f.until.saturating_duration_since(now);
                return Err(f.error.for_caller(credentials, left));
            }
        } else if let Some((resolved, at)) = &entry.last_good
            && (*at >= arrival || now.duration_since(*at) < interval)
        {
            return Ok(resolved.clone());
        }

        match self.fetch(reference, credentials).await {
            Ok(resolved) => {
                let changed = entry
                    .last_good
                    .as_ref()
                    .is_none_or(|(old, _)| old.digest != resolved.digest);
                if changed {
                    tracing::info!(
                        reference = %reference,
                        digest = %resolved.digest,
                        version = resolved.version.as_deref().unwrap_or(""),
                        "tag resolved to a new digest"
                    );
                } else {
                    tracing::debug!(reference = %reference, digest = %resolved.digest, "tag re-resolved");
                }
                entry.last_good = Some((resolved.clone(), Instant::now()));
                entry.failure = None;
                Ok(resolved)
            }
            Err(error) => {
                let count = entry.failure.as_ref().map_or(0, |f| f.count) + 1;
                let backoff = error
                    .retry_after()
                    .unwrap_or_else(|| backoff(interval, count));
                let at = Instant::now();
                tracing::warn!(
                    reference = %reference,
                    error = %error,
                    failures = count,
                    retry_in_s = backoff.as_secs_f64(),
                    "tag resolution failed"
                );
                let error = match error {
                    ResolveError::RateLimited { registry, .. } => ResolveError::RateLimited {
                        registry,
                        retry_after: Some(backoff),
                    },
                    e => e,
                };
                entry.failure = Some(Failure {
                    error: error.clone(),
                    at,
                    until: at + backoff,
                    count,
                });
                Err(error.for_caller(credentials, backoff))
            }
        }
    }

    /// The cache entry of `key`, created when missing; idle entries are pruned.
    fn entry(&self, key: EntryKey) -> SharedEntry {
        let mut entries = lock(&self.inner.entries);
        let now = Instant::now();
        if entries.len() > PRUNE_ABOVE {
            entries.retain(|_, (e, used)| {
                Arc::strong_count(e) > 1 || now.duration_since(*used) < IDLE_EVICTION
            });
        }
        let slot = entries.entry(key).or_insert_with(|| (Arc::default(), now));
        slot.1 = now;
        slot.0.clone()
    }

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
    async fn fetch(
        &self,
        reference: &ImageRef,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, ResolveError> {
        let ctx = Ctx {
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
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        let tag = reference
            .tag()
            .unwrap_or(bootc_crds::image_ref::DEFAULT_TAG);
        let oci_ref = Reference::with_tag(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            tag.to_owned(),
        );
        let timeout = self.inner.options.timeout;
        let digest = tokio::time::timeout(timeout, client.fetch_manifest_digest(&oci_ref, &auth))
            .await
            .map_err(|_| ResolveError::Timeout {
                registry: reference.registry().to_owned(),
                after: timeout,
            })?
            .map_err(|e| match classify(&e, &ctx) {
                ResolveError::Timeout { registry, .. } => ResolveError::Timeout {
                    registry,
                    after: timeout,
                },
                other => other,
            })?;
        let digest: Digest = digest.parse().map_err(|e| ResolveError::Other {
            reference: reference.to_string(),
            detail: format!("the registry answered with digest {digest:?}: {e}"),
        })?;
        let version = self.version(&client, &auth, reference, &digest).await;
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
            Ok(Ok((_, _, config))) => version_label(&config),
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

/// `min(interval, 30 s · 2^(n-1))`, at least one second.
fn backoff(interval: Duration, failures: u32) -> Duration {
    let step = BACKOFF_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    step.min(interval).max(Duration::from_secs(1))
}

/// `config.Labels["org.opencontainers.image.version"]` of an image config document.
fn version_label(config: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(config).ok()?;
    v.get("config")?
        .get("Labels")?
        .get(VERSION_LABEL)?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn b64(s: &str) -> String {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let input = s.as_bytes();
        let mut out = String::new();
        for chunk in input.chunks(3) {
            let b = [
                chunk[0],
                chunk.get(1).copied().unwrap_or(0),
                chunk.get(2).copied().unwrap_or(0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn base64_round_trips() {
        for s in ["", "a", "ab", "abc", "abcd", "user:p@ss:w0rd", "ünïcode:x"] {
            assert_eq!(base64_decode(&b64(s)).unwrap(), s.as_bytes(), "{s}");
            assert_eq!(
                base64_decode(b64(s).trim_end_matches('=')).unwrap(),
                s.as_bytes()
            );
        }
        assert!(base64_decode("a").is_none());
        assert!(base64_decode("ab!d").is_none());
    }

    #[test]
    fn parses_auth_and_username_password() {
        let json = format!(
            r#"{{"auths":{{"quay.io":{{"auth":"{}"}},"127.0.0.1:5000":{{"username":"bob","password":"pw:with:colons"}}}}}}"#,
            b64("alice:s3cr3t:x")
        );
        let creds = parse_pull_secret(json.as_bytes()).unwrap();
        let q = creds.for_registry("quay.io").unwrap();
        assert_eq!((q.username(), q.password()), ("alice", "s3cr3t:x"));
        let l = creds.for_registry("127.0.0.1:5000").unwrap();
        assert_eq!((l.username(), l.password()), ("bob", "pw:with:colons"));
        assert!(creds.for_registry("ghcr.io").is_none());
        assert!(creds.for_registry("127.0.0.1:5001").is_none());
    }

    #[test]
    fn docker_hub_aliases() {
        for key in [
            "index.docker.io",
            "https://index.docker.io/v1/",
            "registry-1.docker.io",
            "docker.io",
        ] {
            let json = format!(r#"{{"auths":{{"{key}":{{"auth":"{}"}}}}}}"#, b64("u:p"));
            let creds = parse_pull_secret(json.as_bytes()).unwrap();
            let c = creds.for_registry("docker.io").expect(key);
            assert_eq!(c.username(), "u");
            assert!(creds.for_registry("index.docker.io").is_some(), "{key}");
        }
        let json = format!(
            r#"{{"auths":{{"https://myreg.example:8443/some/path":{{"auth":"{}"}}}}}}"#,
            b64("u:p")
        );
        let creds = parse_pull_secret(json.as_bytes()).unwrap();
        assert!(creds.for_registry("myreg.example:8443").is_some());
    }

    #[test]
    fn errors_are_clear_and_never_contain_credentials() {
        let e = parse_pull_secret(b"{\"auths\": {\"x\": {\"auth\": \"hunter2").unwrap_err();
        assert!(matches!(e, SecretError::NotJson(_)));
        assert!(
            e.to_string().starts_with(".dockerconfigjson is not JSON"),
            "{e}"
        );
        assert!(!e.to_string().contains("hunter2"), "{e}");

        let e = parse_pull_secret(br#"{"credHelpers":{}}"#).unwrap_err();
        assert_eq!(e.to_string(), ".dockerconfigjson has no auths object");

        // Valid base64 without a colon: the decoded secret must not leak.
        let json = format!(
            r#"{{"auths":{{"quay.io":{{"auth":"{}"}}}}}}"#,
            b64("topsecretnocolon")
        );
        let e = parse_pull_secret(json.as_bytes()).unwrap_err();
        assert_eq!(e.to_string(), "auth for quay.io is not base64 user:pass");
        assert!(!format!("{e:?}").contains("topsecret"));

        let e = parse_pull_secret(br#"{"auths":{"quay.io":{"auth":"not*base64!"}}}"#).unwrap_err();
        assert_eq!(e.to_string(), "auth for quay.io is not base64 user:pass");
        assert!(!format!("{e:?}").contains("base64!"));

        let e = parse_pull_secret(br#"{"auths":{"quay.io":{"identitytoken":"tok"}}}"#).unwrap_err();
        assert!(matches!(e, SecretError::NoCredentials { .. }), "{e}");
        assert!(!e.to_string().contains("tok\""));

        let e = parse_pull_secret(br#"{"auths":{"quay.io":"u:p"}}"#).unwrap_err();
        assert!(matches!(e, SecretError::EntryNotObject { .. }));
    }

    #[test]
    fn debug_redacts_passwords() {
        let json = format!(
            r#"{{"auths":{{"quay.io":{{"auth":"{}"}}}}}}"#,
            b64("alice:VERYSECRET")
        );
        let creds = parse_pull_secret(json.as_bytes())
            .unwrap()
            .with_source("ns", "pull");
        let dbg = format!("{creds:?}");
        assert!(!dbg.contains("VERYSECRET"), "{dbg}");
        assert!(dbg.contains("<redacted>"), "{dbg}");
        let one = creds.for_registry("quay.io").unwrap();
        assert_eq!(one.source(), Some("ns/pull"));
        let dbg = format!("{one:?} {one:#?}");
        assert!(!dbg.contains("VERYSECRET"), "{dbg}");
    }

    #[test]
    fn secret_hash_is_prefixed_sha256() {
        let h = secret_hash(b"abc");
        assert_eq!(
            h,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(h.len() <= 128);
        assert_ne!(secret_hash(b"abc"), secret_hash(b"abd"));
    }

    #[test]
    fn backoff_grows_and_is_capped_by_the_interval() {
        let hour = Duration::from_secs(3600);
        assert_eq!(backoff(hour, 1), Duration::from_secs(30));
        assert_eq!(backoff(hour, 2), Duration::from_secs(60));
        assert_eq!(backoff(hour, 3), Duration::from_secs(120));
        assert_eq!(backoff(hour, 40), hour);
        assert_eq!(
            backoff(Duration::from_secs(300), 5),
            Duration::from_secs(300)
        );
        assert_eq!(
            backoff(Duration::from_millis(10), 1),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn unauthorized_messages() {
        let e = ResolveError::Unauthorized {
            registry: "quay.io".into(),
            repository: "quay.io/a/b".into(),
            with_credentials: true,
            secret: Some("ns/pull".into()),
        };
        assert_eq!(
            e.to_string(),
            "registry quay.io refused the credentials of pull secret ns/pull for quay.io/a/b"
        );
        let e = ResolveError::Unauthorized {
            registry: "quay.io".into(),
            repository: "quay.io/a/b".into(),
            with_credentials: false,
            secret: None,
        };
        assert!(e.to_string().contains("set spec.pullSecretRef"));
    }

    #[test]
    fn version_label_from_config() {
        let cfg = r#"{"architecture":"amd64","config":{"Labels":{"org.opencontainers.image.version":"42.1"}}}"#;
        assert_eq!(version_label(cfg).as_deref(), Some("42.1"));
        assert_eq!(version_label(r#"{"config":{}}"#), None);
    }
}
