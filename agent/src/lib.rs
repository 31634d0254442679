//! The node agent of the bootc node-pool updater: configuration, the host's bootc status, and (to come) the state machine and host access.

pub mod bootc_status;
pub mod config;
pub mod machine;
