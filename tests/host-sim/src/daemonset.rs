//! The real `bootc-node-agent` binary run against a [`Node`] the way a DaemonSet would
//! run it: started once the node is up, started again whenever it exits (the agent exits
//! when the node's system bus goes away at a reboot or soft reboot), and stopped at the
//! end.
//!
//! The agent runs on this machine, outside the container, and reaches the node through
//! `/proc/<init>/root`: its system bus socket and its root file system.
//!
//! Only the agent processes this module started are ever signalled, through their
//! [`tokio::process::Child`] (which never signals a process it already reaped).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::error::{Result, SimError};
use crate::node::{Node, NodePhase, bus_address_of};

/// The agent binary's file name in the cargo target directory.
pub const AGENT_BINARY: &str = "bootc-node-agent";

/// The pause before an exited agent is started again (as a kubelet would pause).
const RESTART_PAUSE: Duration = Duration::from_millis(300);
/// How long a stopped agent has between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(20);
/// How long [`DaemonSet::stop`] waits for everything to end.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// `target/<profile>/bootc-node-agent`, beside this test executable (which lives in
/// `target/<profile>/deps` or `target/<profile>`).
///
/// Cargo does not build another package's binaries for a test, so build it first:
/// `cargo build -p bootc-node-agent` (`cargo test --workspace` builds every binary).
pub fn agent_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| SimError::io("finding this test executable", "/proc/self/exe", e))?;
    let profile_dir = crate::profile_dir(&exe).ok_or_else(|| {
        SimError::InvalidOptions(format!(
            "cannot tell the cargo target directory from `{}`",
            exe.display()
        ))
    })?;
    let binary = profile_dir.join(AGENT_BINARY);
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(SimError::InvalidOptions(format!(
            "the agent binary `{}` is missing: build it first with `cargo build -p \
             bootc-node-agent` (`cargo test --workspace` builds it too)",
            binary.display()
        )))
    }
}

/// What the supervising task and the [`DaemonSet`] share.
#[derive(Debug, Default)]
struct Shared {
    /// The running agent's PID (`None` between runs).
    pid: Option<u32>,
    /// How many times an agent was started.
    starts: u32,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The agent as a DaemonSet would run it on one node: restarted whenever it exits while
/// the node is up, and stopped (SIGTERM, then SIGKILL) by [`DaemonSet::stop`].
///
/// Dropping it without [`DaemonSet::stop`] (a failed test) aborts the supervising task,
/// which SIGKILLs the running agent.
#[derive(Debug)]
pub struct DaemonSet {
    stop: watch::Sender<bool>,
    kills: mpsc::UnboundedSender<u32>,
    task: tokio::task::JoinHandle<()>,
    shared: Arc<Mutex<Shared>>,
}

/// Sets up the agent's pod inside the new mount and PID namespaces made by `unshare`,
/// then runs the agent (`$2…`) as the namespace's PID 1. `$1` is the node's init PID.
///
/// As the DaemonSet's pod sees the host: only the bus socket, `/run/ostree` and the
/// agent's work directory are the node's (tmpfs hides this machine's `/run` and
/// `/var/lib`), its `/proc` is its own, and the kernel's boot ID is the node's (nspawn
/// gives each boot of a container its own). A mount cannot be bound from another mount
/// namespace, so those three are symlinks into the node's root through this machine's
/// `/proc`, kept at `/run/host-proc`: the one thing the pod holds that a real one would
/// not (the agent never reads it).
const POD_SETUP: &str = r#"set -eu
init=$1
shift
node=/proc/$init/root
mkdir -p "$node/run/ostree" "$node/var/lib/bootc-node-agent"
boot_id=$(cat "$node/proc/sys/kernel/random/boot_id")
mount -t tmpfs -o mode=0755 pod-run /run
mkdir /run/dbus /run/host-proc
mount --bind /proc /run/host-proc
node=/run/host-proc/$init/root
ln -s "$node/run/dbus/system_bus_socket" /run/dbus/system_bus_socket
ln -s "$node/run/ostree" /run/ostree
mount -t tmpfs -o mode=0755 pod-var-lib /var/lib
ln -s "$node/var/lib/bootc-node-agent" /var/lib/bootc-node-agent
printf '%s\n' "$boot_id" > /run/pod-boot-id
mount -t proc proc /proc
mount --bind /run/pod-boot-id /proc/sys/kernel/random/boot_id
exec "$@"
"#;

/// Where the agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// On this machine, reaching the node through `/proc/<init>/root`.
    Shared,
    /// In its own PID and mount namespaces (`unshare`), as in its pod: PID 1 in every
    /// incarnation, with only the node's bus socket, `/run/ostree` and work directory.
    Pod,
}

