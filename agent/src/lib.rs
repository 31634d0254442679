//! The node agent of the bootc node-pool updater: configuration, the host's bootc status,
//! the decision state machine, host access over D-Bus, the status report and the run loop.

pub mod bootc_status;
pub mod config;
pub mod host;
pub mod machine;
pub mod report;
pub mod run;
