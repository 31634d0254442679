//! `bootc-sim bench`: one rollout over N in-process nodes, measured.
//!
//! Everything runs in this process: the API emulator, a [`SimCluster`] (per node a
//! memory host, the kubelet's part and the real agent run loop, restarted as a
//! DaemonSet would), and the controller's reconciler with its own client (no retries,
//! the controller's User-Agent), as the binary runs it minus leader election. The nodes
//! boot v1; a pool pinned to v2 is applied; the run ends when every node runs v2, is
//! schedulable, Ready and holds no reboot slot, and the pool's status says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::{self, Options};
use host_sim::cluster::{Invariants, SimCluster, SimOptions};
use host_sim::memory::{Behaviour, Catalog};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::stats::{self, Rng};
use crate::svg::{self, Sample};
use crate::track::{STATES, Tracker};

const REPO: &str = "registry.test/os";
const POOL: &str = "bench";
/// How often the picture's counts are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How often agents may be killed (`--kill-agents-rate` is per second).
const KILL_TICK: Duration = Duration::from_millis(100);
/// How long the invariant checker may take to catch up with the event stream.
const SETTLE: Duration = Duration::from_secs(30);
/// How long the controller may take to stop.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// `bootc-sim bench` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 50)]
    pub nodes: usize,
    /// The pool's maxUnavailable: a count ("5") or a share of the nodes ("10%").
    #[arg(long, default_value = "1")]
    pub max_unavailable: String,
    /// How long a host takes to pull and stage an image, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub stage_ms: u64,
    /// How long a host takes to reboot, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub reboot_ms: u64,
    /// How long after a host is up again its Node turns Ready, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub ready_ms: u64,
    /// Share (0 to 1) of API writes answered with an injected 500, 409 or 429.
    #[arg(long, default_value_t = 0.0)]
    pub api_fault_rate: f64,
    /// Whose writes the injected faults hit: `controller` (its User-Agent) or `all`
    /// (the agents and the simulated kubelets too).
    #[arg(long, value_enum, default_value_t = FaultScope::Controller)]
    pub fault_scope: FaultScope,
    /// Kill (abort) the controller and start a new one every this many seconds.
    #[arg(long)]
    pub kill_controller_every: Option<f64>,
    /// Share of the agents killed per second (each agent, every 100 ms, with
    /// probability rate / 10); their supervisor starts them again.
    #[arg(long, default_value_t = 0.0)]
    pub kill_agents_rate: f64,
    /// Seed of the fault injection and the choice of agents to kill.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Give up (and fail) when the rollout has not completed after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub deadline_s: f64,
    /// Where to write the JSON result; the picture goes beside it, with `.svg`.
    #[arg(long)]
    pub json: PathBuf,
}

/// Whose writes the injected faults hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultScope {
    /// The controller's writes only.
    Controller,
    /// Every client's writes: the controller, the agents and the simulated kubelets.
    All,
}

impl FaultScope {
    fn as_str(self) -> &'static str {
        match self {
            FaultScope::Controller => "controller",
            FaultScope::All => "all",
        }
    }
}

