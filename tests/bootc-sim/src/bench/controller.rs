//! The controller under measurement: the in-process reconciler (the default) or, under
//! `--controller-process`, the real binary as a child process.

use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile;
use bootc_pool_controller::resolve::ResolverOptions;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::chaos;
use super::child::{self, Launch, Usage};
use super::disturb::controller_loop;
use super::setup::{Settings, World};

/// The controller, running.
pub(super) enum Running {
    /// The reconciler in this process; `metrics` its registry.
    InProcess {
        task: JoinHandle<u32>,
        metrics: Metrics,
    },
    /// The binary as a child process; `live` the child running now.
    Process {
        task: JoinHandle<child::Outcome>,
        live: child::Live,
    },
}

/// What the controller came to once stopped.
pub(super) struct Finished {
    /// How often it was killed.
    pub(super) kills: u32,
    /// Its metrics text (under `--controller-process`, every child's, one after another).
    pub(super) metrics: String,
    /// Under `--controller-process`: the children's own CPU time and peak memory.
    pub(super) usage: Option<Usage>,
}

/// Starts the controller, killed every `settings.kill_every` if set, until `stop`.
pub(super) fn start(settings: &Settings, world: &World, stop: watch::Receiver<bool>) -> Running {
    let insecure_registries: Vec<String> = world.chaos.iter().map(chaos::Images::host).collect();
    match (&settings.controller_binary, &world.kubeconfig) {
        (Some(binary), Some(kubeconfig)) => {
            let launch = Launch {
                binary: binary.clone(),
                kubeconfig: kubeconfig.path.clone(),
                lease_namespace: super::setup::LEASE_NAMESPACE.to_owned(),
                insecure_registries,
                log: settings.controller_log.clone(),
            };
            let live = child::Live::default();
            let task = tokio::spawn(child::controller_process_loop(
                launch,
                settings.kill_every,
                stop,
                live.clone(),
            ));
            Running::Process { task, live }
        }
        _ => {
            let metrics = Metrics::new();
            let resolver = ResolverOptions {
                insecure_registries,
                ..ResolverOptions::default()
            };
            let task = tokio::spawn(controller_loop(
                controller_config(&world.emulator),
                metrics.clone(),
                resolver,
                settings.kill_every,
                stop,
            ));
            Running::InProcess { task, metrics }
        }
    }
}

impl Running {
    /// Its metrics text now, and under `--controller-process` the child's resident size
    /// (MiB) and CPU time now; `None` each when it cannot be had.
    pub(super) async fn probe(&self) -> child::Probe {
        match self {
            Running::InProcess { metrics, .. } => child::Probe {
                metrics: Some(metrics.encode()),
                ..child::Probe::default()
            },
            Running::Process { live, .. } => child::probe(live).await,
        }
    }

    /// Waits for the controller to stop (once told to).
    pub(super) async fn finish(self) -> Finished {
        match self {
            Running::InProcess { task, metrics } => Finished {
                kills: task.await.unwrap_or(0),
                metrics: metrics.encode(),
                usage: None,
            },
            Running::Process { task, .. } => {
                let outcome = task.await.unwrap_or_default();
                Finished {
                    kills: outcome.kills,
                    metrics: outcome.metrics,
                    usage: Some(outcome.usage),
                }
            }
        }
    }
}

/// The controller's client configuration: no retries, the controller's User-Agent.
fn controller_config(emulator: &kube_emulator::Emulator) -> kube::Config {
    let mut config = emulator.config();
    config.default_retry = false;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(reconcile::USER_AGENT),
    ));
    config
}
