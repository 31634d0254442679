//! [`Host`] over the host's system bus.
//!
//! bootc runs as a transient oneshot service: the argv goes as a list in `ExecStart`
//! (never through a shell), its output to files in the work directory, with an explicit
//! start timeout. The unit is started with `RemainAfterExit=true` so that, once its job is
//! removed, the unit stays loaded (`active (exited)` or `failed`) and its `Result` and
//! `ExecMainStatus` can be read without racing systemd's garbage collection; after
//! reading, the agent stops the unit and resets a failed state so nothing lingers.
//!
//! - `argv`: the bootc command lines that stage an image;
//! - `unit`: one command as a transient unit, from start to result;
//! - `bus`: failed calls, a lost connection, and bootc's status-change signal;
//! - `proxies`: the systemd, logind and hostname1 interfaces called;
//! - `files`: files written on the host (the registry credentials);
//! - `units`: the states of named units, for `status.health`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use bootc_crds::pool::SignaturePolicy;
use tokio::sync::OnceCell;
use zbus::Connection;

use super::{BootIdentity, Host, HostError, StageProgress, UPDATE_TIMER};
use crate::bootc_status::BootcHost;
use crate::machine::Unlock;

pub mod argv;
mod boot_id;
mod bus;
mod files;
mod pipe;
mod proxies;
mod unit;
mod units;

pub use boot_id::parse_kernel_boot_id;
pub use bus::{CallTimeouts, connection_lost};
use bus::{
    bus_connection, call_error, follow_status_updates, is_unknown_property, manager_on,
    start_if_enabled, stop_if_loaded,
};
pub(crate) use files::write_private;
use proxies::{LoginManagerProxy, SystemdManagerProxy};

/// The host's bootc, as systemd sees it.
const DEFAULT_BOOTC: &str = "/usr/bin/bootc";
/// Prefix of the agent's transient units.
const UNIT_PREFIX: &str = "bootc-node-agent-";
/// Where bootc reads registry credentials first, as the host sees it.
const AUTH_FILE: &str = "run/ostree/auth.json";
/// The kernel's boot ID, as the host sees it.
const KERNEL_BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// ostree's finalization lock: while it exists, `ostree-finalize-staged` leaves the
/// staged deployment out of the next boot.
const FINALIZATION_LOCK: &str = "/run/ostree/staged-deployment-locked";
/// The unit that writes a staged deployment into the boot entries at shutdown.
const FINALIZE_STAGED: &str = "ostree-finalize-staged.service";
/// Creates the finalization lock (coreutils, on every bootc host).
const TOUCH: &str = "/usr/bin/touch";
/// Prints the kernel's boot ID on systemd before 256 (coreutils).
const CAT: &str = "/usr/bin/cat";
/// How often a restarted agent looks again for a previous agent's running commands.
const LEFTOVER_POLL: Duration = Duration::from_millis(250);
/// How long past the command timeout it waits for them.
const LEFTOVER_MARGIN: Duration = Duration::from_secs(10);
/// logind's `SD_LOGIND_SOFT_REBOOT` flag.
const SOFT_REBOOT_FLAG: u64 = 1 << 2;

/// [`Host`] through the host's system bus.
#[derive(Debug)]
pub struct DbusHost {
    connection: Connection,
    /// The bus's address, for the connection `Manager.Reload` is called on.
    address: String,
    calls: CallTimeouts,
    work_dir: PathBuf,
    host_root: PathBuf,
    changes: tokio::sync::watch::Receiver<u64>,
    watcher: tokio::task::JoinHandle<()>,
    timeout: Duration,
    bootc: String,
    counter: AtomicU64,
    /// Names this connection's units apart from any other agent's (see [`instance_id`]).
    instance: String,
    download_only: OnceCell<bool>,
    /// The host's boot ID, read once per connection (see [`Self::boot_id`]).
    boot_id: OnceCell<String>,
    /// The staging's progress, as the reader of bootc's progress pipe last saw it.
    progress: tokio::sync::watch::Sender<Option<StageProgress>>,
    /// Cleared when this bootc refused `--progress-fd`: staging goes on without it.
    progress_supported: std::sync::atomic::AtomicBool,
}

impl DbusHost {
    /// Connects to the bus at `address` (`unix:path=/run/dbus/system_bus_socket`),
    /// subscribes to systemd's job signals and starts following
    /// `bootc-status-updated.target`.
    ///
    /// `work_dir` is an absolute directory as the host sees it; commands write their
    /// output there and the agent reads it at the same path (see [`Self::with_host_root`]).
    /// Each command may run for `timeout`; each D-Bus call is answered within the
    /// [`CallTimeouts`] defaults or fails.
    pub async fn connect(
        address: &str,
        work_dir: impl Into<PathBuf>,
        timeout: Duration,
    ) -> Result<Self, HostError> {
        Self::connect_with(address, work_dir, timeout, CallTimeouts::default()).await
    }

