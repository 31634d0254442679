//! What `bootc-pool-controller` and `bootc-node-agent` share, each rule in one place:
//!
//! - [`backoff`]: the one retry policy (doubling from a first delay to a ceiling).
//! - [`error`]: an error and its causes as one line.
//! - [`health`]: the HTTP server of `/healthz`, `/readyz` and, when given, `/metrics`.
//! - [`kube_client`]: the API client, from a kubeconfig or in cluster, with a User-Agent.
//! - [`logging`]: text or JSON logs on standard error, filtered by `RUST_LOG`.
//! - [`process`]: a binary's runtime and exit codes (2 refused configuration, 1 failure).
//! - [`pull_secret`]: a `.dockerconfigjson`'s credentials by registry, and its hash.
//! - [`shutdown`]: SIGTERM and SIGINT as a shutdown request tasks wait for.

pub mod backoff;
pub mod error;
pub mod health;
pub mod kube_client;
pub mod logging;
pub mod process;
pub mod pull_secret;
pub mod shutdown;

pub use error::error_chain;
