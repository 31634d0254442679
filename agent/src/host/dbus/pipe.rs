//! bootc's progress pipe. bootc writes its progress reports only to a pipe, and only on a
//! descriptor above 2 (`--progress-fd 3`); a transient service cannot be handed one
//! directly on the systemd releases the agent supports (`OpenFile=` is newer), and a
//! shell must not open it. So the pipe is a FIFO that systemd itself opens, as a transient
//! socket unit (`ListenFIFO`) of the same name as the command's service, created with it
//! in one `StartTransientUnit` call: a service started while its socket listens is given
//! the socket's descriptors from 3 on.
//!
//! - The service is then started explicitly (`StartUnit`): the FIFO never triggers it.
//! - systemd keeps the FIFO open read-write, so bootc never meets a closed pipe even
//!   while no agent reads (an agent restarting), and the agent's reader sees the end of
//!   the stream only once the socket is stopped.
//! - A socket whose service ended re-triggers it when unread data waits in the FIFO; the
//!   service may therefore start only once (`StartLimitBurst=1`), and the socket is
//!   stopped before the service is released.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::task::JoinHandle;
use zbus::Variant;

use super::DbusHost;
use super::proxies::SystemdManagerProxy;
use crate::host::StageProgress;
use crate::host::progress::parse_line;

/// How long the reader may take to drain the FIFO once the socket is stopped.
const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// `StartLimitIntervalUSec` of a staging service: longer than any command may run.
const START_LIMIT_INTERVAL_USEC: u64 = 24 * 3600 * 1_000_000;
/// The FIFO's mode (0600): only root on the host reads bootc's reports.
const FIFO_MODE: u32 = 0o600;

/// A command's progress FIFO and the socket unit that holds it open.
#[derive(Debug, Clone)]
pub(super) struct ProgressPipe {
    /// The socket unit (`<command's unit>.socket`).
    pub(super) socket: String,
    /// The FIFO as the host sees it.
    pub(super) host_fifo: PathBuf,
    /// The FIFO as the agent sees it.
    pub(super) local_fifo: PathBuf,
    /// The digest being staged.
    pub(super) digest: String,
}

impl ProgressPipe {
    /// The socket unit that holds the FIFO open, for the service `unit`.
    pub(super) fn socket_properties(&self, unit: &str) -> Vec<(&'static str, Variant<'static>)> {
        let listen = vec![("FIFO".to_owned(), self.host_fifo.display().to_string())];
        vec![
            (
                "Description",
                Variant::from(format!("bootc-node-agent: progress of {unit}")),
            ),
            ("Listen", Variant::from(listen)),
            ("SocketMode", Variant::from(FIFO_MODE)),
            ("RemoveOnStop", Variant::from(true)),
        ]
    }

    /// What the service of a pipe adds to its properties: it may start only once (a
    /// socket re-triggers its ended service while unread data waits).
    pub(super) fn limit_starts(service: &mut Vec<(&'static str, Variant<'static>)>) {
        service.push(("StartLimitBurst", Variant::from(1u32)));
        service.push((
            "StartLimitIntervalUSec",
            Variant::from(START_LIMIT_INTERVAL_USEC),
        ));
    }
}

impl DbusHost {
    /// Starts reading the FIFO, publishing the staging's progress.
    pub(super) fn start_reading(&self, pipe: &ProgressPipe) -> JoinHandle<()> {
        tokio::spawn(read_progress(
            pipe.local_fifo.clone(),
            pipe.digest.clone(),
            self.progress.clone(),
        ))
    }

    /// Stops the socket (so no leftover report can start the service again), lets the
    /// reader take what is left, and releases the socket unit.
    pub(super) async fn close_pipe(
        &self,
        manager: &SystemdManagerProxy<'_>,
        pipe: &ProgressPipe,
        mut reader: JoinHandle<()>,
    ) {
        if let Err(e) = manager.stop_unit(&pipe.socket, "replace").await {
            tracing::warn!(socket = %pipe.socket, error = %e, "cannot stop the progress socket");
        }
        if tokio::time::timeout(DRAIN_WAIT, &mut reader).await.is_err() {
            reader.abort();
        }
        let _ = manager.reset_failed_unit(&pipe.socket).await;
        let _ = tokio::fs::remove_file(&pipe.local_fifo).await;
    }
}

/// Reads bootc's reports from the FIFO at `path` until the stream ends, publishing the
/// staging's progress after each. A FIFO that cannot be opened is logged: the staging
/// goes on without progress.
pub(super) async fn read_progress(
    path: PathBuf,
    digest: String,
    progress: tokio::sync::watch::Sender<Option<StageProgress>>,
) {
    let receiver = match open_fifo(&path) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read bootc's progress");
            return;
        }
    };
    let mut current = StageProgress::new(digest);
    progress.send_replace(Some(current.clone()));
    let mut reader = tokio::io::BufReader::new(receiver);
    let mut line = Vec::new();
    let mut lines = 0u64;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => {
                tracing::debug!(lines, path = %path.display(), "bootc's progress stream ended");
                return;
            }
            Ok(_) => {
                lines += 1;
                if let Some(event) = parse_line(&String::from_utf8_lossy(&line)) {
                    current.apply(event);
                    progress.send_replace(Some(current.clone()));
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "bootc's progress stream ended");
                return;
            }
        }
    }
}

fn open_fifo(path: &Path) -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    tokio::net::unix::pipe::OpenOptions::new().open_receiver(path)
}
