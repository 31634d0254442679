//! `bootc-node-agent`: stages the image its BootcNode asks for, reboots when allowed, and
//! reports what the host booted.

use std::process::ExitCode;
use std::sync::Arc;

use bootc_node_agent::config::{self, Config};
use bootc_node_agent::host::DbusHost;
use bootc_node_agent::run::{self, Options, error_chain};
use clap::Parser;
use tracing::{error, info};

fn main() -> ExitCode {
    let args = config::Args::parse();
    let config = match Config::try_from(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("bootc-node-agent: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log_format);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(agent(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn agent(config: Config) -> Result<(), String> {
    let client = client(&config).await?;
    let host = DbusHost::connect(
        &config.system_bus_address,
        &config.host_work_dir,
        config.command_timeout,
    )
    .await
    .map_err(|e| error_chain(&e))?
    .with_host_root(&config.host_root);
    info!(node = %config.node_name, bus = %config.system_bus_address, "agent started");
    let options = Options {
        node_name: config.node_name.clone(),
        poll_interval: config.status_poll_interval,
        agent_version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    run::run(client, Arc::new(host), options, shutdown_signal())
        .await
        .map_err(|e| error_chain(&e))
}

async fn client(config: &Config) -> Result<kube::Client, String> {
    let kube_config = match &config.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                format!(
                    "cannot read kubeconfig {}: {}",
                    path.display(),
                    error_chain(&e)
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {}", path.display(), error_chain(&e)))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("no --kubeconfig and not in a cluster: {}", error_chain(&e)))?,
    };
    let mut kube_config = kube_config;
    kube_config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(run::USER_AGENT),
    ));
    kube::Client::try_from(kube_config)
        .map_err(|e| format!("cannot build the API client: {}", error_chain(&e)))
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!("cannot listen for SIGTERM; stop the agent with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
    }
}