/// How [`DaemonSet::start_with`] runs the agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Where the agent runs.
    pub isolation: Isolation,
    /// `--status-poll-interval`.
    pub poll_interval: String,
    /// Arguments after the harness's own (which they must not repeat).
    pub extra_args: Vec<String>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            isolation: Isolation::Shared,
            poll_interval: "2s".to_owned(),
            extra_args: Vec::new(),
        }
    }
}

/// One agent run's fixed parts.
#[derive(Debug)]
struct Launch {
    binary: PathBuf,
    node: String,
    kubeconfig: PathBuf,
    log: PathBuf,
    options: AgentOptions,
}

impl Launch {
    /// The agent for the node whose init is `init_pid`, its output appended to the log.
    fn spawn(&self, init_pid: u32) -> std::io::Result<tokio::process::Child> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let (mut command, bus, root) = match self.options.isolation {
            Isolation::Shared => (
                tokio::process::Command::new(&self.binary),
                bus_address_of(init_pid),
                format!("/proc/{init_pid}/root"),
            ),
            Isolation::Pod => {
                let mut unshare = tokio::process::Command::new("unshare");
                unshare
                    .args(["--mount", "--propagation", "private", "--pid"])
                    .args(["--kill-child", "--", "sh", "-c", POD_SETUP, "sh"])
                    .arg(init_pid.to_string())
                    .arg(&self.binary);
                let bus = "unix:path=/run/dbus/system_bus_socket".to_owned();
                (unshare, bus, "/".to_owned())
            }
        };
        command
            .arg("--node-name")
            .arg(&self.node)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--system-bus-address")
            .arg(bus)
            .arg("--host-root")
            .arg(&root)
            .arg("--status-poll-interval")
            .arg(&self.options.poll_interval)
            .args(["--command-timeout", "60s"])
            .args(&self.options.extra_args)
            .env("RUST_LOG", "info,bootc_node_agent=debug")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
    }

    /// Notes a harness-side problem in the agent's log, where a test's timeout shows it.
    fn note(&self, message: &str) {
        tracing::warn!(node = %self.node, "host-sim daemonset: {message}");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
        {
            use std::io::Write;
            let _ = writeln!(f, "host-sim daemonset: {message}");
        }
    }
}

impl DaemonSet {
    /// Starts supervising the agent for `node` (a task on the current tokio runtime): each
    /// time the node is up, `target/<profile>/bootc-node-agent` runs with
    /// `--node-name <node> --kubeconfig <kubeconfig> --system-bus-address <the node's bus>
    /// --host-root /proc/<init>/root --status-poll-interval 2s --command-timeout 60s`,
    /// then `extra_args` (which must not repeat those options), with
    /// `RUST_LOG=info,bootc_node_agent=debug` and its output appended to `log`.
    ///
    /// # Panics
    ///
    /// When the agent binary is missing (see [`agent_binary`]), or outside a tokio
    /// runtime.
    pub fn start(node: &Node, kubeconfig: &Path, log: &Path, extra_args: &[&str]) -> Self {
        let options = AgentOptions {
            extra_args: extra_args.iter().map(|&a| a.to_owned()).collect(),
            ..AgentOptions::default()
        };
        DaemonSet::start_with(node, kubeconfig, log, options)
    }

    /// [`DaemonSet::start`], with the isolation and poll interval of `options`
    /// (`--host-root /` and the bus at `/run/dbus/system_bus_socket` in a pod).
    ///
    /// # Panics
    ///
    /// As [`DaemonSet::start`].
    pub fn start_with(node: &Node, kubeconfig: &Path, log: &Path, options: AgentOptions) -> Self {
        let binary = match agent_binary() {
            Ok(binary) => binary,
            Err(e) => panic!("{e}"),
        };
        let launch = Launch {
            binary,
            node: node.name().to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            log: log.to_owned(),
            options,
        };
        let (stop, stopped) = watch::channel(false);
        let (kills, kill_requests) = mpsc::unbounded_channel();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let task = tokio::spawn(supervise(
            launch,
            node.subscribe(),
            stopped,
            kill_requests,
            Arc::clone(&shared),
        ));
        DaemonSet {
            stop,
            kills,
            task,
            shared,
        }
    }

