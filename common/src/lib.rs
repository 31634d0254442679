//! What `bootc-pool-controller`, `bootc-node-agent` and the `kubectl-bootc` plugin share,
//! each rule in one place. The parts a long-running process alone needs sit behind
//! features, so that the plugin builds without a web server or a log subscriber:
//!
//! - [`backoff`]: the one retry policy (doubling from a first delay to a ceiling).
//! - [`error`]: an error and its causes as one line.
//! - `health` (feature `server`): the HTTP server of `/healthz`, `/readyz` and, when
//!   given, `/metrics`.
//! - [`kube_client`]: the API client, from a kubeconfig or in cluster, with a User-Agent.
//! - `logging` (feature `logging`): text or JSON logs on standard error, filtered by
//!   `RUST_LOG`.
//! - [`node`]: a Node's `Ready` condition, and the pool that owns a BootcNode.
//! - [`process`]: a binary's runtime and exit codes (2 refused configuration, 1 failure).
//! - [`pull_secret`]: a `.dockerconfigjson`'s credentials by registry, and its hash.
//! - [`shutdown`]: SIGTERM and SIGINT as a shutdown request tasks wait for.

pub mod backoff;
pub mod error;
#[cfg(feature = "server")]
pub mod health;
pub mod kube_client;
#[cfg(feature = "logging")]
pub mod logging;
pub mod node;
pub mod process;
pub mod pull_secret;
pub mod shutdown;

pub use error::error_chain;
