//! `bootc-pool-controller`: resolves each BootcNodePool's image and paces its nodes' reboots.

mod config;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = config::Args::parse();
    match config::Config::try_from(args) {
        Ok(config) => {
            eprintln!("bootc-pool-controller: configuration accepted: {config:?}");
            eprintln!(
                "bootc-pool-controller: the reconciler is not part of this build yet; exiting"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bootc-pool-controller: invalid configuration: {e}");
            ExitCode::from(2)
        }
    }
}
