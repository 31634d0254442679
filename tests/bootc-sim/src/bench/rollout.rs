//! The rollout: the invariant checker and the state follower started, the controller
//! started, the pool applied, the faults and agent kills under way, and the counts
//! sampled until the rollout is complete or the deadline passes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::reconcile;
use host_sim::cluster::{InvariantReport, Invariants, PoolBudget};
use kube::Client;
use kube::api::{Api, PostParams};
use kube_emulator::RequestRecord;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::child::{Usage, own_cpu_s};
use super::disturb::agent_killer;
use super::gate::{self, AlertServer};
use super::setup::{POOL_LABEL, PoolPlan, Settings, World};
use super::{BenchArgs, FaultScope, secs};
use super::{chaos, controller, soak};
use crate::svg::Sample;
use crate::track::{Counts, RolloutTracker, STATES};

/// How often the picture's counts are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How long the invariant checker may take to catch up with the event stream.
const SETTLE: Duration = Duration::from_secs(30);

/// What the rollout phase measured.
pub(super) struct Measured {
    /// When the pool was applied.
    pub(super) t0: Instant,
    /// The counts over time, the last at the instant of completion.
    pub(super) samples: Vec<Sample>,
    /// When the rollout was seen complete; `None` past the deadline.
    pub(super) done_at: Option<Instant>,
    /// Every request the emulator served from the pool's creation to the end of sampling.
    pub(super) requests: Vec<RequestRecord>,
    /// Watches the emulator cut for falling behind, by resource, over the whole run.
    pub(super) watches_cut_behind: std::collections::BTreeMap<String, u64>,
    pub(super) controller_kills: u32,
    pub(super) agents_killed: u64,
    /// The invariant checker's report, once it caught up.
    pub(super) report: InvariantReport,
    /// The controller's metrics text.
    pub(super) metrics: String,
    /// Under `--controller-process`: the controller's own CPU time and peak memory.
    pub(super) controller_usage: Option<Usage>,
    /// This process's own CPU seconds (emulator, simulated kubelets and hosts, agents;
    /// the controller too without `--controller-process`) from the pool's creation to
    /// the end of sampling.
    pub(super) bench_cpu_s: Option<f64>,
    /// The state follower (kept until the report is written, for its lag count).
    pub(super) tracker: RolloutTracker,
    /// Each rollout's figures, the first one's first (one unless `--rollouts`).
    pub(super) rollouts: Vec<soak::Figures>,
    /// What the `--chaos` script did and found.
    pub(super) chaos: Option<chaos::Tally>,
    /// Under `--alert-gate`: the gate's Alertmanager (stopped), with what it answered.
    pub(super) gate: Option<AlertServer>,
    /// Kept following until the report is written.
    _invariants: Invariants,
}

