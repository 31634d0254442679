//! The Events the controller records, sent in the background: on the pool (what each
//! plan did, merged: `nodes n1, n2 approved to reboot into …`; `RolloutStarted`, …) and
//! on each node's Node (`RebootApproved`, `NodeUpdated`, …, so that `kubectl describe
//! node` says why a node was cordoned and rebooted). A plan that approves a wave names
//! hundreds of nodes; sent by the reconcile itself, their round trips lengthened it by
//! as much as the writes they report, and every other slot's reaction waits for the
//! reconcile in flight.
//!
//! Events are queued once the writes they report have succeeded (so an event still
//! never reports a write that failed), and sent by one task, [`CONCURRENT`] objects at a
//! time. One object's events are sent in the order queued: a job waits while one of the
//! same object's is in flight. The queue is bounded: when [`QUEUE`] jobs wait, a
//! reconcile waits for room, as it waited for the events before. When the controller
//! stops, what is queued is still sent, for at most [`FLUSH`]. Each pool event is counted
//! in `bootc_pool_actions_total{action="event"}` with its real outcome, once answered,
//! while the pool's series are kept.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Event as KubeEvent;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::warn;

use crate::metrics::Metrics;
use crate::shared::Recorders;

/// How many jobs (one object's events of one plan) wait at most before a reconcile
/// waits for room.
pub const QUEUE: usize = 4096;

/// How many objects' events are sent at once.
pub const CONCURRENT: usize = 32;

/// The longest wait, when the controller stops, for the queued events to be sent.
pub const FLUSH: Duration = Duration::from_secs(5);

/// One object's events, in order.
struct Job {
    reference: ObjectReference,
    events: Vec<KubeEvent>,
    /// The pool whose `event` actions these are, when they are on a pool.
    pool: Option<String>,
    /// The job's place in the queue, given back once it is sent.
    _place: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("on", &self.reference.name)
            .field("events", &self.events.len())
            .finish()
    }
}

/// Which object a job's events are about: one object's are sent one job at a time.
type Key = (Option<String>, Option<String>, Option<String>);

fn key(reference: &ObjectReference) -> Key {
    (
        reference.kind.clone(),
        reference.namespace.clone(),
        reference.name.clone(),
    )
}

/// Where the reconciles queue their events.
#[derive(Debug)]
pub struct EventQueue {
    jobs: mpsc::UnboundedSender<Job>,
    places: Arc<Semaphore>,
    metrics: Metrics,
}

