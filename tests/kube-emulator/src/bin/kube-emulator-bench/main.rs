//! `kube-emulator-bench`: measures GET and LIST throughput and watch fan-out of an in-process emulator, printing one JSON object.
//!
//! Map: the phases are `throughput` (GET and LIST), `fanout` (many watchers of one object) and `own` (each watcher
//! its own object); `measure` holds what they share (clients, timing, percentiles, process limits and memory).

mod fanout;
mod measure;
mod own;
mod throughput;

use std::error::Error;
use std::process::ExitCode;

use clap::Parser;
use kube_emulator::{Emulator, EmulatorOptions};
use serde_json::{Value, json};

use measure::{client, nofile_limits};

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

    /// Events buffered per watcher before the emulator disconnects it (`EmulatorOptions::fanout`).
    #[arg(long, default_value_t = EmulatorOptions::default().fanout)]
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

/// Runs all phases; the JSON report and whether the fan-out was complete.
async fn run(args: &Args) -> Result<(Value, bool), BoxError> {
    let options = EmulatorOptions {
        fanout: args.fanout_buffer,
        ..EmulatorOptions::default()
    };
    let emulator = Emulator::start_with(options).await?;
    let admin = client(&emulator)?;
    let mut report = serde_json::Map::new();
    report.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(0, |n| n.get())),
    );
    // 1. GET throughput; 2. LIST throughput.
    report.extend(throughput::get(args, &emulator, &admin).await?);
    report.extend(throughput::list(args, &emulator, &admin).await?);
    // 3. Watch fan-out (and 4. the memory after it).
    let (fields, complete) = fanout::run(args, &emulator, &admin).await?;
    report.extend(fields);
    // 5. Selective watches: one object per watcher, many writers.
    let own_complete = if args.own_watchers > 0 {
        let (fields, own_complete) = own::run(args, &emulator).await?;
        report.extend(fields);
        own_complete
    } else {
        true
    };
    emulator.stop().await;
    Ok((Value::Object(report), complete && own_complete))
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
