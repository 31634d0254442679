//! `bootc-sim demo`: a rollout as a user meets it, on this machine.
//!
//! The API emulator (in this process; its kubeconfig is written to the work directory
//! and printed), Debian's `docker-registry` on loopback, N nodes booted with real
//! systemd under `systemd-nspawn` (the bootc stand-in as `bootc`, seeded on v1), the
//! real `bootc-pool-controller` binary as a child process, and one real
//! `bootc-node-agent` process per node (restarted across reboots as a DaemonSet would).
//! v1 is pushed to `os:stable`, a pool following that tag is applied and converges; v2
//! is pushed to the same tag and the rollout is shown live. Everything started is
//! stopped at the end, on failure and on Ctrl-C: by handle (nodes, agents, registry) or
//! by the PID of the child this process spawned (the controller).
//!
//! The phases, a module each:
//!
//! - `api`: the emulator, its kubeconfig, the CRDs and the controller's namespace;
//! - `registry`: the registry on loopback, v1 and then v2 pushed to `os:stable`;
//! - `nodes`: the nodes seeded on v1 and booted;
//! - `processes`: the controller and agent processes, and tearing everything down;
//! - `watch` and `display`: the live view until a phase is done, and the summary.

mod api;
mod display;
mod nodes;
mod processes;
mod registry;
mod watch;

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::time::Instant;

use display::{Display, print_summary};
use nodes::NodeSetup;
use processes::{Parts, controller_binary, start_controller_and_agents};
use watch::Watch;

const POOL: &str = "demo";
const GROUP: &str = "node.bootc.dev";
const KERNEL_LABEL: &str = "dev.bootc-pool.sim.kernel";
const VERSION_LABEL: &str = "org.opencontainers.image.version";
/// How often the display is refreshed.
const REFRESH: Duration = Duration::from_millis(200);
/// Where the controller keeps its Lease, as `deploy/install.yaml` installs it (its Role
/// for Leases is there).
const LEASE_NAMESPACE: &str = "bootc-system";

/// `bootc-sim demo` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// The pool's maxUnavailable.
    #[arg(long, default_value_t = 3)]
    pub max_unavailable: u32,
    /// After the rollout, keep everything running until Ctrl-C.
    #[arg(long)]
    pub keep_running: bool,
    /// Give up when a phase (boot, converge, roll out) takes longer than this (seconds).
    #[arg(long, default_value_t = 150)]
    pub phase_timeout_s: u64,
}

/// Runs the demo; Ok(true) when the rollout completed.
pub async fn run(args: DemoArgs) -> Result<bool, String> {
    if args.nodes == 0 || args.max_unavailable == 0 {
        return Err("--nodes and --max-unavailable must be at least 1".to_owned());
    }
    host_sim::image::require_root().map_err(|e| {
        format!(
            "{e}\nthe demo boots its nodes with systemd-nspawn and needs root (sudo); the \
             benchmark (`bootc-sim bench`) does not"
        )
    })?;
    // Not under /tmp: the nodes mount a tmpfs there.
    let work = tempfile::Builder::new()
        .prefix("bootc-sim-demo-")
        .tempdir_in("/var/tmp")
        .map_err(|e| format!("cannot create a work directory in /var/tmp: {e}"))?;
    let mut parts = Parts::default();
    let started = Instant::now();
    let result = tokio::select! {
        result = demo(&args, &mut parts, started, work.path()) => result,
        signal = tokio::signal::ctrl_c() => match signal {
            Ok(()) => Err("interrupted (Ctrl-C)".to_owned()),
            Err(e) => Err(format!("cannot wait for Ctrl-C: {e}")),
        },
    };
    parts.teardown().await;
    println!("torn down after {:.0} s", started.elapsed().as_secs_f64());
    if result.is_err() {
        // The logs explain the failure: kept.
        let kept = work.keep();
        eprintln!("bootc-sim demo: logs kept in {}", kept.display());
    }
    result
}

async fn demo(
    args: &DemoArgs,
    parts: &mut Parts,
    started: Instant,
    dir: &Path,
) -> Result<bool, String> {
    let phase_timeout = Duration::from_secs(args.phase_timeout_s);
    let controller_bin = controller_binary()?;
    // Checked here: `DaemonSet::start` panics without it.
    host_sim::daemonset::agent_binary().map_err(|e| e.to_string())?;
    let standin = host_sim::standin_binary().map_err(|e| e.to_string())?;
    step(started, &format!("work directory {}", dir.display()));

    let api = api::start(parts, started, dir).await?;
    let (host, v1) = registry::start_with_v1(parts, started)?;
    NodeSetup {
        count: args.nodes,
        dir,
        registry_host: &host,
        v1: &v1,
        client: &api.client,
        standin: &standin,
        boot_timeout: phase_timeout,
    }
    .boot(parts, started)
    .await?;
    start_controller_and_agents(parts, started, &controller_bin, &api.kubeconfig, &host, dir)?;

    // The pool, converged on v1.
    apply_pool(&api.client, &host, args.max_unavailable, started).await?;
    let mut watch = Watch {
        handle: &api.handle,
        display: Display::new(args.max_unavailable as usize, started),
        nodes: args.nodes,
    };
    watch
        .until(parts, &v1, phase_timeout, "converging on v1")
        .await?;
    step(started, "converged on v1");

    // v2 on the same tag.
    let v2 = registry::push_v2(parts, started)?;
    let rollout_started = Instant::now();
    watch
        .until(
            parts,
            &v2,
            phase_timeout + Duration::from_secs(30),
            "rolling out v2",
        )
        .await?;
    step(
        started,
        &format!(
            "rolled out v2 to {} nodes in {:.0} s (from the push)",
            args.nodes,
            rollout_started.elapsed().as_secs_f64()
        ),
    );
    print_summary(&api.handle, watch.display.max_slots);

    if args.keep_running {
        println!(
            "\nstill running; kubectl --kubeconfig {} get bootcnodepools,bootcnodes\n\
             press Ctrl-C to tear everything down",
            api.kubeconfig.display()
        );
        std::future::pending::<()>().await;
    }
    Ok(true)
}

/// Applies the pool following `host/os:stable`, every node, `max_unavailable`.
async fn apply_pool(
    client: &Client,
    host: &str,
    max_unavailable: u32,
    started: Instant,
) -> Result<(), String> {
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
            "image": {"ref": format!("{host}/os:stable"), "resolveIntervalSeconds": 30},
            "rollout": {"maxUnavailable": max_unavailable},
        }
    }))
    .map_err(|e| format!("the pool: {e}"))?;
    Api::<BootcNodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .map_err(|e| format!("cannot create the pool: {e}"))?;
    step(
        started,
        &format!(
            "pool `{POOL}` applied: follows {host}/os:stable, maxUnavailable {max_unavailable}"
        ),
    );
    Ok(())
}

fn step(started: Instant, text: &str) {
    println!("[{:>5.1}s] {text}", started.elapsed().as_secs_f64());
    let _ = std::io::stdout().flush();
}

#[cfg(test)]
mod tests;
