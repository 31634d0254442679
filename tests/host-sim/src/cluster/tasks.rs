//! Each node's tasks: the supervised agent (the DaemonSet's part) and the kubelet's part
//! (the Node's `Ready` condition following the host).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_node_agent::host::Host as _;
use bootc_node_agent::run::{self, RunError, RunOptions};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::lock;
use crate::kubelet::set_ready;
use crate::memory::MemoryHost;

/// How long a supervisor waits before restarting an agent that failed for another
/// reason than a lost host (a DaemonSet's restart backoff, shortened).
const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// How long an agent may run on once its host went down before it is killed.
const DOWN_GRACE: Duration = Duration::from_millis(100);
/// How long the kubelet part waits before retrying a failed write.
const KUBELET_RETRY: Duration = Duration::from_millis(100);

/// Whether the node was told to stop (or its cluster is gone).
fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// Waits until the host is up; false when told to stop first.
async fn wait_up(host: &MemoryHost, stop: &mut watch::Receiver<bool>) -> bool {
    let mut boots = host.boots();
    loop {
        if stopped(stop) {
            return false;
        }
        if host.is_up() {
            return true;
        }
        tokio::select! {
            changed = boots.changed() => {
                if changed.is_err() {
                    // Cannot happen while the host lives; poll instead.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            _ = stop.changed() => {}
        }
    }
}

/// Returns when the host's current boot ends (the channel of this boot closes).
async fn host_down(changes: &mut watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {}
}

/// Plays the DaemonSet: runs the agent whenever the host is up, ends it when the host
/// goes down (if it does not end by itself), and starts a new one once the host is up
/// again, and after it is killed or fails.
pub(super) async fn supervise(
    client: Client,
    host: MemoryHost,
    options: RunOptions,
    mut stop: watch::Receiver<bool>,
    slot: Arc<Mutex<Option<AbortHandle>>>,
    starts: Arc<AtomicU32>,
) {
    let node = options.node_name.clone();
    loop {
        if !wait_up(&host, &mut stop).await {
            return;
        }
        // Subscribed before looking at the host: a reboot from now on closes this.
        let mut changes = host.changes();
        if !host.is_up() {
            continue;
        }
        starts.fetch_add(1, Ordering::SeqCst);
        let mut shutdown_rx = stop.clone();
        let shutdown = async move {
            let _ = shutdown_rx.wait_for(|s| *s).await;
        };
        let mut task = tokio::spawn(run::run(
            client.clone(),
            Arc::new(host.clone()),
            options.clone(),
            shutdown,
        ));
        *lock(&slot) = Some(task.abort_handle());
        let result = tokio::select! {
            result = &mut task => result,
            () = host_down(&mut changes) => {
                // The agent normally notices by itself (HostLost); a reboot ends its
                // process anyway, so one that does not is killed after a grace period.
                match tokio::time::timeout(DOWN_GRACE, &mut task).await {
                    Ok(result) => result,
                    Err(_) => {
                        task.abort();
                        (&mut task).await
                    }
                }
            }
        };
        *lock(&slot) = None;
        if stopped(&stop) {
            return;
        }
        match result {
            Ok(Err(RunError::HostLost)) => {
                tracing::debug!(%node, "host-sim cluster: agent lost its host");
            }
            Err(e) if e.is_cancelled() => {
                tracing::debug!(%node, "host-sim cluster: agent killed");
            }
            Ok(Ok(())) => {
                tracing::warn!(%node, "host-sim cluster: agent returned without being stopped");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(%node, error = %e, "host-sim cluster: agent stopped");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
            Err(e) => {
                tracing::warn!(%node, error = %e, "host-sim cluster: agent panicked");
                tokio::time::sleep(RESTART_BACKOFF).await;
            }
        }
    }
}

/// Writes the Node's readiness until it succeeds; false when told to stop first.
async fn write_ready(
    api: &Api<KubeNode>,
    name: &str,
    ready: bool,
    boot_id: Option<&str>,
    stop: &watch::Receiver<bool>,
) -> bool {
    loop {
        if stopped(stop) {
            return false;
        }
        match set_ready(api, name, ready, boot_id).await {
            Ok(()) => return true,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "host-sim cluster: cannot write the Node");
                tokio::time::sleep(KUBELET_RETRY).await;
            }
        }
    }
}

/// The kubelet's part: `Ready=False` as soon as the host goes down, `Ready=True` (with
/// the new boot ID) `ready_delay` after it is up again. The Node starts `Ready`.
pub(super) async fn kubelet(
    api: Api<KubeNode>,
    name: String,
    host: MemoryHost,
    ready_delay: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut ready = true;
    loop {
        // Subscribed before looking at the host: a reboot from now on closes this.
        let mut changes = host.changes();
        if host.is_up() {
            if !ready {
                let mut stop_rx = stop.clone();
                tokio::select! {
                    () = tokio::time::sleep(ready_delay) => {}
                    _ = stop_rx.wait_for(|s| *s) => return,
                }
                if changes.has_changed().is_err() || !host.is_up() {
                    // Down again meanwhile: Ready only after a full delay of this boot.
                    continue;
                }
                if !write_ready(&api, &name, true, Some(&host.boot_id()), &stop).await {
                    return;
                }
                ready = true;
            }
            // Until the host goes down.
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    _ = stop.changed() => if stopped(&stop) { return },
                }
            }
        }
        if ready {
            if !write_ready(&api, &name, false, None, &stop).await {
                return;
            }
            ready = false;
        }
        if !wait_up(&host, &mut stop).await {
            return;
        }
    }
}
