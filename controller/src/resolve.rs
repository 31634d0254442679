//! Tag resolution: turns a pool's `spec.image.ref` into a digest pin, the first step of
//! every reconcile of a pool that follows a tag (asked by `reconcile::lookup`; what the
//! answer means for the target is decided by `plan::target`).
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
//!   index resolves to the digest of the list itself (nodes report per-arch digests, and
//!   the one matching rule, [`bootc_crds::image_ref::runs_digest`], accepts either);
//! - **version label**: `org.opencontainers.image.version` is read from the image config
//!   once per new digest (cached by digest); for an index the linux/amd64 entry, else the
//!   first entry, is used. A failure there never fails the resolution (version `None`,
//!   retried on the next resolution);
//! - **backoff**: after a failure the key is not tried again before
//!   `min(interval, 30 s · 2^(n-1))` (n = consecutive failures; the workspace's
//!   [`Backoff`](bootc_pool_common::backoff::Backoff)); callers asking meanwhile get the
//!   cached error. A 429 waits the same backoff: oci-client does not pass the registry's
//!   `Retry-After` on, so it is never read.
//!
//! Credentials never appear in errors, logs or `Debug` output.
//!
//! Why one `oci_client::Client` per credential set rather than one in total: the client
//! remembers the first credentials it saw for a registry and caches basic-auth "tokens"
//! per registry and repository forever, so a single client would send pool A's pull
//! secret on behalf of pool B (or keep using a rotated-out password). Clients are created
//! lazily, one per distinct credential set (anonymous being one), reused for every request
//! with those credentials and dropped after an hour unused.
//!
//! The parts:
//!
//! - `cache`: the [`Resolver`], its cache entries, coalescing and backoff;
//! - `registry`: the registry exchange (a client per credential set, the digest, the
//!   version label);
//! - `error`: [`ResolveError`] and how registry and network failures map to it.
//!
//! Pull secrets are parsed by [`bootc_pool_common::pull_secret`] (re-exported here).

mod cache;
mod error;
mod registry;

pub use bootc_pool_common::pull_secret::{
    Credentials, RegistryCredentials, SecretError, parse_pull_secret, secret_hash,
};
pub use cache::{Resolved, Resolver, ResolverOptions};
pub use error::ResolveError;

/// The image config label that carries the version shown as `status.targetVersion`.
pub const VERSION_LABEL: &str = "org.opencontainers.image.version";

#[cfg(test)]
mod tests;