/// The pool's budget: `maxUnavailable` resolved against `nodes` (a percentage rounds
/// down, but is at least one node), and the spec value for it.
fn budget(max_unavailable: &str, nodes: usize) -> Result<(usize, Value), String> {
    let text = max_unavailable.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let p: usize = percent
            .parse()
            .map_err(|_| format!("--max-unavailable `{text}`: not a percentage"))?;
        if p == 0 || p > 100 {
            return Err(format!("--max-unavailable `{text}`: must be 1% to 100%"));
        }
        Ok(((nodes * p / 100).max(1), json!(text)))
    } else {
        let n: usize = text
            .parse()
            .map_err(|_| format!("--max-unavailable `{text}`: not a count or a percentage"))?;
        if n == 0 {
            return Err("--max-unavailable must be at least 1".to_owned());
        }
        Ok((n, json!(n)))
    }
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Returns once `stop` says true (or its sender is gone).
async fn stopped_signal(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The controller, in-process, killed and started again every `kill_every` if set.
/// Returns how many times it was killed.
async fn controller_loop(
    config: kube::Config,
    metrics: Metrics,
    kill_every: Option<Duration>,
    mut stop: watch::Receiver<bool>,
) -> u32 {
    let mut kills = 0;
    loop {
        let client = match Client::try_from(config.clone()) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, "bench: cannot make the controller's client");
                return kills;
            }
        };
        let options = Options {
            metrics: metrics.clone(),
            ..Options::default()
        };
        let (shutdown, stopped) = oneshot::channel::<()>();
        let mut task = tokio::spawn(reconcile::run(client, options, async move {
            let _ = stopped.await;
        }));
        let kill = async {
            match kill_every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = kill => {
                task.abort();
                let _ = task.await;
                kills += 1;
            }
            () = stopped_signal(&mut stop) => {
                let _ = shutdown.send(());
                if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
                    task.abort();
                }
                return kills;
            }
            result = &mut task => {
                tracing::error!(?result, "bench: the controller ended by itself; starting it again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Kills a random share of the running agents every [`KILL_TICK`]; returns how many.
async fn agent_killer(
    cluster: Arc<SimCluster>,
    rate_per_s: f64,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> u64 {
    let mut rng = Rng::new(seed);
    let names = cluster.nodes();
    let p = rate_per_s * KILL_TICK.as_secs_f64();
    let mut killed = 0;
    let mut tick = tokio::time::interval(KILL_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped_signal(&mut stop) => return killed,
        }
        for name in &names {
            if rng.next_f64() < p && cluster.kill_agent(name).await {
                killed += 1;
            }
        }
    }
}

/// What the end state shows, read from the store and the hosts.
#[derive(Debug, Default)]
struct EndState {
    on_target: usize,
    /// Per node: full and soft reboots its host was asked for.
    host_reboots: BTreeMap<String, u64>,
    slots_held: Vec<String>,
    pool_status: Value,
    history_limit: usize,
    history_problems: Vec<String>,
}

fn end_state(
    handle: &kube_emulator::Handle,
    cluster: &SimCluster,
    target_digest: &str,
) -> EndState {
    let mut end = EndState::default();
    for name in cluster.nodes() {
        if let Some(host) = cluster.host(&name) {
            let state = host.state();
            if state
                .booted
                .as_ref()
                .is_some_and(|b| b.info.digest == target_digest)
            {
                end.on_target += 1;
            }
            let c = host.counters();
            end.host_reboots.insert(name, c.reboots + c.soft_reboots);
        }
    }
    for b in handle.list("node.bootc.dev", "bootcnodes") {
        let slot = b
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION));
        if slot {
            end.slots_held.push(
                b.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
            );
        }
    }
    let pool = handle
        .get("node.bootc.dev", "bootcnodepools", "", POOL)
        .unwrap_or(Value::Null);
    end.pool_status = pool.get("status").cloned().unwrap_or(Value::Null);
    end.history_limit = pool
        .pointer("/spec/history/limit")
        .and_then(Value::as_u64)
        .unwrap_or(5) as usize;
    let history = end
        .pool_status
        .get("deployHistory")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    end.history_problems = history_problems(&history, end.history_limit, target_digest);
    end
}

