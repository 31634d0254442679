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
mod health;
mod install;
mod kubelet;
mod nodes;
mod processes;
mod real;
mod registry;
mod watch;

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;

use display::print_summary;
use nodes::NodeSetup;
pub(crate) use processes::controller_binary;
use processes::{Launch, Parts, start_controller_and_agents};
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
    /// Number of nodes [default: 10, or 3 with --real-bootc].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// The pool's maxUnavailable [default: 3, or 1 with --real-bootc].
    #[arg(long)]
    pub max_unavailable: Option<u32>,
    /// Nodes running the real bootc 1.16.9 and ostree (from the archive in
    /// $BOOTC_REAL_ARCHIVE_DIR, or shared/tools/real-bootc beside the checkout) instead
    /// of the stand-in; the agents run in pods of their own.
    #[arg(long)]
    pub real_bootc: bool,
    /// With --real-bootc: no DaemonSet; the agent is in the node images with its unit
    /// from systemd/, started by each node's own systemd (its kubeconfig provisioned in
    /// the node's /etc).
    #[arg(long, requires = "real_bootc")]
    pub host_service: bool,
    /// With --real-bootc: the demo starts neither the controller nor the agents, and
    /// plays the kubelets instead: the install's Deployment and DaemonSet, once in the
    /// API, run from the image they name, with podman, as their pod specs say. The API
    /// serves TLS and starts empty (the install brings the CRDs and the namespace). Install
    /// by hand as docs/install.md says (the demo prints the steps and waits), or with
    /// --install.
    #[arg(long, requires = "real_bootc", conflicts_with = "host_service")]
    pub kubelet: bool,
    /// With --kubelet: install as docs/install.md says (scripts/image builds and pushes
    /// the image to the demo's registry, an overlay points the install at it by digest,
    /// kubectl apply -k).
    #[arg(long, requires = "kubelet")]
    pub install: bool,
    /// On the way, reboot one staged node that holds no slot, as a person at its console
    /// would: it must come back on the old image and then reboot exactly once more.
    #[arg(long)]
    pub unapproved_reboot: bool,
    /// After the rollout, point the pool at v1 by digest and roll every node back (with
    /// --real-bootc, also checks that the rollback fetched no blob).
    #[arg(long)]
    pub rollback: bool,
    /// Give the pool a canary of this many nodes: each new image goes to them first, and
    /// the rest of the pool waits until they have run it for --canary-soak seconds (the
    /// live view's header shows the canary's phase). Off by default.
    #[arg(long)]
    pub canary: Option<u32>,
    /// With --canary: the seconds the canary soaks.
    #[arg(long, default_value_t = 10, requires = "canary")]
    pub canary_soak: u32,
    /// After the rollout, keep everything running until Ctrl-C.
    #[arg(long)]
    pub keep_running: bool,
    /// Give up when a phase (boot, converge, roll out) takes longer than this (seconds).
    #[arg(long, default_value_t = 150)]
    pub phase_timeout_s: u64,
}

