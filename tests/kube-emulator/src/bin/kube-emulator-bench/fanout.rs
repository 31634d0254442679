//! The watch fan-out phase: many watchers of one namespace, one object changed many times; every
//! watcher must see every change exactly once, in order.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::measure::{
    client, config_map, create_namespace, memory_mib, open_fds, percentile, round3, rv_of, sorted,
};
use crate::{Args, BoxError};

/// Watches established and failed so far, and a wake-up for each.
type Established = Arc<(AtomicUsize, AtomicUsize, Notify)>;

/// What one watcher saw.
#[derive(Debug, Default)]
struct Received {
    /// `(resourceVersion, data.seq)` of every MODIFIED event, in arrival order.
    events: Vec<(u64, u64)>,
    /// Other events (ADDED, DELETED, ERROR, undecodable items).
    unexpected: u64,
    /// Why the stream ended before the last write arrived, if it did.
    ended: Option<String>,
    /// When the last write arrived.
    done: Option<Instant>,
}

async fn watcher(
    api: Api<ConfigMap>,
    from: String,
    last: u64,
    established: Established,
    mut deadline: watch::Receiver<bool>,
) -> Received {
    let mut seen = Received::default();
    let params = WatchParams::default().disable_bookmarks().timeout(290);
    let stream = match api.watch(&params, &from).await {
        Ok(s) => {
            established.0.fetch_add(1, Ordering::SeqCst);
            established.2.notify_one();
            s
        }
        Err(e) => {
            established.1.fetch_add(1, Ordering::SeqCst);
            established.2.notify_one();
            seen.ended = Some(format!("watch not started: {e}"));
            return seen;
        }
    };
    let mut stream = std::pin::pin!(stream);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            _ = deadline.wait_for(|d| *d) => {
                seen.ended = Some("deadline".into());
                return seen;
            }
        };
        match item {
            None => {
                seen.ended = Some("stream closed by the server".into());
                return seen;
            }
            Some(Err(e)) => {
                seen.ended = Some(format!("stream error: {e}"));
                return seen;
            }
            Some(Ok(WatchEvent::Modified(cm))) => {
                let rv = rv_of(&cm).unwrap_or(0);
                let seq = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("seq"))
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                seen.events.push((rv, seq));
                if seq == last {
                    seen.done = Some(Instant::now());
                    return seen;
                }
            }
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            Some(Ok(WatchEvent::Error(status))) => {
                seen.unexpected += 1;
                seen.ended = Some(format!("ERROR event: {}", status.message));
                return seen;
            }
            Some(Ok(WatchEvent::Added(_) | WatchEvent::Deleted(_))) => seen.unexpected += 1,
        }
    }
}

/// How establishing the watches went.
#[derive(Debug)]
struct Establishment {
    seconds: f64,
    started: usize,
    failed: usize,
    /// Watch requests the emulator logged by then.
    logged: u64,
    /// Open file descriptors of the process by then.
    fds: usize,
}

/// The writes of the phase.
#[derive(Debug)]
struct Writes {
    /// `(resourceVersion, seq)` of each successful write.
    written: Vec<(u64, u64)>,
    errors: u64,
    start: Instant,
    seconds: f64,
}

/// What the watchers saw, compared with what was written.
#[derive(Debug, Default)]
struct FanoutVerdict {
    missed: u64,
    duplicates: u64,
    out_of_order: u64,
    /// Versions that were never written.
    foreign: u64,
    /// Watchers that did not see exactly the written versions.
    incomplete: u64,
    unexpected: u64,
    /// Why watchers ended early, with how many ended so.
    ended: BTreeMap<String, u64>,
    /// When each watcher that got the last write got it, in seconds after the first write, sorted.
    done_seconds: Vec<f64>,
}

