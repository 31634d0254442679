//! The node agent of the bootc node-pool updater: configuration, the host's bootc status, the decision state machine, and host access over D-Bus (the run loop is to come).

pub mod bootc_status;
pub mod config;
pub mod host;
pub mod machine;
