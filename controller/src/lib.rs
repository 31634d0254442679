//! The bootc node-pool controller.

pub mod drain;
pub mod plan;
pub mod reconcile;
