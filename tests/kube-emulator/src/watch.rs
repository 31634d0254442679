//! Watches: from a resourceVersion (410 Gone when it is older than the kept history), with selectors, bookmarks, `sendInitialEvents` and timeouts, streamed as JSON lines.

use std::convert::Infallible;
use std::sync::Arc;
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

fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

/// Starts the watch: the stream of lines to send, or an error to answer with at once.
pub fn start(
    app: &Arc<App>,
    req: WatchRequest,
) -> Result<mpsc::Receiver<Result<Bytes, Infallible>>, ApiError> {
    let t = req.resource.clone();
    let (events, initial, mut last, gone) = {
        let mut inner = app.lock();
        let name = req.fields.single_name().map(str::to_string);
        let events = inner.store.watch(&t.key(), req.namespace.clone(), name);
        let current = inner.store.rv();
        match req.resource_version {
            Some(rv) if rv > 0 && !req.send_initial_events => match inner.store.since(rv) {
                Ok(backlog) => {
                    let initial: Vec<(EventType, Arc<Value>)> =
                        backlog.iter().filter_map(|e| view(&req, e)).collect();
                    (events, initial, current, None)
                }
                Err(g) => (events, Vec::new(), current, Some((rv, g.oldest))),
            },
            _ => {
                let ns = req.namespace.as_deref();
                let initial = inner
                    .store
                    .list(&t.key(), ns)
                    .into_iter()
                    .filter(|o| req.labels.matches_object(o) && req.fields.matches(o))
                    .map(|o| (EventType::Added, o))
                    .collect();
                (events, initial, current, None)
            }
        }
    };
    let (tx, rx) = mpsc::channel(256);
    let app = app.clone();
    tokio::spawn(async move {
        if let Some((asked, oldest)) = gone {
            let status =
                ApiError::gone(format!("too old resource version: {asked} ({oldest})")).status();
            let _ = tx.send(Ok(line("ERROR", &status))).await;
            return;
        }
        // Table events carry their column definitions only in the first event, as
        // kube-apiserver sends them.
        let columns = App::columns(&t);
        let first = std::sync::atomic::AtomicBool::new(true);
        let render = |kind: EventType, object: &Value| -> Bytes {
            let mut object = object.clone();
            object["apiVersion"] = json!(t.api_version());
            match req.table {
                Some(version) => {
                    let headers = first.swap(false, std::sync::atomic::Ordering::SeqCst);
                    let event = crate::table::watch_event_table(
                        version,
                        &columns,
                        kind.as_str(),
                        &object,
                        headers,
                        &req.include_object,
                        chrono::Utc::now(),
                    );
                    let mut text = event.to_string();
                    text.push('\n');
                    Bytes::from(text)
                }
                None => line(kind.as_str(), &object),
            }
        };
        for (kind, object) in &initial {
            if tx.send(Ok(render(*kind, object))).await.is_err() {
                return;
            }
        }
        let bookmark = |rv: u64, end_of_initial: bool| {
            let mut object = json!({"kind": t.kind, "apiVersion": t.api_version(), "metadata": {"resourceVersion": rv.to_string()}});
            if end_of_initial {
                object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            line("BOOKMARK", &object)
        };
        if req.send_initial_events
            && req.bookmarks
            && tx.send(Ok(bookmark(last, true))).await.is_err()
        {
            return;
        }
        run(&app, &req, events, tx, &mut last, &render, &bookmark).await;
    });
    Ok(rx)
}

async fn run(
    app: &Arc<App>,
    req: &WatchRequest,
    mut events: mpsc::Receiver<Arc<Event>>,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    last: &mut u64,
    render: &(dyn Fn(EventType, &Value) -> Bytes + Send + Sync),
    bookmark: &(dyn Fn(u64, bool) -> Bytes + Send + Sync),
) {
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let deadline = req.timeout.map_or(far, |t| Instant::now() + t);
    let mut ticks = tokio::time::interval(app.bookmark_interval);
    ticks.tick().await;
    let mut cut = app.cut.subscribe();
    let send = |event: &Event, last: &mut u64| -> Option<Bytes> {
        if event.rv <= *last {
            return None;
        }
        *last = event.rv;
        view(req, event).map(|(kind, object)| render(kind, &object))
    };
    loop {
        tokio::select! {
            received = events.recv() => match received {
                Some(event) => {
                    if let Some(line) = send(&event, last)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
                // Dropped by the store for falling behind: the client resumes from its
                // last version, as after any dropped stream.
                None => return,
            },
            _ = ticks.tick(), if req.bookmarks => {
                // Every event up to the store's version is already queued here (events
                // are queued under the same lock), so send those first: a bookmark never
                // overtakes an event.
                let now = app.lock().store.rv();
                while let Ok(event) = events.try_recv() {
                    if let Some(line) = send(&event, last)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
                *last = (*last).max(now);
                if tx.send(Ok(bookmark(*last, false))).await.is_err() {
                    return;
                }
            }
            _ = sleep_until(deadline) => return,
            _ = cut.recv() => return,
            _ = tx.closed() => return,
        }
    }
}
