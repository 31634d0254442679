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
//! - **HEAD first**: `HEAD` the manifest and take its `Docker-Content-Digest`; when the
//!   answer is not a 200 with that header (a registry without HEAD answers 404/405, or
//!   omits the header), `GET` it and hash the body. A manifest list or OCI index
//!   resolves to the digest of the list itself (nodes report per-arch digests, and the
//!   one matching rule, [`bootc_crds::image_ref::runs_digest`], accepts either);
//! - **bounded answers**: every answer is read up to a cap and no further, however it is
//!   sent (a `Content-Length` above the cap is not read at all; a chunked body is cut
//!   off there): 4 MiB for a manifest or index, 1 MiB for a token, 8 MiB for an image
//!   config. A larger manifest or token fails the resolution, naming the cap; the pool
//!   keeps its last good target;
//! - **version label**: `org.opencontainers.image.version` is read from the image config
//!   once per new digest (cached by digest); for an index the linux/amd64 entry, else the
//!   first entry, is used. A failure there never fails the resolution (version `None`,
//!   retried on the next resolution);
//! - **backoff**: after a failure the key is not tried again before
//!   `min(interval, 30 s · 2^(n-1))` (n = consecutive failures; the workspace's
//!   [`Backoff`](bootc_pool_common::backoff::Backoff)); callers asking meanwhile get the
//!   cached error. A 429 waits the same backoff; the registry's `Retry-After` is not
//!   read.
//!
//! Credentials never appear in errors, logs or `Debug` output.
//!
//! The exchange itself is the registry API's (OCI Distribution) over one shared HTTP
//! client, per resolution: a request answered 401 with a `WWW-Authenticate` challenge is
//! asked again once, with a pull token from the token service it names (`Bearer`,
//! asked with the credentials when there are some) or with the credentials themselves
//! (`Basic`). Nothing is kept between resolutions, so one pool's credentials or token
//! can never be sent on behalf of another. `oci-client` provides the document types
//! and the index's platform choice; it reads answers whole, without a bound, so it makes
//! no request.
//!
//! The parts:
//!
//! - `cache`: the [`Resolver`], its cache entries, coalescing and backoff;
//! - `registry`: the digest of a tag and the version label of a digest;
//! - `session`: the requests of one resolution (challenges, tokens, capped reads);
//! - `error`: [`ResolveError`] and how registry and network failures map to it.
//!
//! Pull secrets are parsed by [`bootc_pool_common::pull_secret`] (re-exported here).

mod cache;
mod error;
mod registry;
mod session;

pub use bootc_pool_common::pull_secret::{
    Credentials, RegistryCredentials, SecretError, parse_pull_secret, secret_hash,
};
pub use cache::{Resolved, Resolver, ResolverOptions};
pub use error::ResolveError;

/// The image config label that carries the version shown as `status.targetVersion`.
pub const VERSION_LABEL: &str = "org.opencontainers.image.version";

#[cfg(test)]
mod tests;
