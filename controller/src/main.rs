//! `bootc-pool-controller`: resolves each BootcNodePool's image and paces its nodes' reboots.

mod config;

use std::process::ExitCode;

use bootc_pool_common::kube_client::{self, ClientOptions};
use bootc_pool_common::logging;
use bootc_pool_common::process::{self, Runtime};
use bootc_pool_common::shutdown::Shutdown;
use bootc_pool_controller::leader::LeaseConfig;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::{self, Dependencies};
use bootc_pool_controller::resolve::{Resolver, ResolverOptions};
use bootc_pool_controller::server::{Health, Server};
use clap::Parser;
use tracing::info;

/// mimalloc, built without transparent huge pages: the controller's allocations (watch
/// events decoded, requests built, plans made and dropped) cost less CPU than with
/// glibc's allocator, and without huge pages its resident size stays near glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = config::Args::parse();
    let config = match config::Config::try_from(args) {
        Ok(config) => config,
        Err(e) => return process::invalid_configuration("bootc-pool-controller", &e),
    };
    logging::init(config.log_format);
    process::run(Runtime::threads(config.worker_threads), controller(config))
}

async fn controller(config: config::Config) -> Result<(), String> {
    let options = ClientOptions {
        kubeconfig: config.kubeconfig.as_deref(),
        user_agent: reconcile::USER_AGENT,
        // The client's own retry of 429 answers would hide a disruption budget's
        // refusal from the drain for minutes; the drain retries with its own backoff.
        retry_transient: false,
        max_in_flight: Some(config.api_max_in_flight),
    };
    let client = kube_client::client(options).await?;
    let lease_client = kube_client::client(ClientOptions {
        max_in_flight: None,
        ..options
    })
    .await?;
    let identity = config.identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| format!("bootc-pool-controller-{}", std::process::id()))
    });
    let metrics = Metrics::new();
    let health = Health::new();
    let deps = Dependencies {
        instance: identity.clone(),
        resolver: Resolver::new(ResolverOptions {
            insecure_registries: config.insecure_registries.clone(),
            ..ResolverOptions::default()
        }),
        metrics: metrics.clone(),
        health: health.clone(),
        secrets: config.secrets.clone(),
        lease_client: Some(lease_client),
        ..Dependencies::default()
    };
    let server = Server::bind(config.metrics_addr, metrics, health.clone())
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.metrics_addr))?;
    let shutdown = Shutdown::on_signal("controller");
    let server = tokio::spawn(server.run(shutdown.requested()));
    let lease = LeaseConfig::new(&config.lease_name, &config.lease_namespace, &identity);
    info!(
        %identity,
        lease = %config.lease_name,
        namespace = %config.lease_namespace,
        install_namespace = %config.secrets.install,
        pull_secret_namespaces = ?config.secrets.allowed,
        threads = %config
            .worker_threads
            .map_or_else(|| "one per core".to_owned(), |n| n.to_string()),
        "controller started"
    );
    reconcile::run_elected(client, deps, lease, shutdown.requested())
        .await
        .map_err(|e| format!("leader election: {e}"))?;
    let _ = server.await;
    info!("controller stopped");
    Ok(())
}
