//! The agent's run loop: follow the node's own BootcNode, read the host, decide, act, and
//! report, with backoff on errors and nothing written when nothing changed.
//!
//! Inputs that wake the loop: a change of the BootcNode (a watch on that one object,
//! selected by name), the host signalling that bootc's status changed, the end of a
//! staging command, the poll interval, and a retry time from the decision. The loop
//! runs one staging command at a time, in a task of its own so that a new
//! `desiredImage` can cancel it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::conditions::node_degraded;
use bootc_crds::node::{BootcNode, BootcNodeStatus};
use bootc_crds::{ImageRef, REBOOT_SLOT_ANNOTATION};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::host::{BootIdentity, Host, HostError};
use crate::machine::{
    self, Action, Decision, Desired, Failure, HostFacts, Memory, Phase, Slot, Unlock,
};
use crate::report::{self, Inputs};

/// The field manager the agent writes status as.
pub const FIELD_MANAGER: &str = "bootc-node-agent";

/// The User-Agent of the agent's API requests.
pub const USER_AGENT: &str = concat!("bootc-node-agent/", env!("CARGO_PKG_VERSION"));
/// How long a cancelled staging command may take to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// What the run loop needs besides the API client and the host.
#[derive(Debug, Clone)]
pub struct Options {
    /// The node's name: the only BootcNode the agent reads and writes.
    pub node_name: String,
    /// How often the host is read when nothing signals a change.
    pub poll_interval: Duration,
    /// The version reported as `status.agentVersion`.
    pub agent_version: String,
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

/// A staging command in flight.
#[derive(Debug)]
struct Staging {
    image: String,
    task: JoinHandle<Result<(), HostError>>,
}

/// One retried operation's failures in a row.
#[derive(Debug, Clone, Default)]
struct Retry {
    attempts: u32,
    at: Option<DateTime<Utc>>,
    message: Option<String>,
}

impl Retry {
    fn fail(&mut self, message: String, now: DateTime<Utc>) {
        self.attempts = self.attempts.saturating_add(1);
        self.at = Some(now);
        self.message = Some(message);
    }

    fn clear(&mut self) {
        *self = Retry::default();
    }

    /// Time left before the next attempt, or `None` when it may run now.
    fn wait(&self, now: DateTime<Utc>) -> Option<Duration> {
        let at = self.at?;
        let backoff = backoff(self.attempts);
        let elapsed = (now - at).to_std().unwrap_or(Duration::ZERO);
        backoff.checked_sub(elapsed).filter(|d| !d.is_zero())
    }
}

fn backoff(attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(16));
    machine::BACKOFF_MIN
        .saturating_mul(factor)
        .min(machine::BACKOFF_MAX)
}

/// An error and its causes on one line.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// The agent's state between wake-ups.
struct Agent<H> {
    host: Arc<H>,
    client: Client,
    nodes: Api<BootcNode>,
    options: Options,
    /// The BootcNode as last seen (watch or own write).
    node: Option<BootcNode>,
    /// Whether `memory.last_reboot` was taken from the object already.
    restored: bool,
    memory: Memory,
    staging: Option<Staging>,
    /// The pull secret (reference, hash) last written to the host.
    credentials: Option<(Option<String>, Option<String>)>,
    credentials_retry: Retry,
    host_retry: Retry,
    api_retry: Retry,
    /// The host's update timer is masked (done once per agent start, retried on failure).
    timer_masked: bool,
    /// What `bootc --version` said at start.
    bootc_version: Option<String>,
    /// When the last full reconcile ran.
    last_poll: Instant,
    /// The decision's own retry time.
    retry_at: Option<Instant>,
}

impl<H> std::fmt::Debug for Agent<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("node", &self.options.node_name)
            .finish_non_exhaustive()
    }
}

