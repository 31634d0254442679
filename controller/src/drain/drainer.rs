//! The [`Drainer`]: at most one background drain per node, each a tokio task the
//! reconciler starts, polls, forgets and cancels.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::task::{DrainProgress, DrainTask, Wake};
use super::{DrainError, DrainOptions, DrainOutcome};

/// Announced when a background drain finishes (or, on the `blocked` channel, when what
/// holds it up changes), so the reconciler re-enqueues the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainDone {
    /// The pool that started the drain.
    pub pool: String,
    /// The drained node.
    pub node: String,
}

/// Where a node's background drain is.
#[derive(Debug, Clone, PartialEq)]
pub enum DrainState {
    /// Still running.
    Running {
        /// The pool that started it.
        pool: String,
        /// When it started.
        since: std::time::Instant,
        /// The last error it met (a budget's refusal, refused pods, API errors), if any.
        last_error: Option<String>,
    },
    /// Finished and not yet forgotten.
    Finished {
        /// The pool that started it.
        pool: String,
        /// When it started.
        since: std::time::Instant,
        /// When it finished.
        finished: std::time::Instant,
        /// How it ended.
        result: Result<DrainOutcome, DrainError>,
    },
}

struct DrainEntry {
    id: u64,
    pool: String,
    since: std::time::Instant,
    cancel: CancellationToken,
    options: watch::Sender<DrainOptions>,
    progress: Arc<DrainProgress>,
    finished: Option<(std::time::Instant, Result<DrainOutcome, DrainError>)>,
}

impl DrainEntry {
    fn state(&self) -> DrainState {
        match &self.finished {
            None => DrainState::Running {
                pool: self.pool.clone(),
                since: self.since,
                last_error: self.progress.last_error(),
            },
            Some((finished, result)) => DrainState::Finished {
                pool: self.pool.clone(),
                since: self.since,
                finished: *finished,
                result: result.clone(),
            },
        }
    }
}

#[derive(Default)]
struct Drains {
    next_id: u64,
    by_node: HashMap<String, DrainEntry>,
}

/// The background drains, at most one per node. Each runs as a tokio task; its end is
/// announced on the `done` channel and kept (see [`Drainer::state`]) until
/// [`Drainer::forget`] or [`Drainer::cancel`]. Dropping the Drainer cancels every drain.
pub struct Drainer {
    client: Client,
    done: mpsc::UnboundedSender<DrainDone>,
    blocked: Option<mpsc::UnboundedSender<DrainDone>>,
    drains: Arc<Mutex<Drains>>,
}

impl fmt::Debug for Drainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let drains = lock(&self.drains);
        let mut nodes: Vec<(&String, bool)> = drains
            .by_node
            .iter()
            .map(|(node, e)| (node, e.finished.is_some()))
            .collect();
        nodes.sort();
        f.debug_struct("Drainer")
            .field("drains (node, finished)", &nodes)
            .finish_non_exhaustive()
    }
}

fn lock(drains: &Mutex<Drains>) -> MutexGuard<'_, Drains> {
    drains.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a new background drain's task needs.
struct Spawned {
    id: u64,
    pool: String,
    node: String,
    cancel: CancellationToken,
    options: watch::Receiver<DrainOptions>,
    progress: Arc<DrainProgress>,
}

impl Drainer {
    /// A Drainer evicting with `client` (which should not retry 429 answers itself, see
    /// the [drain documentation](super)) and announcing finished drains on `done`.
    pub fn new(client: Client, done: mpsc::UnboundedSender<DrainDone>) -> Self {
        Drainer {
            client,
            done,
            blocked: None,
            drains: Arc::default(),
        }
    }

    /// Also announces, on `blocked`, each change of what holds a running drain up (a
    /// disruption budget refusing an eviction, a refused pod, an API error, or nothing
    /// any more), so that the pool's status can say it.
    pub fn announcing_blocks(mut self, blocked: mpsc::UnboundedSender<DrainDone>) -> Self {
        self.blocked = Some(blocked);
        self
    }

