//! `bootc-sim`: the local cluster harness.
//!
//! - `bootc-sim bench`: the rollout benchmark. Everything runs in this process: the API
//!   emulator, N in-process nodes (a memory host, the kubelet's part and the real agent
//!   run loop each, from `host_sim::cluster`), and the controller's reconciler. It
//!   applies a pool, waits until every node runs the target, checks the rollout's
//!   invariants over the emulator's event stream and writes one JSON object and an SVG
//!   picture of the rollout.
//! - `bootc-sim demo`: the rollout as a user meets it. The emulator, Debian's
//!   `docker-registry` on loopback, N nspawn nodes (real systemd, the bootc stand-in),
//!   the real `bootc-pool-controller` and `bootc-node-agent` binaries as child processes;
//!   v1 then v2 pushed to `:stable` and the rollout shown live. Needs root.
//!
//! The modules: `bench` and `demo` (one each, split by phase), `track` (each node's
//! rollout state, followed from the emulator's change stream), `svg` (the benchmark's
//! picture) and `stats` (a seeded random source, the process's memory, histograms).

// The JSON result is one large `json!`.
#![recursion_limit = "256"]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The simulation allocates and frees JSON trees at every API request of every
/// simulated node; mimalloc does that work with less CPU than glibc's allocator, which
/// leaves more of the machine to the controller the bench measures. It is built without
/// transparent huge pages (`no_thp`): with them, memory it gives back and takes again
/// costs a fault that clears a whole 2 MiB page. The controller and the agent keep the
/// system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod demo;
mod scaling;
mod stats;
mod svg;
mod track;

/// The local cluster harness of the bootc node-pool updater.
#[derive(Debug, Parser)]
#[command(name = "bootc-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Measure a rollout over N in-process nodes and check its invariants.
    Bench(bench::BenchArgs),
    /// Show a rollout over N nspawn nodes with the real binaries (needs root).
    Demo(demo::DemoArgs),
    /// Tabulate and plot bench runs (their `--json` files) against node count.
    Scaling(scaling::ScalingArgs),
}

fn init_logs(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bootc-sim: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        SimCommand::Bench(args) => {
            // The host simulation warns about every failed write; with injected faults
            // that is most of the output.
            init_logs("error");
            runtime.block_on(bench::run(args))
        }
        SimCommand::Demo(args) => {
            init_logs("warn");
            runtime.block_on(demo::run(args))
        }
        SimCommand::Scaling(args) => scaling::run(&args),
    };
    // Whatever a failed run left behind (aborted tasks) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("bootc-sim: {e}");
            ExitCode::from(2)
        }
    }
}
