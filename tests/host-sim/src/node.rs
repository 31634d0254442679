//! One simulated node: a `systemd-nspawn` container booting the [`NodeImage`] with real
//! systemd, logind and D-Bus, the bootc stand-in bind-mounted at `/usr/bin/bootc` and its
//! state directory at `/var/lib/bootc-standin`.
//!
//! A supervisor thread (with its own small tokio runtime, so that a node outlives neither
//! more nor less than its [`Node`] value) owns the nspawn process: when it exits with
//! status 133 (the container asked for a reboot) it boots it again, unless told not to;
//! any other exit leaves the node stopped. While the container runs, the supervisor
//! watches its system bus: the node is [`NodePhase::Up`] once the bus answers and the systemd
//! Manager's `SystemState` is `running` or `degraded`, and goes back to
//! [`NodePhase::Booting`] when that bus connection closes (shutdown, reboot, soft reboot).
//! Everything it sees is published on a [`tokio::sync::watch`] channel
//! ([`Node::subscribe`]).
//!
//! The harness only ever signals processes it started: its own nspawn process and, as a
//! last resort when nspawn ignored SIGTERM and SIGKILL left the container behind, that
//! nspawn's own child (the container's init).
//!
//! - this file: [`Node`], what it shows ([`NodeStatus`], [`NodePhase`]) and asks the node;
//! - `launch`: [`NodeOptions`] and the `systemd-nspawn` command line;
//! - `supervisor`: the thread that owns nspawn, reboots the node and follows its bus;
//! - `standin_state`: [`discard_staged`], for a node that comes back on its old image,
//!   and [`standin_calls`], what the node's bootc was asked.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::sync::watch;

use crate::bus::{self, ListedUnit, UnitState};
use crate::error::{Result, SimError};
use crate::image::NodeImage;

mod launch;
mod standin_state;
mod supervisor;

pub use launch::NodeOptions;
pub(crate) use launch::{BOOTED_MARKER, bind_arg, machine_uuid};
use launch::{check_options, create_dirs, nspawn_command};
pub use standin_state::{discard_staged, standin_calls};
use supervisor::Supervisor;
pub(crate) use supervisor::{BootFn, DiscardFn};

/// nspawn's exit status when the container asked for a reboot.
pub const EXIT_REBOOT: i32 = 133;
/// logind's `SD_LOGIND_SOFT_REBOOT` flag.
pub const SOFT_REBOOT_FLAG: u64 = 1 << 2;

/// How often the supervisor polls while waiting for a container to come up.
const POLL: Duration = Duration::from_millis(100);
/// How long one connection attempt to a node's bus may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodePhase {
    /// The container runs but its system is not (yet, or any more) up: booting, shutting
    /// down, or in the middle of a soft reboot.
    Booting,
    /// The system bus answers and systemd says `running` or `degraded`.
    Up,
    /// The container exited to reboot; the supervisor is about to boot it again.
    Down,
    /// The container exited and will not come back (stopped, powered off, crashed, or
    /// [`Node::never_come_back`]).
    Stopped,
}

/// What the supervisor last saw of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// Where the node is.
    pub phase: NodePhase,
    /// How many full boots reached [`NodePhase::Up`] (soft reboots not counted).
    pub boots: u64,
    /// How many times the node was seen coming up (full boots and soft reboots).
    pub ups: u64,
    /// The running nspawn process.
    pub nspawn_pid: Option<u32>,
    /// The container's systemd, as this machine sees it.
    pub init_pid: Option<u32>,
    /// hostname1's `BootID` when last up (32 hex digits).
    pub boot_id: Option<String>,
    /// The Manager's `SoftRebootsCount` when last up.
    pub soft_reboots: u32,
    /// `SystemState` when last up (`running` or `degraded`).
    pub system_state: Option<String>,
    /// The last nspawn exit status (a signal shows as 128 + its number).
    pub last_exit: Option<i32>,
    /// The last error the supervisor met (a failed restart, a state rewrite that failed).
    pub error: Option<String>,
}

impl NodeStatus {
    fn new() -> Self {
        NodeStatus {
            phase: NodePhase::Booting,
            boots: 0,
            ups: 0,
            nspawn_pid: None,
            init_pid: None,
            boot_id: None,
            soft_reboots: 0,
            system_state: None,
            last_exit: None,
            error: None,
        }
    }
}