/// What is wrong with the pool's deployHistory at the end of a rollout to
/// `target_digest`: over the limit, a repeated digest, not newest `lastDeployed` first,
/// or the target's entry missing or not the newest.
fn history_problems(history: &[Value], limit: usize, target_digest: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if history.len() > limit {
        problems.push(format!(
            "deployHistory has {} entries, limit {}",
            history.len(),
            limit
        ));
    }
    let digests: BTreeSet<&str> = history
        .iter()
        .filter_map(|e| e.get("digest").and_then(Value::as_str))
        .collect();
    if digests.len() != history.len() {
        problems.push("deployHistory repeats a digest".to_owned());
    }
    let last: Vec<&str> = history
        .iter()
        .filter_map(|e| e.get("lastDeployed").and_then(Value::as_str))
        .collect();
    if last.windows(2).any(|w| w[0] < w[1]) {
        problems.push("deployHistory is not newest lastDeployed first".to_owned());
    }
    // The target's entry is the newest; another entry may share its lastDeployed (the
    // times are whole seconds: a node's first report of the old image can fall in the
    // second of the last boot of the new one), and ties are ordered by digest.
    let target_last = history
        .iter()
        .find(|e| e.get("digest").and_then(Value::as_str) == Some(target_digest))
        .and_then(|e| e.get("lastDeployed").and_then(Value::as_str));
    match (target_last, last.first()) {
        (Some(target), Some(newest)) if target == *newest => {}
        (Some(_), _) => problems.push("deployHistory's newest entry is not the target".to_owned()),
        (None, _) => problems.push("deployHistory has no entry for the target".to_owned()),
    }
    problems
}

