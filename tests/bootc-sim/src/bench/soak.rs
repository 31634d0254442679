//! `--pools` and `--rollouts`: what each rollout came to (its makespan, the reconciles
//! it took, the controller's resident size after it), whether the pools ordered by
//! `after` went one after another, and the rollouts after the first, each started as
//! soon as the one before completed.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::child::own_cpu_s;
use super::controller::Running;
use super::rollout::{sample, sample_completion};
use super::setup::{PoolPlan, Settings, World};
use super::{BenchArgs, round, secs};
use crate::stats::{Histogram, parse_histogram};
use crate::svg::Sample;
use crate::track::{PoolProgress, RolloutTracker};

/// The controller's reconcile histogram.
const RECONCILE: &str = "bootc_pool_reconcile_duration_seconds";

/// What one rollout came to.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Figures {
    /// From the first pool's change to the rollout seen complete; `None` past the
    /// deadline.
    pub(super) makespan_s: Option<f64>,
    /// The reconciles during the rollout.
    pub(super) reconciles: u64,
    /// Their 99th percentile, from the histogram's buckets.
    pub(super) reconcile_p99_ms: Option<f64>,
    /// Under `--controller-process`: the controller's resident size once it was over.
    pub(super) controller_rss_mib: Option<f64>,
    /// Under `--controller-process`: the controller's CPU time during the rollout, per
    /// node (`None` when it was restarted meanwhile, and for the first rollout, which
    /// starts before the controller process).
    pub(super) controller_cpu_ms_per_update: Option<f64>,
    /// This process's CPU time during the rollout (emulator, kubelets, agents), per node.
    pub(super) bench_cpu_ms_per_update: Option<f64>,
    /// Pools ordered by `after` that did not wait for the pool before them.
    pub(super) order_problems: Vec<String>,
}

impl Figures {
    pub(super) fn json(&self) -> Value {
        json!({
            "makespan_s": self.makespan_s.map(|m| round(m, 3)),
            "reconciles": self.reconciles,
            "reconcile_p99_ms": self.reconcile_p99_ms.map(|p| round(p, 2)),
            "controller_rss_mib": self.controller_rss_mib.map(|m| round(m, 1)),
            "controller_cpu_ms_per_update": self.controller_cpu_ms_per_update.map(|c| round(c, 3)),
            "bench_cpu_ms_per_update": self.bench_cpu_ms_per_update.map(|c| round(c, 3)),
            "order_problems": self.order_problems,
        })
    }
}

/// Each pool and its nodes, as the follower takes them.
pub(super) fn followed(pools: &[PoolPlan]) -> Vec<(&str, &[String])> {
    pools
        .iter()
        .map(|p| (p.name.as_str(), p.nodes.as_slice()))
        .collect()
}

/// Pools ordered by `after` that were granted a reboot slot before the store showed the
/// pool they wait for complete (or were never seen granted one).
pub(super) fn order_problems(pools: &[PoolPlan], progress: &[PoolProgress]) -> Vec<String> {
    let of = |name: &str| progress.iter().find(|p| p.name == name);
    let mut problems = Vec::new();
    for pool in pools {
        let Some(before) = &pool.after else {
            continue;
        };
        let done = of(before).and_then(|p| p.done_rv);
        let granted = of(&pool.name).and_then(|p| p.first_grant_rv);
        match (done, granted) {
            (Some(done), Some(granted)) if granted > done => {}
            (done, granted) => problems.push(format!(
                "pool {} granted a slot at rv {} before {before} was complete (rv {})",
                pool.name,
                granted.map_or("-".to_owned(), |g| g.to_string()),
                done.map_or("-".to_owned(), |d| d.to_string()),
            )),
        }
    }
    problems
}

/// Where a rollout starts from: the controller's reconcile histogram (empty when it
/// cannot be read) and the CPU time of both processes so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Mark {
    histogram: Histogram,
    controller_cpu: Option<(u32, f64)>,
    bench_cpu_s: Option<f64>,
}

/// The mark now.
pub(super) async fn mark(controller: &Running) -> Mark {
    mark_of(controller.probe().await)
}

fn mark_of(probe: super::child::Probe) -> Mark {
    Mark {
        histogram: probe
            .metrics
            .map_or_else(Histogram::default, |m| parse_histogram(&m, RECONCILE)),
        controller_cpu: probe.cpu,
        bench_cpu_s: own_cpu_s(),
    }
}

/// A process's CPU seconds, read with what tells the process apart (its PID).
type Reading<T> = Option<(T, f64)>;

/// CPU milliseconds per node between two readings; `None` if either is missing or the
/// controller is another process than at the start.
pub(super) fn per_update<T: PartialEq>(
    (before, after): (Reading<T>, Reading<T>),
    nodes: usize,
) -> Option<f64> {
    let ((was, from), (is, to)) = before.zip(after)?;
    (was == is && nodes > 0).then(|| (to - from) * 1000.0 / nodes as f64)
}

/// What a rollout started at `start` (the mark `before`) and seen complete at `done`
/// came to; returns the mark now too.
pub(super) async fn figures(
    controller: &Running,
    pools: &[PoolPlan],
    progress: &[PoolProgress],
    (start, done): (Instant, Option<Instant>),
    before: &Mark,
) -> (Figures, Mark) {
    let probe = controller.probe().await;
    let rss = probe.rss_mib;
    let now = mark_of(probe);
    let during = now.histogram.since(&before.histogram);
    let nodes = pools.iter().map(|p| p.nodes.len()).sum();
    let bench = (
        before.bench_cpu_s.map(|c| ((), c)),
        now.bench_cpu_s.map(|c| ((), c)),
    );
    let figures = Figures {
        makespan_s: done.map(|d| secs(d - start)),
        reconciles: during.count,
        reconcile_p99_ms: during.quantile(0.99).map(|s| s * 1000.0),
        controller_rss_mib: rss,
        controller_cpu_ms_per_update: per_update(
            (before.controller_cpu, now.controller_cpu),
            nodes,
        ),
        bench_cpu_ms_per_update: per_update(bench, nodes),
        order_problems: order_problems(pools, progress),
    };
    (figures, now)
}

