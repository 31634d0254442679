#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Leader election between two replicas against the in-process API emulator, with
//! short durations (lease 1 s, renew deadline 600 ms, retry 100 ms).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bootc_pool_controller::leader::{LeaderElector, LeaseConfig, from_micro_time};
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube_emulator::{Emulator, FaultConfig};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

/// Where the shipped controller keeps its Lease (the Role for Leases is there).
const NAMESPACE: &str = "bootc-system";
const LEASE: Duration = Duration::from_secs(1);
const RENEW_DEADLINE: Duration = Duration::from_millis(600);
const RETRY: Duration = Duration::from_millis(100);
/// A follower's tries in one lease duration.
const TRIES_PER_LEASE: usize = 10;
/// Allowance for a loaded test machine (two cores shared with builds).
const SLACK: Duration = Duration::from_millis(500);

/// One controller replica's elector.
struct Replica {
    identity: String,
    leader: watch::Receiver<bool>,
    /// The replica's own client behind its write fence, as the controller writes.
    writer: kube::Client,
    task: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
    metrics: Metrics,
}

impl Replica {
    /// Starts an elector whose requests carry the controller's User-Agent followed by
    /// `identity` (so faults can target one replica).
    fn start(emulator: &Emulator, lease: &str, identity: &str) -> Replica {
        let mut config = emulator.config();
        config.default_retry = false;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(&format!("{} {identity}", reconcile::USER_AGENT)).unwrap(),
        ));
        let client = kube::Client::try_from(config).unwrap();
        let metrics = Metrics::new();
        let elector = LeaderElector::new(
            client.clone(),
            LeaseConfig {
                lease_duration: LEASE,
                renew_deadline: RENEW_DEADLINE,
                retry_period: RETRY,
                ..LeaseConfig::new(lease, NAMESPACE, identity)
            },
        )
        .unwrap()
        .with_metrics(metrics.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let (leader, fence, task) = elector.run_fenced(async {
            let _ = stopped.await;
        });
        Replica {
            identity: identity.to_owned(),
            leader,
            writer: fence.guard(client),
            task,
            stop: Some(stop),
            metrics,
        }
    }

    fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// Graceful shutdown: waits for the task (which releases the lease) to end.
    async fn shutdown(mut self) {
        drop(self.stop.take());
        timeout(RENEW_DEADLINE + SLACK, &mut self.task)
            .await
            .expect("the elector did not stop")
            .unwrap();
    }
}

/// Watches two replicas' leadership flags on every change, until stopped; answers
/// whether both were ever leader at once. A `watch` keeps only the latest value, so a
/// short term could pass unseen: every stored change of the Lease is read too, and each
/// replica's terms (a new `acquireTime` under its name) must all have been seen.
#[derive(Debug)]
struct Monitor {
    stop: oneshot::Sender<()>,
    task: JoinHandle<(bool, [u32; 2])>,
    /// Per holder, the acquireTimes stored; and the newest resourceVersion read.
    terms: Arc<Mutex<(Terms, u64)>>,
    lease: JoinHandle<()>,
    handle: kube_emulator::Handle,
    identities: [String; 2],
}

