//! `kube-emulator-bench`: measures GET and LIST throughput and watch fan-out of an in-process emulator, printing one JSON object.

use std::collections::{BTreeMap, HashSet};
use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use kube_emulator::{Emulator, Options};
use serde_json::{Value, json};
use tokio::sync::{Barrier, Notify, watch};

type BoxError = Box<dyn Error + Send + Sync>;

/// Measures how much an in-process kube-emulator serves: GETs, LISTs of many objects and
/// watch fan-out. Prints one JSON object on stdout; progress goes to stderr.
#[derive(Debug, Parser)]
#[command(name = "kube-emulator-bench", version)]
struct Args {
    /// Concurrent GET clients (each its own kube::Client).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,

    /// Seconds of the GET phase.
    #[arg(long, default_value_t = 5)]
    seconds: u64,

    /// Objects (ConfigMaps) listed by the LIST phase.
    #[arg(long, default_value_t = 1000)]
    list_objects: usize,

    /// Concurrent LIST clients.
    #[arg(long, default_value_t = 4)]
    list_concurrency: usize,

    /// Seconds of the LIST phase.
    #[arg(long, default_value_t = 3)]
    list_seconds: u64,

    /// Watchers holding a watch on the same namespace's ConfigMaps (all on one kube::Client).
    #[arg(long, default_value_t = 1000)]
    watchers: usize,

    /// Changes written to one watched ConfigMap (sequentially, as fast as answered).
    #[arg(long, default_value_t = 200)]
    events: usize,

    /// Events buffered per watcher before the emulator disconnects it (`Options::fanout`).
    #[arg(long, default_value_t = Options::default().fanout)]
    fanout_buffer: usize,

    /// Seconds to wait for watches to be established, and for deliveries after the last write.
    #[arg(long, default_value_t = 120)]
    timeout: u64,

    /// Watchers of the selective phase, each watching its own object by name (as node
    /// agents watch their BootcNode); 0 skips the phase.
    #[arg(long, default_value_t = 1000)]
    own_watchers: usize,

    /// Rounds of the selective phase: each round changes every watched object once.
    #[arg(long, default_value_t = 5)]
    own_rounds: usize,

    /// Concurrent writers of the selective phase.
    #[arg(long, default_value_t = 8)]
    own_writers: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Nearest-rank percentile of sorted samples (0 when there are none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The `(soft, hard)` open-file limits of this process (`None` for unlimited).
fn nofile_limits() -> Option<(Option<u64>, Option<u64>)> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line["Max open files".len()..].split_whitespace();
    let parse = |f: Option<&str>| -> Option<Option<u64>> {
        match f? {
            "unlimited" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some((parse(fields.next())?, parse(fields.next())?))
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// `(VmHWM, VmRSS)` of this process in MiB.
fn memory_mib() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l[key.len()..].split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmHWM:") / 1024.0, kib("VmRSS:") / 1024.0)
}

fn client(emulator: &Emulator) -> Result<Client, kube::Error> {
    let mut config = emulator.config();
    config.default_retry = false;
    Client::try_from(config)
}

fn config_map(name: &str, data: &[(&str, &str)]) -> Result<ConfigMap, serde_json::Error> {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data,
    }))
}

async fn create_namespace(client: &Client, name: &str) -> Result<(), BoxError> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

fn rv_of(cm: &ConfigMap) -> Option<u64> {
    cm.metadata.resource_version.as_deref()?.parse().ok()
}

