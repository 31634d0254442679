//! Rollout notifications end to end: the controller against the API emulator and
//! simulated nodes, a pool with a webhook, and a receiver on loopback that answers, fails
//! at first, never answers, or is not there because its Secret is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_common::backoff::Backoff;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::notify::NotifyOptions;
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const SECRET: &str = "rollout-hook";

/// What a receiver has seen.
#[derive(Default)]
struct Seen {
    /// Requests answered so far (failed ones included).
    requests: AtomicUsize,
    /// The bodies of the requests answered 200, in order.
    bodies: Mutex<Vec<Value>>,
    /// How many requests are answered 500 first.
    fail_first: usize,
}

/// A webhook receiver on loopback.
struct Receiver {
    addr: SocketAddr,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

impl Receiver {
    /// Answers the first `fail_first` requests 500, then 200.
    async fn start(fail_first: usize) -> Receiver {
        let seen = Arc::new(Seen {
            fail_first,
            ..Seen::default()
        });
        let app = axum::Router::new()
            .route("/hooks/{token}", post(receive))
            .with_state(Arc::clone(&seen));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { addr, seen, task }
    }

    fn url(&self) -> String {
        format!("http://{}/hooks/T0-secret-token", self.addr)
    }

    fn bodies(&self) -> Vec<Value> {
        self.seen.bodies.lock().unwrap().clone()
    }

    /// Waits until `n` bodies have been received; returns them.
    async fn wait_bodies(&self, n: usize) -> Vec<Value> {
        wait_for(&format!("{n} notifications"), async || {
            let bodies = self.bodies();
            (bodies.len() >= n).then_some(bodies)
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(seen): State<Arc<Seen>>, Json(body): Json<Value>) -> StatusCode {
    let n = seen.requests.fetch_add(1, Ordering::SeqCst);
    if n < seen.fail_first {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    seen.bodies.lock().unwrap().push(body);
    StatusCode::OK
}

/// A listener that accepts connections and never answers; the number accepted.
async fn silent_receiver() -> (SocketAddr, Arc<AtomicUsize>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (addr, accepted, task)
}

/// Quick retries for tests: attempts of `attempt_timeout`, 50 ms doubling to 200 ms.
fn deps(metrics: &Metrics, attempt_timeout: Duration) -> Dependencies {
    Dependencies {
        metrics: metrics.clone(),
        notifications: NotifyOptions {
            attempt_timeout,
            attempts: 5,
            backoff: Backoff::new(Duration::from_millis(50), Duration::from_millis(200)),
            give_up_after: Duration::from_secs(5),
            queue: 8,
        },
        ..Dependencies::default()
    }
}

/// Secret `name` in the install's namespace with `url` under the key `url`.
async fn create_secret(client: &Client, name: &str, url: &str) {
    ensure_namespace(client, INSTALL_NAMESPACE).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), INSTALL_NAMESPACE);
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.to_owned());
    secret.data = Some([("url".to_owned(), ByteString(url.as_bytes().to_vec()))].into());
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// The pool `workers` on the `role: worker` nodes, one at a time (two rebooting at once
/// would be two NotReady slot holders: a halt), with its webhook URL in
/// Secret `{secret}` of the install's namespace.
async fn create_pool(client: &Client, image: &str, secret: &str) {
    ensure_namespace(client, INSTALL_NAMESPACE).await;
    let pool = workers_pool_spec(json!({
        "image": {"ref": image},
        "rollout": {"maxUnavailable": 1},
        "notifications": {"webhook": {"secretRef": {"name": secret, "namespace": INSTALL_NAMESPACE}}},
    }));
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools.create(&PostParams::default(), &pool).await.unwrap();
}

/// Pool `workers` all updated to `digest`.
async fn wait_rolled_out(client: &Client, digest: &str) -> BootcNodePool {
    let what = format!("all updated to {digest}");
    wait_pool(client, "workers", &what, |p| {
        let target = p.status.as_ref().and_then(|s| s.target_digest.as_deref());
        all_updated(p, 2) && target == Some(digest)
    })
    .await
}

/// `bootc_pool_notifications_total` of pool `workers` for `event` and `outcome`.
fn count(metrics: &Metrics, event: &str, outcome: &str) -> u64 {
    let series = format!(
        "bootc_pool_notifications_total{{pool=\"workers\",event=\"{event}\",outcome=\"{outcome}\"}} "
    );
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.parse().unwrap())
}

/// Waits until `count(metrics, event, outcome)` reaches `n`, then asserts it is `n`. A
/// delivery is counted once the receiver's answer is back, after the receiver has kept
/// the body: a body received says nothing of the count yet.
async fn wait_count(metrics: &Metrics, event: &str, outcome: &str, n: u64) {
    wait_for(&format!("{n} {event} counted {outcome}"), async || {
        (count(metrics, event, outcome) >= n).then_some(())
    })
    .await;
    assert_eq!(count(metrics, event, outcome), n, "{event} {outcome}");
}

/// Holds the receiver at `n` requests while the pool is planned three more times.
async fn no_more_than(client: &Client, metrics: &Metrics, receiver: &Receiver, n: usize) {
    never_over_reconciles(
        client,
        metrics,
        ("workers", 3),
        "a plan with nothing new announced something",
        async || {
            let got = receiver.seen.requests.load(Ordering::SeqCst);
            (got > n).then(|| format!("{got} requests: {:?}", events_of(&receiver.bodies())))
        },
    )
    .await;
}

fn events_of(bodies: &[Value]) -> Vec<(String, String)> {
    bodies
        .iter()
        .map(|b| {
            let field = |f: &str| b[f].as_str().unwrap_or_default().to_owned();
            (field("event"), field("digest"))
        })
        .collect()
}

/// Nodes n1 and n2 on v1 (v2 in their catalog) against the emulator, and the metrics the
/// controller is to count its notifications in.
struct Env {
    emulator: Emulator,
    client: Client,
    _cluster: host_sim::cluster::SimCluster,
    v1: String,
    v2: String,
    metrics: Metrics,
}

impl Env {
    async fn new() -> Env {
        logs();
        let emulator = Emulator::start().await.unwrap();
        let client = emulator.client().unwrap();
        let (cluster, v1, v2) = workers_cluster(&emulator, &["n1", "n2"], Default::default()).await;
        Env {
            emulator,
            client,
            _cluster: cluster,
            v1,
            v2,
            metrics: Metrics::new(),
        }
    }

