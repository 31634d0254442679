//! The supervisor thread of a node: it owns the nspawn process, boots the container
//! again when it asks for a reboot, and follows each run's system bus to tell when the
//! node is up.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use tokio::sync::watch;

use super::{
    CONNECT_TIMEOUT, Control, EXIT_REBOOT, NodePhase, NodeStatus, POLL, bus_address_of, lock,
    pid_i32,
};
use crate::bus;

/// Makes the command for one boot (the node kind decides what boots: the same image
/// every time, or the deployment its boot entries name).
pub(crate) type BootFn = Box<dyn FnMut() -> std::io::Result<Command> + Send>;
/// Throws the staged deployment away, for [`super::Node::fail_next_boot_to_old_image`].
pub(crate) type DiscardFn = Box<dyn FnMut() -> crate::Result<()> + Send>;

/// The supervisor thread's state.
pub(super) struct Supervisor {
    pub(super) name: String,
    pub(super) boot: BootFn,
    pub(super) log_file: PathBuf,
    pub(super) discard: DiscardFn,
    pub(super) control: Arc<Mutex<Control>>,
    pub(super) status: watch::Sender<NodeStatus>,
}

impl Supervisor {
    pub(super) fn run(self) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                self.status.send_modify(|s| {
                    s.phase = NodePhase::Stopped;
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
            let Some(child) = self.start_container() else {
                return;
            };
            let nspawn_pid = child.id();
            self.status.send_modify(|s| {
                s.phase = NodePhase::Booting;
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

            let code = self.reap(child);
            if !self.after_exit(code) {
                return;
            }
        }
    }

    /// Starts the container, unless a stop came first; `None` (the node stopped) when
    /// it does not start.
    fn start_container(&mut self) -> Option<Child> {
        let control = self.control.clone();
        let mut c = lock(&control);
        if c.stopping {
            drop(c);
            self.status.send_modify(|s| s.phase = NodePhase::Stopped);
            return None;
        }
        let spawned =
            (self.boot)().and_then(|mut command| spawn_logged(&mut command, &self.log_file));
        match spawned {
            Ok(child) => {
                c.nspawn_pid = Some(child.id());
                c.init_pid = None;
                Some(child)
            }
            Err(e) => {
                drop(c);
                let error = format!("cannot start systemd-nspawn: {e}");
                self.status.send_modify(|s| {
                    s.phase = NodePhase::Stopped;
                    s.error = Some(error);
                });
                None
            }
        }
    }

    /// Reaps the exited nspawn (its PIDs are no longer ours to signal) and returns its
    /// exit status, a signal as 128 + its number.
    fn reap(&self, mut child: Child) -> i32 {
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
    }

    /// Publishes the exit; true when the node boots again (a reboot nobody stopped),
    /// after discarding the staged deployment when a failed boot was asked for.
    fn after_exit(&mut self, code: i32) -> bool {
        let (again, fail_boot) = {
            let mut c = lock(&self.control);
            let again = code == EXIT_REBOOT && !c.stopping && !c.never_come_back;
            let fail_boot = again && std::mem::take(&mut c.fail_next_boot);
            (again, fail_boot)
        };
        self.status.send_modify(|s| {
            s.phase = if again {
                NodePhase::Down
            } else {
                NodePhase::Stopped
            };
            s.last_exit = Some(code);
            s.nspawn_pid = None;
            s.init_pid = None;
        });
        if again
            && fail_boot
            && let Err(e) = (self.discard)()
        {
            self.set_error(format!("cannot discard the staged deployment: {e}"));
        }
        again
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
                if let Ok(up) = probe(&address, init).await {
                    break up;
                }
                tokio::time::sleep(POLL).await;
            };
            let full_boot = std::mem::take(&mut first);
            self.status.send_modify(|s| {
                s.phase = NodePhase::Up;
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
            self.status.send_modify(|s| s.phase = NodePhase::Booting);
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
async fn probe(address: &str, init: u32) -> zbus::Result<(zbus::Connection, String, String, u32)> {
    let conn = bus::connect(address, CONNECT_TIMEOUT).await?;
    let ask = async {
        let state = bus::system_state(&conn).await?;
        if state != "running" && state != "degraded" {
            return Err(zbus::Error::Failure(format!("system state {state}")));
        }
        let root = PathBuf::from(format!("/proc/{init}/root"));
        let boot_id = bus::boot_id(&conn, &root).await?;
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
