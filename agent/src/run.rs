//! The agent's run loop: follow the node's own BootcNode, read the host, decide, act, and
//! report, with backoff on errors and nothing written when nothing changed.
//!
//! Inputs that wake the loop: a change of the BootcNode (a watch on that one object,
//! selected by name), the host signalling that bootc's status changed, the end of a
//! staging command, the poll interval, and a retry time from the decision; besides
//! those full passes, bootc's progress reports and, while the health units settle after
//! boot, their next read. The loop runs one staging command at a time, in a task of its
//! own so that a new `desiredImage` can cancel it.
//!
//! - this module: the loop, and what wakes it;
//! - `node`: the BootcNode as the watch delivers it;
//! - `reconcile`: one pass — read the host, decide, act ([`facts`] feeds the decision);
//! - `staging`: the staging command in flight;
//! - `pull_secret`: the pool's pull secret, written to the host;
//! - `status`: the status writes;
//! - `health`: the states of `spec.healthUnits` in `status.health`, read more often
//!   while they settle after boot;
//! - `retry`: failures in a row, and the backoff they earn.
//!
//! A failure to mask the host's update timer does not stop the agent: it is reported in
//! `Degraded` (reason `UpdateTimerNotMasked`, naming the unit and the error) and retried
//! with the same backoff until the timer is masked.

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use chrono::Utc;
use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::host::Host;
use crate::machine::Memory;

mod health;
mod node;
mod progress;
mod pull_secret;
mod reconcile;
mod retry;
mod staging;
mod status;
mod timer;

pub use reconcile::facts;
use retry::Retry;
use staging::{Staging, StagingOutcome, staging_done};

/// The field manager the agent writes status as.
pub const FIELD_MANAGER: &str = "bootc-node-agent";

/// The User-Agent of the agent's API requests.
pub const USER_AGENT: &str = concat!("bootc-node-agent/", env!("CARGO_PKG_VERSION"));

/// What the run loop needs besides the API client and the host.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The node's name: the only BootcNode the agent reads and writes.
    pub node_name: String,
    /// How often the host is read when nothing signals a change.
    pub poll_interval: Duration,
    /// The version reported as `status.agentVersion`.
    pub agent_version: String,
    /// Where the readiness marker is written once the first status is reported
    /// ([`crate::ready`]); `None`: no marker.
    pub ready_dir: Option<std::path::PathBuf>,
}

/// Why the run loop stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The connection to the host's bus ended (the host is rebooting, or its bus
    /// restarted); the agent's supervisor starts it again.
    #[error("the connection to the host's bus was lost")]
    HostLost,
    /// The BootcNode watch ended.
    #[error("the BootcNode watch ended")]
    WatchEnded,
}

/// The agent's state between wake-ups.
struct Agent<H> {
    host: Arc<H>,
    client: Client,
    nodes: Api<BootcNode>,
    options: RunOptions,
    /// The BootcNode as last seen (watch or own write).
    node: Option<BootcNode>,
    /// The versions of the BootcNode the watch delivered, as they came
    /// (`resourceVersion`s are opaque: compared for equality only).
    versions: node::Versions,
    /// Whether `memory.last_reboot` was taken from the object already.
    restored: bool,
    memory: Memory,
    staging: Option<Staging>,
    /// The pull secret (reference, hash) last written to the host.
    credentials: Option<(Option<String>, Option<String>)>,
    credentials_retry: Retry,
    host_retry: Retry,
    api_retry: Retry,
    /// The host's update timer is masked (done once per agent start, retried on failure,
    /// undone when the BootcNode is known not to exist).
    timer_masked: bool,
    /// A list of the BootcNode has completed, so `node: None` means it does not exist
    /// (rather than not yet seen).
    listed: bool,
    /// Failures to mask the update timer, reported in `Degraded` until it is masked.
    timer_retry: Retry,
    /// What `bootc --version` said at start.
    bootc_version: Option<String>,
    /// When the last full reconcile ran.
    last_poll: Instant,
    /// The decision's own retry time.
    retry_at: Option<Instant>,
    /// The readiness marker is written (after the first status reported).
    ready: bool,
    /// Staging progress: the latest report and the one the status shows.
    progress: progress::Shown,
    /// bootc's reports, as the host publishes them.
    progress_rx: tokio::sync::watch::Receiver<Option<crate::host::StageProgress>>,
    /// False once the host can send no more reports.
    progress_open: bool,
    /// A host call found the host's bus gone: the host is going down.
    host_lost: bool,
    /// The health units' states in this boot, and when to read them again.
    health: health::Tracker,
}

impl<H> std::fmt::Debug for Agent<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("node", &self.options.node_name)
            .finish_non_exhaustive()
    }
}

/// What woke the loop.
enum Wake {
    Shutdown,
    Watch(Box<Option<Result<Event<BootcNode>, watcher::Error>>>),
    HostChanged(bool),
    Staged((String, staging::Work), StagingOutcome),
    /// bootc reported progress (false: the host will report none any more).
    Progress(bool),
    /// A progress report's turn to be shown has come.
    ProgressDue,
    /// The health units, still settling, are due to be read again.
    HealthDue,
    Timer,
}

