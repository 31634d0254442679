//! Watches: from a resourceVersion (410 Gone when it is older than the kept history), with selectors, bookmarks, `sendInitialEvents` and timeouts, streamed as JSON lines.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::App;
use crate::store::{Event, EventType};
use crate::table::{self, Column, TableFormat};

/// What one watch asked for.
#[derive(Debug)]
pub struct WatchRequest {
    /// The watched type.
    pub resource: Arc<ResourceType>,
    /// Namespace, or all.
    pub namespace: Option<String>,
    /// `resourceVersion` (`None` or `0`: start with the current objects).
    pub resource_version: Option<u64>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// Render each object as a one-row Table (kubectl get -w).
    pub table: Option<crate::table::TableVersion>,
    /// `includeObject` of those Tables.
    pub include_object: String,
}

/// How a watched event looks to this watcher, if it sees it at all.
fn view(req: &WatchRequest, event: &Event) -> Option<(EventType, Arc<Value>)> {
    if event.key != req.resource.key() {
        return None;
    }
    if let Some(ns) = &req.namespace
        && &event.namespace != ns
    {
        return None;
    }
    let matches = |o: &Value| req.labels.matches_object(o) && req.fields.matches(o);
    let now = matches(&event.object);
    let before = event.previous.as_deref().is_some_and(matches);
    let kind = match event.kind {
        EventType::Added if now => EventType::Added,
        EventType::Modified if now && before => EventType::Modified,
        EventType::Modified if now => EventType::Added,
        EventType::Modified if before => EventType::Deleted,
        EventType::Deleted if now || before => EventType::Deleted,
        EventType::Added | EventType::Modified | EventType::Deleted => return None,
    };
    Some((kind, event.object.clone()))
}

/// One watch line, `{"type":…,"object":…}` and a newline: the object serialized where it
/// is, not copied into a wrapper first.
///
/// The type comes first, as the API server writes it (its watch event's fields in their
/// declared order). A client that reads the event as a tagged enum (kube's `WatchEvent`
/// is one) then decodes the object straight into its type; with the object first, it
/// has to keep the whole object as generic content until it sees the type, and decode it
/// twice.
fn line(kind: &str, object: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        object: &'a Value,
    }
    let mut text = match serde_json::to_vec(&Line { kind, object }) {
        Ok(text) => text,
        // A `Value` always serializes; should it not, the slower way says the same (its
        // keys sorted, the object first).
        Err(_) => json!({"type": kind, "object": object})
            .to_string()
            .into_bytes(),
    };
    text.push(b'\n');
    Bytes::from(text)
}

/// Where a watch starts: its event channel, the events to send first, the version it is at,
/// and, when the asked version is older than the kept history, (asked, oldest kept).
struct Backlog {
    events: mpsc::Receiver<Arc<Event>>,
    initial: Vec<(EventType, Arc<Value>)>,
    last: u64,
    gone: Option<(u64, u64)>,
}

/// Subscribes to the store and reads what the watch sends first, under one lock: the events
/// since the asked version, or the current objects as `ADDED` events.
fn backlog(app: &App, req: &WatchRequest) -> Backlog {
    let t = &req.resource;
    let mut inner = app.lock();
    let name = req.fields.single_name().map(str::to_string);
    let events = inner
        .store
        .watch(&t.key(), req.namespace.clone(), name.clone());
    let last = inner.store.rv();
    let (initial, gone) = match req.resource_version {
        Some(rv) if rv > 0 && !req.send_initial_events => match inner.store.since(rv) {
            Ok(backlog) => {
                let initial: Vec<(EventType, Arc<Value>)> =
                    backlog.iter().filter_map(|e| view(req, e)).collect();
                (initial, None)
            }
            Err(g) => (Vec::new(), Some((rv, g.oldest))),
        },
        _ => {
            let ns = req.namespace.as_deref();
            let initial = inner
                .store
                .list_named(&t.key(), ns, name.as_deref(), t.namespaced)
                .into_iter()
                .filter(|o| req.labels.matches_object(o) && req.fields.matches(o))
                .map(|o| (EventType::Added, o))
                .collect();
            (initial, None)
        }
    };
    Backlog {
        events,
        initial,
        last,
        gone,
    }
}

/// Starts the watch: the stream of lines to send, or an error to answer with at once.
pub fn start(
    app: &Arc<App>,
    req: WatchRequest,
) -> Result<mpsc::Receiver<Result<Bytes, Infallible>>, ApiError> {
    let Backlog {
        events,
        initial,
        mut last,
        gone,
    } = backlog(app, &req);
    let (tx, rx) = mpsc::channel(256);
    let app = app.clone();
    tokio::spawn(async move {
        if let Some((asked, oldest)) = gone {
            let status =
                ApiError::gone(format!("too old resource version: {asked} ({oldest})")).status();
            let _ = tx.send(Ok(line("ERROR", &status))).await;
            return;
        }
        let lines = Lines::new(req);
        let mut held = app.held.subscribe();
        if !unheld(&mut held, &lines.req.resource.plural, &tx).await {
            return;
        }
        for (kind, object) in &initial {
            if tx.send(Ok(lines.render(*kind, object))).await.is_err() {
                return;
            }
        }
        if lines.req.send_initial_events
            && lines.req.bookmarks
            && tx.send(Ok(lines.bookmark(last, true))).await.is_err()
        {
            return;
        }
        run(&app, &lines, (events, held), tx, &mut last).await;
    });
    Ok(rx)
}