/// Runs the benchmark; Ok(false) when an invariant was violated or the rollout did not
/// complete.
pub async fn run(args: BenchArgs) -> Result<bool, String> {
    if args.nodes == 0 {
        return Err("--nodes must be at least 1".to_owned());
    }
    if !(0.0..=1.0).contains(&args.api_fault_rate) {
        return Err("--api-fault-rate must be between 0 and 1".to_owned());
    }
    if args.kill_agents_rate < 0.0 {
        return Err("--kill-agents-rate must not be negative".to_owned());
    }
    let kill_every = match args.kill_controller_every {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            return Err("--kill-controller-every must be a positive number of seconds".into());
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let (budget, spec_budget) = budget(&args.max_unavailable, args.nodes)?;
    let svg_path = args.json.with_extension("svg");
    let n = args.nodes;
    let started = Instant::now();

    let emulator = kube_emulator::Emulator::start()
        .await
        .map_err(|e| format!("cannot start the API emulator: {e}"))?;
    let handle = emulator.handle();
    let client = emulator
        .client()
        .map_err(|e| format!("cannot make a client: {e}"))?;
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), Some("k1"));
    let v2 = catalog.push(REPO, "v2", &digest('2'), Some("k2"));
    let target_digest = digest('2');
    let cluster = SimCluster::start(emulator.config(), catalog)
        .await
        .map_err(|e| format!("cannot start the simulated cluster: {e}"))?;
    let sim = SimOptions {
        behaviour: Behaviour {
            stage_time: Duration::from_millis(args.stage_ms),
            reboot_time: Duration::from_millis(args.reboot_ms),
            ..Behaviour::default()
        },
        ready_delay: Duration::from_millis(args.ready_ms),
        node_labels: BTreeMap::from([("role".to_owned(), "worker".to_owned())]),
        ..SimOptions::default()
    };
    let width = n.to_string().len().max(3);
    for i in 1..=n {
        let name = format!("node-{i:0width$}");
        cluster
            .add_node(&name, &v1, &sim)
            .await
            .map_err(|e| format!("cannot add node {name}: {e}"))?;
    }
    let cluster = Arc::new(cluster);
    let setup_s = secs(started.elapsed());
    eprintln!("bootc-sim bench: {n} nodes up on v1 in {setup_s:.1} s; applying the pool");

    let invariants = Invariants::follow(handle.clone(), budget, BTreeSet::new());
    let tracker = Tracker::follow(handle.clone(), POOL, &target_digest, n);
    let metrics = Metrics::new();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut config = emulator.config();
    config.default_retry = false;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(reconcile::USER_AGENT),
    ));
    let requests_before = handle.requests().len();

    let t0 = Instant::now();
    let controller: JoinHandle<u32> = tokio::spawn(controller_loop(
        config,
        metrics.clone(),
        kill_every,
        stop_rx.clone(),
    ));
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": v2},
            "rollout": {"maxUnavailable": spec_budget, "postRebootDelaySeconds": 0},
        }
    }))
    .map_err(|e| format!("the pool: {e}"))?;
    Api::<BootcNodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .map_err(|e| format!("cannot create the pool: {e}"))?;
    if args.api_fault_rate > 0.0 {
        handle.set_faults(kube_emulator::FaultConfig {
            error_rate: args.api_fault_rate,
            error_codes: vec![500, 409, 429],
            writes_only: true,
            user_agent: (args.fault_scope == FaultScope::Controller)
                .then(|| reconcile::USER_AGENT.to_owned()),
            seed: args.seed,
            ..Default::default()
        });
    }
    let killer: Option<JoinHandle<u64>> = (args.kill_agents_rate > 0.0).then(|| {
        tokio::spawn(agent_killer(
            cluster.clone(),
            args.kill_agents_rate,
            args.seed,
            stop_rx.clone(),
        ))
    });

    // Sample until done or the deadline.
    let deadline = t0 + Duration::from_secs_f64(args.deadline_s);
    let mut samples: Vec<Sample> = Vec::new();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_report = t0;
    let done_at = loop {
        tick.tick().await;
        let now = Instant::now();
        let counts = tracker.counts();
        samples.push(Sample {
            t: secs(now - t0),
            counts,
        });
        if let Some(done) = tracker.done_at() {
            break Some(done);
        }
        if now >= deadline {
            break None;
        }
        if now - last_report >= Duration::from_secs(10) {
            last_report = now;
            let states: Vec<String> = STATES
                .iter()
                .zip(counts.states)
                .map(|(s, c)| format!("{s} {c}"))
                .collect();
            eprintln!(
                "bootc-sim bench: {:.0} s: {}; unavailable {}",
                secs(now - t0),
                states.join(", "),
                counts.unavailable
            );
        }
    };
    let requests: Vec<_> = handle
        .requests()
        .into_iter()
        .skip(requests_before)
        .collect();
    // One last sample at the instant of completion.
    if let Some(done) = done_at {
        samples.push(Sample {
            t: secs(done - t0),
            counts: tracker.counts(),
        });
        samples.sort_by(|a, b| a.t.total_cmp(&b.t));
    }

    // Stop the faults and the killers, then look at the end state.
    handle.clear_faults();
    let _ = stop_tx.send(true);
    let controller_kills = controller.await.unwrap_or(0);
    let agents_killed = match killer {
        Some(k) => k.await.unwrap_or(0),
        None => 0,
    };
    let report = invariants.settled(SETTLE).await;
    let end = end_state(&handle, &cluster, &target_digest);
    let peak_rss = stats::self_status_mib("VmHWM");

    let slots = budget.min(n);
    let waves = n.div_ceil(slots);
    let ideal_s =
        (args.stage_ms as f64 + waves as f64 * (args.reboot_ms + args.ready_ms) as f64) / 1000.0;
    let makespan_s = done_at.map(|d| secs(d - t0));
    let counters = kube_emulator::Counters::of(&requests);
    let writes = requests.iter().filter(|r| r.is_write()).count();
    let controller_requests = requests
        .iter()
        .filter(|r| r.user_agent == reconcile::USER_AGENT)
        .count();
    let controller_writes = requests
        .iter()
        .filter(|r| r.user_agent == reconcile::USER_AGENT && r.is_write())
        .count();
    let histogram =
        stats::parse_histogram(&metrics.encode(), "bootc_pool_reconcile_duration_seconds");
    let ms = |q: f64| histogram.quantile(q).map(|s| round(s * 1000.0, 2));
    let host_reboots_max = end.host_reboots.values().copied().max().unwrap_or(0);
    let event_reboots_max = report.reboots.values().copied().max().unwrap_or(0);
    let reboots_max = host_reboots_max.max(u64::from(event_reboots_max));

    let mut failures: Vec<String> = Vec::new();
    if done_at.is_none() {
        failures.push(format!(
            "the rollout did not complete within {} s",
            args.deadline_s
        ));
    }
    if !report.violations.is_empty() {
        failures.push(format!(
            "{} availability violations",
            report.violations.len()
        ));
    }
    if reboots_max > 1 {
        let twice: Vec<&String> = end
            .host_reboots
            .iter()
            .filter(|(_, r)| **r > 1)
            .map(|(n, _)| n)
            .collect();
        failures.push(format!("nodes rebooted more than once: {twice:?}"));
    }
    if end.on_target != n {
        failures.push(format!("{} of {n} nodes on the target", end.on_target));
    }
    if !report.left_cordoned.is_empty() {
        failures.push(format!("nodes left cordoned: {:?}", report.left_cordoned));
    }
    if !end.slots_held.is_empty() {
        failures.push(format!("reboot slots still held: {:?}", end.slots_held));
    }
    failures.extend(end.history_problems.iter().cloned());

    let mut notes = vec![
        "controller, agents, hosts and the API emulator share this one process: \
         controller_peak_rss_mib and agent_peak_rss_mib are both the process's peak \
         resident size (VmHWM), not per component"
            .to_owned(),
        "reconcile_p50_ms / reconcile_p99_ms are computed from the controller's \
         bootc_pool_reconcile_duration_seconds histogram buckets (linear interpolation \
         inside a bucket, as histogram_quantile does), not from exact timings"
            .to_owned(),
        "ideal_s = stage + ceil(nodes / slots) x (drain + reboot + ready + delay) with \
         drain = 0 (no pods) and delay = postRebootDelaySeconds = 0"
            .to_owned(),
        "api_* count every request the emulator served from the pool's creation to the \
         rollout's completion: controller, agents and the simulated kubelets"
            .to_owned(),
    ];
    if tracker.lagged() > 0 {
        notes.push(format!(
            "the state follower fell behind by {} events and re-listed",
            tracker.lagged()
        ));
    }

    let result = json!({
        "nodes": n,
        "max_unavailable": args.max_unavailable,
        "stage_ms": args.stage_ms,
        "reboot_ms": args.reboot_ms,
        "ready_ms": args.ready_ms,
        "api_fault_rate": args.api_fault_rate,
        "fault_scope": args.fault_scope.as_str(),
        "kill_controller_every_s": args.kill_controller_every,
        "kill_agents_rate": args.kill_agents_rate,
        "seed": args.seed,
        "ok": failures.is_empty(),
        "failures": failures,
        "setup_s": round(setup_s, 2),
        "makespan_s": makespan_s.map(|m| round(m, 3)),
        "ideal_s": round(ideal_s, 3),
        "makespan_ratio": makespan_s.map(|m| round(m / ideal_s, 3)),
        "waves": waves,
        "api_requests_total": requests.len(),
        "api_writes_total": writes,
        "api_writes_per_node": round(writes as f64 / n as f64, 2),
        "api_requests_controller": controller_requests,
        "api_writes_controller_per_node": round(controller_writes as f64 / n as f64, 2),
        "api_faults_injected": counters.injected,
        "api_requests_by_verb": counters.by_verb,
        "api_requests_by_user_agent": counters.by_user_agent,
        "controller_peak_rss_mib": peak_rss.map(|m| round(m, 1)),
        "agent_peak_rss_mib": peak_rss.map(|m| round(m, 1)),
        "reconcile_count": histogram.count,
        "reconcile_mean_ms": (histogram.count > 0)
            .then(|| round(histogram.sum / histogram.count as f64 * 1000.0, 2)),
        "reconcile_p50_ms": ms(0.5),
        "reconcile_p99_ms": ms(0.99),
        "max_concurrent_unavailable": report.max_unavailable_seen,
        "unavailable_budget": budget,
        "reboots_per_node_max": reboots_max,
        "nodes_on_target": end.on_target,
        "nodes_left_cordoned": report.left_cordoned.len(),
        "reboot_slots_left": end.slots_held.len(),
        "invariant_violations": report.violations.len(),
        "violations": report.violations.iter().take(20).collect::<Vec<_>>(),
        "invariant_events_checked": report.events,
        "deploy_history": end.pool_status.get("deployHistory").cloned().unwrap_or(Value::Null),
        "deploy_history_limit": end.history_limit,
        "controller_kills": controller_kills,
        "agents_killed": agents_killed,
        "samples": samples.len(),
        "svg": svg_path.file_name().map(|f| f.to_string_lossy().into_owned()),
        "notes": notes,
    });

    let title = format!(
        "{n} nodes, maxUnavailable {} ({budget}): makespan {} s, ideal {:.2} s",
        args.max_unavailable,
        makespan_s.map_or("-".to_owned(), |m| format!("{m:.2}")),
        ideal_s
    );
    write(
        &svg_path,
        &svg::render(&title, &samples, n, budget),
        "the picture",
    )?;
    let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
    write(&args.json, &(text + "\n"), "the JSON result")?;

    eprintln!(
        "bootc-sim bench: makespan {} s (ideal {ideal_s:.2} s), {} requests, max unavailable {} of {budget}, {} violations; wrote {} and {}",
        makespan_s.map_or("-".to_owned(), |m| format!("{m:.2}")),
        requests.len(),
        report.max_unavailable_seen,
        report.violations.len(),
        args.json.display(),
        svg_path.display()
    );
    for f in &failures {
        eprintln!("bootc-sim bench: FAILED: {f}");
    }
    for v in report.violations.iter().take(5) {
        eprintln!("bootc-sim bench: violation: {v}");
    }

    drop(tracker);
    drop(invariants);
    match Arc::try_unwrap(cluster) {
        Ok(cluster) => cluster.stop().await,
        Err(_) => tracing::warn!("bench: the cluster is still shared; left to the runtime"),
    }
    emulator.stop().await;
    Ok(failures.is_empty())
}