/// What the supervisor and the [`Node`] share.
#[derive(Debug, Default)]
struct Control {
    /// The nspawn process while it has not been reaped (only then may it be signalled).
    nspawn_pid: Option<u32>,
    /// Its child, the container's init (for the SIGKILL of last resort).
    init_pid: Option<u32>,
    /// A stop was asked: do not boot again.
    stopping: bool,
    /// On the next reboot, do not boot again.
    never_come_back: bool,
    /// On the next reboot, discard the staged deployment before booting again.
    fail_next_boot: bool,
}

/// What [`Node::boot`] needs: how to make each boot's command, how to throw a staged
/// deployment away, and the node's fixed parts.
pub(crate) struct Boot {
    pub(crate) name: String,
    /// Shown by [`Node::state_dir`].
    pub(crate) state_dir: PathBuf,
    pub(crate) log_file: PathBuf,
    pub(crate) stop_timeout: Duration,
    pub(crate) boot_timeout: Duration,
    pub(crate) kube: Option<kube::Client>,
    pub(crate) command: BootFn,
    pub(crate) discard: DiscardFn,
}

/// A running simulated node. Dropping it stops the container (blocking, with a deadline).
#[derive(Debug)]
pub struct Node {
    name: String,
    state_dir: PathBuf,
    log_file: PathBuf,
    stop_timeout: Duration,
    control: Arc<Mutex<Control>>,
    status: watch::Receiver<NodeStatus>,
    supervisor: Option<JoinHandle<()>>,
    kubelet: Option<tokio::task::JoinHandle<()>>,
}

fn lock(control: &Mutex<Control>) -> MutexGuard<'_, Control> {
    control
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The system bus address of a container whose init is `init_pid`.
pub fn bus_address_of(init_pid: u32) -> String {
    format!("unix:path=/proc/{init_pid}/root/run/dbus/system_bus_socket")
}

impl Node {
    /// Boots a node and waits until it is up (at most `options.boot_timeout`).
    ///
    /// Needs root, `systemd-nspawn` and a tokio runtime (for the kubelet task, when
    /// asked for).
    pub async fn start(options: NodeOptions) -> Result<Node> {
        check_options(&options)?;
        let image = match &options.image {
            Some(p) => p.clone(),
            None => NodeImage::ensure().await?.root().to_path_buf(),
        };
        create_dirs(&options)?;
        let log_file = options.log_file.clone().unwrap_or_else(|| {
            let mut p = options.state_dir.clone().into_os_string();
            p.push(".log");
            PathBuf::from(p)
        });
        let command_options = options.clone();
        let state_dir = options.state_dir.clone();
        let boot = Boot {
            name: options.name.clone(),
            state_dir: options.state_dir.clone(),
            log_file,
            stop_timeout: options.stop_timeout,
            boot_timeout: options.boot_timeout,
            kube: options.kube.clone(),
            command: Box::new(move || Ok(nspawn_command(&command_options, &image))),
            discard: Box::new(move || discard_staged(&state_dir)),
        };
        Node::boot(boot).await
    }

