//! One simulated node: a `systemd-nspawn` container booting the [`NodeImage`] with real
//! systemd, logind and D-Bus, the bootc stand-in bind-mounted at `/usr/bin/bootc` and its
//! state directory at `/var/lib/bootc-standin`.
//!
//! A supervisor thread (with its own small tokio runtime, so that a node outlives neither
//! more nor less than its [`Node`] value) owns the nspawn process: when it exits with
//! status 133 (the container asked for a reboot) it boots it again, unless told not to;
//! any other exit leaves the node stopped. While the container runs, the supervisor
//! watches its system bus: the node is [`Phase::Up`] once the bus answers and the systemd
//! Manager's `SystemState` is `running` or `degraded`, and goes back to
//! [`Phase::Booting`] when that bus connection closes (shutdown, reboot, soft reboot).
//! Everything it sees is published on a [`tokio::sync::watch`] channel
//! ([`Node::subscribe`]).
//!
//! The harness only ever signals processes it started: its own nspawn process and, as a
//! last resort when nspawn ignored SIGTERM and SIGKILL left the container behind, that
//! nspawn's own child (the container's init).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use tokio::sync::watch;

use crate::bus::{self, UnitState};
use crate::error::{Result, SimError};
use crate::image::{BOOTC_PATH, Fnv, NodeImage, STANDIN_STATE_PATH, require_root, require_tool};

/// nspawn's exit status when the container asked for a reboot.
pub const EXIT_REBOOT: i32 = 133;
/// logind's `SD_LOGIND_SOFT_REBOOT` flag.
pub const SOFT_REBOOT_FLAG: u64 = 1 << 2;

/// How often the supervisor polls while waiting for a container to come up.
const POLL: Duration = Duration::from_millis(100);
/// How long one connection attempt to a node's bus may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How to start a [`Node`].
#[derive(Clone)]
pub struct NodeOptions {
    /// The node's name: nspawn's machine name, the container's hostname, the Kubernetes
    /// Node's name. Must be unique among running nodes.
    pub name: String,
    /// The host directory bind-mounted at `/var/lib/bootc-standin` (the stand-in's state);
    /// it survives reboots. Created if missing.
    pub state_dir: PathBuf,
    /// The stand-in binary, bind-mounted read-only at `/usr/bin/bootc`
    /// (see [`crate::standin_binary`]).
    pub bootc_binary: PathBuf,
    /// The root file system to boot; `None`: [`NodeImage::ensure`].
    pub image: Option<PathBuf>,
    /// Host directories bind-mounted read-write at the same absolute path inside the node,
    /// so that a process outside (an agent) and the node's systemd see the same files
    /// there. Created if missing. Avoid `/tmp` (the node mounts a tmpfs over it).
    pub shared_dirs: Vec<PathBuf>,
    /// More read-write bind mounts: (host path, path in the node).
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// Where nspawn's output (the container's console) goes; `None`: `<state_dir>.log`.
    pub log_file: Option<PathBuf>,
    /// How long [`Node::start`] waits for the first boot.
    pub boot_timeout: Duration,
    /// How long [`Node::stop`] waits for a clean shutdown before SIGKILL.
    pub stop_timeout: Duration,
    /// When set, the harness plays the kubelet against this API: it creates the Node
    /// object and keeps its `Ready` condition (see [`crate::kubelet`]).
    pub kube: Option<kube::Client>,
}

impl std::fmt::Debug for NodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOptions")
            .field("name", &self.name)
            .field("state_dir", &self.state_dir)
            .field("bootc_binary", &self.bootc_binary)
            .field("image", &self.image)
            .field("shared_dirs", &self.shared_dirs)
            .field("binds", &self.binds)
            .field("log_file", &self.log_file)
            .field("boot_timeout", &self.boot_timeout)
            .field("stop_timeout", &self.stop_timeout)
            .field("kube", &self.kube.as_ref().map(|_| "kube::Client"))
            .finish()
    }
}

