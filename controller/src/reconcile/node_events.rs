//! The Events a plan records on its nodes' Node objects (`RebootApproved`, `NodeUpdated`,
//! …, so that `kubectl describe node` says why a node was cordoned and rebooted), sent in
//! the background. A plan that approves a wave names hundreds of nodes; sent by the
//! reconcile itself, their round trips lengthened it by as much as the writes they
//! report, and every other slot's reaction waits for the reconcile in flight.
//!
//! A node's events are queued once its writes have succeeded (so an event still never
//! reports a write that failed), each node's in the plan's order, and sent by one task,
//! [`CONCURRENT`] nodes at a time. The queue is bounded: when [`QUEUE`] nodes' events
//! wait, a reconcile waits for room, as it waited for the events before. When the
//! controller stops, what is queued is still sent, for at most [`FLUSH`].

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Event as KubeEvent;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::warn;

use crate::shared::Recorders;

/// How many nodes' events wait at most before a reconcile waits for room.
pub const QUEUE: usize = 4096;

/// How many nodes' events are sent at once.
pub const CONCURRENT: usize = 32;

/// The longest wait, when the controller stops, for the queued events to be sent.
pub const FLUSH: Duration = Duration::from_secs(5);

/// One node's events, in order.
struct Job {
    reference: ObjectReference,
    events: Vec<KubeEvent>,
}

/// Where the reconciles queue their nodes' events.
#[derive(Debug)]
pub struct NodeEvents {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("node", &self.reference.name)
            .field("events", &self.events.len())
            .finish()
    }
}

/// The task sending the queued events; [`Sender::stop`] sends what is queued and ends it.
#[derive(Debug)]
pub struct Sender {
    closing: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl NodeEvents {
    /// The queue, and the task sending what is queued through `recorder`.
    pub fn start(recorder: Recorders) -> (Self, Sender) {
        let (jobs, queued) = mpsc::channel(QUEUE);
        let (closing, closed) = oneshot::channel();
        let task = tokio::spawn(send_all(recorder, queued, closed));
        (NodeEvents { jobs }, Sender { closing, task })
    }

    /// Queues `events` regarding `reference` (a Node), to be sent in this order.
    pub async fn queue(&self, reference: ObjectReference, events: Vec<KubeEvent>) {
        if events.is_empty() {
            return;
        }
        let job = Job { reference, events };
        if let Err(e) = self.jobs.send(job).await {
            let on = e.0.reference.name.as_deref().unwrap_or_default().to_owned();
            warn!(
                on,
                "cannot record the node's events: the controller is stopping"
            );
        }
    }
}

impl Sender {
    /// Takes no more events, sends those queued (for at most [`FLUSH`]), and ends.
    pub async fn stop(self) {
        let _ = self.closing.send(());
        let mut task = self.task;
        if tokio::time::timeout(FLUSH, &mut task).await.is_err() {
            warn!("the nodes' last events were not all recorded before the controller stopped");
            task.abort();
        }
    }
}

/// Sends each queued job, [`CONCURRENT`] at once, until `closed` fires and the queue is
/// empty (or every queue handle is gone).
async fn send_all(
    recorder: Recorders,
    mut queued: mpsc::Receiver<Job>,
    closed: oneshot::Receiver<()>,
) {
    let mut closed = std::pin::pin!(closed);
    let mut closing = false;
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            // In this order: a stop is seen at once, and a job that ended frees its place
            // before another is taken.
            biased;
            stop = &mut closed, if !closing => {
                closing = true;
                // Asked to stop; a handle dropped without asking leaves the queue open.
                if stop.is_ok() {
                    queued.close();
                }
            }
            Some(()) = running.next(), if !running.is_empty() => {}
            job = queued.recv(), if running.len() < CONCURRENT => match job {
                Some(job) => running.push(send(&recorder, job)),
                None => break,
            },
        }
    }
    while running.next().await.is_some() {}
}

/// Records one node's events in order (best effort: each failure is logged).
async fn send(recorder: &Recorders, job: Job) {
    for event in &job.events {
        if let Err(e) = recorder.publish(event, &job.reference).await {
            let on = job.reference.name.as_deref().unwrap_or_default();
            warn!(on, error = %e, reason = %event.reason, "cannot record an event");
        }
    }
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
        let (queue, sender) = NodeEvents::start(recorder);
        let names: Vec<String> = (0..3 * CONCURRENT).map(|i| format!("n{i}")).collect();
        for name in &names {
            let events = vec![event("RebootApproved"), event("NodeUpdated")];
            queue.queue(node(name), events).await;
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
        queue.queue(node("late"), vec![event("NodeUpdated")]).await;
        assert_eq!(recorded(&client).await.len(), 2 * names.len());
    }

    /// The sending task's handle dropped without `stop`: the queue stays open. (The
    /// first event may have been queued before the task saw the handle go; the second is
    /// queued after the task sent the first, so after it saw.)
    #[tokio::test]
    async fn a_dropped_handle_leaves_the_queue_open() {
        let (_emulator, client, recorder) = recorder().await;
        let (queue, sender) = NodeEvents::start(recorder);
        drop(sender);
        for (n, name) in ["n1", "n2"].into_iter().enumerate() {
            queue.queue(node(name), vec![event("NodeUpdated")]).await;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while recorded(&client).await.len() <= n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{name} never recorded"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
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
}
