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
/// `cargo build -p bootc-node-agent` (or `cargo build --workspace`).
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
             bootc-node-agent` (or `cargo build --workspace`; scripts/test does)",
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

/// One agent run's fixed parts.
#[derive(Debug)]
struct Launch {
    binary: PathBuf,
    node: String,
    kubeconfig: PathBuf,
    log: PathBuf,
    extra_args: Vec<String>,
}

impl Launch {
    /// The agent for the node whose init is `init_pid`, its output appended to the log.
    fn spawn(&self, init_pid: u32) -> std::io::Result<tokio::process::Child> {
        let root = format!("/proc/{init_pid}/root");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        tokio::process::Command::new(&self.binary)
            .arg("--node-name")
            .arg(&self.node)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--system-bus-address")
            .arg(bus_address_of(init_pid))
            .arg("--host-root")
            .arg(&root)
            .args(["--status-poll-interval", "2s", "--command-timeout", "60s"])
            .args(&self.extra_args)
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
        let binary = match agent_binary() {
            Ok(binary) => binary,
            Err(e) => panic!("{e}"),
        };
        let launch = Launch {
            binary,
            node: node.name().to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            log: log.to_owned(),
            extra_args: extra_args.iter().map(|&a| a.to_owned()).collect(),
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
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
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