impl NodeOptions {
    /// Options with the defaults: the cached node image, no extra mounts, 60 s to boot,
    /// 30 s to stop, no kubelet.
    pub fn new(
        name: impl Into<String>,
        state_dir: impl Into<PathBuf>,
        bootc_binary: impl Into<PathBuf>,
    ) -> Self {
        NodeOptions {
            name: name.into(),
            state_dir: state_dir.into(),
            bootc_binary: bootc_binary.into(),
            image: None,
            shared_dirs: Vec::new(),
            binds: Vec::new(),
            log_file: None,
            boot_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(30),
            kube: None,
        }
    }
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
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
    pub phase: Phase,
    /// How many full boots reached [`Phase::Up`] (soft reboots not counted).
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
            phase: Phase::Booting,
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

/// A UUID derived from the node's name: nspawn passes it to the container's systemd, which
/// makes it the machine ID (the image's `/etc/machine-id` is empty).
fn machine_uuid(name: &str) -> String {
    let mut a = Fnv::with_seed(1);
    a.write(name.as_bytes());
    let mut b = Fnv::with_seed(2);
    b.write(name.as_bytes());
    let (a, b) = (a.finish(), b.finish());
    // Version 4, variant 1 bits, so that it is a well-formed UUID.
    let a = (a & !0xf000) | 0x4000;
    let b = (b & !(0xc000_u64 << 48)) | (0x8000_u64 << 48);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
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
        require_root()?;
        require_tool("systemd-nspawn", "systemd-container")?;
        if !valid_name(&options.name) {
            return Err(SimError::InvalidOptions(format!(
                "node name `{}` is not a lowercase DNS label",
                options.name
            )));
        }
        if !options.bootc_binary.is_file() {
            return Err(SimError::Standin(format!(
                "`{}` is not a file",
                options.bootc_binary.display()
            )));
        }
        for dir in &options.shared_dirs {
            if !dir.is_absolute() {
                return Err(SimError::InvalidOptions(format!(
                    "shared directory `{}` is not absolute",
                    dir.display()
                )));
            }
        }
        let image = match &options.image {
            Some(p) => p.clone(),
            None => NodeImage::ensure().await?.root().to_path_buf(),
        };
        let mut dirs: Vec<&Path> = vec![&options.state_dir];
        dirs.extend(options.shared_dirs.iter().map(PathBuf::as_path));
        dirs.extend(options.binds.iter().map(|(host, _)| host.as_path()));
        for dir in dirs {
            std::fs::create_dir_all(dir)
                .map_err(|e| SimError::io("creating a node directory", dir, e))?;
        }
        let log_file = options.log_file.clone().unwrap_or_else(|| {
            let mut p = options.state_dir.clone().into_os_string();
            p.push(".log");
            PathBuf::from(p)
        });

        let mut command = Command::new("systemd-nspawn");
        command
            .arg("-D")
            .arg(&image)
            .arg("-b")
            .arg("--register=no")
            .arg("--keep-unit")
            .arg("-M")
            .arg(&options.name)
            .arg(format!("--uuid={}", machine_uuid(&options.name)))
            .arg("--volatile=overlay")
            .arg("--console=read-only")
            .arg(bind_arg(
                "--bind",
                &options.state_dir,
                Path::new(STANDIN_STATE_PATH),
            ))
            .arg(bind_arg(
                "--bind-ro",
                &options.bootc_binary,
                Path::new(BOOTC_PATH),
            ));
        for dir in &options.shared_dirs {
            command.arg(bind_arg("--bind", dir, dir));
        }
        for (host, inside) in &options.binds {
            command.arg(bind_arg("--bind", host, inside));
        }

        let control = Arc::new(Mutex::new(Control::default()));
        let (tx, rx) = watch::channel(NodeStatus::new());
        let supervisor = Supervisor {
            name: options.name.clone(),
            command,
            log_file: log_file.clone(),
            state_dir: options.state_dir.clone(),
            control: control.clone(),
            status: tx,
        };
        let handle = std::thread::Builder::new()
            .name(format!("node-{}", options.name))
            .spawn(move || supervisor.run())
            .map_err(|e| SimError::io("starting the node's supervisor thread", &log_file, e))?;

        let kubelet = options.kube.clone().map(|client| {
            tokio::spawn(crate::kubelet::run(
                client,
                options.name.clone(),
                rx.clone(),
            ))
        });

        let node = Node {
            name: options.name.clone(),
            state_dir: options.state_dir.clone(),
            log_file,
            stop_timeout: options.stop_timeout,
            control,
            status: rx,
            supervisor: Some(handle),
            kubelet,
        };
        node.wait_booted(0, options.boot_timeout).await?;
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
        bus::boot_id(&conn)
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
            |s| s.phase == Phase::Up && s.boots > after_boots,
        )
        .await
    }

    /// Waits until the node is up with a `SoftRebootsCount` above `after` (and no full
    /// boot in between: the count restarts at 0 on a full boot).
    pub async fn wait_soft_rebooted(&self, after: u32, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(
            &format!("node `{}` soft rebooting (count above {after})", self.name),
            timeout,
            |s| s.phase == Phase::Up && s.soft_reboots > after,
        )
        .await
    }

    /// Waits until the node is no longer up (going down, down or stopped).
    pub async fn wait_not_up(&self, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(&format!("node `{}` going down", self.name), timeout, |s| {
            s.phase != Phase::Up
        })
        .await
    }

    /// Waits until the node is stopped for good.
    pub async fn wait_stopped(&self, timeout: Duration) -> Result<NodeStatus> {
        self.wait_for(&format!("node `{}` stopping", self.name), timeout, |s| {
            s.phase == Phase::Stopped
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
                    if s.phase == Phase::Stopped {
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
        self.status.borrow().phase == Phase::Stopped
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

fn bind_arg(flag: &str, host: &Path, inside: &Path) -> String {
    format!("{flag}={}:{}", host.display(), inside.display())
}

/// The supervisor thread's state.
struct Supervisor {
    name: String,
    command: Command,
    log_file: PathBuf,
    state_dir: PathBuf,
    control: Arc<Mutex<Control>>,
    status: watch::Sender<NodeStatus>,
}

impl Supervisor {
    fn run(self) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                self.status.send_modify(|s| {
                    s.phase = Phase::Stopped;
                    s.error = Some(format!("cannot build the supervisor's runtime: {e}"));
                });
                return;
            }
        };
        runtime.block_on(self.supervise());
    }

    fn set_error(&self, error: String) {
        tracing::warn!(node = %self.name, %error, "host-sim node");
        self.status.send_modify(|s| s.error = Some(error));
    }

    async fn supervise(mut self) {
        loop {
            // Start the container, unless a stop came first.
            let control = self.control.clone();
            let mut child = {
                let mut c = lock(&control);
                if c.stopping {
                    drop(c);
                    self.status.send_modify(|s| s.phase = Phase::Stopped);
                    return;
                }
                match spawn_logged(&mut self.command, &self.log_file) {
                    Ok(child) => {
                        c.nspawn_pid = Some(child.id());
                        c.init_pid = None;
                        child
                    }
                    Err(e) => {
                        drop(c);
                        let error = format!("cannot start systemd-nspawn: {e}");
                        self.status.send_modify(|s| {
                            s.phase = Phase::Stopped;
                            s.error = Some(error);
                        });
                        return;
                    }
                }
            };
            let nspawn_pid = child.id();
            self.status.send_modify(|s| {
                s.phase = Phase::Booting;
                s.nspawn_pid = Some(nspawn_pid);
                s.init_pid = None;
            });

            // Wait for it to exit (without reaping, so its PID stays ours until we say so)
            // while following its boots.
            let exited = tokio::task::spawn_blocking(move || {
                waitid(
                    Id::Pid(Pid::from_raw(pid_i32(nspawn_pid))),
                    WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
                )
            });
            tokio::select! {
                _ = exited => {}
                () = self.follow(nspawn_pid) => {}
            }

            let code = {
                let mut c = lock(&self.control);
                c.nspawn_pid = None;
                c.init_pid = None;
                match child.wait() {
                    Ok(status) => status
                        .code()
                        .or_else(|| {
                            use std::os::unix::process::ExitStatusExt;
                            status.signal().map(|s| 128 + s)
                        })
                        .unwrap_or(-1),
                    Err(_) => -1,
                }
            };
            let (again, fail_boot) = {
                let mut c = lock(&self.control);
                let again = code == EXIT_REBOOT && !c.stopping && !c.never_come_back;
                let fail_boot = again && std::mem::take(&mut c.fail_next_boot);
                (again, fail_boot)
            };
            self.status.send_modify(|s| {
                s.phase = if again { Phase::Down } else { Phase::Stopped };
                s.last_exit = Some(code);
                s.nspawn_pid = None;
                s.init_pid = None;
            });
            if !again {
                return;
            }
            if fail_boot && let Err(e) = discard_staged(&self.state_dir) {
                self.set_error(format!("cannot discard the staged deployment: {e}"));
            }
        }
    }

    /// Follows one container run: finds its init, then forever waits for it to be up,
    /// publishes that, and waits for its bus connection to close.
    async fn follow(&self, nspawn_pid: u32) {
        let init = loop {
            if let Some(pid) = container_init(nspawn_pid) {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        lock(&self.control).init_pid = Some(init);
        self.status.send_modify(|s| s.init_pid = Some(init));
        let address = bus_address_of(init);
        let mut first = true;
        loop {
            let (conn, state, boot_id, soft_reboots) = loop {
                if let Ok(up) = probe(&address).await {
                    break up;
                }
                tokio::time::sleep(POLL).await;
            };
            let full_boot = std::mem::take(&mut first);
            self.status.send_modify(|s| {
                s.phase = Phase::Up;
                if full_boot {
                    s.boots += 1;
                }
                s.ups += 1;
                s.boot_id = Some(boot_id);
                s.soft_reboots = soft_reboots;
                s.system_state = Some(state);
            });
            // The connection closes when the node's D-Bus goes away: shutdown, reboot or
            // soft reboot.
            let mut stream = zbus::MessageStream::from(&conn);
            while stream.next().await.is_some() {}
            drop(conn);
            self.status.send_modify(|s| s.phase = Phase::Booting);
        }
    }
}

/// Starts `command` with its output appended to `log_file`.
fn spawn_logged(command: &mut Command, log_file: &Path) -> std::io::Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file)?;
    let err = log.try_clone()?;
    command.stdin(Stdio::null()).stdout(log).stderr(err).spawn()
}

/// Connects and asks whether the system is up; `Err` until it is.
async fn probe(address: &str) -> zbus::Result<(zbus::Connection, String, String, u32)> {
    let conn = bus::connect(address, CONNECT_TIMEOUT).await?;
    let ask = async {
        let state = bus::system_state(&conn).await?;
        if state != "running" && state != "degraded" {
            return Err(zbus::Error::Failure(format!("system state {state}")));
        }
        let boot_id = bus::boot_id(&conn).await?;
        let soft = bus::soft_reboots(&conn).await?;
        Ok((state, boot_id, soft))
    };
    let (state, boot_id, soft) = match tokio::time::timeout(CONNECT_TIMEOUT * 3, ask).await {
        Ok(r) => r?,
        Err(_) => return Err(zbus::Error::Failure("no answer".into())),
    };
    Ok((conn, state, boot_id, soft))
}

/// The container's init: nspawn's child process once it runs systemd.
fn container_init(nspawn_pid: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{nspawn_pid}/task")).ok()?;
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
            if comm.trim() == "systemd" {
                return Some(child);
            }
        }
    }
    None
}