impl Monitor {
    fn start(emulator: &Emulator, name: &str, a: &Replica, b: &Replica) -> Monitor {
        let handle = emulator.handle();
        let mut changes = handle.events();
        // A term under way when the monitor starts counts on both sides: as stored here,
        // and as seen when the monitor first reads the flags.
        let mut stored = Terms::new();
        let before = handle.get("coordination.k8s.io", "leases", NAMESPACE, name);
        if let Some((Some(holder), Some(at))) = before.as_ref().map(term_of) {
            stored.entry(holder).or_default().insert(at);
        }
        let name = name.to_owned();
        let terms = Arc::new(Mutex::new((stored, handle.resource_version())));
        let sink = Arc::clone(&terms);
        let lease = tokio::spawn(async move {
            loop {
                let c = match changes.recv().await {
                    Ok(c) => c,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the monitor missed {n} stored changes")
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let mut t = sink.lock().unwrap();
                t.1 = c.rv;
                if c.key.plural == "leases"
                    && c.object["metadata"]["name"] == name
                    && let (Some(holder), Some(at)) = term_of(&c.object)
                {
                    t.0.entry(holder).or_default().insert(at);
                }
            }
        });
        let (mut ra, mut rb) = (a.leader.clone(), b.leader.clone());
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let (mut a_open, mut b_open) = (true, true);
            let mut last = [false; 2];
            let mut seen = [0u32; 2];
            loop {
                let now = [*ra.borrow_and_update(), *rb.borrow_and_update()];
                for i in 0..2 {
                    if now[i] && !last[i] {
                        seen[i] += 1;
                    }
                }
                last = now;
                if now[0] && now[1] {
                    return (true, seen);
                }
                tokio::select! {
                    _ = &mut stopped => return (false, seen),
                    r = ra.changed(), if a_open => a_open = r.is_ok(),
                    r = rb.changed(), if b_open => b_open = r.is_ok(),
                }
            }
        });
        Monitor {
            stop,
            task,
            terms,
            lease,
            handle,
            identities: [a.identity.clone(), b.identity.clone()],
        }
    }

    /// Panics if both replicas were ever leader at once, or if a term was stored that
    /// the monitor did not see (its check would be incomplete); returns how many terms
    /// each replica had.
    async fn check(self) -> [u32; 2] {
        let _ = self.stop.send(());
        let (both, seen) = self.task.await.unwrap();
        assert!(!both, "both replicas were leader at the same time");
        let target = self.handle.resource_version();
        timeout(10 * LEASE, async {
            while self.terms.lock().unwrap().1 < target {
                assert!(!self.lease.is_finished(), "the Lease reader stopped");
                tokio::time::sleep(RETRY / 10).await;
            }
        })
        .await
        .expect("the Lease reader fell behind");
        self.lease.abort();
        let stored = self.terms.lock().unwrap().0.clone();
        for (identity, seen) in self.identities.iter().zip(seen) {
            let terms = stored.get(identity).map_or(0, BTreeSet::len);
            assert_eq!(
                terms, seen as usize,
                "{identity}: {terms} terms stored, {seen} seen: the check is incomplete"
            );
        }
        seen
    }
}

/// Per holder, the acquireTimes of its terms.
type Terms = BTreeMap<String, BTreeSet<String>>;

/// A Lease's (holder, acquireTime).
fn term_of(lease: &serde_json::Value) -> (Option<String>, Option<String>) {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    (
        text(&lease["spec"]["holderIdentity"]),
        text(&lease["spec"]["acquireTime"]),
    )
}

/// Replicas `replica-a` and `replica-b` electing with lease `lease`, a [`Monitor`] of
/// both, and which of them (0 or 1) leads first.
async fn two_replicas(emulator: &Emulator, lease: &str) -> (Replica, Replica, Monitor, usize) {
    let a = Replica::start(emulator, lease, "replica-a");
    let b = Replica::start(emulator, lease, "replica-b");
    let monitor = Monitor::start(emulator, lease, &a, &b);
    let first = wait_leader([&a, &b], LEASE + SLACK).await;
    (a, b, monitor, first)
}

/// `replica-a` elected alone with lease `lease`, then `replica-b` started beside it.
async fn a_leads_then_b(emulator: &Emulator, lease: &str) -> (Replica, Replica) {
    let a = Replica::start(emulator, lease, "replica-a");
    wait_until_leader(&a, LEASE + SLACK).await;
    let b = Replica::start(emulator, lease, "replica-b");
    (a, b)
}

