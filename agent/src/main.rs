//! `bootc-node-agent`: stages the image its BootcNode asks for, reboots when allowed, and
//! reports what the host booted.

use std::process::ExitCode;
use std::sync::Arc;

use bootc_node_agent::config::{self, Config};
use bootc_node_agent::host::DbusHost;
use bootc_node_agent::ready;
use bootc_node_agent::run::{self, RunOptions};
use bootc_pool_common::error_chain;
use bootc_pool_common::kube_client::{self, ClientOptions};
use bootc_pool_common::process::{self, Runtime};
use bootc_pool_common::{logging, shutdown};
use clap::Parser;
use tracing::info;

fn main() -> ExitCode {
    let args = config::Args::parse();
    if args.check_ready {
        // The readiness probe: ready once the running agent reported its first status.
        return match ready::check(&ready::dir(&args.host_root, &args.host_work_dir)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bootc-node-agent: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match Config::try_from(args) {
        Ok(config) => config,
        Err(e) => return process::invalid_configuration("bootc-node-agent", &e),
    };
    logging::init(config.log_format);
    process::run(Runtime::CurrentThread, agent(config))
}

async fn agent(config: Config) -> Result<(), String> {
    let client = kube_client::client(ClientOptions {
        kubeconfig: config.kubeconfig.as_deref(),
        user_agent: run::USER_AGENT,
        retry_transient: true,
        max_in_flight: None,
    })
    .await?;
    let host = DbusHost::connect(
        &config.system_bus_address,
        &config.host_work_dir,
        config.command_timeout,
    )
    .await
    .map_err(|e| error_chain(&e))?
    .with_host_root(&config.host_root);
    info!(node = %config.node_name, bus = %config.system_bus_address, "agent started");
    let options = RunOptions {
        node_name: config.node_name.clone(),
        poll_interval: config.status_poll_interval,
        agent_version: env!("CARGO_PKG_VERSION").to_owned(),
        ready_dir: Some(ready::dir(&config.host_root, &config.host_work_dir)),
    };
    run::run(client, Arc::new(host), options, shutdown::signal("agent"))
        .await
        .map_err(|e| error_chain(&e))
}
