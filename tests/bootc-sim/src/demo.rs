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

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::pool::BootcNodePool;
use bootc_standin::Resolver as _;
use host_sim::daemonset::DaemonSet;
use host_sim::{Node, NodeOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use test_registry::Registry;
use tokio::time::Instant;

/// The CRDs, as `crds/` holds them.
const CRDS: [(&str, &str); 2] = [
    (
        "bootcnodepools",
        include_str!("../../../crds/node.bootc.dev_bootcnodepools.yaml"),
    ),
    (
        "bootcnodes",
        include_str!("../../../crds/node.bootc.dev_bootcnodes.yaml"),
    ),
];
const POOL: &str = "demo";
const GROUP: &str = "node.bootc.dev";
const KERNEL_LABEL: &str = "dev.bootc-pool.sim.kernel";
const VERSION_LABEL: &str = "org.opencontainers.image.version";
/// How often the display is refreshed.
const REFRESH: Duration = Duration::from_millis(200);
/// How long the controller has between SIGTERM and SIGKILL.
const CONTROLLER_GRACE: Duration = Duration::from_secs(10);

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

/// The controller child process; SIGTERM then SIGKILL by its PID when dropped.
#[derive(Debug)]
struct ControllerProcess {
    child: Child,
    log: PathBuf,
}

impl ControllerProcess {
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = std::time::Instant::now() + CONTROLLER_GRACE;
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Everything the demo started, stopped in reverse order by [`Parts::teardown`] (or,
/// if that never runs, by the parts' own `Drop`).
#[derive(Debug, Default)]
struct Parts {
    agents: Vec<DaemonSet>,
    nodes: Vec<Node>,
    controller: Option<ControllerProcess>,
    registry: Option<Registry>,
    emulator: Option<kube_emulator::Emulator>,
}

impl Parts {
    async fn teardown(&mut self) {
        let agents = std::mem::take(&mut self.agents);
        let nodes = std::mem::take(&mut self.nodes);
        if !agents.is_empty() || !nodes.is_empty() {
            println!(
                "stopping {} agents and {} nodes …",
                agents.len(),
                nodes.len()
            );
        }
        // A DaemonSet panics when its agent does not stop in time; keep tearing down.
        for agent in agents {
            let stopping = tokio::spawn(agent.stop());
            if stopping.await.is_err() {
                eprintln!("bootc-sim demo: an agent did not stop cleanly (killed)");
            }
        }
        let mut stopping = tokio::task::JoinSet::new();
        for node in nodes {
            stopping.spawn(async move {
                let name = node.name().to_owned();
                if let Err(e) = node.stop().await {
                    eprintln!("bootc-sim demo: node {name} did not stop cleanly: {e}");
                }
            });
        }
        while stopping.join_next().await.is_some() {}
        if let Some(mut controller) = self.controller.take() {
            controller.stop();
        }
        if let Some(mut registry) = self.registry.take() {
            registry.stop();
        }
        if let Some(emulator) = self.emulator.take() {
            emulator.stop().await;
        }
    }
}

/// The controller binary, beside this executable in `target/<profile>/`.
fn controller_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let binary = exe
        .parent()
        .map(|d| d.join("bootc-pool-controller"))
        .ok_or("this executable has no directory")?;
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "`{}` is missing: build it with `cargo build -p bootc-pool-controller` (the \
             same profile as bootc-sim)",
            binary.display()
        ))
    }
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

    // The API.
    let emulator = kube_emulator::Emulator::start()
        .await
        .map_err(|e| format!("cannot start the API emulator: {e}"))?;
    let kubeconfig = dir.join("kubeconfig");
    emulator
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| format!("cannot write the kubeconfig: {e}"))?;
    let client = emulator
        .client()
        .map_err(|e| format!("cannot make a client: {e}"))?;
    let handle = emulator.handle();
    parts.emulator = Some(emulator);
    register_crds(&client).await?;
    create_namespace(&client, LEASE_NAMESPACE).await?;
    step(
        started,
        &format!(
            "API emulator up; try: kubectl --kubeconfig {} get bootcnodepools,bootcnodes",
            kubeconfig.display()
        ),
    );

    // The registry and v1.
    let registry = Registry::start().map_err(|e| {
        format!("cannot start docker-registry (Debian package docker-registry): {e}")
    })?;
    let host = registry.host();
    let v1 = registry
        .push(
            "os",
            "stable",
            &[(VERSION_LABEL, "1.0"), (KERNEL_LABEL, "k1")],
        )
        .map_err(|e| format!("cannot build and push v1 (umoci, skopeo): {e}"))?;
    parts.registry = Some(registry);
    step(
        started,
        &format!("registry on {host}; v1 pushed to {host}/os:stable ({v1})"),
    );

    // The nodes, seeded on v1 as an installer would leave them.
    let seed_root = dir.join("seed-root");
    std::fs::create_dir_all(&seed_root).map_err(|e| format!("{}: {e}", seed_root.display()))?;
    let v1_pin = format!("{host}/os@{v1}");
    let info = bootc_standin::HttpResolver::new(&seed_root)
        .resolve(&v1_pin)
        .map_err(|e| format!("cannot resolve {v1_pin}: {e}"))?;
    let pid = std::process::id();
    let names: Vec<String> = (1..=args.nodes)
        .map(|i| format!("demo{pid}-n{i:02}"))
        .collect();
    let mut options = Vec::new();
    for name in &names {
        let state_dir = dir.join("nodes").join(name);
        bootc_standin::seed(&state_dir, info.clone())
            .map_err(|e| format!("cannot seed {name}: {e}"))?;
        let mut o = NodeOptions::new(name, &state_dir, &standin);
        o.kube = Some(client.clone());
        o.boot_timeout = phase_timeout;
        options.push(o);
    }
    step(
        started,
        &format!(
            "booting {} nspawn nodes (the first run builds the node image, which takes a few minutes) …",
            names.len()
        ),
    );
    let mut options = options.into_iter();
    // The first alone: it builds (or checks) the cached node image.
    if let Some(first) = options.next() {
        let name = first.name.clone();
        let node = Node::start(first).await.map_err(|e| {
            format!("node {name} did not boot (building the node image or booting it failed): {e}")
        })?;
        parts.nodes.push(node);
    }
    let mut booting = tokio::task::JoinSet::new();
    for o in options {
        booting.spawn(async move {
            let name = o.name.clone();
            Node::start(o)
                .await
                .map_err(|e| format!("node {name} did not boot: {e}"))
        });
    }
    let mut first_error = None;
    while let Some(joined) = booting.join_next().await {
        match joined {
            Ok(Ok(node)) => parts.nodes.push(node),
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(e) => first_error = first_error.or(Some(format!("a node's start failed: {e}"))),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    parts.nodes.sort_by(|a, b| a.name().cmp(b.name()));
    step(started, &format!("{} nodes up", parts.nodes.len()));

    // The controller and the agents.
    let controller_log = dir.join("controller.log");
    let log = std::fs::File::create(&controller_log)
        .map_err(|e| format!("{}: {e}", controller_log.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", controller_log.display()))?;
    let child = Command::new(&controller_bin)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--insecure-registry",
            &host,
            "--log-format",
            "text",
            "--lease-namespace",
            LEASE_NAMESPACE,
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", controller_bin.display()))?;
    parts.controller = Some(ControllerProcess {
        child,
        log: controller_log.clone(),
    });
    let agent_logs = dir.join("agents");
    std::fs::create_dir_all(&agent_logs).map_err(|e| format!("{}: {e}", agent_logs.display()))?;
    for node in &parts.nodes {
        let log = agent_logs.join(format!("{}.log", node.name()));
        parts
            .agents
            .push(DaemonSet::start(node, &kubeconfig, &log, &[]));
    }
    step(
        started,
        &format!(
            "controller (pid {}) and {} agents started; logs in {} and {}",
            parts.controller.as_ref().map_or(0, |c| c.child.id()),
            parts.agents.len(),
            controller_log.display(),
            agent_logs.display()
        ),
    );

    // The pool, converged on v1.
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
            "image": {"ref": format!("{host}/os:stable"), "resolveIntervalSeconds": 30},
            "rollout": {"maxUnavailable": args.max_unavailable},
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
            "pool `{POOL}` applied: follows {host}/os:stable, maxUnavailable {}",
            args.max_unavailable
        ),
    );
    let mut display = Display::new(args.max_unavailable as usize, started);
    watch_until(
        &handle,
        &mut display,
        parts,
        &v1,
        args.nodes,
        phase_timeout,
        "converging on v1",
    )
    .await?;
    step(started, "converged on v1");

    // v2 on the same tag.
    let v2 = parts
        .registry
        .as_ref()
        .ok_or("the registry is gone")?
        .push(
            "os",
            "stable",
            &[(VERSION_LABEL, "2.0"), (KERNEL_LABEL, "k2")],
        )
        .map_err(|e| format!("cannot build and push v2: {e}"))?;
    step(
        started,
        &format!(
            "v2 pushed to {host}/os:stable ({v2}); the controller picks it up within 30 s (its resolve interval)"
        ),
    );
    let rollout_started = Instant::now();
    watch_until(
        &handle,
        &mut display,
        parts,
        &v2,
        args.nodes,
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
    print_summary(&handle, display.max_slots);

    if args.keep_running {
        println!(
            "\nstill running; kubectl --kubeconfig {} get bootcnodepools,bootcnodes\n\
             press Ctrl-C to tear everything down",
            kubeconfig.display()
        );
        std::future::pending::<()>().await;
    }
    Ok(true)
}

fn step(started: Instant, text: &str) {
    println!("[{:>5.1}s] {text}", started.elapsed().as_secs_f64());
    let _ = std::io::stdout().flush();
}

/// Where the controller keeps its Lease, as `deploy/install.yaml` installs it (its Role
/// for Leases is there).
const LEASE_NAMESPACE: &str = "bootc-system";

async fn create_namespace(client: &Client, name: &str) -> Result<(), String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
        .map_err(|e| format!("namespace {name}: {e}"))?;
    api.create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| format!("cannot create the namespace {name}: {e}"))?;
    Ok(())
}

