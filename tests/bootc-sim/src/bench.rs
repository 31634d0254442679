//! `bootc-sim bench`: one rollout over N in-process nodes, measured.
//!
//! Everything runs in this process: the API emulator, a [`SimCluster`] (per node a
//! memory host, the kubelet's part and the real agent run loop, restarted as a
//! DaemonSet would), and the controller's reconciler with its own client (no retries,
//! the controller's User-Agent), as the binary runs it minus leader election. The nodes
//! boot v1; a pool pinned to v2 is applied; the run ends when every node runs v2, is
//! schedulable, Ready and holds no reboot slot, and the pool's status says so. Under
//! `--controller-process` the controller is the real binary in a child process instead,
//! so that its own CPU time and memory can be told from the simulator's. The simulated
//! agents and kubelets reach the emulator without sockets (`--sim-transport local`, the
//! default: a watch per agent would otherwise hold two file descriptors here), the
//! controller always over loopback HTTP.
//!
//! The phases, a module each:
//!
//! - `setup`: the flags checked, the emulator and the nodes up on v1;
//! - `rollout`: the pool applied, the controller started, faults and kills under way,
//!   the rollout sampled until done;
//! - `controller`: the controller in this process, or under `--controller-process` the
//!   real binary as a child process (`child`: started, measured from `/proc/<pid>` and
//!   stopped by its PID);
//! - `disturb`: the controller killed and restarted, agents killed at random;
//! - `chaos`: under `--chaos`, the registry, the watch cuts, the node replaced, the image
//!   edited and the pool deleted and created again, with the check that a deleted pool
//!   leaves no trace;
//! - `gate`: under `--alert-gate`, the loopback Alertmanager the pool's alert gate asks;
//! - `gated`: what a canary and an alert gate must show in the slot grants;
//! - `soak`: under `--pools` and `--rollouts`, each rollout's figures, the order of the
//!   pools named in `after`, and the rollouts after the first;
//! - `end_state`: what the store and the hosts show at the end;
//! - `report`: the numbers, the failures, the JSON result and the picture.
//!
//! [`SimCluster`]: host_sim::cluster::SimCluster

mod chaos;
mod child;
mod controller;
mod disturb;
mod end_state;
mod gate;
mod gated;
mod report;
mod rollout;
mod setup;
mod soak;

use std::path::PathBuf;
use std::time::Duration;

use crate::stats;

const REPO: &str = "registry.test/os";
const POOL: &str = "bench";

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
    /// Every disturbance at once: the controller killed every 5 s, 5% of the agents
    /// killed per second, 5% of every client's writes failed, watch streams cut, a
    /// registry outage, a node deleted and added again, the pool's image edited, and the
    /// pool deleted and created again, all mid-rollout (the flags above set the rates
    /// when given). The pool follows a tag in a real registry on loopback (Debian's
    /// docker-registry, with skopeo and umoci to push).
    #[arg(long)]
    pub chaos: bool,
    /// How the simulated agents and kubelets reach the API emulator: `local` hands each
    /// request straight to the emulator's router (no sockets, so 10,000 nodes' watches fit
    /// in the open-file limit), `http` sends it over loopback (a connection per watch).
    /// The controller always goes over HTTP.
    #[arg(long, value_enum, default_value_t = SimTransport::Local)]
    pub sim_transport: SimTransport,
    /// Run the real `bootc-pool-controller` binary (beside this one in
    /// `target/<profile>/`) as a child process instead of the in-process reconciler,
    /// and report its own CPU time and peak memory. Its output goes beside the JSON
    /// result, with `.controller.log`.
    #[arg(long)]
    pub controller_process: bool,
    /// Give the pool a canary (`spec.rollout.canary.nodes`): this many nodes ("2") or
    /// this share of them ("10%", rounded down, at least one) take the target first.
    #[arg(long)]
    pub canary: Option<String>,
    /// With --canary: the seconds the canary soaks before the rest of the pool goes on
    /// (`spec.rollout.canary.soakSeconds`).
    #[arg(long, default_value_t = 0, requires = "canary")]
    pub canary_soak: u32,
    /// Give the pool an alert gate (`spec.health.alerts`, `intervalSeconds: 1`): a tiny
    /// Alertmanager on loopback that this process serves, answering `[]`; no reboot slot
    /// may be granted before it first answered so.
    #[arg(long)]
    pub alert_gate: bool,
    /// With --alert-gate: for this many seconds from the pool's creation the gate's
    /// Alertmanager answers one firing `severity="critical"` alert, holding the rollout.
    #[arg(long, default_value_t = 0.0, requires = "alert_gate")]
    pub alert_firing_s: f64,
    /// Split the nodes between this many pools (`bench-001`, `bench-002`, …), in
    /// contiguous blocks of names, each selecting its nodes by a `pool` label and
    /// resolving --max-unavailable against its own size; the invariant is checked per
    /// pool.
    #[arg(long, default_value_t = 1)]
    pub pools: usize,
    /// With --pools: the first this many pools go one after another, each naming the one
    /// before it in `spec.rollout.after`; the others roll out side by side.
    #[arg(long, default_value_t = 0)]
    pub ordered: usize,
    /// Consecutive rollouts: each time one completes, every pool is moved to the next
    /// version at once. Reports each rollout's makespan, reconcile p99 and (under
    /// --controller-process) the controller's resident size after it.
    #[arg(long, default_value_t = 1)]
    pub rollouts: usize,
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

/// How the simulated agents and kubelets reach the API emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimTransport {
    /// Straight to the emulator's router, in this process: no sockets.
    Local,
    /// Over loopback HTTP, as the controller does.
    Http,
}

impl SimTransport {
    fn as_str(self) -> &'static str {
        match self {
            SimTransport::Local => "local",
            SimTransport::Http => "http",
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

pub(crate) fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Runs the benchmark; Ok(false) when an invariant was violated or the rollout did not
/// complete.
pub async fn run(mut args: BenchArgs) -> Result<bool, String> {
    if args.chaos {
        args.kill_controller_every.get_or_insert(5.0);
        if args.kill_agents_rate == 0.0 {
            args.kill_agents_rate = 0.05;
        }
        if args.api_fault_rate == 0.0 {
            args.api_fault_rate = 0.05;
        }
        args.fault_scope = FaultScope::All;
    }
    let settings = setup::Settings::check(&args)?;
    let world = setup::World::start(&args, &settings.pools).await?;
    let measured = rollout::measure(&args, &settings, &world).await?;
    let last = world.next.last().map_or(&world.target_digest, |(_, d)| d);
    let end = end_state::end_state(&world.handle, &world.cluster, last, &settings.pools);
    let peak_rss = stats::self_status_mib("VmHWM");
    let ok = report::Run {
        args: &args,
        settings: &settings,
        setup_s: world.setup_s,
        measured: &measured,
        end: &end,
        peak_rss,
    }
    .finish()?;
    drop(measured);
    world.stop().await;
    Ok(ok)
}

#[cfg(test)]
mod tests;