/// Each of `workers` clients runs `call` in a loop for `seconds` (after one untimed call each);
/// returns the latencies in ms, the error count and the measured wall time.
async fn hammer<F, Fut>(
    emulator: &Emulator,
    workers: usize,
    seconds: u64,
    call: F,
) -> Result<(Vec<f64>, u64, Duration), BoxError>
where
    F: Fn(Client) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send,
{
    let barrier = Arc::new(Barrier::new(workers + 1));
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let client = client(emulator)?;
        let call = call.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            // Warm up the connection before the clock starts.
            let warm = call(client.clone()).await;
            barrier.wait().await;
            let start = Instant::now();
            let mut latencies = Vec::new();
            let mut errors = u64::from(warm.is_err());
            while start.elapsed() < Duration::from_secs(seconds) {
                let t = Instant::now();
                match call(client.clone()).await {
                    Ok(()) => latencies.push(ms(t.elapsed())),
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (l, e) = task.await?;
        latencies.extend(l);
        errors += e;
    }
    Ok((latencies, errors, start.elapsed()))
}

/// What one watcher saw.
#[derive(Debug, Default)]
struct Seen {
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
    established: Arc<(AtomicUsize, AtomicUsize, Notify)>,
    mut deadline: watch::Receiver<bool>,
) -> Seen {
    let mut seen = Seen::default();
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

/// Runs all phases; the JSON report and whether the fan-out was complete.
async fn run(args: &Args) -> Result<(Value, bool), BoxError> {
    let options = Options {
        fanout: args.fanout_buffer,
        ..Options::default()
    };
    let emulator = Emulator::start_with(options).await?;
    let handle = emulator.handle();
    let admin = client(&emulator)?;
    let mut report = serde_json::Map::new();
    report.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(0, |n| n.get())),
    );

    // 1. GET throughput.
    eprintln!("GET: {} clients for {} s", args.concurrency, args.seconds);
    create_namespace(&admin, "bench-get").await?;
    Api::<ConfigMap>::namespaced(admin.clone(), "bench-get")
        .create(
            &PostParams::default(),
            &config_map("target", &[("k", "v")])?,
        )
        .await?;
    handle.clear_requests();
    let (latencies, errors, wall) =
        hammer(&emulator, args.concurrency, args.seconds, |c| async move {
            Api::<ConfigMap>::namespaced(c, "bench-get")
                .get("target")
                .await?;
            Ok(())
        })
        .await?;
    let logged = handle.counters().by_verb.get("get").copied().unwrap_or(0);
    let latencies = sorted(latencies);
    let get_rps = latencies.len() as f64 / wall.as_secs_f64();
    eprintln!("GET: {} requests, {get_rps:.0}/s", latencies.len());
    report.insert("concurrency".into(), json!(args.concurrency));
    report.insert("get_seconds".into(), json!(round3(wall.as_secs_f64())));
    report.insert("get_requests".into(), json!(latencies.len()));
    report.insert("get_errors".into(), json!(errors));
    report.insert("get_requests_logged_by_emulator".into(), json!(logged));
    report.insert("get_rps".into(), json!(round3(get_rps)));
    report.insert(
        "get_p50_ms".into(),
        json!(round3(percentile(&latencies, 50.0))),
    );
    report.insert(
        "get_p99_ms".into(),
        json!(round3(percentile(&latencies, 99.0))),
    );

    // 2. LIST throughput.
    eprintln!("LIST: creating {} ConfigMaps", args.list_objects);
    create_namespace(&admin, "bench-list").await?;
    let list_api = Api::<ConfigMap>::namespaced(admin.clone(), "bench-list");
    let created = Instant::now();
    stream::iter(0..args.list_objects)
        .map(|i| {
            let api = list_api.clone();
            async move {
                let cm = config_map(&format!("cm-{i:05}"), &[("index", &i.to_string())])?;
                api.create(&PostParams::default(), &cm).await?;
                Ok::<(), BoxError>(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    let create_rps = args.list_objects as f64 / created.elapsed().as_secs_f64();
    eprintln!(
        "LIST: {} clients for {} s",
        args.list_concurrency, args.list_seconds
    );
    let expected = args.list_objects;
    let (latencies, errors, wall) = hammer(
        &emulator,
        args.list_concurrency,
        args.list_seconds,
        move |c| async move {
            let list = Api::<ConfigMap>::namespaced(c, "bench-list")
                .list(&ListParams::default())
                .await?;
            if list.items.len() != expected {
                return Err(format!("listed {} of {expected} objects", list.items.len()).into());
            }
            Ok(())
        },
    )
    .await?;
    let latencies = sorted(latencies);
    let list_rps = latencies.len() as f64 / wall.as_secs_f64();
    eprintln!("LIST: {} requests, {list_rps:.1}/s", latencies.len());
    report.insert("create_rps".into(), json!(round3(create_rps)));
    report.insert("list_objects".into(), json!(args.list_objects));
    report.insert("list_concurrency".into(), json!(args.list_concurrency));
    report.insert("list_seconds".into(), json!(round3(wall.as_secs_f64())));
    report.insert("list_requests".into(), json!(latencies.len()));
    report.insert("list_errors".into(), json!(errors));
    report.insert("list_rps".into(), json!(round3(list_rps)));
    report.insert(
        "listed_objects_per_second".into(),
        json!(round3(list_rps * args.list_objects as f64)),
    );
    report.insert(
        "list_p50_ms".into(),
        json!(round3(percentile(&latencies, 50.0))),
    );
    report.insert(
        "list_p99_ms".into(),
        json!(round3(percentile(&latencies, 99.0))),
    );

    // 3. Watch fan-out.
    create_namespace(&admin, "bench-fanout").await?;
    let fanout_api = Api::<ConfigMap>::namespaced(admin.clone(), "bench-fanout");
    let target = fanout_api
        .create(
            &PostParams::default(),
            &config_map("target", &[("seq", "0")])?,
        )
        .await?;
    let from = rv_of(&target).ok_or("created ConfigMap has no resourceVersion")?;
    handle.clear_requests();
    eprintln!(
        "WATCH: starting {} watchers from resourceVersion {from}",
        args.watchers
    );
    let watch_client = client(&emulator)?;
    let established = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0), Notify::new()));
    let (stop, deadline) = watch::channel(false);
    let last = args.events as u64;
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.watchers)
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
    let wait_until = Instant::now() + Duration::from_secs(args.timeout);
    loop {
        let notified = established.2.notified();
        let (ok, failed) = (
            established.0.load(Ordering::SeqCst),
            established.1.load(Ordering::SeqCst),
        );
        if ok + failed >= args.watchers || Instant::now() >= wait_until {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
    }
    let established_seconds = started.elapsed().as_secs_f64();
    let watch_started = established.0.load(Ordering::SeqCst);
    let watch_failed = established.1.load(Ordering::SeqCst);
    let watches_logged = handle.counters().by_verb.get("watch").copied().unwrap_or(0);
    let fds = open_fds();
    eprintln!(
        "WATCH: {watch_started} established ({watch_failed} failed) in {established_seconds:.2} s, \
         {watches_logged} watch requests logged, {fds} open fds; writing {} changes",
        args.events
    );

    let writer = Api::<ConfigMap>::namespaced(client(&emulator)?, "bench-fanout");
    let mut written: Vec<(u64, u64)> = Vec::with_capacity(args.events);
    let mut write_errors = 0u64;
    let write_start = Instant::now();
    for seq in 1..=last {
        let patch = json!({"data": {"seq": seq.to_string()}});
        match writer
            .patch("target", &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(cm) => written.push((rv_of(&cm).unwrap_or(0), seq)),
            Err(e) => {
                write_errors += 1;
                eprintln!("WATCH: write {seq} failed: {e}");
            }
        }
    }
    let write_seconds = write_start.elapsed().as_secs_f64();
    eprintln!(
        "WATCH: {} writes in {write_seconds:.3} s; waiting for deliveries",
        written.len()
    );

    // Stop waiting `timeout` seconds after the last write.
    let timeout = Duration::from_secs(args.timeout);
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        let _ = stop.send(true);
    });
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await?);
    }
    stopper.abort();
    let (peak_rss, rss) = memory_mib();

    // Verify: every watcher got exactly the written versions, each once, in order.
    let expected: Vec<u64> = written.iter().map(|(rv, _)| *rv).collect();
    let expected_set: HashSet<u64> = expected.iter().copied().collect();
    let mut missed = 0u64;
    let mut duplicates = 0u64;
    let mut out_of_order = 0u64;
    let mut foreign = 0u64;
    let mut incomplete = 0u64;
    let mut unexpected = 0u64;
    let mut ended: BTreeMap<String, u64> = BTreeMap::new();
    let mut done_seconds = Vec::new();
    for seen in &results {
        let rvs: Vec<u64> = seen.events.iter().map(|(rv, _)| *rv).collect();
        let distinct: HashSet<u64> = rvs.iter().copied().collect();
        duplicates += (rvs.len() - distinct.len()) as u64;
        missed += expected_set.difference(&distinct).count() as u64;
        foreign += distinct.difference(&expected_set).count() as u64;
        out_of_order += rvs.windows(2).filter(|w| w[0] >= w[1]).count() as u64;
        unexpected += seen.unexpected;
        if rvs != expected {
            incomplete += 1;
        }
        if let Some(reason) = &seen.ended {
            *ended.entry(reason.clone()).or_default() += 1;
        }
        if let Some(done) = seen.done {
            done_seconds.push(done.saturating_duration_since(write_start).as_secs_f64());
        }
    }
    let done_seconds = sorted(done_seconds);
    let fanout_seconds = done_seconds.last().copied().unwrap_or(0.0);
    let deliveries = (args.watchers * args.events) as u64;
    let delivered: u64 = results.iter().map(|s| s.events.len() as u64).sum();
    let counters = handle.counters();
    let watches_total = counters.by_verb.get("watch").copied().unwrap_or(0);
    let complete = write_errors == 0
        && watch_failed == 0
        && missed == 0
        && duplicates == 0
        && out_of_order == 0
        && foreign == 0
        && unexpected == 0
        && incomplete == 0
        && ended.is_empty()
        && done_seconds.len() == args.watchers;
    eprintln!(
        "WATCH: {delivered} of {deliveries} deliveries in {fanout_seconds:.3} s; \
         missed {missed}, duplicates {duplicates}, out of order {out_of_order}"
    );

    report.insert("watchers".into(), json!(args.watchers));
    report.insert("events".into(), json!(args.events));
    report.insert("fanout_buffer".into(), json!(args.fanout_buffer));
    report.insert(
        "watch_establish_seconds".into(),
        json!(round3(established_seconds)),
    );
    report.insert("watches_established".into(), json!(watch_started));
    report.insert("watch_start_errors".into(), json!(watch_failed));
    report.insert(
        "watch_requests_logged_before_writes".into(),
        json!(watches_logged),
    );
    report.insert("watch_requests_logged_total".into(), json!(watches_total));
    report.insert("open_fds_during_fanout".into(), json!(fds));
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
    report.insert("write_seconds".into(), json!(round3(write_seconds)));
    report.insert(
        "write_rps_during_fanout".into(),
        json!(round3(written.len() as f64 / write_seconds)),
    );
    report.insert("write_errors".into(), json!(write_errors));
    report.insert(
        "watcher_done_p50_seconds".into(),
        json!(round3(percentile(&done_seconds, 50.0))),
    );
    report.insert("fanout_missed".into(), json!(missed));
    report.insert("fanout_duplicates".into(), json!(duplicates));
    report.insert("fanout_out_of_order".into(), json!(out_of_order));
    report.insert("fanout_unknown_versions".into(), json!(foreign));
    report.insert("fanout_unexpected_events".into(), json!(unexpected));
    report.insert("watchers_incomplete".into(), json!(incomplete));
    report.insert("watchers_ended_early".into(), json!(ended));
    report.insert("fanout_complete".into(), json!(complete));

    // 4. Memory.
    report.insert("peak_rss_mib".into(), json!(round3(peak_rss)));
    report.insert("rss_mib".into(), json!(round3(rss)));
    report.insert(
        "rss_note".into(),
        json!(
            "VmHWM/VmRSS of the whole benchmark process after the fan-out: the emulator and all \
             its clients (GET/LIST clients, watchers and their received-event records) share it"
        ),
    );

    drop(results);

    // 5. Selective watches: one object per watcher, many writers.
    let own_complete = if args.own_watchers > 0 {
        let (fields, own_complete) = own_objects(args, &emulator).await?;
        report.extend(fields);
        own_complete
    } else {
        true
    };
    emulator.stop().await;
    Ok((Value::Object(report), complete && own_complete))
}