/// Runs the demo; Ok(true) when the rollout completed.
pub async fn run(mut args: DemoArgs) -> Result<bool, String> {
    let (nodes, budget) = if args.real_bootc { (3, 1) } else { (10, 3) };
    args.nodes = Some(args.nodes.unwrap_or(nodes));
    args.max_unavailable = Some(args.max_unavailable.unwrap_or(budget));
    if args.nodes == Some(0) || args.max_unavailable == Some(0) || args.canary == Some(0) {
        return Err("--nodes, --max-unavailable and --canary must be at least 1".to_owned());
    }
    if args.canary_soak > 604_800 {
        return Err("--canary-soak must be at most 604800 seconds (a week)".to_owned());
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
    if result.is_err() {
        real::keep_journals(&parts.real_nodes);
    }
    parts.teardown().await;
    println!("torn down after {:.0} s", started.elapsed().as_secs_f64());
    if result.is_err() {
        // The logs explain the failure: kept.
        let kept = work.keep();
        eprintln!(
            "bootc-sim demo: logs kept in {} (the pods' under pods/, each node's console and \
             journal under nodes/)",
            kept.display()
        );
    }
    result
}

/// What the demo set up before the pool: the API, the pool's image (a tag) and v1's
/// digest.
struct Setup {
    api: api::ApiServer,
    image_ref: String,
    v1: String,
}

async fn demo(
    args: &DemoArgs,
    parts: &mut Parts,
    started: Instant,
    dir: &Path,
) -> Result<bool, String> {
    let phase_timeout = Duration::from_secs(args.phase_timeout_s);
    let nodes = args.nodes.unwrap_or(1);
    let max_unavailable = args.max_unavailable.unwrap_or(1);
    let setup = set_up(args, parts, started, dir).await?;
    let api = &setup.api;

    let degraded = health::DegradedWatch::start(&api.handle);
    let mut watch = Watch::new(&api.handle, max_unavailable as usize, nodes, started);
    // The pool, converged on v1.
    let canary = args.canary.map(|n| (n, args.canary_soak));
    apply_pool(
        &api.client,
        &setup.image_ref,
        max_unavailable,
        canary,
        started,
    )
    .await?;
    watch
        .until(parts, &setup.v1, phase_timeout, "converging on v1")
        .await?;
    step(started, "converged on v1");

    // v2 on the same tag.
    let v2 = if args.real_bootc {
        real::push_v2(parts, started)?
    } else {
        registry::push_v2(parts, started)?
    };
    let rollout_started = Instant::now();
    let rebooted = if args.unapproved_reboot {
        Some(real::unapproved_reboot(parts, &api.handle, started, phase_timeout).await?)
    } else {
        None
    };
    let timeout = phase_timeout + Duration::from_secs(30);
    watch.until(parts, &v2, timeout, "rolling out v2").await?;
    step(
        started,
        &format!(
            "rolled out v2 to {nodes} nodes in {:.0} s (from the push)",
            rollout_started.elapsed().as_secs_f64()
        ),
    );
    if let Some((name, boots)) = &rebooted {
        real::check_one_approved_reboot(parts, name, *boots)?;
    }
    degraded.check()?;
    step(started, "no node or pool reported Degraded");
    if args.kubelet {
        step(started, &kubelet::container_list());
    }
    print_summary(&api.handle, watch.max_slots().await?);

    if args.rollback {
        roll_back(parts, &setup, &mut watch, started, phase_timeout).await?;
    }
    degraded.check()?;

    if args.keep_running {
        println!(
            "\nstill running; kubectl --kubeconfig {} get bootcnodepools,bootcnodes\n{}\n\
             press Ctrl-C to tear everything down",
            api.kubeconfig.display(),
            plugin_hint(&api.kubeconfig)
        );
        std::future::pending::<()>().await;
    }
    Ok(true)
}

/// How to use `kubectl bootc` against the demo: the plugin built beside this executable
/// (kubectl finds `kubectl-bootc` on the PATH), or how to build it.
fn plugin_hint(kubeconfig: &std::path::Path) -> String {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf));
    match dir.filter(|d| d.join("kubectl-bootc").is_file()) {
        Some(dir) => format!(
            "the plugin: PATH={}:$PATH kubectl --kubeconfig {} bootc status (also: bootc why demo, bootc history demo)",
            dir.display(),
            kubeconfig.display()
        ),
        None => "the plugin: build it with `cargo build -p kubectl-bootc` and put target/debug on the PATH".to_owned(),
    }
}

/// The API, the registry with v1, the nodes (real or stand-in), the controller and (but
/// for host-service nodes) the agents.
async fn set_up(
    args: &DemoArgs,
    parts: &mut Parts,
    started: Instant,
    dir: &Path,
) -> Result<Setup, String> {
    let phase_timeout = Duration::from_secs(args.phase_timeout_s);
    let nodes = args.nodes.unwrap_or(1);
    let controller_bin = controller_binary()?;
    // Checked here: `DaemonSet::start` panics without it.
    host_sim::daemonset::agent_binary().map_err(|e| e.to_string())?;
    step(started, &format!("work directory {}", dir.display()));

    let api = api::start(parts, started, dir, args.kubelet).await?;
    let (image_ref, registry_host, v1) = if args.real_bootc {
        let (tag, v1) = real::start_with_v1(parts, started, dir, args.host_service).await?;
        real::RealNodes {
            dir,
            count: nodes,
            client: &api.client,
            boot_timeout: phase_timeout,
            kubeconfig: args.host_service.then_some(api.kubeconfig.as_path()),
        }
        .boot(parts, started)
        .await?;
        let host = tag.split('/').next().unwrap_or_default().to_owned();
        (tag, host, v1)
    } else {
        let standin = host_sim::standin_binary().map_err(|e| e.to_string())?;
        let (host, v1) = registry::start_with_v1(parts, started)?;
        NodeSetup {
            count: nodes,
            dir,
            registry_host: &host,
            v1: &v1,
            client: &api.client,
            standin: &standin,
            boot_timeout: phase_timeout,
        }
        .boot(parts, started)
        .await?;
        (format!("{host}/os:stable"), host, v1)
    };
    if args.kubelet {
        start_from_the_install(args, parts, &api, &registry_host, dir, started).await?;
    } else {
        let launch = Launch {
            controller_bin: &controller_bin,
            kubeconfig: &api.kubeconfig,
            registry_host: &registry_host,
            dir,
            with_agents: !args.host_service,
        };
        start_controller_and_agents(parts, started, &launch)?;
    }
    Ok(Setup { api, image_ref, v1 })
}

