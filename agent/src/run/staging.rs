//! The staging command in flight: one at a time, in a task of its own so that a new
//! `desiredImage` can cancel it, and its failures remembered for the decision's backoff.

use std::sync::Arc;
use std::time::Duration;

use bootc_crds::ImageRef;
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

/// How a staging task ended: the command's result, or the task's own failure.
pub(super) type StagingOutcome = Result<Result<(), HostError>, tokio::task::JoinError>;

/// A staging command in flight.
#[derive(Debug)]
pub(super) struct Staging {
    pub(super) image: String,
    policy: SignaturePolicy,
    task: JoinHandle<Result<(), HostError>>,
}

/// Resolves when the staging command in flight ends; never when there is none.
pub(super) async fn staging_done(
    staging: &mut Option<Staging>,
) -> ((String, SignaturePolicy), StagingOutcome) {
    match staging {
        Some(s) => {
            let result = (&mut s.task).await;
            let done = (s.image.clone(), s.policy);
            *staging = None;
            (done, result)
        }
        None => std::future::pending().await,
    }
}

impl<H: Host + 'static> Agent<H> {
    pub(super) fn start_staging(&mut self, image: String, policy: SignaturePolicy) {
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
        info!(%image, signature_policy = ?policy, "staging");
        let host = Arc::clone(&self.host);
        let task = tokio::spawn(async move { host.stage(&pin, policy).await });
        self.staging = Some(Staging {
            image,
            policy,
            task,
        });
    }

    pub(super) fn staging_finished(
        &mut self,
        (image, policy): (String, SignaturePolicy),
        result: StagingOutcome,
    ) {
        let now = Utc::now();
        match result {
            Ok(Ok(())) => {
                info!(%image, "staged");
                self.memory.enforced = match policy {
                    SignaturePolicy::Enforce => Some(image.clone()),
                    SignaturePolicy::Default => None,
                };
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
