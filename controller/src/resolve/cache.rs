//! The [`Resolver`]: its cache entries (one per reference and credential set), the
//! coalescing of concurrent callers and the backoff after failures.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bootc_crds::image_ref::{Digest, ImageRef};
use bootc_pool_common::backoff::Backoff;
use chrono::{DateTime, Utc};

use super::{Credentials, ResolveError};

/// First backoff step after a failed resolution.
const BACKOFF_BASE: Duration = Duration::from_secs(30);
/// Failures past this many do not lengthen the backoff any more (30 s · 2^16, about 23
/// days, is the longest step; the interval caps it well before in practice).
const BACKOFF_MAX_FAILURES: u32 = 17;
/// The shortest backoff, whatever the interval.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Cache entries unused for this long are dropped.
const IDLE_EVICTION: Duration = Duration::from_secs(3600);
/// Number of entries above which idle ones are looked for.
const PRUNE_ABOVE: usize = 64;

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
/// the [module documentation](super)). Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Resolver {
    pub(super) inner: Arc<ResolverState>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("options", &self.inner.options)
            .field("entries", &lock(&self.inner.entries).len())
            .finish_non_exhaustive()
    }
}

pub(super) struct ResolverState {
    pub(super) options: ResolverOptions,
    /// The HTTP client of every registry exchange, or why there is none.
    pub(super) http: Result<reqwest::Client, String>,
    /// One cache entry per key, with its last use.
    entries: Mutex<HashMap<EntryKey, (SharedEntry, Instant)>>,
    /// Digest → version label (`None`: the image has none).
    pub(super) versions: Mutex<HashMap<Digest, Option<String>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EntryKey {
    reference: String,
    credentials: Option<String>,
}

/// A cache entry; its async mutex is held during the registry exchange, which is what
/// makes concurrent callers of one key wait for a single request.
type SharedEntry = Arc<tokio::sync::Mutex<CacheEntry>>;

#[derive(Default)]
struct CacheEntry {
    last_good: Option<(Resolved, Instant)>,
    failure: Option<LastFailure>,
}

struct LastFailure {
    error: ResolveError,
    at: Instant,
    until: Instant,
    count: u32,
}

/// Locks a std mutex, recovering from poisoning (the maps stay consistent: every
/// critical section is a single insert, lookup or retain).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Resolver {
    /// A resolver with no cached answers.
    pub fn new(options: ResolverOptions) -> Self {
        let http = super::session::http_client(options.timeout);
        Resolver {
            inner: Arc::new(ResolverState {
                options,
                http,
                entries: Mutex::new(HashMap::new()),
                versions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &ResolverOptions {
        &self.inner.options
    }

    /// Resolves `reference` (see the [module documentation](super) for caching and
    /// backoff).
    ///
    /// `credentials` are those of the pool's pull secret for the reference's registry
    /// ([`RegistryCredentials::for_registry`](super::RegistryCredentials::for_registry));
    /// `interval` is the pool's `resolveIntervalSeconds`.
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
        if let Some(answer) = entry.answer(arrival, interval, credentials) {
            return answer;
        }
        let fetched = self.fetch(reference, credentials).await;
        entry.record(reference, fetched, interval, credentials)
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
}

impl CacheEntry {
    /// The answer a caller that arrived at `arrival` takes without a request: one
    /// produced while it waited on the lock (coalescing), a failure still in its backoff,
    /// or a success younger than `interval`.
    fn answer(
        &self,
        arrival: Instant,
        interval: Duration,
        credentials: Option<&Credentials>,
    ) -> Option<Result<Resolved, ResolveError>> {
        let now = Instant::now();
        if let Some(f) = &self.failure {
            if f.at >= arrival || now < f.until {
                let left = f.until.saturating_duration_since(now);
                return Some(Err(f.error.for_caller(credentials, left)));
            }
        } else if let Some((resolved, at)) = &self.last_good
            && (*at >= arrival || now.duration_since(*at) < interval)
        {
            return Some(Ok(resolved.clone()));
        }
        None
    }

    /// Keeps what a registry exchange gave (a success, or a failure with its backoff) and
    /// returns it as the caller sees it.
    fn record(
        &mut self,
        reference: &ImageRef,
        fetched: Result<Resolved, ResolveError>,
        interval: Duration,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, ResolveError> {
        match fetched {
            Ok(resolved) => {
                self.succeeded(reference, &resolved);
                Ok(resolved)
            }
            Err(error) => Err(self.failed(reference, error, interval, credentials)),
        }
    }

    fn succeeded(&mut self, reference: &ImageRef, resolved: &Resolved) {
        let changed = self
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
        self.last_good = Some((resolved.clone(), Instant::now()));
        self.failure = None;
    }

    fn failed(
        &mut self,
        reference: &ImageRef,
        error: ResolveError,
        interval: Duration,
        credentials: Option<&Credentials>,
    ) -> ResolveError {
        let count = self.failure.as_ref().map_or(0, |f| f.count) + 1;
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
        self.failure = Some(LastFailure {
            error: error.clone(),
            at,
            until: at + backoff,
            count,
        });
        error.for_caller(credentials, backoff)
    }
}

/// `min(interval, 30 s · 2^(n-1))`, at least one second.
pub(super) fn backoff(interval: Duration, failures: u32) -> Duration {
    Backoff::new(BACKOFF_BASE, interval)
        .delay(failures.min(BACKOFF_MAX_FAILURES))
        .max(BACKOFF_MIN)
}