    /// Boots a node of any kind: `boot.command` makes each boot's nspawn command.
    pub(crate) async fn boot(boot: Boot) -> Result<Node> {
        let control = Arc::new(Mutex::new(Control::default()));
        let (tx, rx) = watch::channel(NodeStatus::new());
        let log_file = boot.log_file.clone();
        let supervisor = Supervisor {
            name: boot.name.clone(),
            boot: boot.command,
            log_file: log_file.clone(),
            discard: boot.discard,
            control: control.clone(),
            status: tx,
        };
        let handle = std::thread::Builder::new()
            .name(format!("node-{}", boot.name))
            .spawn(move || supervisor.run())
            .map_err(|e| SimError::io("starting the node's supervisor thread", &log_file, e))?;

        let kubelet = boot
            .kube
            .map(|client| tokio::spawn(crate::kubelet::run(client, boot.name.clone(), rx.clone())));

        let node = Node {
            name: boot.name,
            state_dir: boot.state_dir,
            log_file,
            stop_timeout: boot.stop_timeout,
            control,
            status: rx,
            supervisor: Some(handle),
            kubelet,
        };
        node.wait_booted(0, boot.boot_timeout).await?;
        Ok(node)
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host directory holding the stand-in's state.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The container's console log.
    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// What the supervisor last saw.
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// Every change the supervisor sees: boots, soft reboots, exits.
    pub fn subscribe(&self) -> watch::Receiver<NodeStatus> {
        self.status.clone()
    }

    /// The container's systemd as this machine sees it; `None` while the container is down.
    pub fn init_pid(&self) -> Option<u32> {
        self.status.borrow().init_pid
    }

    /// The node's system bus (`unix:path=/proc/PID/root/run/dbus/system_bus_socket`); it
    /// changes with every full boot, not with a soft reboot.
    pub fn bus_address(&self) -> Result<String> {
        self.init_pid()
            .map(bus_address_of)
            .ok_or_else(|| self.down_error())
    }

    /// The node's root file system as this machine sees it (`/proc/PID/root`).
    pub fn root_path(&self) -> Result<PathBuf> {
        self.init_pid()
            .map(|pid| PathBuf::from(format!("/proc/{pid}/root")))
            .ok_or_else(|| self.down_error())
    }

    fn down_error(&self) -> SimError {
        let status = self.status();
        SimError::Stopped {
            node: self.name.clone(),
            details: format!(
                " or down ({:?}, last exit {:?}); see {}",
                status.phase,
                status.last_exit,
                self.log_file.display()
            ),
        }
    }

    fn bus_error(&self, call: &'static str) -> impl FnOnce(zbus::Error) -> SimError + '_ {
        move |source| SimError::Bus {
            node: self.name.clone(),
            call,
            source,
        }
    }

    /// A new connection to the node's system bus.
    pub async fn connect(&self) -> Result<zbus::Connection> {
        let address = self.bus_address()?;
        bus::connect(&address, CONNECT_TIMEOUT)
            .await
            .map_err(self.bus_error("connect"))
    }

    /// hostname1's `BootID`, asked now (32 lowercase hex digits).
    pub async fn boot_id(&self) -> Result<String> {
        let conn = self.connect().await?;
        let root = self.root_path()?;
        bus::boot_id(&conn, &root)
            .await
            .map_err(self.bus_error("hostname1.BootID"))
    }

    /// The systemd Manager's `SoftRebootsCount`, asked now.
    pub async fn soft_reboots(&self) -> Result<u32> {
        let conn = self.connect().await?;
        bus::soft_reboots(&conn)
            .await
            .map_err(self.bus_error("Manager.SoftRebootsCount"))
    }

    /// The systemd Manager's `SystemState`, asked now.
    pub async fn system_state(&self) -> Result<String> {
        let conn = self.connect().await?;
        bus::system_state(&conn)
            .await
            .map_err(self.bus_error("Manager.SystemState"))
    }

    /// A unit's load and activity states, asked now.
    pub async fn unit_state(&self, unit: &str) -> Result<UnitState> {
        let conn = self.connect().await?;
        bus::unit_state(&conn, unit)
            .await
            .map_err(self.bus_error("Unit properties"))
    }

    /// The units whose names match `patterns`, in one of `states` (any state when
    /// empty), as the node's systemd lists them now.
    pub async fn list_units(&self, states: &[&str], patterns: &[&str]) -> Result<Vec<ListedUnit>> {
        let conn = self.connect().await?;
        bus::list_units(&conn, states, patterns)
            .await
            .map_err(self.bus_error("Manager.ListUnitsByPatterns"))
    }

    /// Asks the node's logind to reboot (`RebootWithFlags(0)`, or the soft-reboot flag).
    /// A bus that goes away before the answer arrives is the reboot under way.
    pub async fn reboot(&self, soft: bool) -> Result<()> {
        let conn = self.connect().await?;
        let flags = if soft { SOFT_REBOOT_FLAG } else { 0 };
        match bus::reboot_with_flags(&conn, flags).await {
            Err(e) if !bootc_node_agent::host::dbus::connection_lost(&e) => {
                Err(self.bus_error("login1.RebootWithFlags")(e))
            }
            _ => Ok(()),
        }
    }

    /// Waits until the node is up after a full boot numbered above `after_boots`
    /// (`wait_booted(node.status().boots, …)` waits for the next full boot).
    pub async fn wait_booted(&self, after_boots: u64, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(
            &format!("node `{}` booting (boot {})", self.name, after_boots + 1),
            timeout,
            |s| s.phase == NodePhase::Up && s.boots > after_boots,
        )
        .await
    }

    /// Waits until the node is up with a `SoftRebootsCount` above `after` (and no full
    /// boot in between: the count restarts at 0 on a full boot).
    pub async fn wait_soft_rebooted(&self, after: u32, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(
            &format!("node `{}` soft rebooting (count above {after})", self.name),
            timeout,
            |s| s.phase == NodePhase::Up && s.soft_reboots > after,
        )
        .await
    }

    /// Waits until the node is no longer up (going down, down or stopped).
    pub async fn wait_not_up(&self, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(&format!("node `{}` going down", self.name), timeout, |s| {
            s.phase != NodePhase::Up
        })
        .await
    }

    /// Waits until the node is stopped for good.
    pub async fn wait_stopped(&self, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(&format!("node `{}` stopping", self.name), timeout, |s| {
            s.phase == NodePhase::Stopped
        })
        .await
    }

    /// Waits until `pred` holds for the node's status. Fails early when the node stopped
    /// for good and `pred` does not hold for that.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&NodeStatus) -> bool,
    ) -> Result<NodeStatus> {
        let mut rx = self.status.clone();
        let log = self.log_file.display().to_string();
        let wait = async {
            loop {
                {
                    let s = rx.borrow_and_update();
                    if pred(&s) {
                        return Ok(s.clone());
                    }
                    if s.phase == NodePhase::Stopped {
                        return Err(SimError::Stopped {
                            node: self.name.clone(),
                            details: format!(
                                " (last exit {:?}, error {:?}) while waiting for {what}; see {log}",
                                s.last_exit, s.error
                            ),
                        });
                    }
                }
                if rx.changed().await.is_err() {
                    let s = rx.borrow().clone();
                    if pred(&s) {
                        return Ok(s);
                    }
                    return Err(SimError::Stopped {
                        node: self.name.clone(),
                        details: format!(" (supervisor gone) while waiting for {what}; see {log}"),
                    });
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(r) => r,
            Err(_) => Err(SimError::Timeout {
                what: what.to_owned(),
                timeout,
                details: format!("; last status {:?}; see {log}", self.status()),
            }),
        }
    }

    /// How many times `bootc SUB` ran on this node, over all its boots ([`standin_calls`]):
    /// the agent reads `bootc status` once per pass, so a test counts passes with
    /// `standin_calls("status")`.
    pub fn standin_calls(&self, sub: &str) -> Result<u64> {
        standin_calls(&self.state_dir, sub)
    }

    /// On the next reboot, before the container boots again, the staged deployment is
    /// discarded (as if the new deployment failed and the boot loader fell back), so the
    /// node comes back on its old image. Applies once.
    pub fn fail_next_boot_to_old_image(&self) {
        lock(&self.control).fail_next_boot = true;
    }

    /// On the next reboot the container is not booted again: the node stays down.
    pub fn never_come_back(&self) {
        lock(&self.control).never_come_back = true;
    }

    /// Shuts the container down (SIGTERM to nspawn: a clean poweroff), waiting at most the
    /// stop timeout before SIGKILL. The node does not come back.
    pub async fn stop(&self) -> Result<()> {
        self.signal_stop(Signal::SIGTERM);
        if self.wait_stopped(self.stop_timeout).await.is_ok() {
            return Ok(());
        }
        self.kill_hard();
        self.wait_stopped(Duration::from_secs(10)).await.map(|_| ())
    }

    fn signal_stop(&self, signal: Signal) {
        let mut c = lock(&self.control);
        c.stopping = true;
        if let Some(pid) = c.nspawn_pid {
            let _ = kill(Pid::from_raw(pid_i32(pid)), signal);
        }
    }

    /// SIGKILL to our nspawn and to its child, the container's init (only while nspawn is
    /// not reaped, so that both PIDs are still the processes we started).
    fn kill_hard(&self) {
        let c = lock(&self.control);
        if let Some(pid) = c.nspawn_pid {
            if let Some(init) = c.init_pid {
                let _ = kill(Pid::from_raw(pid_i32(init)), Signal::SIGKILL);
            }
            let _ = kill(Pid::from_raw(pid_i32(pid)), Signal::SIGKILL);
        }
    }

    fn stopped(&self) -> bool {
        self.status.borrow().phase == NodePhase::Stopped
    }

    /// Blocking stop for `Drop`: SIGTERM, poll until stopped or the deadline, SIGKILL.
    fn stop_blocking(&mut self) {
        if !self.stopped() {
            self.signal_stop(Signal::SIGTERM);
            let deadline = Instant::now() + self.stop_timeout;
            while !self.stopped() && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            if !self.stopped() {
                self.kill_hard();
            }
        }
        if let Some(handle) = self.supervisor.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            if handle.is_finished() {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_blocking();
        if let Some(kubelet) = self.kubelet.take() {
            // It ends by itself once the status channel closes; it may still be writing
            // the final NotReady.
            drop(kubelet);
        }
    }
}

fn pid_i32(pid: u32) -> i32 {
    i32::try_from(pid).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
