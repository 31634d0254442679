//! `bootc-node-agent`: stages the image its BootcNode asks for, reboots when allowed, and
//! reports what the host booted.

use std::process::ExitCode;

use bootc_node_agent::config;
use clap::Parser;

fn main() -> ExitCode {
    let args = config::Args::parse();
    match config::Config::try_from(args) {
        Ok(config) => {
            eprintln!("bootc-node-agent: configuration accepted: {config:?}");
            eprintln!("bootc-node-agent: the agent loop is not part of this build yet; exiting");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bootc-node-agent: invalid configuration: {e}");
            ExitCode::from(2)
        }
    }
}
