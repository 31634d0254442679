//! What the reconcile shell and the services it calls (the alert gate, the notifier, the
//! resolver, the metrics…) share, below all of them: the controller's name in what it
//! sends and writes, the clock, and the HTTP client every request outside the cluster
//! starts from.

use std::sync::Arc;

use chrono::{DateTime, Utc};

/// The User-Agent of the controller's requests (for audit logs and request counts).
pub const USER_AGENT: &str = concat!("bootc-pool-controller/", env!("CARGO_PKG_VERSION"));
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "bootc-pool-controller";

/// A clock, injectable for tests.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The HTTP client of a request outside the cluster (a registry, an alert source, a
/// webhook), before each caller's timeouts and redirect policy: it sends the
/// controller's [`USER_AGENT`].
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().user_agent(USER_AGENT)
}

/// The controller's Event recorder. It records as kube's
/// [`Recorder`](kube::runtime::events::Recorder) does (the same Event names, fields and
/// series: an event repeated on one object within six minutes, with the same type,
/// action, reason and related object, counts up the first one's `series`), but keeps of
/// each recent event only what a repeat needs: its key's hash, its name and namespace,
/// its count and when it was last seen, not the whole Event and key (about 1.5 kB each).
/// With an Event on every Node in a rollout, kube's kept copies grew the controller by
/// about 7 MiB per 1,000 nodes. The kept entries are split by the object an event
/// regards ([`RECORDERS`] parts), a part sweeps out expired entries at most every
/// [`SWEEP_EVERY`], and keeps at most [`KEEP_PER_PART`].
#[derive(Clone)]
pub struct Recorders {
    client: kube::Client,
    reporter: kube::runtime::events::Reporter,
    parts: Arc<[std::sync::Mutex<Part>]>,
}

/// How many parts [`Recorders`] splits its kept events over.
pub const RECORDERS: usize = 64;
/// How long an event is kept for its repeats to count as a series (kube's six minutes).
const KEEP: k8s_openapi::jiff::SignedDuration = k8s_openapi::jiff::SignedDuration::from_mins(6);
/// The most events a part keeps (4,096 in all, as client-go's event correlator keeps):
/// past it, the one seen longest ago is forgotten, so a rollout of many nodes does not
/// grow the controller by its events for six minutes. A repeat of a forgotten event is
/// recorded as a new Event rather than counted into its series.
const KEEP_PER_PART: usize = 64;
/// How often a part sweeps out events older than [`KEEP`].
const SWEEP_EVERY: k8s_openapi::jiff::SignedDuration =
    k8s_openapi::jiff::SignedDuration::from_secs(10);

/// One part of the kept events: by key hash, each event's name, namespace, count and
/// last time.
#[derive(Debug, Default)]
struct Part {
    kept: std::collections::HashMap<u64, Kept>,
    swept: Option<k8s_openapi::jiff::Timestamp>,
}

#[derive(Debug, Clone)]
struct Kept {
    name: String,
    namespace: String,
    /// The series count written last; 1 before any repeat.
    count: i32,
    last: k8s_openapi::jiff::Timestamp,
}

