//! What the demo starts and stops: the controller child process, the agents, and
//! [`Parts`], everything started, torn down in reverse order.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use host_sim::Node;
use host_sim::daemonset::{AgentOptions, DaemonSet, Isolation};
use host_sim::real::{RealImage, RealNode};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use test_registry::Registry;
use tokio::time::Instant;

use super::real::RealRegistry;
use super::{LEASE_NAMESPACE, step};

/// How long the controller has between SIGTERM and SIGKILL.
const CONTROLLER_GRACE: Duration = Duration::from_secs(10);

/// The controller child process; SIGTERM then SIGKILL by its PID when dropped.
#[derive(Debug)]
pub(super) struct ControllerProcess {
    pub(super) child: Child,
    pub(super) log: PathBuf,
}

impl ControllerProcess {
    pub(super) fn stop(&mut self) {
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
pub(super) struct Parts {
    /// `--kubelet`: the pods run from the install.
    pub(super) kubelets: Option<super::kubelet::Kubelets>,
    pub(super) agents: Vec<DaemonSet>,
    pub(super) nodes: Vec<Node>,
    /// Real-bootc nodes (`--real-bootc`); dropping one removes its sysroot.
    pub(super) real_nodes: Vec<RealNode>,
    pub(super) controller: Option<ControllerProcess>,
    pub(super) registry: Option<Registry>,
    /// The registry and node image of `--real-bootc`.
    pub(super) real: Option<(RealRegistry, RealImage)>,
    pub(super) emulator: Option<kube_emulator::Emulator>,
}

impl Parts {
    /// Every node, of either kind.
    pub(super) fn all_nodes(&self) -> Vec<&Node> {
        self.nodes
            .iter()
            .chain(self.real_nodes.iter().map(RealNode::node))
            .collect()
    }

    pub(super) async fn teardown(&mut self) {
        if let Some(kubelets) = self.kubelets.take() {
            println!("stopping the pods …");
            kubelets.stop().await;
        }
        let agents = std::mem::take(&mut self.agents);
        let nodes = std::mem::take(&mut self.nodes);
        let real_nodes = std::mem::take(&mut self.real_nodes);
        if !agents.is_empty() || !nodes.is_empty() || !real_nodes.is_empty() {
            println!(
                "stopping {} agents and {} nodes …",
                agents.len(),
                nodes.len() + real_nodes.len()
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
        for node in real_nodes {
            stopping.spawn(async move {
                let name = node.name().to_owned();
                if let Err(e) = node.stop().await {
                    eprintln!("bootc-sim demo: node {name} did not stop cleanly: {e}");
                }
                // Its sysroot goes with it (`chattr -i`, then removed).
                drop(node);
            });
        }
        while stopping.join_next().await.is_some() {}
        if let Some(mut controller) = self.controller.take() {
            controller.stop();
        }
        if let Some(mut registry) = self.registry.take() {
            registry.stop();
        }
        // Killed (by its child handle) and its storage removed on drop.
        drop(self.real.take());
        if let Some(emulator) = self.emulator.take() {
            emulator.stop().await;
        }
    }
}

/// The controller binary, beside this executable in `target/<profile>/`.
pub(crate) fn controller_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    controller_binary_beside(&exe)
}

/// The controller binary in the directory of `exe`.
pub(crate) fn controller_binary_beside(exe: &Path) -> Result<PathBuf, String> {
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

/// What [`start_controller_and_agents`] starts from.
pub(super) struct Launch<'a> {
    /// The controller binary.
    pub(super) controller_bin: &'a Path,
    /// The emulator's kubeconfig.
    pub(super) kubeconfig: &'a Path,
    /// The registry's `host:port` (insecure for the controller).
    pub(super) registry_host: &'a str,
    /// The work directory (the logs).
    pub(super) dir: &'a Path,
    /// Whether to run an agent per node (not for host-service nodes, whose systemd does).
    pub(super) with_agents: bool,
}

/// Starts the controller binary against the emulator (its log in `dir`) and one agent
/// per node (their logs in `dir/agents`).
pub(super) fn start_controller_and_agents(
    parts: &mut Parts,
    started: Instant,
    launch: &Launch<'_>,
) -> Result<(), String> {
    let Launch {
        controller_bin,
        kubeconfig,
        registry_host,
        dir,
        with_agents,
    } = *launch;
    let isolation = if parts.real_nodes.is_empty() {
        Isolation::Shared
    } else {
        // As in its pod: real nodes get the agent the way the DaemonSet runs it.
        Isolation::Pod
    };
    let controller_log = dir.join("controller.log");
    let log = std::fs::File::create(&controller_log)
        .map_err(|e| format!("{}: {e}", controller_log.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", controller_log.display()))?;
    let child = Command::new(controller_bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--insecure-registry",
            registry_host,
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
    let mut agents = Vec::new();
    for node in parts.all_nodes().into_iter().filter(|_| with_agents) {
        let log = agent_logs.join(format!("{}.log", node.name()));
        let options = AgentOptions {
            isolation,
            ..AgentOptions::default()
        };
        agents.push(DaemonSet::start_with(node, kubeconfig, &log, options));
    }
    parts.agents = agents;
    let pid = parts.controller.as_ref().map_or(0, |c| c.child.id());
    let message = if with_agents {
        format!(
            "controller (pid {pid}) and {} agents started; logs in {} and {}",
            parts.agents.len(),
            controller_log.display(),
            agent_logs.display()
        )
    } else {
        format!(
            "controller (pid {pid}) started, its log in {}; the agents are the nodes' own \
             host services (journalctl -u bootc-node-agent on a node)",
            controller_log.display()
        )
    };
    step(started, &message);
    Ok(())
}
