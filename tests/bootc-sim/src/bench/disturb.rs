//! The disturbances: the controller killed and started again on a period, agents
//! killed at random (their supervisor starts them again).

use std::sync::Arc;
use std::time::Duration;

use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::{self, Dependencies};
use bootc_pool_controller::resolve::{Resolver, ResolverOptions};
use host_sim::cluster::SimCluster;
use kube::Client;
use tokio::sync::{oneshot, watch};

use crate::stats::Rng;

/// How often agents may be killed (`--kill-agents-rate` is per second).
const KILL_TICK: Duration = Duration::from_millis(100);
/// How long the controller may take to stop.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Returns once `stop` says true (or its sender is gone).
async fn stopped_signal(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The controller, in-process, killed and started again every `kill_every` if set.
/// Returns how many times it was killed.
pub(super) async fn controller_loop(
    config: kube::Config,
    metrics: Metrics,
    resolver: ResolverOptions,
    kill_every: Option<Duration>,
    mut stop: watch::Receiver<bool>,
) -> u32 {
    let mut kills = 0;
    loop {
        let client = match Client::try_from(config.clone()) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, "bench: cannot make the controller's client");
                return kills;
            }
        };
        // A new process: a new resolver, its cache empty.
        let deps = Dependencies {
            metrics: metrics.clone(),
            resolver: Resolver::new(resolver.clone()),
            ..Dependencies::default()
        };
        let (shutdown, stopped) = oneshot::channel::<()>();
        let mut task = tokio::spawn(reconcile::run(client, deps, async move {
            let _ = stopped.await;
        }));
        let kill = async {
            match kill_every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = kill => {
                task.abort();
                let _ = task.await;
                kills += 1;
            }
            () = stopped_signal(&mut stop) => {
                let _ = shutdown.send(());
                if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
                    task.abort();
                }
                return kills;
            }
            result = &mut task => {
                tracing::error!(?result, "bench: the controller ended by itself; starting it again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Kills a random share of the running agents every [`KILL_TICK`]; returns how many.
pub(super) async fn agent_killer(
    cluster: Arc<SimCluster>,
    rate_per_s: f64,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> u64 {
    let mut rng = Rng::new(seed);
    let names = cluster.nodes();
    let p = rate_per_s * KILL_TICK.as_secs_f64();
    let mut killed = 0;
    let mut tick = tokio::time::interval(KILL_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped_signal(&mut stop) => return killed,
        }
        for name in &names {
            if rng.next_f64() < p && cluster.kill_agent(name).await {
                killed += 1;
            }
        }
    }
}