/// Rewrites the stand-in's state so that the staged deployment (and a queued rollback) is
/// gone, under the stand-in's own lock.
pub fn discard_staged(state_dir: &Path) -> Result<()> {
    use nix::fcntl::{Flock, FlockArg};
    let lock_path = state_dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| SimError::io("opening the stand-in's lock", &lock_path, e))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| {
        SimError::io(
            "locking the stand-in's state",
            &lock_path,
            std::io::Error::from(errno),
        )
    })?;
    let path = state_dir.join("state.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| SimError::io("reading the stand-in's state", &path, e))?;
    let mut state: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        SimError::io(
            "parsing the stand-in's state",
            &path,
            std::io::Error::other(e),
        )
    })?;
    if let Some(obj) = state.as_object_mut() {
        obj.insert("staged".into(), serde_json::Value::Null);
        obj.insert("rollbackQueued".into(), serde_json::Value::Bool(false));
    }
    let body = serde_json::to_vec_pretty(&state).map_err(|e| {
        SimError::io(
            "writing the stand-in's state",
            &path,
            std::io::Error::other(e),
        )
    })?;
    let tmp = state_dir.join(".state.json.host-sim.tmp");
    std::fs::write(&tmp, body)
        .map_err(|e| SimError::io("writing the stand-in's state", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| SimError::io("writing the stand-in's state", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_uuid_is_stable_and_well_formed() {
        let a = machine_uuid("node-a");
        assert_eq!(a, machine_uuid("node-a"));
        assert_ne!(a, machine_uuid("node-b"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn names() {
        assert!(valid_name("sim-node-1"));
        assert!(!valid_name("Sim"));
        assert!(!valid_name("-a"));
        assert!(!valid_name(""));
    }

    #[test]
    fn discard_staged_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("state.json"),
            r#"{"booted":{"x":1},"staged":{"y":2},"rollback":null,"rollbackQueued":true}"#,
        )
        .unwrap();
        discard_staged(dir.path()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("state.json")).unwrap())
                .unwrap();
        assert_eq!(v["booted"]["x"], 1);
        assert!(v["staged"].is_null());
        assert_eq!(v["rollbackQueued"], false);
    }
}