/// Runs the phase; its report fields (and the memory of the process after it), and whether
/// the fan-out was complete.
pub(crate) async fn run(
    args: &Args,
    emulator: &Emulator,
    admin: &Client,
) -> Result<(Map<String, Value>, bool), BoxError> {
    let handle = emulator.handle();
    let from = create_target(admin).await?;
    handle.clear_requests();
    eprintln!(
        "WATCH: starting {} watchers from resourceVersion {from}",
        args.watchers
    );
    let watch_client = client(emulator)?;
    let established: Established =
        Arc::new((AtomicUsize::new(0), AtomicUsize::new(0), Notify::new()));
    let (stop, deadline) = watch::channel(false);
    let last = args.events as u64;
    let started = Instant::now();
    let tasks: Vec<JoinHandle<Received>> = (0..args.watchers)
        .map(|_| {
            tokio::spawn(watcher(
                Api::namespaced(watch_client.clone(), "bench-fanout"),
                from.to_string(),
                last,
                established.clone(),
                deadline.clone(),
            ))
        })
        .collect();
    wait_established(
        &established,
        args.watchers,
        Duration::from_secs(args.timeout),
    )
    .await;
    let est = Establishment {
        seconds: started.elapsed().as_secs_f64(),
        started: established.0.load(Ordering::SeqCst),
        failed: established.1.load(Ordering::SeqCst),
        logged: handle.counters().by_verb.get("watch").copied().unwrap_or(0),
        fds: open_fds(),
    };
    eprintln!(
        "WATCH: {} established ({} failed) in {:.2} s, \
         {} watch requests logged, {} open fds; writing {} changes",
        est.started, est.failed, est.seconds, est.logged, est.fds, args.events
    );

    let writes = write_changes(emulator, last).await?;
    eprintln!(
        "WATCH: {} writes in {:.3} s; waiting for deliveries",
        writes.written.len(),
        writes.seconds
    );
    let results = collect(tasks, stop, Duration::from_secs(args.timeout)).await?;
    let (peak_rss, rss) = memory_mib();

    let verdict = verify(&results, &writes);
    let delivered: u64 = results.iter().map(|s| s.events.len() as u64).sum();
    let watches_total = handle.counters().by_verb.get("watch").copied().unwrap_or(0);
    let complete = verdict.complete(&writes, &est, args.watchers);
    let mut report = report(args, &est, &writes, &verdict, delivered, watches_total);
    report.insert("fanout_complete".into(), json!(complete));

    memory_fields(&mut report, peak_rss, rss);
    Ok((report, complete))
}

/// Creates the watched ConfigMap; its resourceVersion.
async fn create_target(admin: &Client) -> Result<u64, BoxError> {
    create_namespace(admin, "bench-fanout").await?;
    let fanout_api = Api::<ConfigMap>::namespaced(admin.clone(), "bench-fanout");
    let target = fanout_api
        .create(
            &PostParams::default(),
            &config_map("target", &[("seq", "0")])?,
        )
        .await?;
    Ok(rv_of(&target).ok_or("created ConfigMap has no resourceVersion")?)
}

/// 4. Memory: the peak and current resident memory (MiB) measured after the fan-out.
fn memory_fields(report: &mut Map<String, Value>, peak_rss: f64, rss: f64) {
    report.insert("peak_rss_mib".into(), json!(round3(peak_rss)));
    report.insert("rss_mib".into(), json!(round3(rss)));
    report.insert(
        "rss_note".into(),
        json!(
            "VmHWM/VmRSS of the whole benchmark process after the fan-out: the emulator and all \
             its clients (GET/LIST clients, watchers and their received-event records) share it"
        ),
    );
}

/// Waits until every watch is established or has failed, or `timeout` has passed.
async fn wait_established(established: &Established, watchers: usize, timeout: Duration) {
    let wait_until = Instant::now() + timeout;
    loop {
        let notified = established.2.notified();
        let (ok, failed) = (
            established.0.load(Ordering::SeqCst),
            established.1.load(Ordering::SeqCst),
        );
        if ok + failed >= watchers || Instant::now() >= wait_until {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
    }
}

/// Writes `data.seq` = 1 to `last` to the watched ConfigMap, one change at a time.
async fn write_changes(emulator: &Emulator, last: u64) -> Result<Writes, BoxError> {
    let writer = Api::<ConfigMap>::namespaced(client(emulator)?, "bench-fanout");
    let mut written: Vec<(u64, u64)> = Vec::with_capacity(usize::try_from(last).unwrap_or(0));
    let mut errors = 0u64;
    let start = Instant::now();
    for seq in 1..=last {
        let patch = json!({"data": {"seq": seq.to_string()}});
        match writer
            .patch("target", &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(cm) => written.push((rv_of(&cm).unwrap_or(0), seq)),
            Err(e) => {
                errors += 1;
                eprintln!("WATCH: write {seq} failed: {e}");
            }
        }
    }
    Ok(Writes {
        written,
        errors,
        start,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What every watcher saw; watchers still waiting `timeout` after the last write are stopped.
async fn collect(
    tasks: Vec<JoinHandle<Received>>,
    stop: watch::Sender<bool>,
    timeout: Duration,
) -> Result<Vec<Received>, BoxError> {
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        let _ = stop.send(true);
    });
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await?);
    }
    stopper.abort();
    Ok(results)
}

