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

/// kube's event [`Recorder`](kube::runtime::events::Recorder), split by the object an
/// event regards. A recorder keeps the events of the last few minutes, to count repeats
/// of one as a series, and sweeps all of them at every event it records: one recorder
/// for a rollout that records an event on each of 10,000 Nodes swept thousands of
/// entries per event (a fifth of the controller's CPU at 5,000 nodes). Each object's
/// events go to one recorder of [`RECORDERS`], so a series is counted as before.
#[derive(Clone)]
pub struct Recorders {
    each: Arc<[kube::runtime::events::Recorder]>,
}

impl std::fmt::Debug for Recorders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorders")
            .field("each", &self.each.len())
            .finish()
    }
}

/// How many recorders [`Recorders`] splits the events over.
pub const RECORDERS: usize = 64;

impl Recorders {
    /// Recorders of `client` naming `reporter`.
    pub fn new(client: &kube::Client, reporter: &kube::runtime::events::Reporter) -> Self {
        Recorders {
            each: (0..RECORDERS)
                .map(|_| kube::runtime::events::Recorder::new(client.clone(), reporter.clone()))
                .collect(),
        }
    }

    /// Records `event` regarding `reference`, as
    /// [`Recorder::publish`](kube::runtime::events::Recorder::publish) does.
    pub async fn publish(
        &self,
        event: &kube::runtime::events::Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), kube::Error> {
        self.each[Self::shard(reference)]
            .publish(event, reference)
            .await
    }

    /// The recorder of the object `reference` names.
    fn shard(reference: &k8s_openapi::api::core::v1::ObjectReference) -> usize {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (&reference.kind, &reference.namespace, &reference.name).hash(&mut h);
        usize::try_from(h.finish() % RECORDERS as u64).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::{RECORDERS, Recorders};

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
