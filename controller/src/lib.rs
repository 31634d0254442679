//! The bootc node-pool controller.

pub mod drain;
pub mod history;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod reconcile;
pub mod resolve;
pub mod server;