/// Runs the rollout to completion or the deadline, then stops the faults, the killers
/// and the controller and lets the invariant checker catch up.
pub(super) async fn measure(
    args: &BenchArgs,
    settings: &Settings,
    world: &World,
) -> Result<Measured, String> {
    let handle = &world.handle;
    let invariants = match settings.pools.as_slice() {
        [_] => Invariants::follow(handle.clone(), settings.budget, BTreeSet::new()),
        pools => Invariants::follow_pools(handle.clone(), budgets(pools), BTreeSet::new()),
    };
    let tracker = RolloutTracker::follow(
        handle.clone(),
        &soak::followed(&settings.pools),
        &world.target_digest,
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let requests_before = handle.requests().len();

    let gate = AlertServer::start_if(settings.alert_firing).await?;
    let t0 = Instant::now();
    let cpu_before = own_cpu_s();
    let controller = controller::start(settings, world, stop_rx.clone());
    let before = soak::mark(&controller).await;
    let gate_url = gate.as_ref().map(|g| g.url.as_str());
    for pool in &settings.pools {
        let spec = pool_spec(&world.v2, settings, gate_url, pool);
        apply_pool(&world.client, &pool.name, spec).await?;
    }
    let (killer, cutter) = disturb(args, world, &stop_rx);
    let deadline = t0 + Duration::from_secs_f64(args.deadline_s);
    let ((mut samples, done_at), chaos) =
        sample_beside_script(args, world, &tracker, t0, deadline).await;
    if let Some(done) = done_at {
        sample_completion(&mut samples, &tracker, t0, done);
    }
    let first = (&tracker, t0, done_at);
    let rollouts = soak::all(
        args,
        (settings, world),
        &controller,
        first,
        &mut samples,
        before,
    );
    let rollouts = rollouts.await?;
    let bench_cpu_s = cpu_before
        .zip(own_cpu_s())
        .map(|(before, after)| after - before);
    let mut requests = handle.requests();
    let requests = requests.split_off(requests_before.min(requests.len()));

    // Stop the faults and the killers, then let the checker catch up.
    handle.clear_faults();
    let _ = stop_tx.send(true);
    let controller = controller.finish().await;
    let mut chaos = chaos;
    let agents_killed = wind_down((killer, cutter), &mut chaos, gate.as_ref()).await;
    let report = settled(&invariants).await;
    Ok(Measured {
        t0,
        samples,
        done_at,
        requests,
        watches_cut_behind: handle.watches_cut_behind(),
        controller_kills: controller.kills,
        agents_killed,
        report,
        metrics: controller.metrics,
        controller_usage: controller.usage,
        bench_cpu_s,
        tracker,
        rollouts,
        chaos,
        gate,
        _invariants: invariants,
    })
}

/// Waits for the agent killer and the watch cutter (told to stop), and stops the gate;
/// returns how many agents were killed.
async fn wind_down(
    (killer, cutter): (Option<JoinHandle<u64>>, Option<JoinHandle<u64>>),
    chaos: &mut Option<chaos::Tally>,
    gate: Option<&AlertServer>,
) -> u64 {
    let agents_killed = match killer {
        Some(k) => k.await.unwrap_or(0),
        None => 0,
    };
    if let (Some(tally), Some(cutter)) = (chaos, cutter) {
        tally.watch_cuts = cutter.await.unwrap_or(0);
    }
    if let Some(gate) = gate {
        gate.stop();
    }
    agents_killed
}

/// The injected faults switched on, the agent killer and (under `--chaos`) the watch
/// cutter started, as the flags ask.
fn disturb(
    args: &BenchArgs,
    world: &World,
    stop: &watch::Receiver<bool>,
) -> (Option<JoinHandle<u64>>, Option<JoinHandle<u64>>) {
    if args.api_fault_rate > 0.0 {
        world.handle.set_faults(fault_config(args));
    }
    let killer = (args.kill_agents_rate > 0.0).then(|| {
        tokio::spawn(agent_killer(
            world.cluster.clone(),
            args.kill_agents_rate,
            args.seed,
            stop.clone(),
        ))
    });
    let cutter = world
        .chaos
        .as_ref()
        .map(|_| tokio::spawn(chaos::cut_watches(world.handle.clone(), stop.clone())));
    (killer, cutter)
}

/// Samples the rollout while the `--chaos` script (if any) runs beside it; returns the
/// samples, the completion and what the script did.
async fn sample_beside_script(
    args: &BenchArgs,
    world: &World,
    tracker: &RolloutTracker,
    t0: Instant,
    deadline: Instant,
) -> ((Vec<Sample>, Option<Instant>), Option<chaos::Tally>) {
    let script_over = AtomicBool::new(world.chaos.is_none());
    let script = async {
        let tally = match &world.chaos {
            Some(images) => Some(chaos::run(world, images, tracker, args.seed).await),
            None => None,
        };
        script_over.store(true, Ordering::SeqCst);
        tally
    };
    tokio::join!(sample(tracker, t0, deadline, &script_over), script)
}

/// Each pool's nodes and budget, for the invariant checker.
fn budgets(pools: &[PoolPlan]) -> Vec<PoolBudget> {
    pools
        .iter()
        .map(|p| PoolBudget {
            name: p.name.clone(),
            nodes: p.nodes.iter().cloned().collect(),
            budget: p.budget,
        })
        .collect()
}

/// A pool's spec: its nodes (by their `pool` label), pinned to `v2`, `maxUnavailable`
/// as given, after the pool before it under `--ordered`; the canary under `--canary`,
/// and under `--alert-gate` a gate on `gate_url` asked every second, which fails closed.
pub(super) fn pool_spec(
    v2: &str,
    settings: &Settings,
    gate_url: Option<&str>,
    pool: &PoolPlan,
) -> Value {
    let mut spec = json!({
        "nodeSelector": {"matchLabels": {POOL_LABEL: pool.name}},
        "image": {"ref": v2},
        "rollout": {"maxUnavailable": settings.spec_budget, "postRebootDelaySeconds": 0},
    });
    if let Some(after) = &pool.after {
        spec["rollout"]["after"] = json!([after]);
    }
    if let Some((_, nodes)) = &settings.canary {
        spec["rollout"]["canary"] = json!({"nodes": nodes, "soakSeconds": settings.canary_soak});
    }
    if let Some(url) = gate_url {
        spec["health"] = json!({"alerts": {
            "url": url,
            "matchers": [gate::MATCHER],
            "failClosed": true,
            "intervalSeconds": 1,
        }});
    }
    spec
}

/// Creates the pool `name` with `spec`.
async fn apply_pool(client: &Client, name: &str, spec: Value) -> Result<(), String> {
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .map_err(|e| format!("the pool: {e}"))?;
    pool.spec
        .validate()
        .map_err(|e| format!("the pool's spec: {e}"))?;
    Api::<BootcNodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .map_err(|e| format!("cannot create the pool {name}: {e}"))?;
    Ok(())
}

/// The injected API faults: writes answered 500, 409 or 429 at `--api-fault-rate`.
fn fault_config(args: &BenchArgs) -> kube_emulator::FaultConfig {
    kube_emulator::FaultConfig {
        error_rate: args.api_fault_rate,
        error_codes: vec![500, 409, 429],
        writes_only: true,
        user_agent: (args.fault_scope == FaultScope::Controller)
            .then(|| reconcile::USER_AGENT.to_owned()),
        seed: args.seed,
        ..Default::default()
    }
}

/// Samples the counts every [`SAMPLE_EVERY`] until the rollout is done or `deadline`
/// passes (reporting progress every 10 s). Under `--chaos` a completion counts only
/// once the script is over (it re-arms the completion when it ends).
pub(super) async fn sample(
    tracker: &RolloutTracker,
    t0: Instant,
    deadline: Instant,
    script_over: &AtomicBool,
) -> (Vec<Sample>, Option<Instant>) {
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
        let over = script_over.load(Ordering::SeqCst);
        if let Some(done) = tracker.done_at().filter(|_| over) {
            break Some(done);
        }
        if now >= deadline {
            break None;
        }
        if now - last_report >= Duration::from_secs(10) {
            last_report = now;
            report_progress(now - t0, counts);
        }
    };
    (samples, done_at)
}

/// One last sample at the instant of completion, in time order.
pub(super) fn sample_completion(
    samples: &mut Vec<Sample>,
    tracker: &RolloutTracker,
    t0: Instant,
    done: Instant,
) {
    samples.push(Sample {
        t: secs(done - t0),
        counts: tracker.counts(),
    });
    samples.sort_by(|a, b| a.t.total_cmp(&b.t));
}

fn report_progress(elapsed: Duration, counts: Counts) {
    let states: Vec<String> = STATES
        .iter()
        .zip(counts.states)
        .map(|(s, c)| format!("{s} {c}"))
        .collect();
    eprintln!(
        "bootc-sim bench: {:.0} s: {}; unavailable {}",
        secs(elapsed),
        states.join(", "),
        counts.unavailable
    );
}

/// What the checker saw once it examined every change; a checker that did not get there
/// cannot vouch for the run, which is a violation.
async fn settled(invariants: &Invariants) -> InvariantReport {
    invariants.try_settled(SETTLE).await.unwrap_or_else(|e| {
        let mut seen = invariants.report();
        seen.violations.push(e.to_string());
        seen
    })
}
