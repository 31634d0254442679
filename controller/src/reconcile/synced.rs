//! Whether the controller's caches have been filled, and the replica's readiness that
//! follows from it.

use crate::server::Health;
use tokio::sync::watch;

/// Whether the BootcNode and Node caches have been filled once, as the watch streams
/// that fill them say. (A store's own `wait_until_ready` wakes only its latest waiter, so
/// two tasks waiting on one store could wait forever; a `watch` channel wakes them all.)
#[derive(Debug, Clone)]
pub(super) struct Synced {
    bootc: watch::Receiver<bool>,
    nodes: watch::Receiver<bool>,
}

impl Synced {
    pub(super) fn new(bootc: watch::Receiver<bool>, nodes: watch::Receiver<bool>) -> Self {
        Synced { bootc, nodes }
    }

    /// Waits until both caches have been filled; false when their streams are gone.
    pub(super) async fn wait(&self) -> bool {
        let (mut bootc, mut nodes) = (self.bootc.clone(), self.nodes.clone());
        bootc.wait_for(|s| *s).await.is_ok() && nodes.wait_for(|s| *s).await.is_ok()
    }
}

/// Marks the replica ready once its caches have synced.
pub(super) async fn ready_when_synced(health: Health, synced: Synced) {
    if synced.wait().await {
        health.set_ready(true);
    }
}