    /// [`Self::connect`], with D-Bus calls bounded by `calls`.
    pub async fn connect_with(
        address: &str,
        work_dir: impl Into<PathBuf>,
        timeout: Duration,
        calls: CallTimeouts,
    ) -> Result<Self, HostError> {
        let work_dir = work_dir.into();
        if !work_dir.is_absolute() {
            return Err(HostError::WorkDirNotAbsolute {
                path: work_dir.display().to_string(),
            });
        }
        let connection = bus_connection(address, calls.call).await?;
        let (changes, watcher) = follow_status_updates(&connection).await?;
        Ok(Self {
            connection,
            address: address.to_owned(),
            calls,
            work_dir,
            host_root: PathBuf::from("/"),
            changes,
            watcher,
            timeout,
            bootc: DEFAULT_BOOTC.to_owned(),
            counter: AtomicU64::new(0),
            instance: instance_id(),
            download_only: OnceCell::new(),
            boot_id: OnceCell::new(),
            progress: tokio::sync::watch::Sender::new(None),
            progress_supported: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Where the agent sees the host's root file system (default `/`: the DaemonSet
    /// mounts the host directories it needs at their own paths). The work directory and
    /// `/run/ostree/auth.json` are reached under it.
    pub fn with_host_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.host_root = root.into();
        self
    }

    /// `path` (absolute, as the host sees it) as the agent sees it.
    fn local(&self, path: &Path) -> PathBuf {
        self.host_root.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// Uses `path` (absolute, as the host sees it) as the bootc binary.
    pub fn with_bootc_path(mut self, path: impl Into<String>) -> Self {
        self.bootc = path.into();
        self
    }

    async fn manager(&self) -> Result<SystemdManagerProxy<'static>, HostError> {
        manager_on(&self.connection).await
    }

    /// `Manager.Reload`, on a connection of its own whose calls may take
    /// [`CallTimeouts::reload`]: a reload of a large system may take longer than any
    /// other call should. Reloads are rare (masking and releasing the update timer).
    async fn reload(&self) -> Result<(), HostError> {
        let connection = bus_connection(&self.address, self.calls.reload).await?;
        manager_on(&connection)
            .await?
            .reload()
            .await
            .map_err(call_error("Manager.Reload"))
    }

    /// Runs `bootc ARGS` as a transient unit and returns its standard output.
    async fn bootc(&self, args: &[&str]) -> Result<String, HostError> {
        let mut argv = vec![self.bootc.clone()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        self.output_of(argv).await
    }

    /// Runs `argv` as a transient unit and returns its standard output.
    async fn output_of(&self, argv: Vec<String>) -> Result<String, HostError> {
        let finished = self.run(argv.clone()).await?;
        let command = argv.join(" ");
        let out = tokio::fs::read(&finished.stdout_path)
            .await
            .map_err(|source| HostError::Output {
                command,
                path: finished.stdout_path.display().to_string(),
                source,
            })?;
        let _ = tokio::fs::remove_file(&finished.stdout_path).await;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// bootc without `switch --download-only`: `bootc switch PIN` then `bootc upgrade
    /// --download-only`, back to back in one transient unit (systemd starts the second
    /// the moment the first exits, with no round trip through the agent). Between the
    /// two the staged deployment is unlocked; should the host shut down in that gap, the
    /// unit is stopped before `ostree-finalize-staged` (it is ordered after it) and its
    /// `ExecStopPost` creates ostree's finalization lock, so the next boot stays on the
    /// old deployment. The same holds when the agent cancels it. See docs/testing.md.
    async fn switch_then_lock(
        &self,
        reference: &str,
        digest: &str,
        policy: SignaturePolicy,
    ) -> Result<(), HostError> {
        let spec = unit::UnitSpec {
            commands: argv::staging_commands(&self.bootc, reference, false, policy),
            stop_post: Some(vec![TOUCH.to_owned(), FINALIZATION_LOCK.to_owned()]),
            after: vec![FINALIZE_STAGED.to_owned()],
            progress: Some(digest.to_owned()),
        };
        self.run_staging(spec).await
    }

    /// Runs a staging unit with bootc's progress pipe; once more without it when this
    /// bootc refuses `--progress-fd` (older than the option), remembered from then on.
    async fn run_staging(&self, spec: unit::UnitSpec) -> Result<(), HostError> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut spec = spec;
        if !self.progress_supported.load(Relaxed) {
            spec.progress = None;
        }
        let finished = match self.run_unit(spec.clone()).await {
            Err(HostError::CommandFailed {
                exit_status: 2,
                stderr,
                ..
            }) if spec.progress.is_some() && stderr.contains(unit::PROGRESS_FLAG) => {
                tracing::warn!(
                    error = %stderr,
                    "this bootc has no --progress-fd; staging without progress reports"
                );
                self.progress_supported.store(false, Relaxed);
                spec.progress = None;
                self.run_unit(spec).await?
            }
            Err(e @ HostError::ProgressPipe { .. }) => {
                tracing::warn!(
                    error = %e,
                    "staging without progress reports from now on"
                );
                self.progress_supported.store(false, Relaxed);
                spec.progress = None;
                self.run_unit(spec).await?
            }
            other => other?,
        };
        let _ = tokio::fs::remove_file(&finished.stdout_path).await;
        Ok(())
    }

    async fn supports_download_only(&self) -> Result<bool, HostError> {
        self.download_only
            .get_or_try_init(|| async {
                let help = self.bootc(&["switch", "--help"]).await?;
                Ok(help.contains("--download-only"))
            })
            .await
            .copied()
    }
}

/// 16 hex digits drawn at random (std's per-process random hash keys, the time and a
/// per-process counter): what tells this connection's units from those of an earlier
/// agent process, which in a pod has the same PID.
fn instance_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let hash = RandomState::new().hash_one((nanos, seq, std::process::id()));
    format!("{hash:016x}")
}

/// The version in `bootc --version`'s output: its first line without the program name
/// (`bootc 1.1.4` → `1.1.4`); `None` for empty output.
pub fn parse_bootc_version(output: &str) -> Option<String> {
    let line = output.lines().map(str::trim).find(|l| !l.is_empty())?;
    let version = line.strip_prefix("bootc").map_or(line, str::trim_start);
    (!version.is_empty()).then(|| version.to_owned())
}

impl Host for DbusHost {
    async fn bootc_version(&self) -> Result<String, HostError> {
        let out = self.bootc(&["--version"]).await?;
        parse_bootc_version(&out).ok_or_else(|| HostError::Unexpected {
            what: format!("`{} --version` printed no version", self.bootc),
        })
    }

    async fn status(&self) -> Result<BootcHost, HostError> {
        let args = ["status", "--format=json", "--format-version=1"];
        let out = self.bootc(&args).await?;
        crate::bootc_status::parse(out.as_bytes()).map_err(|source| HostError::ParseStatus {
            command: format!("{} {}", self.bootc, args.join(" ")),
            source,
        })
    }

    async fn identity(&self) -> Result<BootIdentity, HostError> {
        let boot_id = self.boot_id().await?;
        let manager = self.manager().await?;
        let (soft_reboots, can_soft_reboot) = match manager.soft_reboots_count().await {
            Ok(n) => (u64::from(n), true),
            Err(e) if is_unknown_property(&e) => (0, false),
            Err(source) => {
                return Err(HostError::Call {
                    call: "Manager.SoftRebootsCount",
                    source,
                });
            }
        };
        Ok(BootIdentity {
            boot_id,
            soft_reboots,
            can_soft_reboot,
        })
    }

    async fn stage(
        &self,
        pin: &bootc_crds::ImageRef,
        policy: SignaturePolicy,
    ) -> Result<(), HostError> {
        let reference = pin.to_string();
        if !pin.is_pin() || pin.pinned().as_deref() != Some(reference.as_str()) {
            return Err(HostError::NotAPin { reference });
        }
        let digest = pin.digest().map(|d| d.to_string()).unwrap_or_default();
        if self.supports_download_only().await? {
            self.run_staging(unit::UnitSpec {
                commands: argv::staging_commands(&self.bootc, &reference, true, policy),
                progress: Some(digest),
                ..unit::UnitSpec::default()
            })
            .await
        } else {
            self.switch_then_lock(&reference, &digest, policy).await
        }
    }

    async fn lock(&self) -> Result<(), HostError> {
        self.bootc(&["upgrade", "--download-only"]).await?;
        Ok(())
    }

    async fn unlock(&self, how: Unlock) -> Result<(), HostError> {
        match how {
            Unlock::FromDownloaded => {
                self.bootc(&["upgrade", "--from-downloaded"]).await?;
            }
            Unlock::AlreadyUnlocked => {}
            Unlock::Rollback => {
                self.bootc(&["rollback"]).await?;
            }
        }
        Ok(())
    }

    async fn unit_states(
        &self,
        names: &[String],
    ) -> Result<Vec<bootc_crds::node::UnitHealth>, HostError> {
        crate::host::check_unit_names(names)?;
        let manager = self.manager().await?;
        units::read(&self.connection, &manager, names).await
    }

    async fn reboot(&self, soft: bool) -> Result<(), HostError> {
        let flags = if soft { SOFT_REBOOT_FLAG } else { 0 };
        let login = LoginManagerProxy::new(&self.connection)
            .await
            .map_err(call_error("login1.Manager"))?;
        match login.reboot_with_flags(flags).await {
            Ok(()) => Ok(()),
            // logind queues the reboot before it answers; a bus that goes away before the
            // answer arrives is that reboot under way, not a failure to report.
            Err(e) if connection_lost(&e) => {
                tracing::info!(error = %e, "the bus went away during the reboot request");
                Ok(())
            }
            Err(source) => Err(call_error("Manager.RebootWithFlags")(source)),
        }
    }

    async fn mask_update_timer(&self) -> Result<(), HostError> {
        // The order matters on real systemd: a runtime mask only takes effect after a
        // reload, and a reload while the timer is still active fails it ("Unit to
        // trigger vanished", leaving the system degraded). So: stop, mask, reload, and
        // clear any failed state.
        let manager = self.manager().await?;
        stop_if_loaded(&manager, UPDATE_TIMER).await?;
        manager
            .mask_unit_files(&[UPDATE_TIMER], true, true)
            .await
            .map_err(call_error("Manager.MaskUnitFiles"))?;
        self.reload().await?;
        let _ = manager.reset_failed_unit(UPDATE_TIMER).await;
        Ok(())
    }

    async fn release_update_timer(&self) -> Result<(), HostError> {
        let manager = self.manager().await?;
        manager
            .unmask_unit_files(&[UPDATE_TIMER], true)
            .await
            .map_err(call_error("Manager.UnmaskUnitFiles"))?;
        self.reload().await?;
        start_if_enabled(&manager, UPDATE_TIMER).await
    }

    async fn write_credentials(&self, auth: Option<&[u8]>) -> Result<(), HostError> {
        let path = self.local(Path::new("/").join(AUTH_FILE).as_path());
        write_private(&path, auth)
            .await
            .map_err(|source| HostError::Credentials {
                path: path.display().to_string(),
                source,
            })
    }

    async fn cancel(&self) -> Result<(), HostError> {
        let manager = self.manager().await?;
        // Progress sockets first: a socket outliving its service would start the
        // service again for a report left in its FIFO.
        for kind in ["socket", "service"] {
            let pattern = format!("{UNIT_PREFIX}*.{kind}");
            let units = manager
                .list_units_by_patterns(&["activating", "active", "deactivating"], &[&pattern])
                .await
                .map_err(call_error("Manager.ListUnitsByPatterns"))?;
            for (name, ..) in units {
                stop_if_loaded(&manager, &name).await?;
            }
        }
        Ok(())
    }

    async fn await_leftovers(&self) -> Result<usize, HostError> {
        let manager = self.manager().await?;
        let pattern = format!("{UNIT_PREFIX}*.service");
        let running = async || {
            manager
                .list_units_by_patterns(&["activating", "deactivating"], &[&pattern])
                .await
                .map_err(call_error("Manager.ListUnitsByPatterns"))
                .map(|units| units.into_iter().map(|u| u.0).collect::<Vec<_>>())
        };
        let first = running().await?;
        if first.is_empty() {
            return Ok(0);
        }
        tracing::info!(
            units = ?first,
            "commands a previous agent started are still running; waiting for them to end"
        );
        // Keep their progress pipes drained (a full FIFO would hold bootc up); what
        // they report is for a digest this agent did not ask for, so it is not shown.
        let readers: Vec<_> = first
            .iter()
            .map(|unit| {
                let stem = unit.trim_end_matches(".service");
                self.local(&self.work_dir.join(format!("{stem}.progress")))
            })
            .filter(|fifo| fifo.exists())
            .map(|fifo| {
                let (sink, _) = tokio::sync::watch::channel(None);
                tokio::spawn(pipe::read_progress(fifo, String::new(), sink))
            })
            .collect();
        let _abort = AbortOnDrop(readers);
        let deadline = tokio::time::Instant::now() + self.timeout + LEFTOVER_MARGIN;
        loop {
            let left = running().await?;
            if left.is_empty() {
                tracing::info!(units = ?first, "the previous agent's commands ended");
                return Ok(first.len());
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    units = ?left,
                    "the previous agent's commands still run past the command timeout"
                );
                return Ok(first.len());
            }
            tokio::time::sleep(LEFTOVER_POLL).await;
        }
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.clone()
    }

    fn progress(&self) -> tokio::sync::watch::Receiver<Option<StageProgress>> {
        self.progress.subscribe()
    }
}

/// Aborts the tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl Drop for DbusHost {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}