/// Waits (with a deadline) until one of the two replicas is leader; returns its index.
async fn wait_leader(replicas: [&Replica; 2], within: Duration) -> usize {
    let (mut a, mut b) = (replicas[0].leader.clone(), replicas[1].leader.clone());
    timeout(within, async {
        tokio::select! {
            r = a.wait_for(|l| *l) => { r.unwrap(); 0 }
            r = b.wait_for(|l| *l) => { r.unwrap(); 1 }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no leader within {within:?}"))
}

/// Waits (with a deadline) until `replica` is leader; returns how long that took.
async fn wait_until_leader(replica: &Replica, within: Duration) -> Duration {
    let start = Instant::now();
    let mut rx = replica.leader.clone();
    timeout(within, rx.wait_for(|l| *l))
        .await
        .unwrap_or_else(|_| panic!("{} not leader within {within:?}", replica.identity))
        .unwrap();
    start.elapsed()
}

/// An emulator with the controller's namespace, where its Lease lives.
async fn emulator() -> Emulator {
    let emulator = Emulator::start().await.unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(emulator.client().unwrap());
    let namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    emulator
}

async fn lease_spec(emulator: &Emulator, name: &str) -> LeaseSpec {
    let api: Api<Lease> = Api::namespaced(emulator.client().unwrap(), NAMESPACE);
    api.get(name).await.unwrap().spec.unwrap_or_default()
}

/// The renewTime of Lease `name`, which `holder` must hold now.
async fn lease_renewed_by(
    emulator: &Emulator,
    name: &str,
    holder: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime {
    let spec = lease_spec(emulator, name).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(holder), "{spec:?}");
    spec.renew_time.unwrap()
}

/// Lease requests made by the replica named `identity`.
fn lease_requests(emulator: &Emulator, identity: &str) -> usize {
    emulator
        .handle()
        .requests()
        .into_iter()
        .filter(|r| r.resource == "leases" && r.user_agent.ends_with(identity))
        .count()
}

/// Lease writes of the replica named `identity` that the emulator stored.
fn lease_writes(emulator: &Emulator, identity: &str) -> usize {
    emulator
        .handle()
        .requests()
        .into_iter()
        .filter(|r| r.resource == "leases" && r.user_agent.ends_with(identity))
        .filter(|r| r.is_write() && r.code < 300)
        .count()
}

/// Waits (with a deadline of ten lease durations) until `count()`, a count from the
/// request log, reaches `target`.
async fn wait_count(what: &str, target: usize, count: impl Fn() -> usize) {
    timeout(10 * LEASE, async {
        while count() < target {
            tokio::time::sleep(RETRY / 4).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: {} of {target} within {:?}", count(), 10 * LEASE));
}

/// Lease writes the emulator refused with 409, by verb.
fn lease_conflicts(emulator: &Emulator, name: &str) -> Vec<String> {
    emulator
        .handle()
        .requests()
        .into_iter()
        .filter(|r| r.resource == "leases" && r.code == 409 && !r.injected)
        .filter(|r| r.name == name || r.verb == "create")
        .map(|r| r.verb)
        .collect()
}

#[tokio::test]
async fn exactly_one_leader_at_a_time() {
    let emulator = emulator().await;
    let (a, b, monitor, first) = two_replicas(&emulator, "steady").await;

    let (leader, follower) = if first == 0 { (&a, &b) } else { (&b, &a) };

    // Over counted tries: the leader keeps renewing, the follower never takes over
    // (three lease durations of its tries, each one a chance to take an expired lease),
    // and the Lease names the leader. Every change of either flag is followed.
    let tries = TRIES_PER_LEASE * 3;
    let renewals = lease_writes(&emulator, &leader.identity) + tries;
    wait_count("the leader's renewals", renewals, || {
        lease_writes(&emulator, &leader.identity)
    })
    .await;
    let target = lease_requests(&emulator, &follower.identity) + tries;
    wait_count("the follower's tries", target, || {
        lease_requests(&emulator, &follower.identity)
    })
    .await;
    assert!(leader.is_leader(), "the leader stepped down while renewing");
    assert!(!follower.is_leader());
    let spec = lease_spec(&emulator, "steady").await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(leader.identity.as_str())
    );
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(
        spec.lease_transitions,
        Some(0),
        "created by the first leader"
    );
    assert!(spec.renew_time > spec.acquire_time, "renewed: {spec:?}");

    // bootc_pool_leader follows.
    assert!(leader.metrics.encode().contains("\nbootc_pool_leader 1\n"));
    assert!(
        follower
            .metrics
            .encode()
            .contains("\nbootc_pool_leader 0\n")
    );

    let terms = monitor.check().await;
    let (l, f) = if first == 0 { (0, 1) } else { (1, 0) };
    assert_eq!(
        (terms[l], terms[f]),
        (1, 0),
        "one term, the leader's, all along"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn shutdown_releases_and_hands_over_at_once() {
    let emulator = emulator().await;
    let (a, b, monitor, first) = two_replicas(&emulator, "handover").await;
    let (leader, follower) = if first == 0 { (a, b) } else { (b, a) };

    let before = lease_spec(&emulator, "handover").await;
    let mut old = leader.leader.clone();
    leader.shutdown().await;
    let released_at = emulator.handle().requests().len();
    assert!(
        !*old.borrow_and_update(),
        "a stopped elector still reads leader"
    );
    wait_until_leader(&follower, 10 * LEASE).await;
    // Released, so the follower takes over at its next try, not after the ten or so
    // tries that waiting for the lease to expire takes: counted in the request log.
    let after_release: Vec<_> = emulator.handle().requests()[released_at..]
        .iter()
        .filter(|r| r.resource == "leases" && r.user_agent.ends_with(&follower.identity))
        .cloned()
        .collect();
    let took = after_release
        .iter()
        .position(|r| r.is_write() && r.code < 300)
        .expect("the follower's acquiring write");
    let reads = after_release[..took]
        .iter()
        .filter(|r| !r.is_write())
        .count();
    assert!(
        reads <= 2,
        "{reads} reads before taking over: {after_release:#?}"
    );

    let after = lease_spec(&emulator, "handover").await;
    assert_eq!(
        after.holder_identity.as_deref(),
        Some(follower.identity.as_str())
    );
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    monitor.check().await;
    follower.shutdown().await;
    // The last one out leaves the lease free.
    let last = lease_spec(&emulator, "handover").await;
    assert_eq!(last.holder_identity, None);
}

#[tokio::test]
async fn crashed_leader_is_replaced_after_expiry() {
    let emulator = emulator().await;
    let (a, b, monitor, first) = two_replicas(&emulator, "crash").await;
    let (leader, follower) = if first == 0 { (a, b) } else { (b, a) };
    // A few renewals, counted.
    let renewals = lease_writes(&emulator, &leader.identity) + 3;
    wait_count("three renewals", renewals, || {
        lease_writes(&emulator, &leader.identity)
    })
    .await;

    // A crash: the task is gone without releasing the lease.
    leader.task.abort();
    let took = wait_until_leader(&follower, LEASE + 2 * RETRY + SLACK).await;
    assert!(!leader.is_leader(), "an aborted elector still reads leader");
    // Not before the lease (renewed at most one retry period before the crash) expired.
    assert!(
        took >= LEASE - 2 * RETRY,
        "took over a live lease after {took:?}"
    );
    let spec = lease_spec(&emulator, "crash").await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(follower.identity.as_str())
    );
    assert_eq!(spec.lease_transitions, Some(1));
    monitor.check().await;
    follower.shutdown().await;
}

#[tokio::test]
async fn failing_renewals_step_down_before_the_lease_expires() {
    let emulator = emulator().await;
    let (a, b) = a_leads_then_b(&emulator, "cutoff").await;
    let monitor = Monitor::start(&emulator, "cutoff", &a, &b);

    // replica-a's writes now fail: it must stop acting within the renew deadline, before
    // replica-b may take over the expired lease. Every stored change of the Lease from
    // here on is read: the last one naming replica-a holds its last renewal.
    let mut changes = emulator.handle().events();
    let before = lease_renewed_by(&emulator, "cutoff", "replica-a").await;
    emulator.handle().set_faults(FaultConfig {
        error_rate: 1.0,
        error_codes: vec![500],
        writes_only: true,
        user_agent: Some("replica-a".to_owned()),
        ..FaultConfig::default()
    });
    let mut a_rx = a.leader.clone();
    timeout(10 * LEASE, a_rx.wait_for(|l| !*l))
        .await
        .expect("replica-a kept leading without renewing")
        .unwrap();
    let stepped_down_at = chrono::Utc::now();
    let mut renewed = from_micro_time(&before).unwrap();
    loop {
        let change = match changes.try_recv() {
            Ok(change) => change,
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
            Err(e) => panic!("Lease changes missed: {e}"),
        };
        if change.key.plural != "leases" {
            continue;
        }
        let lease: Lease = serde_json::from_value((*change.object).clone()).unwrap();
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() == Some("replica-a") {
            renewed = spec.renew_time.as_ref().and_then(from_micro_time).unwrap();
        }
    }
    let expires = renewed + chrono::Duration::from_std(LEASE).unwrap();
    assert!(
        stepped_down_at < expires,
        "replica-a stepped down at {stepped_down_at}, after the lease it renewed at \
         {renewed} expired"
    );
    wait_until_leader(&b, 10 * LEASE).await;
    assert!(!a.is_leader());
    assert_eq!(
        lease_spec(&emulator, "cutoff")
            .await
            .holder_identity
            .as_deref(),
        Some("replica-b")
    );

    // replica-a's requests work again: it stays a follower for three more tries.
    emulator.handle().clear_faults();
    let tries = lease_requests(&emulator, "replica-a");
    timeout(10 * LEASE, async {
        while lease_requests(&emulator, "replica-a") < tries + 3 {
            assert!(b.is_leader() && !a.is_leader());
            tokio::time::sleep(RETRY / 4).await;
        }
    })
    .await
    .expect("replica-a stopped trying");
    assert!(b.is_leader() && !a.is_leader());
    monitor.check().await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Waits until both replicas have made a lease duration's worth of Lease requests more
/// (the leader renewing, the follower trying): chances enough for a second leader.
async fn both_try_for_a_lease(emulator: &Emulator) {
    for identity in ["replica-a", "replica-b"] {
        let target = lease_requests(emulator, identity) + TRIES_PER_LEASE;
        wait_count(&format!("{identity}'s tries"), target, || {
            lease_requests(emulator, identity)
        })
        .await;
    }
}

#[tokio::test]
async fn simultaneous_start_leaves_one_leader() {
    let emulator = emulator().await;
    // Every request waits 50 ms, so both replicas read the same state before either
    // writes: the second write must be refused.
    emulator.handle().set_faults(FaultConfig {
        latency: Duration::from_millis(50),
        ..FaultConfig::default()
    });

    // 1. No lease yet: both create, one gets 409 AlreadyExists.
    emulator.handle().clear_requests();
    let (a, b, monitor, _) = two_replicas(&emulator, "race-create").await;
    both_try_for_a_lease(&emulator).await;
    assert!(a.is_leader() ^ b.is_leader());
    assert_eq!(lease_conflicts(&emulator, "race-create"), ["create"]);
    monitor.check().await;
    a.shutdown().await;
    b.shutdown().await;

    // 2. A free lease: both update with the same resourceVersion, one gets 409.
    let api: Api<Lease> = Api::namespaced(emulator.client().unwrap(), NAMESPACE);
    api.create(
        &PostParams::default(),
        &Lease {
            metadata: ObjectMeta {
                name: Some("race-update".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }),
        },
    )
    .await
    .unwrap();
    emulator.handle().clear_requests();
    let (a, b, monitor, first) = two_replicas(&emulator, "race-update").await;
    both_try_for_a_lease(&emulator).await;
    assert!(a.is_leader() ^ b.is_leader());
    let conflicts = lease_conflicts(&emulator, "race-update");
    assert!(
        !conflicts.is_empty() && conflicts.iter().all(|v| v == "update"),
        "{conflicts:?}"
    );
    let spec = lease_spec(&emulator, "race-update").await;
    let leader = if first == 0 { &a } else { &b };
    assert!(leader.is_leader());
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(leader.identity.as_str())
    );
    assert_eq!(spec.lease_transitions, Some(5), "one transition, not two");
    monitor.check().await;
    a.shutdown().await;
    b.shutdown().await;
}

/// A Lease named `name` (a kind the controller may write), written through `replica`'s
/// fence.
async fn write_through(replica: &Replica, name: &str) -> Result<Lease, kube::Error> {
    let api: Api<Lease> = Api::namespaced(replica.writer.clone(), NAMESPACE);
    let object = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    api.create(&PostParams::default(), &object).await
}

/// Lease creations of `identity` that reached the emulator.
fn lease_creations(emulator: &Emulator, identity: &str) -> usize {
    emulator
        .handle()
        .requests()
        .iter()
        .filter(|r| r.resource == "leases" && r.verb == "create")
        .filter(|r| r.user_agent.contains(identity))
        .count()
}

/// The write fence: a replica that stepped down sends no write at all (not even one
/// planned while it led), reads still work, and the new leader's writes go through; a
/// write the server does not answer before the cut-off is abandoned with its own error.
#[tokio::test]
async fn a_replica_that_stepped_down_sends_no_write() {
    let emulator = emulator().await;
    let (a, b) = a_leads_then_b(&emulator, "fence").await;
    write_through(&a, "while-leading").await.unwrap();
    assert!(
        write_through(&b, "standby").await.is_err(),
        "a standby writes nothing"
    );
    assert_eq!(lease_creations(&emulator, "replica-b"), 0);

    // replica-a loses the Lease (its writes fail), replica-b takes over.
    emulator.handle().set_faults(FaultConfig {
        error_rate: 1.0,
        error_codes: vec![500],
        writes_only: true,
        user_agent: Some("replica-a".to_owned()),
        ..FaultConfig::default()
    });
    wait_until_leader(&b, LEASE + RENEW_DEADLINE + 2 * RETRY + SLACK).await;
    emulator.handle().clear_faults();
    let before = lease_creations(&emulator, "replica-a");
    let refused = write_through(&a, "after-losing").await.unwrap_err();
    assert!(refused.to_string().contains("not the leader"), "{refused}");
    assert_eq!(
        lease_creations(&emulator, "replica-a"),
        before,
        "the refused write never reached the server"
    );
    let api: Api<Lease> = Api::namespaced(a.writer.clone(), NAMESPACE);
    assert!(
        api.get("while-leading").await.is_ok(),
        "reads are not fenced"
    );
    write_through(&b, "new-leader").await.unwrap();

    // A write that the server holds past the cut-off is abandoned.
    emulator.handle().set_faults(FaultConfig {
        latency: LEASE,
        ..FaultConfig::default()
    });
    // The server answers only after a lease duration; the fence's error came first, so
    // the write was cut off before the lease could pass (no clock needed to tell).
    let cut = write_through(&b, "slow").await.unwrap_err();
    assert!(cut.to_string().contains("abandoned"), "{cut}");
    // The server dropped it with the connection: it is never written. A marker written
    // after it, held as long, is stored only once the abandoned write's hold is over
    // (both wait out the same latency on the server's timers); every stored change up to
    // the marker's is read.
    let mut changes = emulator.handle().events();
    let admin: Api<Lease> = Api::namespaced(emulator.client().unwrap(), NAMESPACE);
    let marker = Lease {
        metadata: ObjectMeta {
            name: Some("after-slow".to_owned()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    admin.create(&PostParams::default(), &marker).await.unwrap();
    emulator.handle().clear_faults();
    let mut names = Vec::new();
    loop {
        let change = timeout(10 * LEASE, changes.recv())
            .await
            .expect("the marker's change")
            .expect("every stored change read");
        let name = change.object["metadata"]["name"]
            .as_str()
            .map(str::to_owned);
        if change.key.plural == "leases" && name.as_deref() == Some("after-slow") {
            break;
        }
        names.extend(name);
    }
    assert!(
        !names.iter().any(|n| n == "slow"),
        "the abandoned write landed: {names:?}"
    );
    assert!(
        admin.get_opt("slow").await.unwrap().is_none(),
        "the abandoned write landed"
    );
    a.shutdown().await;
    b.shutdown().await;
}
