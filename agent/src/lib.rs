//! The node agent of the bootc node-pool updater:
//!
//! - [`config`]: the command line and environment, checked once at start.
//! - [`bootc_status`]: bootc's status document, parsed, and what the agent reports from it.
//! - [`machine`]: the decision, a pure function from what is asked, the host and memory.
//! - [`host`]: the [`host::Host`] the agent acts on, and its D-Bus implementation.
//! - [`report`]: the BootcNode status composed from the host and the decision.
//! - [`run`]: the run loop — watch, reconcile, stage, write the pull secret and status.
//! - [`ready`]: readiness, marked once the first status is reported, and its probe.
//!
//! What it shares with the controller (client, logging, shutdown, backoff, pull-secret
//! parsing) is in `bootc_pool_common`.

pub mod bootc_status;
pub mod config;
pub mod host;
pub mod machine;
pub mod ready;
pub mod report;
pub mod run;
