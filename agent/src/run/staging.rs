//! The staging command in flight: one at a time, in a task of its own so that a new
//! `desiredImage` can cancel it, and its failures remembered for the decision's backoff.

use std::sync::Arc;
use std::time::Duration;

use bootc_crds::ImageRef;
use bootc_crds::conditions::node_degraded;
use bootc_crds::pool::SignaturePolicy;
use bootc_pool_common::error_chain;
use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::Agent;
use crate::host::{Host, HostError};
use crate::machine::Failure;

/// How long a cancelled staging command may take to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// What a staging task does to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Work {
    /// Stage the image locked, under this signature policy.
    Stage(SignaturePolicy),
    /// Lock the image's deployment, staged unlocked (`bootc upgrade --download-only`).
    Lock,
}

impl Work {
    /// How the work is named in a message.
    fn name(self) -> &'static str {
        match self {
            Work::Stage(_) => "staging",
            Work::Lock => "locking (`bootc upgrade --download-only`)",
        }
    }
}

/// A command that succeeded, checked against the status read after it: `Err` with what
/// the status showed when the desired image is not staged and locked.
pub(super) type Checked = Result<(), String>;

/// How a staging task ended: the command's result, or the task's own failure.
pub(super) type StagingOutcome = Result<Result<Checked, HostError>, tokio::task::JoinError>;

/// A staging command in flight.
#[derive(Debug)]
pub(super) struct Staging {
    pub(super) image: String,
    work: Work,
    task: JoinHandle<Result<Checked, HostError>>,
}

/// Resolves when the staging command in flight ends; never when there is none.
pub(super) async fn staging_done(
    staging: &mut Option<Staging>,
) -> ((String, Work), StagingOutcome) {
    match staging {
        Some(s) => {
            let result = (&mut s.task).await;
            let done = (s.image.clone(), s.work);
            *staging = None;
            (done, result)
        }
        None => std::future::pending().await,
    }
}

/// Does `work` for `pin` (the desired image), then reads the status and checks that
/// the desired image is staged and locked: a command's exit status alone is not trusted
/// (bootc answers `switch --download-only` of an image staged unlocked with exit 0 and
/// leaves it unlocked: bootc issue #2425).
async fn work_and_check<H: Host>(
    host: &H,
    pin: &ImageRef,
    work: Work,
) -> Result<Checked, HostError> {
    match work {
        Work::Stage(policy) => host.stage(pin, policy).await?,
        Work::Lock => host.lock().await?,
    }
    let status = host.status().await?;
    let staged = super::reconcile::slot(&status.status.staged);
    let Some(digest) = pin.digest() else {
        return Ok(Err(format!("{pin} carries no digest to check")));
    };
    Ok(crate::machine::check_locked(
        staged.as_ref(),
        &pin.to_string(),
        digest,
        work.name(),
    ))
}

impl<H: Host + 'static> Agent<H> {
    /// Starts staging `image` under `policy`.
    pub(super) fn start_staging(&mut self, image: String, policy: SignaturePolicy) {
        self.start_work(image, Work::Stage(policy));
    }

    /// Starts locking the deployment of `image`, staged unlocked.
    pub(super) fn start_locking(&mut self, image: String) {
        self.start_work(image, Work::Lock);
    }

    fn start_work(&mut self, image: String, work: Work) {
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
        info!(%image, work = ?work, "staging");
        let host = Arc::clone(&self.host);
        let task = tokio::spawn(async move { work_and_check(host.as_ref(), &pin, work).await });
        self.staging = Some(Staging { image, work, task });
    }

    pub(super) fn staging_finished(
        &mut self,
        (image, work): (String, Work),
        result: StagingOutcome,
    ) {
        let now = Utc::now();
        match result {
            Ok(Ok(Err(shown))) => {
                warn!(%image, error = %shown, "the host does not show the image staged and locked");
                self.record_failure_as(&image, shown, now, Some(node_degraded::STAGING_NOT_LOCKED));
            }
            Ok(Ok(Ok(()))) => {
                info!(%image, work = ?work, "staged and locked");
                match work {
                    Work::Stage(SignaturePolicy::Enforce) => {
                        self.memory.enforced = Some(image.clone());
                    }
                    Work::Stage(SignaturePolicy::Default) => self.memory.enforced = None,
                    Work::Lock => {}
                }
                if self
                    .memory
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.image == image)
                {
                    self.memory.failure = None;
                }
            }
            Ok(Err(e)) if e.connection_lost() => {
                // The host is going down under the pull: not the pull's failure.
                info!(%image, "the host's bus went away during staging");
                self.host_lost = true;
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

    /// Remembers a failed command for `image`, counting failures in a row.
    pub(super) fn record_failure(&mut self, image: &str, message: String, now: DateTime<Utc>) {
        self.record_failure_as(image, message, now, None);
    }

    /// [`Agent::record_failure`] with `Degraded`'s reason given (`None`: read from the
    /// message).
    pub(super) fn record_failure_as(
        &mut self,
        image: &str,
        message: String,
        now: DateTime<Utc>,
        reason: Option<&'static str>,
    ) {
        let attempts = match &self.memory.failure {
            Some(f) if f.image == image => f.attempts.saturating_add(1),
            _ => 1,
        };
        self.memory.failure = Some(Failure {
            image: image.to_owned(),
            message,
            attempts,
            at: now,
            reason,
        });
    }

    /// Stops the staging command in flight, if any, and waits for its task to end.
    pub(super) async fn cancel_staging(&mut self) {
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
}
