//! What `bootc-pool-controller` and `bootc-node-agent` share, each rule in one place:
//!
//! - [`backoff`]: the one retry policy (doubling from a first delay to a ceiling).

pub mod backoff;
