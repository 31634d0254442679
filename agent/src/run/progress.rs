//! Staging progress in the status: what bootc reports arrives as often as bootc writes
//! it; the status shows it at most once per [`INTERVAL`], and a report that arrives
//! sooner waits for its turn (the latest one wins).

use std::future::Future;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::Agent;
use crate::host::{Host, StageProgress};
use crate::report;

/// The shortest time between two progress writes of one node.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// The progress bootc last reported, and the one the status shows.
#[derive(Debug, Default)]
pub(super) struct Shown {
    latest: Option<StageProgress>,
    shown: Option<(StageProgress, DateTime<Utc>)>,
    shown_at: Option<Instant>,
}

impl Shown {
    /// Takes a new report in.
    pub(super) fn offer(&mut self, progress: Option<StageProgress>) {
        self.latest = progress;
    }

    /// When the latest report may be shown; `None` when it is shown already.
    pub(super) fn due(&self) -> Option<Instant> {
        let latest = self.latest.as_ref()?;
        if self.shown.as_ref().is_some_and(|(s, _)| s == latest) {
            return None;
        }
        Some(self.shown_at.map_or_else(Instant::now, |t| t + INTERVAL))
    }

    /// Puts the latest report's turn off by one interval (the status cannot show it yet).
    fn defer(&mut self) {
        self.shown_at = Some(Instant::now());
    }

    /// Makes the latest report the one shown.
    pub(super) fn take(&mut self, now: DateTime<Utc>) {
        if let Some(latest) = &self.latest {
            self.shown = Some((latest.clone(), now));
            self.shown_at = Some(Instant::now());
        }
    }

    /// What the status shows.
    pub(super) fn current(&self) -> Option<(&StageProgress, DateTime<Utc>)> {
        self.shown.as_ref().map(|(p, at)| (p, *at))
    }
}

impl<H: Host + 'static> Agent<H> {
    /// Takes in the report the host just published (`open`: false when it will publish
    /// no more) and shows it if its turn has come.
    pub(super) async fn progress_arrived(&mut self, open: bool) {
        self.progress_open = open;
        let latest = self.progress_rx.borrow_and_update().clone();
        self.progress.offer(latest);
        self.show_progress().await;
    }

    /// Awaits `work` while still showing bootc's reports as they come: a host read can
    /// wait for a whole pull (bootc's status waits for the lock the pull holds).
    pub(super) async fn with_progress<T>(&mut self, work: impl Future<Output = T>) -> T {
        tokio::pin!(work);
        loop {
            let due = self.progress.due();
            tokio::select! {
                done = &mut work => return done,
                changed = self.progress_rx.changed(), if self.progress_open => {
                    self.progress_arrived(changed.is_ok()).await;
                }
                () = super::sleep_until_some(due) => self.show_progress().await,
            }
        }
    }

    /// Shows the latest report, when its turn has come, in `status.progress` alone, and
    /// only while the status says the node is staging.
    pub(super) async fn show_progress(&mut self) {
        if self.progress.due().is_none_or(|due| due > Instant::now()) {
            return;
        }
        let now = Utc::now();
        let Some(node) = self.node.clone().filter(staging) else {
            // The status does not say Staging yet: the write that says it carries the
            // latest report (`status.rs`); until then, no progress write of its own.
            self.progress.defer();
            return;
        };
        self.progress.take(now);
        if self.api_retry.wait(now).is_some() {
            return;
        }
        let shown = self
            .progress
            .current()
            .and_then(|(p, at)| report::progress_status(p, at, &node.spec.desired_image));
        if shown.is_none()
            || node.status.as_ref().and_then(|s| s.progress.as_ref()) == shown.as_ref()
        {
            return;
        }
        let body = serde_json::json!({ "status": { "progress": shown } });
        match self.patch_own_status(body).await {
            Ok(updated) => {
                debug!("progress written");
                self.keep_answer(updated);
            }
            Err(e) => {
                // Not a failure of the node: the next report, or the next status write,
                // carries it.
                warn!(error = %error_chain(&e), "progress write failed");
            }
        }
    }
}

/// Whether the status on `node` says it is staging.
fn staging(node: &BootcNode) -> bool {
    node.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == bootc_crds::conditions::IDLE
                && c.reason == bootc_crds::conditions::idle::STAGING
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(bytes: u64) -> StageProgress {
        StageProgress {
            digest: "sha256:ab".into(),
            bytes_done: bytes,
            bytes_total: 100,
            ..StageProgress::default()
        }
    }

    #[test]
    fn the_latest_report_waits_for_its_turn() {
        let mut s = Shown::default();
        assert_eq!(s.due(), None, "nothing reported");
        s.offer(Some(report(1)));
        let first = s.due().expect("due");
        assert!(first <= Instant::now(), "the first report is shown at once");
        s.take(Utc::now());
        assert_eq!(s.due(), None, "shown");
        assert_eq!(s.current().map(|(p, _)| p.bytes_done), Some(1));

        s.offer(Some(report(2)));
        s.offer(Some(report(3)));
        let next = s.due().expect("due");
        let wait = next.saturating_duration_since(Instant::now());
        assert!(
            wait > INTERVAL - Duration::from_secs(1),
            "waits its turn: {wait:?}"
        );
        s.take(Utc::now());
        assert_eq!(
            s.current().map(|(p, _)| p.bytes_done),
            Some(3),
            "the latest wins"
        );
    }
}