    /// The running agent's PID, `None` between runs.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.shared).pid
    }

    /// How many times an agent was started so far.
    pub fn starts(&self) -> u32 {
        lock(&self.shared).starts
    }

    /// The running agent's PID on this machine and in its own PID namespace (the same
    /// numbers with [`Isolation::Shared`]); `None` between runs or before it exec'd.
    pub fn agent_pids(&self) -> Option<(u32, u32)> {
        let pid = self.pid()?;
        let agent = agent_process(pid)?;
        let status = std::fs::read_to_string(format!("/proc/{agent}/status")).ok()?;
        let exe = std::fs::read_link(format!("/proc/{agent}/exe")).ok()?;
        if exe.file_name()? != AGENT_BINARY {
            return None;
        }
        let inner = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()?;
        Some((agent, inner))
    }

    /// SIGKILLs the running agent, as an OOM kill or a node-local crash would (it is
    /// started again like any agent that exited). Does nothing between runs. The signal
    /// is sent by the supervising task, shortly after this returns.
    pub fn kill(&self) {
        if let Some(pid) = self.pid() {
            let _ = self.kills.send(pid);
        }
    }

    /// Stops the agent (SIGTERM, SIGKILL after 20 s) and the supervision, and waits for
    /// both.
    ///
    /// # Panics
    ///
    /// When that takes more than 30 s (the task is aborted first, which SIGKILLs the
    /// agent) or the supervising task panicked.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        match tokio::time::timeout(STOP_TIMEOUT, &mut self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the agent's supervising task failed: {e}"),
            Err(_) => {
                self.task.abort();
                panic!("the agent did not stop within {STOP_TIMEOUT:?}");
            }
        }
    }
}

impl Drop for DaemonSet {
    fn drop(&mut self) {
        // A no-op after `stop`; otherwise the task's future is dropped, and with it the
        // running agent's `Child` (killed on drop).
        self.task.abort();
    }
}

/// Resolves once a stop is asked (the guard of the value is not held across awaits).
async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await.map(|_| ());
}

/// Waits until the node is up; its init's PID, or `None` when a stop was asked (or the
/// node is gone).
async fn node_up(
    status: &mut watch::Receiver<crate::NodeStatus>,
    stopped: &mut watch::Receiver<bool>,
) -> Option<u32> {
    loop {
        let (phase, pid) = {
            let s = status.borrow_and_update();
            (s.phase, s.init_pid)
        };
        if phase == NodePhase::Up
            && let Some(pid) = pid
        {
            return Some(pid);
        }
        tokio::select! {
            changed = status.changed() => {
                if changed.is_err() {
                    // The node was dropped: nothing more to run on. Wait for the stop.
                    stop_requested(stopped).await;
                    return None;
                }
            }
            () = stop_requested(stopped) => return None,
        }
    }
}

/// The supervising task: the DaemonSet's restart loop.
async fn supervise(
    launch: Launch,
    mut status: watch::Receiver<crate::NodeStatus>,
    mut stopped: watch::Receiver<bool>,
    mut kill_requests: mpsc::UnboundedReceiver<u32>,
    shared: Arc<Mutex<Shared>>,
) {
    loop {
        let Some(init_pid) = node_up(&mut status, &mut stopped).await else {
            return;
        };
        let mut child = match launch.spawn(init_pid) {
            Ok(child) => child,
            Err(e) => {
                launch.note(&format!(
                    "cannot start `{}`: {e}; trying again",
                    launch.binary.display()
                ));
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    () = stop_requested(&mut stopped) => return,
                }
            }
        };
        {
            let mut s = lock(&shared);
            s.pid = child.id();
            s.starts += 1;
        }
        let stop = loop {
            tokio::select! {
                _ = child.wait() => break false,
                Some(pid) = kill_requests.recv() => {
                    // Only the run it was meant for (a request may outlive its run).
                    if child.id() == Some(pid) {
                        let _ = child.start_kill();
                    }
                }
                () = stop_requested(&mut stopped) => break true,
            }
        };
        if stop {
            // In a pod, `unshare` ignores SIGTERM: the agent itself gets it.
            let term = child.id().and_then(agent_process);
            if let Some(pid) = term.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if tokio::time::timeout(TERM_GRACE, child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
            lock(&shared).pid = None;
            return;
        }
        lock(&shared).pid = None;
        tokio::select! {
            () = tokio::time::sleep(RESTART_PAUSE) => {}
            () = stop_requested(&mut stopped) => return,
        }
    }
}

/// The agent's process for the DaemonSet's child `pid`: the child itself, or in a pod,
/// the one child `unshare` forked (`None` before it did).
fn agent_process(pid: u32) -> Option<u32> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim_end() != "unshare" {
        return Some(pid);
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}