/// The task sending the queued events; [`Sender::stop`] sends what is queued and ends it.
#[derive(Debug)]
pub struct Sender {
    closing: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl EventQueue {
    /// The queue, and the task sending what is queued through `recorder` (counting the
    /// pools' events in `metrics`).
    pub fn start(recorder: Recorders, metrics: Metrics) -> (Self, Sender) {
        let (jobs, queued) = mpsc::unbounded_channel();
        let (closing, closed) = oneshot::channel();
        let task = tokio::spawn(send_all(recorder, metrics.clone(), queued, closed));
        let places = Arc::new(Semaphore::new(QUEUE));
        let queue = EventQueue {
            jobs,
            places,
            metrics,
        };
        (queue, Sender { closing, task })
    }

    /// Queues `events` regarding `reference` (a Node), to be sent in this order.
    pub async fn on_node(&self, reference: ObjectReference, events: Vec<KubeEvent>) {
        self.queue(reference, events, None).await;
    }

    /// Queues `events` regarding pool `pool` (whose reference is `reference`), to be sent
    /// in this order after those queued before for it, each counted as its `event` action.
    pub async fn on_pool(&self, pool: &str, reference: ObjectReference, events: Vec<KubeEvent>) {
        if !events.is_empty() {
            self.metrics.keep_pool(pool);
        }
        self.queue(reference, events, Some(pool.to_owned())).await;
    }

    async fn queue(
        &self,
        reference: ObjectReference,
        events: Vec<KubeEvent>,
        pool: Option<String>,
    ) {
        if events.is_empty() {
            return;
        }
        let on = || reference.name.as_deref().unwrap_or_default().to_owned();
        // The semaphore is never closed: a place always comes, once a job is sent.
        let Ok(place) = Arc::clone(&self.places).acquire_owned().await else {
            warn!(on = on(), "cannot record the events: the queue is closed");
            return;
        };
        let job = Job {
            reference,
            events,
            pool,
            _place: place,
        };
        if let Err(e) = self.jobs.send(job) {
            let on = e.0.reference.name.as_deref().unwrap_or_default().to_owned();
            warn!(on, "cannot record the events: the controller is stopping");
        }
    }
}

impl Sender {
    /// Takes no more events, sends those queued (for at most [`FLUSH`]), and ends.
    pub async fn stop(self) {
        let _ = self.closing.send(());
        let mut task = self.task;
        if tokio::time::timeout(FLUSH, &mut task).await.is_err() {
            warn!("the last events were not all recorded before the controller stopped");
            task.abort();
        }
    }
}

/// Sends each queued job, [`CONCURRENT`] objects at once and one job per object at a
/// time, until `closed` fires and the queue is empty (or every queue handle is gone).
async fn send_all(
    recorder: Recorders,
    metrics: Metrics,
    mut queued: mpsc::UnboundedReceiver<Job>,
    closed: oneshot::Receiver<()>,
) {
    let mut closed = std::pin::pin!(closed);
    let mut closing = false;
    let mut running = FuturesUnordered::new();
    // The objects with a job in flight, each with its jobs that wait, in order.
    let mut waiting: HashMap<Key, VecDeque<Job>> = HashMap::new();
    let send = |job| send(&recorder, &metrics, job);
    loop {
        tokio::select! {
            // In this order: a stop is seen at once, and a job that ended frees its place
            // (or hands it to its object's next job) before another is taken.
            biased;
            stop = &mut closed, if !closing => {
                closing = true;
                // Asked to stop; a handle dropped without asking leaves the queue open.
                if stop.is_ok() {
                    queued.close();
                }
            }
            Some(key) = running.next(), if !running.is_empty() => {
                if let Some(next) = next_of(&mut waiting, key) {
                    running.push(send(next));
                }
            }
            job = queued.recv(), if running.len() < CONCURRENT => match job {
                Some(job) => match waiting.entry(key(&job.reference)) {
                    Entry::Occupied(mut later) => later.get_mut().push_back(job),
                    Entry::Vacant(free) => {
                        free.insert(VecDeque::new());
                        running.push(send(job));
                    }
                },
                None => break,
            },
        }
    }
    while let Some(key) = running.next().await {
        if let Some(next) = next_of(&mut waiting, key) {
            running.push(send(next));
        }
    }
}

/// The next job of the object whose job ended, if one waits; else the object is free.
fn next_of(waiting: &mut HashMap<Key, VecDeque<Job>>, key: Key) -> Option<Job> {
    let next = waiting.get_mut(&key).and_then(VecDeque::pop_front);
    if next.is_none() {
        waiting.remove(&key);
    }
    next
}

/// Records one object's events in order (best effort: each failure is logged), and
/// returns which object it was.
async fn send(recorder: &Recorders, metrics: &Metrics, job: Job) -> Key {
    for event in &job.events {
        let started = Instant::now();
        let outcome = match recorder.publish(event, &job.reference).await {
            Ok(()) => "ok",
            Err(e) => {
                let on = job.reference.name.as_deref().unwrap_or_default();
                warn!(on, error = %e, reason = %event.reason, "cannot record an event");
                "api"
            }
        };
        if let Some(pool) = &job.pool {
            metrics.observe_known_action(pool, "event", outcome, started.elapsed());
        }
    }
    key(&job.reference)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::Api;
    use kube::runtime::events::{EventType, Reporter};

    use super::*;

    fn node(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        }
    }

    fn event(reason: &str) -> KubeEvent {
        KubeEvent {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: Some(format!("{reason} note")),
            action: reason.to_owned(),
            secondary: None,
        }
    }

    async fn recorder() -> (kube_emulator::Emulator, kube::Client, Recorders) {
        let emulator = kube_emulator::Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let reporter = Reporter {
            controller: "bootc-pool-controller".to_owned(),
            instance: None,
        };
        let recorder = Recorders::new(&client, &reporter);
        (emulator, client, recorder)
    }

    /// Each Event as (node, reason), in the order they were made (their `eventTime`, in
    /// microseconds: one node's are made one after the other's answer).
    async fn recorded(client: &kube::Client) -> Vec<(String, String)> {
        let api: Api<K8sEvent> = Api::namespaced(client.clone(), "default");
        let mut list = api.list(&Default::default()).await.unwrap().items;
        list.sort_by_key(|e| e.event_time.clone().unwrap().0);
        list.into_iter()
            .map(|e| (e.regarding.unwrap().name.unwrap(), e.reason.unwrap()))
            .collect()
    }