    /// A webhook receiver failing its first `failures` requests, the controller started
    /// and the pool created, telling the receiver.
    async fn rolling_out_to_a_receiver(failures: usize) -> (Env, Receiver, Running) {
        let e = Env::new().await;
        let receiver = Receiver::start(failures).await;
        create_secret(&e.client, SECRET, &receiver.url()).await;
        let controller = start(&e.emulator, deps(&e.metrics, Duration::from_secs(5)));
        create_pool(&e.client, &e.v2, SECRET).await;
        (e, receiver, controller)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_and_a_rollback_are_announced_once_each() {
    let (e, receiver, controller) = Env::rolling_out_to_a_receiver(0).await;
    let done = wait_rolled_out(&e.client, &digest('2')).await;
    // Plans with nothing new to say announce nothing.
    let bodies = receiver.wait_bodies(2).await;
    no_more_than(&e.client, &e.metrics, &receiver, 2).await;
    let started = &bodies[0];
    assert_eq!(started["pool"], "workers");
    assert_eq!(started["image"], e.v2.as_str());
    // The version label is known once a node has pulled the image.
    assert!([json!(null), json!("v2")].contains(&started["version"]));
    assert!(started["message"].as_str().unwrap().contains(&e.v2));
    let text = started["text"].as_str().unwrap();
    assert!(text.starts_with("Pool workers: rollout of "), "{text}");
    assert!(text.ends_with("started, 2 of 2 nodes to update."), "{text}");
    assert!(!text.contains('\n'), "{text}");
    let completed = &bodies[1];
    let version = done.status.unwrap().target_version;
    assert_eq!(completed["version"], json!(version.clone()));
    let short = "2".repeat(12);
    let what = version.map_or(short.clone(), |v| format!("version {v} ({short})"));
    let text = format!("Pool workers: rollout of {what} completed, all 2 nodes updated.");
    assert_eq!(completed["text"], text);
    chrono::DateTime::parse_from_rfc3339(started["time"].as_str().unwrap()).unwrap();

    // Back to v1, which the nodes ran before. The rollback's events come after anything
    // the first rollout queued, so a repeat of its events would show up before them.
    let back = json!({"spec": {"image": {"ref": e.v1}}});
    patch_pool(&e.client, "workers", back).await;
    wait_rolled_out(&e.client, &digest('1')).await;
    let bodies = receiver.wait_bodies(4).await;
    // A late duplicate would come with a later plan: three more, none announcing.
    no_more_than(&e.client, &e.metrics, &receiver, 4).await;
    let (d1, d2) = (digest('1'), digest('2'));
    let expected = [
        ("RolloutStarted", &d2),
        ("RolloutCompleted", &d2),
        ("RolledBack", &d1),
        ("RolloutCompleted", &d1),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(e, d)| ((*e).to_owned(), (*d).clone()))
        .collect();
    assert_eq!(events_of(&bodies), expected);
    assert_eq!(receiver.seen.requests.load(Ordering::SeqCst), 4);
    for (event, delivered) in [
        ("RolloutStarted", 1),
        ("RolloutCompleted", 2),
        ("RolledBack", 1),
    ] {
        wait_count(&e.metrics, event, "delivered", delivered).await;
        assert_eq!(count(&e.metrics, event, "failed"), 0, "{event}");
    }
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_failing_at_first_gets_the_event_on_a_retry() {
    let (e, receiver, controller) = Env::rolling_out_to_a_receiver(2).await;
    wait_rolled_out(&e.client, &digest('2')).await;
    let bodies = receiver.wait_bodies(2).await;
    let d2 = digest('2');
    assert_eq!(
        events_of(&bodies),
        vec![
            ("RolloutStarted".to_owned(), d2.clone()),
            ("RolloutCompleted".to_owned(), d2)
        ]
    );
    // Two answers 500, then the same event again, then the next one.
    assert_eq!(receiver.seen.requests.load(Ordering::SeqCst), 4);
    wait_count(&e.metrics, "RolloutStarted", "delivered", 1).await;
    assert_eq!(count(&e.metrics, "RolloutStarted", "failed"), 0);
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_never_answers_does_not_slow_the_rollout() {
    let e = Env::new().await;
    let (addr, accepted, silent) = silent_receiver().await;
    create_secret(&e.client, SECRET, &format!("http://{addr}/hooks/T0")).await;
    // Each attempt waits 20 s for an answer, and the next would start past the 5 s
    // allowed: one attempt per event.
    let controller = start(&e.emulator, deps(&e.metrics, Duration::from_secs(20)));
    let created = Instant::now();
    create_pool(&e.client, &e.v2, SECRET).await;
    wait_rolled_out(&e.client, &digest('2')).await;
    // The rollout finished while the webhook still held the first event's request.
    assert!(accepted.load(Ordering::SeqCst) >= 1, "no request was sent");
    assert_eq!(
        count(&e.metrics, "RolloutStarted", "failed"),
        0,
        "the rollout took {:?}, as long as the webhook's timeout",
        created.elapsed()
    );
    wait_for("both events counted as failed", async || {
        let failed = ["RolloutStarted", "RolloutCompleted"]
            .iter()
            .all(|event| count(&e.metrics, event, "failed") == 1);
        failed.then_some(())
    })
    .await;
    assert_eq!(count(&e.metrics, "RolloutStarted", "delivered"), 0);
    let events = recorded_events(&e.client, None).await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "NotificationFailed"
                && note.contains("RolloutStarted notification not delivered")
                && note.contains("did not answer within 20s")),
        "{events:#?}"
    );
    controller.stop().await;
    silent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_reported_and_the_rollout_goes_on() {
    let e = Env::new().await;
    let controller = start(&e.emulator, deps(&e.metrics, Duration::from_secs(5)));
    create_pool(&e.client, &e.v2, "no-such-secret").await;
    wait_rolled_out(&e.client, &digest('2')).await;
    wait_for("both events counted as failed", async || {
        let failed = ["RolloutStarted", "RolloutCompleted"]
            .iter()
            .all(|event| count(&e.metrics, event, "failed") == 1);
        failed.then_some(())
    })
    .await;
    let events = recorded_events(&e.client, None).await;
    let reported = events.iter().find(|(reason, note)| {
        reason == "NotificationFailed" && note.starts_with("RolloutStarted")
    });
    let (_, note) = reported.unwrap_or_else(|| panic!("no NotificationFailed in {events:#?}"));
    assert_eq!(
        note,
        "RolloutStarted notification not delivered: webhook Secret bootc-system/no-such-secret \
         not found (after 1 attempt)"
    );
    // The Secret is read for each event: once it is there, the next one is delivered.
    let receiver = Receiver::start(0).await;
    create_secret(&e.client, "no-such-secret", &receiver.url()).await;
    let back = json!({"spec": {"image": {"ref": e.v1}}});
    patch_pool(&e.client, "workers", back).await;
    let bodies = receiver.wait_bodies(1).await;
    assert_eq!(bodies[0]["event"], "RolledBack");
    wait_count(&e.metrics, "RolledBack", "delivered", 1).await;
    controller.stop().await;
}