/// The selective phase: `own_watchers` watchers each watch one ConfigMap by name while
/// `own_writers` writers change every ConfigMap `own_rounds` times. Every watcher must see
/// exactly its object's changes, in order.
async fn own_objects(
    args: &Args,
    emulator: &Emulator,
) -> Result<(serde_json::Map<String, Value>, bool), BoxError> {
    let admin = client(emulator)?;
    create_namespace(&admin, "bench-own").await?;
    let api = Api::<ConfigMap>::namespaced(admin, "bench-own");
    let mut from = 0u64;
    for i in 0..args.own_watchers {
        let cm = api
            .create(
                &PostParams::default(),
                &config_map(&format!("own-{i}"), &[("seq", "0")])?,
            )
            .await?;
        from = from.max(rv_of(&cm).unwrap_or(0));
    }
    let watch_client = client(emulator)?;
    let rounds = args.own_rounds as u64;
    let established = Arc::new(Barrier::new(args.own_watchers + 1));
    let tasks: Vec<_> = (0..args.own_watchers)
        .map(|i| {
            let api = Api::<ConfigMap>::namespaced(watch_client.clone(), "bench-own");
            let established = established.clone();
            let from = from.to_string();
            tokio::spawn(async move {
                let params = WatchParams::default()
                    .fields(&format!("metadata.name=own-{i}"))
                    .disable_bookmarks()
                    .timeout(290);
                let stream = api.watch(&params, &from).await;
                established.wait().await;
                let mut seqs = Vec::new();
                let Ok(stream) = stream else {
                    return seqs;
                };
                let mut stream = std::pin::pin!(stream);
                while let Ok(Some(Ok(WatchEvent::Modified(cm)))) =
                    tokio::time::timeout(Duration::from_secs(120), stream.next()).await
                {
                    let seq: u64 = cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get("seq"))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    seqs.push(seq);
                    if seq == rounds {
                        break;
                    }
                }
                seqs
            })
        })
        .collect();
    established.wait().await;
    eprintln!(
        "OWN: {} watchers established; {} writers change every object {rounds} times",
        args.own_watchers, args.own_writers
    );
    let writer = client(emulator)?;
    let start = Instant::now();
    let mut write_errors = 0u64;
    for round in 1..=rounds {
        let results: Vec<Result<ConfigMap, kube::Error>> = stream::iter(0..args.own_watchers)
            .map(|i| {
                let api = Api::<ConfigMap>::namespaced(writer.clone(), "bench-own");
                async move {
                    let patch = json!({"data": {"seq": round.to_string()}});
                    api.patch(
                        &format!("own-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                }
            })
            .buffer_unordered(args.own_writers.max(1))
            .collect()
            .await;
        write_errors += results.iter().filter(|r| r.is_err()).count() as u64;
    }
    let write_seconds = start.elapsed().as_secs_f64();
    let expected: Vec<u64> = (1..=rounds).collect();
    let mut incomplete = 0u64;
    for task in tasks {
        if task.await? != expected {
            incomplete += 1;
        }
    }
    let all_seconds = start.elapsed().as_secs_f64();
    let writes = (args.own_watchers as u64) * rounds;
    let complete = write_errors == 0 && incomplete == 0;
    eprintln!(
        "OWN: {writes} writes in {write_seconds:.3} s, all delivered after {all_seconds:.3} s; {incomplete} watchers incomplete"
    );
    let mut fields = serde_json::Map::new();
    fields.insert("own_watchers".into(), json!(args.own_watchers));
    fields.insert("own_writers".into(), json!(args.own_writers));
    fields.insert("own_writes".into(), json!(writes));
    fields.insert("own_write_errors".into(), json!(write_errors));
    fields.insert("own_write_seconds".into(), json!(round3(write_seconds)));
    fields.insert(
        "own_write_rps".into(),
        json!(round3(writes as f64 / write_seconds)),
    );
    fields.insert("own_delivered_seconds".into(), json!(round3(all_seconds)));
    fields.insert("own_watchers_incomplete".into(), json!(incomplete));
    fields.insert("own_complete".into(), json!(complete));
    Ok((fields, complete))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<ExitCode, Box<dyn Error + Send + Sync>> {
    let args = Args::parse();
    // Each watch is a loopback connection with both ends in this process: two descriptors.
    let needed = 2 * (args.watchers + args.concurrency + args.list_concurrency) as u64 + 256;
    match nofile_limits() {
        Some((Some(soft), hard)) if soft < needed => {
            let hint = needed.next_power_of_two().max(4096);
            eprintln!(
                "kube-emulator-bench: {} watchers need about {needed} open files, but the soft \
                 limit is {soft} (hard: {}); run `ulimit -n {hint}` first",
                args.watchers,
                hard.map_or("unlimited".to_string(), |h| h.to_string()),
            );
            return Ok(ExitCode::from(2));
        }
        Some(_) => {}
        None => eprintln!("kube-emulator-bench: cannot read the open-file limit; continuing"),
    }
    let (report, complete) = run(&args).await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    if complete {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("kube-emulator-bench: the watch fan-out was incomplete (see fanout_* fields)");
        Ok(ExitCode::FAILURE)
    }
}