fn write(path: &Path, text: &str, what: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write {what} to `{}`: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(digest: char, last: &str) -> Value {
        json!({"digest": format!("sha256:{}", digest.to_string().repeat(64)), "lastDeployed": last})
    }

    #[test]
    fn the_history_must_have_the_target_newest_ties_allowed() {
        let target = format!("sha256:{}", "2".repeat(64));
        let newest = [
            entry('2', "2026-11-22T11:18:15Z"),
            entry('1', "2026-11-22T11:18:05Z"),
        ];
        assert!(history_problems(&newest, 5, &target).is_empty());
        // The old image's last report in the target's last second sorts first by digest.
        let tie = [
            entry('1', "2026-11-22T11:18:15Z"),
            entry('2', "2026-11-22T11:18:15Z"),
        ];
        assert!(history_problems(&tie, 5, &target).is_empty());
        let older = [
            entry('1', "2026-11-22T11:18:16Z"),
            entry('2', "2026-11-22T11:18:15Z"),
        ];
        assert_eq!(
            history_problems(&older, 5, &target),
            vec!["deployHistory's newest entry is not the target"]
        );
        let missing = [entry('1', "2026-11-22T11:18:16Z")];
        assert_eq!(
            history_problems(&missing, 5, &target),
            vec!["deployHistory has no entry for the target"]
        );
        let unordered = [
            entry('1', "2026-11-22T11:18:05Z"),
            entry('2', "2026-11-22T11:18:15Z"),
        ];
        assert!(
            history_problems(&unordered, 5, &target)
                .contains(&"deployHistory is not newest lastDeployed first".to_owned())
        );
        let repeated = [
            entry('2', "2026-11-22T11:18:15Z"),
            entry('2', "2026-11-22T11:18:15Z"),
        ];
        assert!(
            history_problems(&repeated, 1, &target)
                .iter()
                .any(|p| p.contains("repeats") || p.contains("limit 1"))
        );
    }

    #[test]
    fn budgets() {
        assert_eq!(budget("5", 50).unwrap().0, 5);
        assert_eq!(budget("10%", 200).unwrap().0, 20);
        assert_eq!(budget("5%", 10).unwrap().0, 1);
        assert_eq!(budget("10%", 200).unwrap().1, json!("10%"));
        assert!(budget("0", 5).is_err());
        assert!(budget("x", 5).is_err());
        assert!(budget("0%", 5).is_err());
    }
}