/// Runs the agent until `shutdown` resolves (then cancels a staging command in flight
/// and returns `Ok`) or the host connection is lost.
pub async fn run<H: Host + 'static>(
    client: Client,
    host: Arc<H>,
    options: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let nodes: Api<BootcNode> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={}", options.node_name));
    let stream = watcher::watcher(nodes.clone(), config).default_backoff();
    tokio::pin!(stream);
    tokio::pin!(shutdown);
    let mut changes = host.changes();
    let mut agent = Agent::new(host, client, nodes, options);
    agent.start().await;
    // Objects seen between a (re)list's Init and InitDone.
    let mut listing: Option<Option<BootcNode>> = None;
    loop {
        let deadline = agent.next_wake();
        let progress_due = agent.progress.due();
        let health_due = agent.health.next_read();
        let wake = tokio::select! {
            () = &mut shutdown => Wake::Shutdown,
            event = stream.next() => Wake::Watch(Box::new(event)),
            changed = changes.changed() => Wake::HostChanged(changed.is_ok()),
            (image, result) = staging_done(&mut agent.staging) => Wake::Staged(image, result),
            changed = agent.progress_rx.changed(), if agent.progress_open => {
                Wake::Progress(changed.is_ok())
            }
            () = sleep_until_some(progress_due) => Wake::ProgressDue,
            () = sleep_until_some(health_due) => Wake::HealthDue,
            () = tokio::time::sleep_until(deadline) => Wake::Timer,
        };
        let reconcile = match agent.woke(wake, &mut listing).await {
            ControlFlow::Continue(reconcile) => reconcile,
            ControlFlow::Break(end) => return end,
        };
        // A host whose bus is gone is rebooting (or its bus restarted): reading it now
        // would only report a misleading error. Exit for the supervisor to restart us.
        if changes.has_changed().is_err() {
            agent.cancel_staging().await;
            return Err(RunError::HostLost);
        }
        if reconcile {
            agent.reconcile().await;
        }
        if agent.host_lost {
            info!("the host's bus went away under a call; the host is going down");
            agent.cancel_staging().await;
            return Err(RunError::HostLost);
        }
    }
}

impl<H: Host + 'static> Agent<H> {
    /// Handles what woke the loop: whether a full pass is due now, or how the loop ends.
    async fn woke(
        &mut self,
        wake: Wake,
        listing: &mut Option<Option<BootcNode>>,
    ) -> ControlFlow<Result<(), RunError>, bool> {
        ControlFlow::Continue(match wake {
            Wake::Progress(open) => {
                self.progress_arrived(open).await;
                false
            }
            Wake::ProgressDue => {
                self.show_progress().await;
                false
            }
            Wake::HealthDue => {
                self.poll_health().await;
                false
            }
            Wake::Shutdown => {
                info!("shutting down");
                self.cancel_staging().await;
                return ControlFlow::Break(Ok(()));
            }
            Wake::Watch(event) => match self.watched(*event, listing) {
                Ok(reconcile) => reconcile,
                Err(e) => return ControlFlow::Break(Err(e)),
            },
            Wake::HostChanged(true) => {
                debug!("the host signalled a bootc status change");
                true
            }
            Wake::HostChanged(false) => {
                self.cancel_staging().await;
                return ControlFlow::Break(Err(RunError::HostLost));
            }
            Wake::Staged(image, result) => {
                self.staging_finished(image, result);
                true
            }
            Wake::Timer => true,
        })
    }
}

/// Resolves at `at`; never when there is none.
pub(super) async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl<H: Host + 'static> Agent<H> {
    fn new(host: Arc<H>, client: Client, nodes: Api<BootcNode>, options: RunOptions) -> Self {
        Agent {
            progress_rx: host.progress(),
            host,
            client,
            nodes,
            options,
            node: None,
            versions: node::Versions::default(),
            restored: false,
            memory: Memory::default(),
            staging: None,
            credentials: None,
            credentials_retry: Retry::default(),
            host_retry: Retry::default(),
            api_retry: Retry::default(),
            timer_masked: false,
            listed: false,
            timer_retry: Retry::default(),
            bootc_version: None,
            last_poll: Instant::now(),
            retry_at: None,
            ready: false,
            progress: progress::Shown::default(),
            progress_open: true,
            host_lost: false,
            health: health::Tracker::default(),
        }
    }

    /// At start: let the commands a previous agent left running end (a pod restarted
    /// mid-pull keeps its pull), clear what they left, and mask the update timer.
    async fn start(&mut self) {
        if let Some(dir) = &self.options.ready_dir
            && let Err(e) = crate::ready::clear(dir)
        {
            warn!(error = %e, "cannot remove an earlier readiness marker");
        }
        if let Err(e) = self.host.await_leftovers().await {
            warn!(error = %error_chain(&e), "cannot look for commands left by a previous agent");
        }
        if let Err(e) = self.host.cancel().await {
            warn!(error = %error_chain(&e), "cannot stop commands left by a previous agent");
        }
        self.mask_timer().await;
        // Asked once: the agent restarts with every boot, and bootc changes only then.
        match self.host.bootc_version().await {
            Ok(version) => {
                info!(%version, "bootc version");
                self.bootc_version = Some(version);
            }
            Err(e) => {
                warn!(error = %error_chain(&e), "cannot read bootc's version; not reported");
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let now = Utc::now();
        let mut wake = self.last_poll + self.options.poll_interval;
        let retries = [
            &self.host_retry,
            &self.credentials_retry,
            &self.api_retry,
            &self.timer_retry,
        ];
        for retry in retries {
            if retry.is_failing() {
                wake = wake.min(Instant::now() + retry.wait(now).unwrap_or_default());
            }
        }
        if let Some(retry) = self.retry_at {
            wake = wake.min(retry);
        }
        wake
    }
}