/// Runs the agent until `shutdown` resolves (then cancels a staging command in flight
/// and returns `Ok`) or the host connection is lost.
pub async fn run<H: Host + 'static>(
    client: Client,
    host: Arc<H>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let nodes: Api<BootcNode> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={}", options.node_name));
    let stream = watcher::watcher(nodes.clone(), config).default_backoff();
    tokio::pin!(stream);
    tokio::pin!(shutdown);
    let mut changes = host.changes();
    let mut agent = Agent {
        host,
        client,
        nodes,
        options,
        node: None,
        restored: false,
        memory: Memory::default(),
        staging: None,
        credentials: None,
        credentials_retry: Retry::default(),
        host_retry: Retry::default(),
        api_retry: Retry::default(),
        timer_masked: false,
        bootc_version: None,
        last_poll: Instant::now(),
        retry_at: None,
    };
    agent.start().await;
    // Objects seen between a (re)list's Init and InitDone.
    let mut listing: Option<Option<BootcNode>> = None;

    enum Wake {
        Shutdown,
        Watch(Box<Option<Result<Event<BootcNode>, watcher::Error>>>),
        HostChanged(bool),
        Staged(
            String,
            Result<Result<(), HostError>, tokio::task::JoinError>,
        ),
        Timer,
    }
    loop {
        let deadline = agent.next_wake();
        let wake = tokio::select! {
            () = &mut shutdown => Wake::Shutdown,
            event = stream.next() => Wake::Watch(Box::new(event)),
            changed = changes.changed() => Wake::HostChanged(changed.is_ok()),
            (image, result) = staging_done(&mut agent.staging) => Wake::Staged(image, result),
            () = tokio::time::sleep_until(deadline) => Wake::Timer,
        };
        let reconcile = match wake {
            Wake::Shutdown => {
                info!("shutting down");
                agent.cancel_staging().await;
                return Ok(());
            }
            Wake::Watch(event) => match *event {
                None => return Err(RunError::WatchEnded),
                Some(Err(e)) => {
                    warn!(error = %error_chain(&e), "BootcNode watch failed; retrying");
                    false
                }
                Some(Ok(Event::Init)) => {
                    listing = Some(None);
                    false
                }
                Some(Ok(Event::InitApply(node))) => {
                    listing = Some(Some(node));
                    false
                }
                Some(Ok(Event::InitDone)) => {
                    let node = listing.take().flatten();
                    agent.observe(node)
                }
                Some(Ok(Event::Apply(node))) => agent.observe(Some(node)),
                Some(Ok(Event::Delete(_))) => agent.observe(None),
            },
            Wake::HostChanged(true) => {
                debug!("the host signalled a bootc status change");
                true
            }
            Wake::HostChanged(false) => {
                agent.cancel_staging().await;
                return Err(RunError::HostLost);
            }
            Wake::Staged(image, result) => {
                agent.staging_finished(image, result);
                true
            }
            Wake::Timer => true,
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
    }
}

/// Resolves when the staging command in flight ends; never when there is none.
async fn staging_done(
    staging: &mut Option<Staging>,
) -> (
    String,
    Result<Result<(), HostError>, tokio::task::JoinError>,
) {
    match staging {
        Some(s) => {
            let result = (&mut s.task).await;
            let image = s.image.clone();
            *staging = None;
            (image, result)
        }
        None => std::future::pending().await,
    }
}

