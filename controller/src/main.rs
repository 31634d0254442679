//! `bootc-pool-controller`: resolves each BootcNodePool's image and paces its nodes' reboots.

mod config;

use std::process::ExitCode;

use bootc_pool_controller::leader::LeaseConfig;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::{self, Options};
use bootc_pool_controller::resolve::{Resolver, ResolverOptions};
use bootc_pool_controller::server::{Health, Server};
use clap::Parser;
use tracing::{error, info};

fn main() -> ExitCode {
    let args = config::Args::parse();
    let config = match config::Config::try_from(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("bootc-pool-controller: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(config.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(controller(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: config::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        config::LogFormat::Json => builder.json().init(),
        config::LogFormat::Text => builder.init(),
    }
}

/// An error and its causes on one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

async fn controller(config: config::Config) -> Result<(), String> {
    let mut kube_config = match &config.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {}", path.display(), chain(&e)))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {}", path.display(), chain(&e)))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("no --kubeconfig and not in a cluster: {}", chain(&e)))?,
    };
    // The client's own retry of 429 answers would hide a disruption budget's refusal
    // from the drain for minutes; the drain retries with its own backoff.
    kube_config.default_retry = false;
    kube_config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(reconcile::USER_AGENT),
    ));
    let client = kube::Client::try_from(kube_config)
        .map_err(|e| format!("cannot build the API client: {}", chain(&e)))?;
    let identity = config.identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| format!("bootc-pool-controller-{}", std::process::id()))
    });
    let metrics = Metrics::new();
    let health = Health::new();
    let options = Options {
        instance: identity.clone(),
        resolver: Resolver::new(ResolverOptions {
            insecure_registries: config.insecure_registries.clone(),
            ..ResolverOptions::default()
        }),
        metrics: metrics.clone(),
        ..Options::default()
    };
    let server = Server::bind(config.metrics_addr, metrics, health.clone())
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.metrics_addr))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(server.run(async move {
        let _ = server_stop.wait_for(|s| *s).await;
    }));
    let lease = LeaseConfig::new(&config.lease_name, &config.lease_namespace, &identity);
    info!(%identity, lease = %config.lease_name, namespace = %config.lease_namespace, "controller started");
    health.set_ready(true);
    let mut stop = stop_rx;
    let elected = reconcile::run_elected(client, options, lease, async move {
        let _ = stop.wait_for(|s| *s).await;
    });
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    elected.await.map_err(|e| format!("leader election: {e}"))?;
    let _ = server.await;
    info!("controller stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!("cannot listen for SIGTERM; stop the controller with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
    }
}
