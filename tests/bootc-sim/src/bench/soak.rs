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

/// The controller's reconcile histogram now (empty when it cannot be read).
pub(super) async fn reconciles(controller: &Running) -> Histogram {
    let (_, metrics) = controller.probe().await;
    metrics.map_or_else(Histogram::default, |m| parse_histogram(&m, RECONCILE))
}

/// What a rollout started at `start` and seen complete at `done` came to, with the
/// controller's reconcile histogram as it was at `start`; returns the histogram now too.
pub(super) async fn figures(
    controller: &Running,
    pools: &[PoolPlan],
    progress: &[PoolProgress],
    (start, done): (Instant, Option<Instant>),
    before: &Histogram,
) -> (Figures, Histogram) {
    let (rss, metrics) = controller.probe().await;
    let now = metrics.map_or_else(Histogram::default, |m| parse_histogram(&m, RECONCILE));
    let during = now.since(before);
    let figures = Figures {
        makespan_s: done.map(|d| secs(d - start)),
        reconciles: during.count,
        reconcile_p99_ms: during.quantile(0.99).map(|s| s * 1000.0),
        controller_rss_mib: rss,
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
    before: Histogram,
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
    mut before: Histogram,
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
            "bootc-sim bench: rollout {} of {}: makespan {} s, controller RSS {} MiB",
            k + 2,
            args.rollouts,
            crate::stats::or_dash(figures.makespan_s, 2, "-"),
            crate::stats::or_dash(figures.controller_rss_mib, 1, "-"),
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
    json!({
        "rollouts": rollouts.len(),
        "controller_rss_mib_early": early.map(|m| round(m, 1)),
        "controller_rss_mib_last": last.map(|m| round(m, 1)),
        "controller_rss_growth": growth,
        "reconcile_p99_ms_first_five_max": p99(&rollouts[..five]).map(|p| round(p, 2)),
        "reconcile_p99_ms_last_five_max": p99(&rollouts[rollouts.len() - five..]).map(|p| round(p, 2)),
    })
}