async fn register_crds(client: &Client) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (plural, yaml) in CRDS {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml)
            .map_err(|e| format!("crds/node.bootc.dev_{plural}.yaml: {e}"))?;
        api.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| format!("cannot register the {plural} CRD: {e}"))?;
    }
    Ok(())
}

/// One node's row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    state: String,
    booted: String,
    ready: bool,
    cordoned: bool,
    slot: bool,
}

fn short(digest: &str) -> String {
    digest
        .strip_prefix("sha256:")
        .unwrap_or(digest)
        .chars()
        .take(12)
        .collect()
}

fn rows(handle: &kube_emulator::Handle, names: &[String]) -> Vec<Row> {
    let bootc: BTreeMap<String, Value> = handle
        .list(GROUP, "bootcnodes")
        .into_iter()
        .filter_map(|b| Some((b.pointer("/metadata/name")?.as_str()?.to_owned(), b)))
        .collect();
    let nodes: BTreeMap<String, Value> = handle
        .list("", "nodes")
        .into_iter()
        .filter_map(|n| Some((n.pointer("/metadata/name")?.as_str()?.to_owned(), n)))
        .collect();
    names
        .iter()
        .map(|name| {
            let b = bootc.get(name);
            let n = nodes.get(name);
            let state = b
                .and_then(|b| b.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
                .and_then(|c| c["reason"].as_str())
                .unwrap_or("-")
                .to_owned();
            let booted = b
                .and_then(|b| b.pointer("/status/booted"))
                .map(|booted| {
                    let digest = booted["imageDigest"].as_str().unwrap_or("");
                    match booted["version"].as_str() {
                        Some(v) => format!("{} ({v})", short(digest)),
                        None => short(digest),
                    }
                })
                .unwrap_or_else(|| "-".to_owned());
            let ready = n
                .and_then(|n| n.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            let cordoned = n
                .and_then(|n| n.pointer("/spec/unschedulable"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let slot = b
                .and_then(|b| b.pointer("/metadata/annotations"))
                .and_then(Value::as_object)
                .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION));
            Row {
                name: name.clone(),
                state,
                booted,
                ready,
                cordoned,
                slot,
            }
        })
        .collect()
}

/// The live view: redrawn in place on a terminal, one line per change otherwise.
#[derive(Debug)]
struct Display {
    tty: bool,
    budget: usize,
    started: Instant,
    last: Vec<Row>,
    last_header: String,
    max_slots: usize,
}

impl Display {
    fn new(budget: usize, started: Instant) -> Self {
        Display {
            tty: std::io::stdout().is_terminal(),
            budget,
            started,
            last: Vec::new(),
            last_header: String::new(),
            max_slots: 0,
        }
    }

    fn show(&mut self, phase: &str, pool: &Value, rows: Vec<Row>) {
        let status = pool.get("status");
        let slots = rows.iter().filter(|r| r.slot).count();
        self.max_slots = self.max_slots.max(slots);
        let target = status
            .and_then(|s| s.get("targetDigest"))
            .and_then(Value::as_str)
            .map(short)
            .unwrap_or_else(|| "-".to_owned());
        let version = status
            .and_then(|s| s.get("targetVersion"))
            .and_then(Value::as_str)
            .unwrap_or("-");
        let updated = status
            .and_then(|s| s.get("updatedCount"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let header = format!(
            "{phase}: target {target} ({version}), {updated}/{} updated, slots in use {slots}/{}",
            rows.len(),
            self.budget
        );
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut out = std::io::stdout().lock();
        if self.tty {
            if header == self.last_header && rows == self.last {
                return;
            }
            let _ = write!(out, "\x1b[H\x1b[2J");
            let _ = writeln!(out, "[{elapsed:>5.1}s] {header}\n");
            let _ = writeln!(
                out,
                "NODE             STATE        BOOTED                 READY  CORDONED  SLOT"
            );
            for r in &rows {
                let _ = writeln!(
                    out,
                    "{:<16} {:<12} {:<22} {:<6} {:<9} {}",
                    r.name,
                    r.state,
                    r.booted,
                    yes(r.ready),
                    yes(r.cordoned),
                    if r.slot { "held" } else { "" }
                );
            }
        } else {
            if header != self.last_header {
                let _ = writeln!(out, "[{elapsed:>5.1}s] {header}");
            }
            for r in &rows {
                if self.last.iter().any(|l| l == r) {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "[{elapsed:>5.1}s]   {}: {}, booted {}, {}{}{}",
                    r.name,
                    r.state,
                    r.booted,
                    if r.ready { "Ready" } else { "NotReady" },
                    if r.cordoned { ", cordoned" } else { "" },
                    if r.slot { ", holds a reboot slot" } else { "" }
                );
            }
        }
        let _ = out.flush();
        self.last_header = header;
        self.last = rows;
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Shows the nodes until the pool reports every node updated on `digest` with no node
/// cordoned or holding a slot.
async fn watch_until(
    handle: &kube_emulator::Handle,
    display: &mut Display,
    parts: &mut Parts,
    digest: &str,
    nodes: usize,
    timeout: Duration,
    phase: &str,
) -> Result<(), String> {
    let names: Vec<String> = parts.nodes.iter().map(|n| n.name().to_owned()).collect();
    let deadline = Instant::now() + timeout;
    let mut tick = tokio::time::interval(REFRESH);
    loop {
        tick.tick().await;
        let pool = handle
            .get(GROUP, "bootcnodepools", "", POOL)
            .unwrap_or(Value::Null);
        let rows = rows(handle, &names);
        let status = pool.get("status");
        let done = status
            .and_then(|s| s.get("targetDigest"))
            .and_then(Value::as_str)
            == Some(digest)
            && status
                .and_then(|s| s.get("updatedCount"))
                .and_then(Value::as_u64)
                == Some(nodes as u64)
            && status
                .and_then(|s| s.get("conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "UpToDate"))
                .is_some_and(|c| c["reason"] == "AllUpdated")
            && rows.iter().all(|r| r.ready && !r.cordoned && !r.slot);
        display.show(phase, &pool, rows);
        if done {
            return Ok(());
        }
        if let Some(controller) = parts.controller.as_mut()
            && let Ok(Some(status)) = controller.child.try_wait()
        {
            return Err(format!(
                "the controller exited ({status}); its log: {}",
                controller.log.display()
            ));
        }
        if Instant::now() >= deadline {
            let stuck: Vec<String> = display
                .last
                .iter()
                .filter(|r| !r.ready || r.cordoned || r.slot || r.state != "Idle")
                .map(|r| {
                    format!(
                        "{} ({}, booted {}{}{})",
                        r.name,
                        r.state,
                        r.booted,
                        if r.cordoned { ", cordoned" } else { "" },
                        if r.slot { ", holds a slot" } else { "" }
                    )
                })
                .collect();
            return Err(format!(
                "timed out {phase} after {} s; nodes not done: {}; pool status: {}",
                timeout.as_secs(),
                if stuck.is_empty() {
                    "none".to_owned()
                } else {
                    stuck.join("; ")
                },
                status.map(Value::to_string).unwrap_or_default()
            ));
        }
    }
}

/// The pool's status and deployHistory, as tables.
fn print_summary(handle: &kube_emulator::Handle, max_slots: usize) {
    let pool = handle
        .get(GROUP, "bootcnodepools", "", POOL)
        .unwrap_or(Value::Null);
    let status = pool.get("status").cloned().unwrap_or(Value::Null);
    let s = |k: &str| {
        status
            .get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_else(|| "-".to_owned())
    };
    println!("\npool `{POOL}` status:");
    for key in [
        "targetImage",
        "targetVersion",
        "nodeCount",
        "updatedCount",
        "updatingCount",
        "stagedCount",
        "degradedCount",
        "lastResolvedTime",
    ] {
        println!("  {key:<17} {}", s(key));
    }
    println!("  most reboot slots held at once: {max_slots}");
    if let Some(conditions) = status.get("conditions").and_then(Value::as_array) {
        println!("  conditions:");
        for c in conditions {
            println!(
                "    {:<12} {:<6} {:<16} {}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            );
        }
    }
    println!("\ndeployHistory:");
    println!(
        "  {:<14} {:<8} {:>5}  {:<21} {:<21}",
        "DIGEST", "VERSION", "NODES", "FIRST DEPLOYED", "LAST DEPLOYED"
    );
    for e in status
        .get("deployHistory")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        println!(
            "  {:<14} {:<8} {:>5}  {:<21} {:<21}",
            short(e["digest"].as_str().unwrap_or("")),
            e["version"].as_str().unwrap_or("-"),
            e["nodeCount"].as_i64().unwrap_or(0),
            e["firstDeployed"].as_str().unwrap_or(""),
            e["lastDeployed"].as_str().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_digests() {
        assert_eq!(
            short(&format!("sha256:{}", "ab".repeat(32))),
            "abababababab"
        );
        assert_eq!(short("x"), "x");
    }

    #[test]
    fn the_crds_parse() {
        for (_, yaml) in CRDS {
            assert!(serde_yaml_ng::from_str::<CustomResourceDefinition>(yaml).is_ok());
        }
    }

    #[test]
    fn the_controller_is_looked_up_beside_this_executable() {
        if let Err(e) = controller_binary() {
            assert!(e.contains("cargo build -p bootc-pool-controller"), "{e}");
        }
    }
}