/// `--kubelet`: plays the kubelets, installs (or waits for a person to), and waits for a
/// controller to lead.
async fn start_from_the_install(
    args: &DemoArgs,
    parts: &mut Parts,
    api: &api::ApiServer,
    registry: &str,
    dir: &Path,
    started: Instant,
) -> Result<(), String> {
    let logs = dir.join("pods");
    parts.kubelets = Some(kubelet::Kubelets::start(parts, api.client.clone(), logs)?);
    step(
        started,
        "playing the kubelets: waiting for the install's Deployment and DaemonSet",
    );
    let limit = if args.install {
        install::as_documented(registry, &api.kubeconfig, dir, started).await?;
        Some(Duration::from_secs(args.phase_timeout_s))
    } else {
        println!("{}", install::instructions(registry, &api.kubeconfig, dir));
        None
    };
    let holder = install::wait_for_controller(&api.client, limit).await?;
    step(started, &format!("the controller's pod {holder} leads"));
    Ok(())
}

/// Points the pool at v1 by digest and watches every node go back; on real-bootc nodes,
/// checks that no blob was fetched (each node had v1 as its rollback deployment).
async fn roll_back(
    parts: &mut Parts,
    setup: &Setup,
    watch: &mut Watch<'_>,
    started: Instant,
    timeout: Duration,
) -> Result<(), String> {
    let (api, image_ref, v1) = (&setup.api, setup.image_ref.as_str(), setup.v1.as_str());
    let repository = image_ref.rsplit_once(':').map_or(image_ref, |(r, _)| r);
    let pinned = format!("{repository}@{v1}");
    let requests = real::requests_so_far(parts);
    let patch = json!({"spec": {"image": {"ref": pinned}}});
    Api::<BootcNodePool>::all(api.client.clone())
        .patch(POOL, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("cannot point the pool at {pinned}: {e}"))?;
    step(
        started,
        &format!("pool `{POOL}` now asks for {pinned}: rolling back"),
    );
    let back = Instant::now();
    watch
        .until(parts, v1, timeout, "rolling back to v1")
        .await?;
    step(
        started,
        &format!("rolled back to v1 in {:.0} s", back.elapsed().as_secs_f64()),
    );
    if let Some(from) = requests {
        let blobs = real::blobs_fetched_since(parts, from).unwrap_or_default();
        if blobs > 0 {
            return Err(format!(
                "the rollback fetched {blobs} blobs: it pulled instead of `bootc rollback`"
            ));
        }
        println!("the rollback fetched no blob from the registry (bootc rollback)");
    }
    print_summary(&api.handle, watch.max_slots().await?);
    Ok(())
}

/// Applies the pool following `image_ref` (a tag), every node, `max_unavailable`, and
/// with `canary` (nodes, soak seconds) a canary.
async fn apply_pool(
    client: &Client,
    image_ref: &str,
    max_unavailable: u32,
    canary: Option<(u32, u32)>,
    started: Instant,
) -> Result<(), String> {
    let mut rollout = json!({"maxUnavailable": max_unavailable});
    if let Some((nodes, soak)) = canary {
        rollout["canary"] = json!({"nodes": nodes, "soakSeconds": soak});
    }
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
            "image": {"ref": image_ref, "resolveIntervalSeconds": 30},
            "rollout": rollout,
        }
    }))
    .map_err(|e| format!("the pool: {e}"))?;
    Api::<BootcNodePool>::all(client.clone())
        .create(&PostParams::default(), &pool)
        .await
        .map_err(|e| format!("cannot create the pool: {e}"))?;
    let with_canary = canary
        .map(|(n, soak)| format!(", a canary of {n} soaking {soak} s"))
        .unwrap_or_default();
    step(
        started,
        &format!(
            "pool `{POOL}` applied: follows {image_ref}, maxUnavailable {max_unavailable}{with_canary}"
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
