//! Leader election around the reconciler: a replica runs the controller only while it
//! holds the Lease.

use std::future::Future;

use kube::Client;
use tracing::info;

use super::{Dependencies, run};

/// Runs the controller only while this replica holds the Lease of `lease`: a standby
/// replica watches nothing and writes nothing but the Lease, and the leader's writes pass
/// a [`crate::leader::Fence`], so that none starts once its leadership is in doubt and
/// none lands after the Lease could have passed to another replica. Returns after `shutdown`,
/// once the controller has stopped and the Lease is released.
pub async fn run_elected(
    client: Client,
    deps: Dependencies,
    lease: crate::leader::LeaseConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), crate::leader::LeaseConfigError> {
    let lease_client = deps.lease_client.clone().unwrap_or_else(|| client.clone());
    let elector =
        crate::leader::LeaderElector::new(lease_client, lease)?.with_metrics(deps.metrics.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    // The election ends (and releases the Lease) only after the controller has stopped.
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let (mut leader, fence, election) = elector.run_fenced(async move {
        let _ = stopped_rx.await;
    });
    // Every write of the controller goes through the fence; the elector's own Lease
    // writes do not.
    let writer = fence.guard(client.clone());
    // Dropped without a shutdown (the task aborted, the process dying), the election
    // stops where it is, without releasing the Lease: the other replica takes over when
    // it expires, exactly as after a crash.
    let mut election = AbortOnDrop(Some(election));
    let mut stop = stop_rx.clone();
    loop {
        // Standing by, ready to take over: ready as a replica.
        deps.health.set_ready(true);
        tokio::select! {
            r = leader.wait_for(|l| *l) => if r.is_err() { break },
            _ = stop.wait_for(|s| *s) => break,
        }
        info!("leading: starting the controller");
        // Stop when leadership is lost or on shutdown; a oneshot so the future is Sync.
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
        let (mut l, mut s) = (leader.clone(), stop.clone());
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = l.wait_for(|l| !*l) => {}
                _ = s.wait_for(|s| *s) => {}
            }
            let _ = lost_tx.send(());
        });
        run(writer.clone(), deps.clone(), async move {
            let _ = lost_rx.await;
        })
        .await;
        watcher.abort();
        info!("the controller stopped");
        if *stop.borrow() {
            break;
        }
    }
    let _ = stopped_tx.send(());
    if let Some(election) = election.0.take() {
        let _ = election.await;
    }
    Ok(())
}

/// Aborts the task when dropped before it was taken out.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}