/// Checks that every watcher got exactly the written versions, each once, in order.
fn verify(results: &[Received], writes: &Writes) -> FanoutVerdict {
    let expected: Vec<u64> = writes.written.iter().map(|(rv, _)| *rv).collect();
    let expected_set: HashSet<u64> = expected.iter().copied().collect();
    let mut v = FanoutVerdict::default();
    let mut done_seconds = Vec::new();
    for seen in results {
        let rvs: Vec<u64> = seen.events.iter().map(|(rv, _)| *rv).collect();
        let distinct: HashSet<u64> = rvs.iter().copied().collect();
        v.duplicates += (rvs.len() - distinct.len()) as u64;
        v.missed += expected_set.difference(&distinct).count() as u64;
        v.foreign += distinct.difference(&expected_set).count() as u64;
        v.out_of_order += rvs.windows(2).filter(|w| w[0] >= w[1]).count() as u64;
        v.unexpected += seen.unexpected;
        if rvs != expected {
            v.incomplete += 1;
        }
        if let Some(reason) = &seen.ended {
            *v.ended.entry(reason.clone()).or_default() += 1;
        }
        if let Some(done) = seen.done {
            done_seconds.push(done.saturating_duration_since(writes.start).as_secs_f64());
        }
    }
    v.done_seconds = sorted(done_seconds);
    v
}

impl FanoutVerdict {
    /// Whether every write succeeded and every one of `watchers` watchers saw every write,
    /// once and in order.
    fn complete(&self, writes: &Writes, est: &Establishment, watchers: usize) -> bool {
        writes.errors == 0
            && est.failed == 0
            && self.missed == 0
            && self.duplicates == 0
            && self.out_of_order == 0
            && self.foreign == 0
            && self.unexpected == 0
            && self.incomplete == 0
            && self.ended.is_empty()
            && self.done_seconds.len() == watchers
    }
}

/// The report fields of the phase (but for `fanout_complete`).
fn report(
    args: &Args,
    est: &Establishment,
    writes: &Writes,
    verdict: &FanoutVerdict,
    delivered: u64,
    watches_total: u64,
) -> Map<String, Value> {
    let fanout_seconds = verdict.done_seconds.last().copied().unwrap_or(0.0);
    let deliveries = (args.watchers * args.events) as u64;
    eprintln!(
        "WATCH: {delivered} of {deliveries} deliveries in {fanout_seconds:.3} s; \
         missed {}, duplicates {}, out of order {}",
        verdict.missed, verdict.duplicates, verdict.out_of_order
    );
    let mut report = Map::new();
    report.insert("watchers".into(), json!(args.watchers));
    report.insert("events".into(), json!(args.events));
    report.insert("fanout_buffer".into(), json!(args.fanout_buffer));
    report.insert("watch_establish_seconds".into(), json!(round3(est.seconds)));
    report.insert("watches_established".into(), json!(est.started));
    report.insert("watch_start_errors".into(), json!(est.failed));
    report.insert(
        "watch_requests_logged_before_writes".into(),
        json!(est.logged),
    );
    report.insert("watch_requests_logged_total".into(), json!(watches_total));
    report.insert("open_fds_during_fanout".into(), json!(est.fds));
    report.insert("deliveries".into(), json!(deliveries));
    report.insert("delivered".into(), json!(delivered));
    report.insert("fanout_seconds".into(), json!(round3(fanout_seconds)));
    report.insert(
        "deliveries_per_second".into(),
        json!(round3(if fanout_seconds > 0.0 {
            delivered as f64 / fanout_seconds
        } else {
            0.0
        })),
    );
    report.insert("write_seconds".into(), json!(round3(writes.seconds)));
    report.insert(
        "write_rps_during_fanout".into(),
        json!(round3(writes.written.len() as f64 / writes.seconds)),
    );
    report.insert("write_errors".into(), json!(writes.errors));
    report.insert(
        "watcher_done_p50_seconds".into(),
        json!(round3(percentile(&verdict.done_seconds, 50.0))),
    );
    report.insert("fanout_missed".into(), json!(verdict.missed));
    report.insert("fanout_duplicates".into(), json!(verdict.duplicates));
    report.insert("fanout_out_of_order".into(), json!(verdict.out_of_order));
    report.insert("fanout_unknown_versions".into(), json!(verdict.foreign));
    report.insert("fanout_unexpected_events".into(), json!(verdict.unexpected));
    report.insert("watchers_incomplete".into(), json!(verdict.incomplete));
    report.insert("watchers_ended_early".into(), json!(verdict.ended));
    report
}