/// Whether `plural`'s watches are held now.
fn is_held(held: &tokio::sync::watch::Receiver<BTreeSet<String>>, plural: &str) -> bool {
    held.borrow().contains(plural)
}

/// Waits until `plural`'s watches are not held; `false` when the client went away or the
/// emulator stopped first.
async fn unheld(
    held: &mut tokio::sync::watch::Receiver<BTreeSet<String>>,
    plural: &str,
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
) -> bool {
    while is_held(held, plural) {
        tokio::select! {
            changed = held.changed() => if changed.is_err() {
                return false;
            },
            _ = tx.closed() => return false,
        }
    }
    true
}

/// The lines one watch sends: its events (plain, or as one-row Tables) and bookmarks.
struct Lines {
    req: WatchRequest,
    /// The watched type's Table columns.
    columns: Vec<Column>,
    /// Whether the next Table event is the first: table events carry their column
    /// definitions only in the first event, as kube-apiserver sends them.
    first: AtomicBool,
}

impl Lines {
    fn new(req: WatchRequest) -> Self {
        Lines {
            columns: App::columns(&req.resource),
            req,
            first: AtomicBool::new(true),
        }
    }

    /// The line of one event.
    fn render(&self, kind: EventType, object: &Value) -> Bytes {
        let api_version = self.req.resource.api_version();
        if self.req.table.is_none()
            && object.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
        {
            // Stored in the version watched, as nearly every object is: no copy.
            return line(kind.as_str(), object);
        }
        let mut object = object.clone();
        object["apiVersion"] = json!(api_version);
        match self.req.table {
            Some(version) => {
                let headers = self.first.swap(false, Ordering::SeqCst);
                let format = TableFormat {
                    version,
                    columns: &self.columns,
                    include_object: &self.req.include_object,
                };
                let event = table::watch_event_table(
                    format,
                    kind.as_str(),
                    &object,
                    headers,
                    chrono::Utc::now(),
                );
                let mut text = event.to_string();
                text.push('\n');
                Bytes::from(text)
            }
            None => line(kind.as_str(), &object),
        }
    }

    /// A bookmark at `rv`; the one ending the initial events is annotated so.
    fn bookmark(&self, rv: u64, end_of_initial: bool) -> Bytes {
        let t = &self.req.resource;
        let mut object = json!({"kind": t.kind, "apiVersion": t.api_version(), "metadata": {"resourceVersion": crate::store::rv_text(rv)}});
        if end_of_initial {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line("BOOKMARK", &object)
    }

    /// The line of an event newer than `last` (which it advances), if this watcher sees it.
    fn event(&self, event: &Event, last: &mut u64) -> Option<Bytes> {
        if event.rv <= *last {
            return None;
        }
        *last = event.rv;
        view(&self.req, event).map(|(kind, object)| self.render(kind, &object))
    }
}

async fn run(
    app: &Arc<App>,
    lines: &Lines,
    (mut events, mut held): (
        mpsc::Receiver<Arc<Event>>,
        tokio::sync::watch::Receiver<BTreeSet<String>>,
    ),
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    last: &mut u64,
) {
    let req = &lines.req;
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let deadline = req.timeout.map_or(far, |t| Instant::now() + t);
    let mut ticks = tokio::time::interval(app.bookmark_interval);
    ticks.tick().await;
    let mut cut = app.cut.subscribe();
    loop {
        let holding = is_held(&held, &req.resource.plural);
        tokio::select! {
            // While held, events wait in the queue (a watch that falls a whole queue
            // behind is cut, and its client resumes from its last version, as always).
            changed = held.changed() => if changed.is_err() {
                return;
            },
            received = events.recv(), if !holding => match received {
                Some(event) => {
                    if let Some(line) = lines.event(&event, last)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
                // Dropped by the store for falling behind: the client resumes from its
                // last version, as after any dropped stream.
                None => return,
            },
            _ = ticks.tick(), if req.bookmarks && !holding => {
                // Every event up to the store's version is already queued here (events
                // are queued under the same lock), so send those first: a bookmark never
                // overtakes an event.
                let now = app.lock().store.rv();
                while let Ok(event) = events.try_recv() {
                    if let Some(line) = lines.event(&event, last)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
                *last = (*last).max(now);
                if tx.send(Ok(lines.bookmark(*last, false))).await.is_err() {
                    return;
                }
            }
            _ = sleep_until(deadline) => return,
            _ = cut.recv() => return,
            _ = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_line_names_its_type_before_its_object_as_the_api_server_does() {
        let object = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "a"}});
        let text = line("MODIFIED", &object);
        let text = std::str::from_utf8(&text).unwrap();
        assert!(
            text.starts_with(r#"{"type":"MODIFIED","object":{"#),
            "the type comes first: {text}"
        );
        assert!(text.ends_with("}\n"), "one line: {text:?}");
        let read: Value = serde_json::from_str(text).unwrap();
        assert_eq!(read, json!({"type": "MODIFIED", "object": object}));
    }
}