    /// Starts draining `node` for `pool` in the background (on the current tokio runtime),
    /// unless a drain of `node` is running or finished and not yet forgotten: then nothing
    /// new starts, but a running drain takes `options` from its next round (so a fixed
    /// `force` or `deleteEmptyDirData` unblocks it; the set of pods to evict, once fixed,
    /// does not change). Idempotent.
    pub fn start(&self, pool: &str, node: &str, options: DrainOptions) {
        let mut drains = lock(&self.drains);
        if let Some(entry) = drains.by_node.get(node) {
            if entry.pool != pool {
                tracing::warn!(
                    node,
                    pool,
                    draining_for = %entry.pool,
                    "node is already drained for another pool"
                );
            } else if entry.finished.is_none() {
                entry.options.send_if_modified(|current| {
                    let changed = *current != options;
                    *current = options;
                    changed
                });
            }
            return;
        }
        drains.next_id += 1;
        let id = drains.next_id;
        let cancel = CancellationToken::new();
        let (options_tx, options_rx) = watch::channel(options);
        let wake = self.blocked.clone().map(|tx| {
            let news = DrainDone {
                pool: pool.to_owned(),
                node: node.to_owned(),
            };
            // A closed channel means the reconciler is gone; nothing to tell.
            Box::new(move || drop(tx.send(news.clone()))) as Wake
        });
        let progress = Arc::new(DrainProgress::new(wake));
        drains.by_node.insert(
            node.to_string(),
            DrainEntry {
                id,
                pool: pool.to_string(),
                since: std::time::Instant::now(),
                cancel: cancel.clone(),
                options: options_tx,
                progress: Arc::clone(&progress),
                finished: None,
            },
        );
        drop(drains);
        self.spawn(Spawned {
            id,
            pool: pool.to_string(),
            node: node.to_string(),
            cancel,
            options: options_rx,
            progress,
        });
    }

    /// Runs a drain registered by [`Drainer::start`] as a task; its result is kept in its
    /// entry and announced, unless the entry was cancelled meanwhile.
    fn spawn(&self, drain: Spawned) {
        let client = self.client.clone();
        let done = self.done.clone();
        let shared = Arc::clone(&self.drains);
        let Spawned {
            id,
            pool,
            node,
            cancel,
            options,
            progress,
        } = drain;
        let span = tracing::info_span!("drain", pool = %pool, node = %node);
        tokio::spawn(
            async move {
                let result = DrainTask::new(client, &node, options, &cancel, &progress)
                    .run()
                    .await;
                if let Err(e) = &result {
                    tracing::error!(error = %e, "drain failed");
                }
                let announce = match lock(&shared).by_node.get_mut(&node) {
                    Some(entry) if entry.id == id => {
                        entry.finished = Some((std::time::Instant::now(), result));
                        true
                    }
                    // Cancelled and forgotten (perhaps already restarted): nobody waits.
                    _ => false,
                };
                if announce {
                    // A closed channel means the reconciler is gone; nothing to tell.
                    let _ = done.send(DrainDone { pool, node });
                }
            }
            .instrument(span),
        );
    }

    /// Cancels the drain of `node` (the node left the pool, the target was rolled back)
    /// and forgets it, running or finished. Its task stops within a moment and announces
    /// nothing.
    pub fn cancel(&self, node: &str) {
        if let Some(entry) = lock(&self.drains).by_node.remove(node) {
            tracing::info!(node, pool = %entry.pool, "cancelling drain");
            entry.cancel.cancel();
        }
    }

    /// Where the drain of `node` is; `None` when there is none (never started, cancelled
    /// or forgotten).
    pub fn state(&self, node: &str) -> Option<DrainState> {
        lock(&self.drains).by_node.get(node).map(DrainEntry::state)
    }

    /// Forgets the finished drain of `node` (after the reconciler acted on its result), so
    /// a later [`Drainer::start`] starts a new one. A running drain is left alone.
    pub fn forget(&self, node: &str) {
        let mut drains = lock(&self.drains);
        if drains
            .by_node
            .get(node)
            .is_some_and(|e| e.finished.is_some())
        {
            drains.by_node.remove(node);
        }
    }

    /// The nodes with a drain, running or finished and not forgotten (sorted).
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = lock(&self.drains).by_node.keys().cloned().collect();
        nodes.sort();
        nodes
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        for entry in lock(&self.drains).by_node.values() {
            entry.cancel.cancel();
        }
    }
}