    /// Many nodes' events queued at once (more than are sent at a time): once `stop`
    /// returns, every one is recorded, each node's in the order queued.
    #[tokio::test]
    async fn what_is_queued_is_sent_in_order_before_stop_returns() {
        let (_emulator, client, recorder) = recorder().await;
        let (queue, sender) = EventQueue::start(recorder, Metrics::new());
        let names: Vec<String> = (0..3 * CONCURRENT).map(|i| format!("n{i}")).collect();
        for name in &names {
            let events = vec![event("RebootApproved"), event("NodeUpdated")];
            queue.on_node(node(name), events).await;
        }
        sender.stop().await;
        let seen = recorded(&client).await;
        assert_eq!(seen.len(), 2 * names.len(), "{seen:?}");
        for name in &names {
            let reasons: Vec<&str> = seen
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, r)| r.as_str())
                .collect();
            assert_eq!(reasons, ["RebootApproved", "NodeUpdated"], "{name}");
        }
        // Stopped: a late event is refused without a panic, and not recorded.
        queue
            .on_node(node("late"), vec![event("NodeUpdated")])
            .await;
        assert_eq!(recorded(&client).await.len(), 2 * names.len());
    }

    /// The sending task's handle dropped without `stop`: the queue stays open. (The
    /// first event may have been queued before the task saw the handle go; the second is
    /// queued after the task sent the first, so after it saw.)
    #[tokio::test]
    async fn a_dropped_handle_leaves_the_queue_open() {
        let (_emulator, client, recorder) = recorder().await;
        let (queue, sender) = EventQueue::start(recorder, Metrics::new());
        drop(sender);
        for (n, name) in ["n1", "n2"].into_iter().enumerate() {
            queue.on_node(node(name), vec![event("NodeUpdated")]).await;
            wait_recorded(&client, n + 1).await;
        }
        let seen = recorded(&client).await;
        assert_eq!(
            seen,
            [
                ("n1".into(), "NodeUpdated".into()),
                ("n2".into(), "NodeUpdated".into())
            ]
        );
    }

    /// Many jobs for the same two objects, queued at once: each object's events are
    /// recorded in the order queued, though more objects' could be sent at a time.
    #[tokio::test]
    async fn one_objects_jobs_are_sent_one_after_the_other() {
        let (_emulator, client, recorder) = recorder().await;
        let (queue, sender) = EventQueue::start(recorder, Metrics::new());
        let jobs = 2 * CONCURRENT;
        for i in 0..jobs {
            for name in ["n1", "n2"] {
                let events = vec![event(&format!("First{i}")), event(&format!("Second{i}"))];
                queue.on_node(node(name), events).await;
            }
        }
        sender.stop().await;
        let seen = recorded(&client).await;
        let expected: Vec<String> = (0..jobs)
            .flat_map(|i| [format!("First{i}"), format!("Second{i}")])
            .collect();
        for name in ["n1", "n2"] {
            let reasons: Vec<&str> = seen
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, r)| r.as_str())
                .collect();
            assert_eq!(reasons, expected, "{name}");
        }
    }

    /// A pool's events are counted with their outcome once answered.
    #[tokio::test]
    async fn a_pools_events_are_counted_with_their_outcome() {
        let (emulator, client, recorder) = recorder().await;
        let metrics = Metrics::new();
        let (queue, sender) = EventQueue::start(recorder, metrics.clone());
        let pool = ObjectReference {
            api_version: Some("node.bootc.dev/v1alpha1".to_owned()),
            kind: Some("BootcNodePool".to_owned()),
            name: Some("workers".to_owned()),
            ..ObjectReference::default()
        };
        let events = vec![event("RolloutStarted"), event("RolloutComplete")];
        queue.on_pool("workers", pool.clone(), events).await;
        // Then every write of an Event fails.
        wait_recorded(&client, 2).await;
        emulator.handle().set_faults(kube_emulator::FaultConfig {
            error_rate: 1.0,
            writes_only: true,
            resource: Some("events".to_owned()),
            ..kube_emulator::FaultConfig::default()
        });
        queue
            .on_pool("workers", pool, vec![event("RolloutHalted")])
            .await;
        sender.stop().await;
        let text = metrics.encode();
        let count = |outcome: &str| {
            let prefix = format!(
                "bootc_pool_actions_total{{pool=\"workers\",action=\"event\",outcome=\"{outcome}\"}} "
            );
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .map_or(0, |v| v.parse::<u64>().unwrap())
        };
        assert_eq!((count("ok"), count("api")), (2, 1), "{text}");
        assert_eq!(recorded(&client).await.len(), 2);
    }

    /// Waits until `n` Events are recorded.
    async fn wait_recorded(client: &kube::Client, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while recorded(client).await.len() < n {
            assert!(std::time::Instant::now() < deadline, "never recorded");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// While [`QUEUE`] jobs wait (every request is held up), the next one waits for room.
    #[tokio::test]
    async fn a_full_queue_makes_the_next_job_wait() {
        let (emulator, _client, recorder) = recorder().await;
        emulator.handle().set_faults(kube_emulator::FaultConfig {
            latency: Duration::from_secs(3600),
            ..kube_emulator::FaultConfig::default()
        });
        let (queue, _sender) = EventQueue::start(recorder, Metrics::new());
        for i in 0..QUEUE {
            queue
                .on_node(node(&format!("n{i}")), vec![event("NodeUpdated")])
                .await;
        }
        assert_eq!(queue.places.available_permits(), 0);
        let next = queue.on_node(node("one-more"), vec![event("NodeUpdated")]);
        assert!(futures::FutureExt::now_or_never(next).is_none());
    }
}