impl<H: Host + 'static> Agent<H> {
    /// At start: stop commands a previous agent left running, and mask the update timer.
    async fn start(&mut self) {
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

    async fn mask_timer(&mut self) {
        if self.timer_masked {
            return;
        }
        match self.host.mask_update_timer().await {
            Ok(()) => {
                self.timer_masked = true;
                info!("masked bootc-fetch-apply-updates.timer until the next boot");
            }
            Err(e) => {
                warn!(error = %error_chain(&e), "cannot mask bootc-fetch-apply-updates.timer; will retry");
            }
        }
    }

    /// Takes in the object from the watch; true when a reconcile is needed (anything
    /// but our own status write coming back).
    fn observe(&mut self, node: Option<BootcNode>) -> bool {
        let Some(node) = node else {
            if self.node.take().is_some() {
                info!("BootcNode deleted; waiting for it to come back");
            }
            return false;
        };
        if !self.restored {
            self.restored = true;
            if let Some(last) = node.status.as_ref().and_then(|s| s.last_reboot.as_ref()) {
                self.memory.last_reboot = report::record_from_status(last);
            }
        }
        let changed = match &self.node {
            None => true,
            Some(old) => {
                old.spec != node.spec
                    || old.annotations().get(REBOOT_SLOT_ANNOTATION)
                        != node.annotations().get(REBOOT_SLOT_ANNOTATION)
                    || old.status != node.status && !self.is_stale(&node)
            }
        };
        if !self.is_stale(&node) {
            self.node = Some(node);
        }
        changed
    }

    /// True when `node` is older than the object we already hold (a watch event that
    /// arrives after our own write's response).
    fn is_stale(&self, node: &BootcNode) -> bool {
        let version = |n: &BootcNode| {
            n.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        match (self.node.as_ref().and_then(version), version(node)) {
            (Some(held), Some(seen)) => seen < held,
            _ => false,
        }
    }

    fn next_wake(&self) -> Instant {
        let now = Utc::now();
        let mut wake = self.last_poll + self.options.poll_interval;
        let mut at = |d: Option<Duration>| {
            if let Some(d) = d {
                wake = wake.min(Instant::now() + d);
            }
        };
        for retry in [&self.host_retry, &self.credentials_retry, &self.api_retry] {
            if retry.at.is_some() {
                at(Some(retry.wait(now).unwrap_or_default()));
            }
        }
        if let Some(retry) = self.retry_at {
            wake = wake.min(retry);
        }
        wake
    }

    fn staging_finished(
        &mut self,
        image: String,
        result: Result<Result<(), HostError>, tokio::task::JoinError>,
    ) {
        let now = Utc::now();
        match result {
            Ok(Ok(())) => {
                info!(%image, "staged");
                if self
                    .memory
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.image == image)
                {
                    self.memory.failure = None;
                }
            }
            Ok(Err(e)) => {
                let message = error_chain(&e);
                warn!(%image, error = %message, "staging failed");
                self.record_failure(&image, message, now);
            }
            Err(e) => {
                warn!(%image, error = %e, "the staging task ended abnormally");
                self.record_failure(&image, format!("staging stopped: {e}"), now);
            }
        }
    }

    fn record_failure(&mut self, image: &str, message: String, now: DateTime<Utc>) {
        let attempts = match &self.memory.failure {
            Some(f) if f.image == image => f.attempts.saturating_add(1),
            _ => 1,
        };
        self.memory.failure = Some(Failure {
            image: image.to_owned(),
            message,
            attempts,
            at: now,
        });
    }

    /// Stops the staging command in flight, if any, and waits for its task to end.
    async fn cancel_staging(&mut self) {
        let Some(staging) = self.staging.take() else {
            return;
        };
        info!(image = %staging.image, "cancelling staging");
        if let Err(e) = self.host.cancel().await {
            warn!(error = %error_chain(&e), "cannot stop the staging command");
        }
        let mut task = staging.task;
        if tokio::time::timeout(CANCEL_WAIT, &mut task).await.is_err() {
            warn!(image = %staging.image, "staging did not stop in time; abandoning it");
            task.abort();
        }
    }

    /// Writes the pull secret to the host when it changed (and once at start).
    async fn sync_credentials(&mut self, node: &BootcNode) {
        let secret = node.spec.pull_secret_ref.as_ref();
        let want = (
            secret.map(|s| format!("{}/{}", s.namespace, s.name)),
            node.spec.pull_secret_hash.clone(),
        );
        let now = Utc::now();
        if self.credentials.as_ref() == Some(&want) || self.credentials_retry.wait(now).is_some() {
            return;
        }
        let content = match secret {
            None => Ok(None),
            Some(r) => {
                let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &r.namespace);
                let what = format!("pull Secret {}/{}", r.namespace, r.name);
                match secrets.get(&r.name).await {
                    Err(e) => Err(format!("cannot read the {what}: {}", error_chain(&e))),
                    Ok(s) => match s.data.as_ref().and_then(|d| d.get(".dockerconfigjson")) {
                        None => Err(format!(
                            "the {what} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                        )),
                        Some(bytes) => {
                            match serde_json::from_slice::<serde_json::Value>(&bytes.0) {
                                Ok(v) if v.get("auths").is_some_and(|a| a.is_object()) => {
                                    Ok(Some(bytes.0.clone()))
                                }
                                _ => Err(format!(
                                    "the {what}'s .dockerconfigjson is not a JSON object with \"auths\""
                                )),
                            }
                        }
                    },
                }
            }
        };
        let result = match content {
            Ok(content) => self
                .host
                .write_credentials(content.as_deref())
                .await
                .map_err(|e| error_chain(&e)),
            Err(message) => Err(message),
        };
        match result {
            Ok(()) => {
                info!(secret = ?want.0, "registry credentials written to the host");
                self.credentials = Some(want);
                self.credentials_retry.clear();
            }
            Err(message) => {
                warn!(error = %message, "registry credentials not written; will retry");
                self.credentials_retry.fail(message, now);
            }
        }
    }

    /// Reads the host; `None` (and a retry) when it cannot be read.
    async fn read_host(&mut self) -> Option<(crate::bootc_status::Host, BootIdentity)> {
        let read = async {
            let status = self.host.status().await?;
            let identity = self.host.identity().await?;
            Ok::<_, HostError>((status, identity))
        };
        match read.await {
            Ok(read) => {
                self.host_retry.clear();
                Some(read)
            }
            Err(e) => {
                let message = format!("cannot read the host: {}", error_chain(&e));
                warn!(error = %message, "host read failed; will retry");
                self.host_retry.fail(message, Utc::now());
                None
            }
        }
    }

    async fn reconcile(&mut self) {
        self.last_poll = Instant::now();
        self.retry_at = None;
        self.mask_timer().await;
        let Some(node) = self.node.clone() else {
            return;
        };
        self.sync_credentials(&node).await;
        let now = Utc::now();
        if self.host_retry.wait(now).is_some() {
            return;
        }
        let read = self.read_host().await;
        let desired = Desired {
            image: node.spec.desired_image.clone(),
            state: node.spec.desired_image_state,
            reboot_policy: node.spec.reboot_policy,
            holds_slot: node
                .annotations()
                .get(REBOOT_SLOT_ANNOTATION)
                .is_some_and(|v| !v.is_empty()),
        };
        let Some((status, identity)) = read else {
            // Report what is known, marked degraded; decide again after the backoff.
            let message = self.host_retry.message.clone().unwrap_or_default();
            let phase = current_phase(node.status.as_ref());
            self.report(
                &node,
                None,
                phase,
                Some((node_degraded::ERROR, message)),
                now,
            )
            .await;
            return;
        };
        let facts = facts(&status, &identity);
        let decision = machine::decide(&desired, &facts, &self.memory, now);
        self.retry_at = decision.retry_after.map(|d| Instant::now() + d);

        // A staging command for another image (or none wanted any more) is cancelled.
        let wanted = match &decision.action {
            Action::Stage { image } => Some(image.as_str()),
            _ => None,
        };
        if self
            .staging
            .as_ref()
            .is_some_and(|s| Some(s.image.as_str()) != wanted)
        {
            self.cancel_staging().await;
        }
        let Decision {
            phase,
            degraded,
            action,
            ..
        } = decision;
        let degraded = degraded.or_else(|| {
            self.credentials_retry
                .message
                .clone()
                .map(|m| (node_degraded::ERROR, m))
        });
        match action {
            Action::Wait => {}
            Action::Stage { image } => {
                if self.staging.is_none() {
                    self.start_staging(image);
                }
            }
            Action::Reboot {
                unlock,
                soft,
                record,
            } => {
                self.reboot(&node, &status, unlock, soft, record, degraded.clone())
                    .await;
                return;
            }
        }
        self.report(&node, Some(&status), phase, degraded, now)
            .await;
    }

    fn start_staging(&mut self, image: String) {
        let pin = match ImageRef::parse(&image) {
            Ok(pin) => pin,
            Err(e) => {
                // decide() only asks to stage canonical pins; keep the promise anyway.
                self.record_failure(
                    &image,
                    format!("refusing to stage {image:?}: {e}"),
                    Utc::now(),
                );
                return;
            }
        };
        info!(%image, "staging");
        let host = Arc::clone(&self.host);
        let task = tokio::spawn(async move { host.stage(&pin).await });
        self.staging = Some(Staging { image, task });
    }

    async fn reboot(
        &mut self,
        node: &BootcNode,
        status: &crate::bootc_status::Host,
        unlock: Unlock,
        soft: bool,
        record: machine::RebootRecord,
        degraded: Option<(&'static str, String)>,
    ) {
        let image = node.spec.desired_image.clone();
        let now = Utc::now();
        // `bootc rollback` toggles: when the rollback is already queued, it is done.
        let queued = unlock == Unlock::Rollback && status.status.rollback_queued;
        if !queued && let Err(e) = self.host.unlock(unlock).await {
            let message = error_chain(&e);
            warn!(%image, error = %message, "unlocking the staged deployment failed");
            self.record_failure(&image, message, now);
            let degraded = self
                .memory
                .failure
                .as_ref()
                .map(|f| (node_degraded::ERROR, f.message.clone()));
            self.report(node, Some(status), Phase::Rebooting, degraded, now)
                .await;
            return;
        }
        // The record must be on the object before the reboot: it is what keeps a
        // restarted agent from rebooting twice for one approval.
        let previous = self.memory.last_reboot.replace(record);
        if !self
            .report(node, Some(status), Phase::Rebooting, degraded, now)
            .await
        {
            self.memory.last_reboot = previous;
            return;
        }
        info!(%image, soft, "rebooting");
        if let Err(e) = self.host.reboot(soft).await {
            // The request may have been cut off by the reboot itself; the record stays,
            // and the decision asks again only when the reboot is overdue.
            let message = error_chain(&e);
            warn!(%image, error = %message, "the reboot request failed");
            self.record_failure(&image, message, now);
        }
    }

    /// Writes the status when it differs from the object's; false when a write failed.
    async fn report(
        &mut self,
        node: &BootcNode,
        host: Option<&crate::bootc_status::Host>,
        phase: Phase,
        degraded: Option<(&str, String)>,
        now: DateTime<Utc>,
    ) -> bool {
        let held = self.node.as_ref().unwrap_or(node);
        let previous = held.status.as_ref();
        let status = report::compose(&Inputs {
            previous,
            generation: held.metadata.generation,
            host,
            desired: &node.spec.desired_image,
            phase,
            degraded,
            last_reboot: self.memory.last_reboot.as_ref(),
            agent_version: &self.options.agent_version,
            bootc_version: self.bootc_version.as_deref(),
            now,
        });
        if previous == Some(&status) {
            return true;
        }
        if self.api_retry.wait(now).is_some() {
            return false;
        }
        let patch = Patch::Merge(report::merge_patch(&status));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        match self
            .nodes
            .patch_status(&self.options.node_name, &params, &patch)
            .await
        {
            Ok(updated) => {
                debug!(phase = ?phase, "status written");
                self.api_retry.clear();
                self.node = Some(updated);
                true
            }
            Err(e) => {
                let message = error_chain(&e);
                warn!(error = %message, "status write failed; will retry");
                self.api_retry.fail(message, now);
                false
            }
        }
    }
}

/// The phase the object reports, for when the host cannot be read.
fn current_phase(status: Option<&BootcNodeStatus>) -> Phase {
    let reason = status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == bootc_crds::conditions::IDLE)
            .map(|c| c.reason.as_str())
    });
    match reason {
        Some(r) if r == Phase::Staging.reason() => Phase::Staging,
        Some(r) if r == Phase::Staged.reason() => Phase::Staged,
        Some(r) if r == Phase::Rebooting.reason() => Phase::Rebooting,
        _ => Phase::Idle,
    }
}

/// The host's report reduced to what decisions need.
pub fn facts(status: &crate::bootc_status::Host, identity: &BootIdentity) -> HostFacts {
    let slot = |entry: &Option<crate::bootc_status::BootEntry>| {
        entry.as_ref().and_then(|e| {
            let image = e.image.as_ref()?;
            Some(Slot {
                image: image.image.image.clone(),
                image_digest: image.image_digest.to_string(),
                soft_reboot_capable: e.soft_reboot_capable.unwrap_or(false),
                download_only: e.download_only.unwrap_or(false),
            })
        })
    };
    HostFacts {
        booted: slot(&status.status.booted),
        staged: slot(&status.status.staged),
        rollback: slot(&status.status.rollback),
        boot_id: identity.boot_id.clone(),
        soft_reboots: identity.soft_reboots,
        can_soft_reboot: identity.can_soft_reboot,
    }
}