impl std::fmt::Debug for Recorders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorders")
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl Recorders {
    /// A recorder of `client` naming `reporter`.
    pub fn new(client: &kube::Client, reporter: &kube::runtime::events::Reporter) -> Self {
        Recorders {
            client: client.clone(),
            reporter: reporter.clone(),
            parts: (0..RECORDERS)
                .map(|_| std::sync::Mutex::default())
                .collect(),
        }
    }

    /// Records `event` regarding `reference`: a new Event, or the series of the same
    /// event recorded within [`KEEP`] counted up.
    pub async fn publish(
        &self,
        event: &kube::runtime::events::Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), kube::Error> {
        use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        use kube::api::{Api, Patch, PatchParams, PostParams};
        let now = k8s_openapi::jiff::Timestamp::now();
        let key = self.key(event, reference);
        let part = &self.parts[Self::shard(reference)];
        let repeat = lock_part(part).repeat(key, now);
        match repeat {
            Some(kept) => {
                let series = EventSeries {
                    count: kept.count,
                    last_observed_time: MicroTime(now),
                };
                let patch = serde_json::json!({ "series": series });
                Api::<K8sEvent>::namespaced(self.client.clone(), &kept.namespace)
                    .patch(&kept.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                lock_part(part).seen(key, kept);
            }
            None => {
                let new = self.generate(event, reference, now);
                let kept = Kept {
                    name: new.metadata.name.clone().unwrap_or_default(),
                    namespace: new.metadata.namespace.clone().unwrap_or_default(),
                    count: 1,
                    last: now,
                };
                Api::<K8sEvent>::namespaced(self.client.clone(), &kept.namespace)
                    .create(&PostParams::default(), &new)
                    .await?;
                lock_part(part).seen(key, kept);
            }
        }
        Ok(())
    }

    /// The Event kube's recorder would create for `event` regarding `reference` at
    /// `now` (a cluster-scoped object's in `default`).
    fn generate(
        &self,
        event: &kube::runtime::events::Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        now: k8s_openapi::jiff::Timestamp,
    ) -> k8s_openapi::api::events::v1::Event {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
        let controller = &self.reporter.controller;
        let regarding = reference.name.as_ref().unwrap_or(controller);
        k8s_openapi::api::events::v1::Event {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference.clone()),
            note: event.note.clone(),
            metadata: ObjectMeta {
                namespace: Some(reference.namespace.clone().unwrap_or("default".to_owned())),
                name: Some(format!("{regarding}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone().unwrap_or(controller.clone())),
            type_: Some(
                match event.type_ {
                    kube::runtime::events::EventType::Normal => "Normal",
                    kube::runtime::events::EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            related: event.secondary.clone(),
            ..k8s_openapi::api::events::v1::Event::default()
        }
    }

    /// What makes two events one series (kube's key): type, action, reason, the object
    /// regarded and the related one (the reporter is this recorder's own).
    fn key(
        &self,
        event: &kube::runtime::events::Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        matches!(event.type_, kube::runtime::events::EventType::Warning).hash(&mut h);
        (&event.action, &event.reason).hash(&mut h);
        for r in std::iter::once(Some(reference)).chain([event.secondary.as_ref()]) {
            r.map(|r| {
                (
                    (&r.api_version, &r.field_path, &r.kind),
                    (&r.name, &r.namespace, &r.resource_version, &r.uid),
                )
            })
            .hash(&mut h);
        }
        h.finish()
    }

    /// The part that keeps the events of the object `reference` names.
    fn shard(reference: &k8s_openapi::api::core::v1::ObjectReference) -> usize {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (&reference.kind, &reference.namespace, &reference.name).hash(&mut h);
        usize::try_from(h.finish() % RECORDERS as u64).unwrap_or(0)
    }
}

fn lock_part(part: &std::sync::Mutex<Part>) -> std::sync::MutexGuard<'_, Part> {
    part.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Part {
    /// The kept event `key` counted once more, if it was seen within [`KEEP`] of `now`
    /// (sweeping out expired entries first, at most every [`SWEEP_EVERY`]).
    fn repeat(&mut self, key: u64, now: k8s_openapi::jiff::Timestamp) -> Option<Kept> {
        if self.swept.is_none_or(|t| t + SWEEP_EVERY <= now) {
            self.kept.retain(|_, k| k.last + KEEP > now);
            self.swept = Some(now);
        }
        let kept = self.kept.get(&key).filter(|k| k.last + KEEP > now)?;
        Some(Kept {
            count: kept.count.max(1) + 1,
            last: now,
            ..kept.clone()
        })
    }

    /// Remembers `kept` as written, forgetting the event seen longest ago when the part
    /// is full.
    fn seen(&mut self, key: u64, kept: Kept) {
        if self.kept.len() >= KEEP_PER_PART
            && !self.kept.contains_key(&key)
            && let Some(oldest) = self
                .kept
                .iter()
                .min_by_key(|(_, k)| k.last)
                .map(|(k, _)| *k)
        {
            self.kept.remove(&oldest);
        }
        self.kept.insert(key, kept);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::api::Api;
    use kube::runtime::events::{Event, EventType, Reporter};

    use super::{KEEP, KEEP_PER_PART, Kept, Part, RECORDERS, Recorders};

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: "Rollout".to_owned(),
            secondary: None,
        }
    }

    /// Recorded against the API emulator: a repeat of one event on one object within
    /// the six minutes counts up the first Event's series (its note stays the first);
    /// another reason, or another object, is an Event of its own, with kube's fields.
    #[tokio::test]
    async fn a_repeat_counts_up_the_series_of_the_first() {
        let emulator = kube_emulator::Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let reporter = Reporter {
            controller: "bootc-pool-controller".to_owned(),
            instance: Some("pod-1".to_owned()),
        };
        let recorder = Recorders::new(&client, &reporter);
        let node = |name: &str| ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        };
        for note in ["first", "second", "third"] {
            recorder
                .publish(&event("RebootApproved", note), &node("n1"))
                .await
                .unwrap();
        }
        recorder
            .publish(&event("NodeUpdated", "other"), &node("n1"))
            .await
            .unwrap();
        recorder
            .publish(&event("RebootApproved", "n2's"), &node("n2"))
            .await
            .unwrap();
        let events: Api<K8sEvent> = Api::namespaced(client, "default");
        let mut list = events.list(&Default::default()).await.unwrap().items;
        list.sort_by_key(|e| (e.regarding.clone().unwrap().name, e.reason.clone()));
        let seen: Vec<(String, String, Option<i32>)> = list
            .iter()
            .map(|e| {
                (
                    e.reason.clone().unwrap(),
                    e.note.clone().unwrap(),
                    e.series.as_ref().map(|s| s.count),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("NodeUpdated".into(), "other".into(), None),
                ("RebootApproved".into(), "first".into(), Some(3)),
                ("RebootApproved".into(), "n2's".into(), None),
            ]
        );
        let first = &list[1];
        assert!(first.metadata.name.as_deref().unwrap().starts_with("n1."));
        assert_eq!(
            first.reporting_controller.as_deref(),
            Some("bootc-pool-controller")
        );
        assert_eq!(first.reporting_instance.as_deref(), Some("pod-1"));
        assert_eq!(first.type_.as_deref(), Some("Normal"));
        assert_eq!(first.action.as_deref(), Some("Rollout"));
        assert!(first.event_time.is_some());
        emulator.stop().await;
    }

    /// A kept event counts up within [`KEEP`], is a new one after it, and the sweep
    /// drops what expired.
    #[test]
    fn kept_events_count_up_and_expire() {
        let t0 = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut part = Part::default();
        assert!(part.repeat(1, t0).is_none());
        let kept = |count, last| Kept {
            name: "n1.1".into(),
            namespace: "default".into(),
            count,
            last,
        };
        part.seen(1, kept(1, t0));
        let later = t0 + k8s_openapi::jiff::SignedDuration::from_mins(5);
        let again = part.repeat(1, later).unwrap();
        assert_eq!(
            (again.count, again.last, again.name.as_str()),
            (2, later, "n1.1")
        );
        part.seen(1, again);
        // Six minutes after the last repeat (not the first): a new event; the next sweep
        // (at most every ten seconds) drops it.
        let secs = k8s_openapi::jiff::SignedDuration::from_secs;
        assert_eq!(part.repeat(1, later + KEEP - secs(1)).unwrap().count, 3);
        assert!(part.repeat(1, later + KEEP).is_none());
        assert_eq!(part.kept.len(), 1);
        assert!(part.repeat(2, later + KEEP + secs(9)).is_none());
        assert!(part.kept.is_empty());
    }

    /// A full part forgets the event seen longest ago, and only that one.
    #[test]
    fn a_full_part_forgets_the_oldest_event() {
        let t0 = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let at = |i: u64| t0 + k8s_openapi::jiff::SignedDuration::from_secs(i as i64);
        let kept = |i: u64| Kept {
            name: format!("n.{i}"),
            namespace: "default".into(),
            count: 1,
            last: at(i),
        };
        let mut part = Part::default();
        let full = KEEP_PER_PART as u64;
        for i in 0..full {
            part.seen(i, kept(i));
        }
        // Event 0 repeated: it is now the newest; 1 is the oldest.
        let again = part.repeat(0, at(full)).unwrap();
        part.seen(0, again);
        part.seen(full, kept(full + 1));
        assert_eq!(part.kept.len(), KEEP_PER_PART);
        let now = at(full + 2);
        assert!(part.repeat(1, now).is_none(), "the oldest is forgotten");
        assert_eq!(part.repeat(0, now).unwrap().count, 3);
        assert_eq!(part.repeat(2, now).unwrap().count, 2);
        assert_eq!(part.repeat(full, now).unwrap().count, 2);
    }

    /// One object's events always go to the same recorder (its series are counted as
    /// one recorder counts them), and many objects' spread over all of them.
    #[test]
    fn an_object_has_one_recorder_and_many_objects_spread() {
        let node = |name: String| ObjectReference {
            kind: Some("Node".to_owned()),
            name: Some(name),
            ..ObjectReference::default()
        };
        let mut used = std::collections::BTreeSet::new();
        for i in 0..2_000 {
            let shard = Recorders::shard(&node(format!("node-{i}")));
            assert_eq!(shard, Recorders::shard(&node(format!("node-{i}"))));
            used.insert(shard);
        }
        assert_eq!(used.len(), RECORDERS);
    }
}