/// Every rollout's figures: the first one's (followed by `first`: its tracker, start
/// and completion), then, if it completed, those of the ones after it ([`more`]).
pub(super) async fn all(
    args: &BenchArgs,
    (settings, world): (&Settings, &World),
    controller: &Running,
    (tracker, t0, done): (&RolloutTracker, Instant, Option<Instant>),
    samples: &mut Vec<Sample>,
    before: Mark,
) -> Result<Vec<Figures>, String> {
    let progress = tracker.pools();
    let (first, before) =
        figures(controller, &settings.pools, &progress, (t0, done), &before).await;
    let mut out = vec![first];
    if done.is_some() {
        let at = (t0, samples);
        out.extend(more(args, (settings, world), controller, at, before).await?);
    }
    Ok(out)
}

/// The rollouts after the first: every pool moved to the next version (in pool order,
/// so that a pool never sees the one it waits for still done with the old one), then
/// followed to completion or `--deadline-s`. Their samples are added to `samples` (on
/// the clock of `t0`); stops at the first that does not complete.
pub(super) async fn more(
    args: &BenchArgs,
    (settings, world): (&Settings, &World),
    controller: &Running,
    (t0, samples): (Instant, &mut Vec<Sample>),
    mut before: Mark,
) -> Result<Vec<Figures>, String> {
    let api: Api<BootcNodePool> = Api::all(world.client.clone());
    let mut out = Vec::new();
    for (k, (pin, digest)) in world.next.iter().enumerate() {
        let tracker =
            RolloutTracker::follow(world.handle.clone(), &followed(&settings.pools), digest);
        let start = Instant::now();
        let edit = json!({"spec": {"image": {"ref": pin}}});
        for pool in &settings.pools {
            api.patch(&pool.name, &PatchParams::default(), &Patch::Merge(&edit))
                .await
                .map_err(|e| format!("rollout {}: cannot move pool {}: {e}", k + 2, pool.name))?;
        }
        let deadline = start + Duration::from_secs_f64(args.deadline_s);
        let (mut these, done) = sample(&tracker, start, deadline, &AtomicBool::new(true)).await;
        if let Some(done) = done {
            sample_completion(&mut these, &tracker, start, done);
        }
        let offset = secs(start - t0);
        samples.extend(these.into_iter().map(|mut s| {
            s.t += offset;
            s
        }));
        let (figures, now) = figures(
            controller,
            &settings.pools,
            &tracker.pools(),
            (start, done),
            &before,
        )
        .await;
        eprintln!(
            "bootc-sim bench: rollout {} of {}: makespan {} s, controller RSS {} MiB, \
             CPU ms per update: controller {}, bench {}",
            k + 2,
            args.rollouts,
            crate::stats::or_dash(figures.makespan_s, 2, "-"),
            crate::stats::or_dash(figures.controller_rss_mib, 1, "-"),
            crate::stats::or_dash(figures.controller_cpu_ms_per_update, 2, "-"),
            crate::stats::or_dash(figures.bench_cpu_ms_per_update, 2, "-"),
        );
        before = now;
        out.push(figures);
        if done.is_none() {
            break;
        }
    }
    Ok(out)
}

/// What the soak shows: the controller's resident size after the last rollout against
/// after the fifth (after the first, with five or fewer), and the largest reconcile p99
/// of the last five against the first five.
pub(super) fn summary(rollouts: &[Figures]) -> Value {
    let rss = |i: usize| rollouts.get(i).and_then(|f| f.controller_rss_mib);
    let early = rss(if rollouts.len() > 5 { 4 } else { 0 });
    let last = rollouts.last().and_then(|f| f.controller_rss_mib);
    let growth = early.zip(last).map(|(e, l)| round(l / e - 1.0, 3));
    let p99 = |figures: &[Figures]| {
        figures
            .iter()
            .filter_map(|f| f.reconcile_p99_ms)
            .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p))))
    };
    let five = rollouts.len().min(5);
    let mean = |figures: &[Figures], of: fn(&Figures) -> Option<f64>| {
        let values: Vec<f64> = figures.iter().filter_map(of).collect();
        (!values.is_empty()).then(|| round(values.iter().sum::<f64>() / values.len() as f64, 3))
    };
    let (first, last_five) = (&rollouts[..five], &rollouts[rollouts.len() - five..]);
    let controller_cpu = |f: &Figures| f.controller_cpu_ms_per_update;
    let bench_cpu = |f: &Figures| f.bench_cpu_ms_per_update;
    json!({
        "rollouts": rollouts.len(),
        "controller_rss_mib_early": early.map(|m| round(m, 1)),
        "controller_rss_mib_last": last.map(|m| round(m, 1)),
        "controller_rss_growth": growth,
        "reconcile_p99_ms_first_five_max": p99(first).map(|p| round(p, 2)),
        "reconcile_p99_ms_last_five_max": p99(last_five).map(|p| round(p, 2)),
        "controller_cpu_ms_per_update_first_five": mean(first, controller_cpu),
        "controller_cpu_ms_per_update_last_five": mean(last_five, controller_cpu),
        "bench_cpu_ms_per_update_first_five": mean(first, bench_cpu),
        "bench_cpu_ms_per_update_last_five": mean(last_five, bench_cpu),
    })
}
