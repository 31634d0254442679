//! Graceful shutdown: SIGTERM (what Kubernetes and systemd send) or SIGINT (Ctrl-C) asks
//! a process to stop; its tasks finish their work in flight and return.

use std::future::Future;

use tokio::sync::watch;
use tracing::{error, info};

/// Resolves on SIGTERM or SIGINT. When the signals cannot be listened for, says so (the
/// process named `who`, `agent` or `controller`, must then be stopped with SIGKILL) and
/// never resolves.
pub async fn signal(who: &str) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!("cannot listen for SIGTERM; stop the {who} with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
    }
}

/// A shutdown request that any number of tasks can wait for. Clones share it.
#[derive(Debug, Clone)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
}

/// Requests the shutdown its [`Shutdown`] waits for.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

impl ShutdownTrigger {
    /// Requests shutdown; every wait in progress or to come completes.
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }
}

impl Shutdown {
    /// A shutdown requested by hand (tests, or a caller with its own reasons).
    pub fn channel() -> (ShutdownTrigger, Shutdown) {
        let (tx, requested) = watch::channel(false);
        (ShutdownTrigger { tx }, Shutdown { requested })
    }

    /// A shutdown requested by SIGTERM or SIGINT (see [`signal`]). Call inside a Tokio
    /// runtime: the signals are followed by a task of their own.
    pub fn on_signal(who: &'static str) -> Shutdown {
        let (trigger, shutdown) = Shutdown::channel();
        tokio::spawn(async move {
            signal(who).await;
            trigger.trigger();
        });
        shutdown
    }

    /// Completes once shutdown is requested (or its trigger is gone).
    pub fn requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut requested = self.requested.clone();
        async move {
            let _ = requested.wait_for(|s| *s).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn every_waiter_sees_the_request() {
        let (trigger, shutdown) = Shutdown::channel();
        let early = tokio::spawn(shutdown.requested());
        let pending = tokio::time::timeout(Duration::from_millis(20), shutdown.requested()).await;
        assert!(pending.is_err(), "completed before the request");
        trigger.trigger();
        early.await.unwrap();
        shutdown.clone().requested().await;
    }

    #[tokio::test]
    async fn a_dropped_trigger_releases_the_waiters() {
        let (trigger, shutdown) = Shutdown::channel();
        drop(trigger);
        shutdown.requested().await;
    }
}
