//! [`Host`] over the host's system bus.
//!
//! bootc runs as a transient oneshot service: the argv goes as a list in `ExecStart`
//! (never through a shell), its output to files in the work directory, with an explicit
//! start timeout. The unit is started with `RemainAfterExit=true` so that, once its job is
//! removed, the unit stays loaded (`active (exited)` or `failed`) and its `Result` and
//! `ExecMainStatus` can be read without racing systemd's garbage collection; after
//! reading, the agent stops the unit and resets a failed state so nothing lingers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::OnceCell;
use zbus::proxy::CacheProperties;
use zbus::{Connection, OwnedObjectPath, Variant};

use super::{BootIdentity, Host, HostError};
use crate::machine::Unlock;

/// The host's bootc, as systemd sees it.
const DEFAULT_BOOTC: &str = "/usr/bin/bootc";
/// The target bootc's path unit starts whenever bootc's status changes.
const STATUS_UPDATED_TARGET: &str = "bootc-status-updated.target";
/// Prefix of the agent's transient units.
const UNIT_PREFIX: &str = "bootc-node-agent-";
/// Where bootc reads registry credentials first, as the host sees it.
const AUTH_FILE: &str = "run/ostree/auth.json";
/// The timer that would update the host behind the pool's back.
const UPDATE_TIMER: &str = "bootc-fetch-apply-updates.timer";
/// Extra time past the unit's own start timeout before the agent gives up.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(2);
/// How much of a command's standard error an error carries.
const STDERR_TAIL: u64 = 4096;
/// logind's `SD_LOGIND_SOFT_REBOOT` flag.
const SOFT_REBOOT_FLAG: u64 = 1 << 2;

/// One `ExecStart` entry: path, argv, ignore-failure.
type ExecCommand = (String, Vec<String>, bool);

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
trait SystemdManager {
    fn subscribe(&self) -> zbus::Result<()>;

    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, Variant<'_>)],
        aux: &[(&str, &[(&str, Variant<'_>)])],
    ) -> zbus::Result<OwnedObjectPath>;

    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;

    fn reload(&self) -> zbus::Result<()>;

    #[allow(clippy::type_complexity)]
    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<
        Vec<(
            String,
            String,
            String,
            String,
            String,
            String,
            OwnedObjectPath,
            u32,
            String,
            OwnedObjectPath,
        )>,
    >;

    fn mask_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;

    #[zbus(property)]
    fn soft_reboots_count(&self) -> zbus::Result<u32>;

    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: OwnedObjectPath,
        unit: String,
        result: String,
    ) -> zbus::Result<()>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1"
)]
trait SystemdService {
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
trait LoginManager {
    fn reboot_with_flags(&self, flags: u64) -> zbus::Result<()>;
}

#[zbus::proxy(
    interface = "org.freedesktop.hostname1",
    default_service = "org.freedesktop.hostname1",
    default_path = "/org/freedesktop/hostname1"
)]
trait Hostname {
    #[zbus(property, name = "BootID")]
    fn boot_id(&self) -> zbus::Result<Vec<u8>>;
}

/// [`Host`] through the host's system bus.
#[derive(Debug)]
pub struct DbusHost {
    connection: Connection,
    work_dir: PathBuf,
    host_root: PathBuf,
    changes: tokio::sync::watch::Receiver<u64>,
    watcher: tokio::task::JoinHandle<()>,
    timeout: Duration,
    bootc: String,
    counter: AtomicU64,
    download_only: OnceCell<bool>,
}

/// What a finished command left behind.
struct Finished {
    stdout_path: PathBuf,
}

impl DbusHost {
    /// Connects to the bus at `address` (`unix:path=/run/dbus/system_bus_socket`),
    /// subscribes to systemd's job signals and starts following
    /// `bootc-status-updated.target`.
    ///
    /// `work_dir` is an absolute directory as the host sees it; commands write their
    /// output there and the agent reads it at the same path (see [`Self::with_host_root`]).
    /// Each command may run for `timeout`.
    pub async fn connect(
        address: &str,
        work_dir: impl Into<PathBuf>,
        timeout: Duration,
    ) -> Result<Self, HostError> {
        let work_dir = work_dir.into();
        if !work_dir.is_absolute() {
            return Err(HostError::WorkDirNotAbsolute {
                path: work_dir.display().to_string(),
            });
        }
        let connection = zbus::connection::Builder::address(address)
            .build()
            .await
            .map_err(|source| HostError::Connect {
                address: address.to_owned(),
                source,
            })?;
        let (changes, watcher) = follow_status_updates(&connection).await?;
        Ok(Self {
            connection,
            work_dir,
            host_root: PathBuf::from("/"),
            changes,
            watcher,
            timeout,
            bootc: DEFAULT_BOOTC.to_owned(),
            counter: AtomicU64::new(0),
            download_only: OnceCell::new(),
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
        SystemdManagerProxy::builder(&self.connection)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(call_error("systemd1.Manager"))
    }

    /// Runs `bootc ARGS` as a transient unit and returns its standard output.
    async fn bootc(&self, args: &[&str]) -> Result<String, HostError> {
        let mut argv = vec![self.bootc.clone()];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
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

    async fn run(&self, argv: Vec<String>) -> Result<Finished, HostError> {
        let command = argv.join(" ");
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let unit = format!("bootc-node-agent-{n}-{}.service", std::process::id());
        let host_stdout = self.work_dir.join(format!("{unit}.out"));
        let host_stderr = self.work_dir.join(format!("{unit}.err"));
        let stdout_path = self.local(&host_stdout);
        let stderr_path = self.local(&host_stderr);
        let local_dir = self.local(&self.work_dir);
        tokio::fs::create_dir_all(&local_dir)
            .await
            .map_err(|source| HostError::Output {
                command: command.clone(),
                path: local_dir.display().to_string(),
                source,
            })?;
        for path in [&stdout_path, &stderr_path] {
            prepare_output(path, &command).await?;
        }

        let manager = self.manager().await?;
        subscribe(&manager).await?;
        let mut removed = manager
            .receive_job_removed()
            .await
            .map_err(call_error("Manager.JobRemoved"))?;

        let exec: Vec<ExecCommand> = vec![(argv[0].clone(), argv.clone(), false)];
        let timeout_usec = u64::try_from(self.timeout.as_micros()).unwrap_or(u64::MAX);
        let properties: Vec<(&str, Variant<'_>)> = vec![
            (
                "Description",
                Variant::from(format!("bootc-node-agent: {command}")),
            ),
            ("Type", Variant::from("oneshot")),
            ("RemainAfterExit", Variant::from(true)),
            ("ExecStart", Variant::from(exec)),
            // The D-Bus form of `StandardOutput=file:PATH` (systemd rejects the
            // `file:` string on the bus).
            (
                "StandardOutputFile",
                Variant::from(host_stdout.display().to_string()),
            ),
            (
                "StandardErrorFile",
                Variant::from(host_stderr.display().to_string()),
            ),
            ("TimeoutStartUSec", Variant::from(timeout_usec)),
        ];
        let job = manager
            .start_transient_unit(&unit, "fail", &properties, &[])
            .await
            .map_err(call_error("Manager.StartTransientUnit"))?;

        let wait = async {
            while let Some(signal) = removed.next().await {
                let Ok(args) = signal.args() else { continue };
                if args.job.as_str() == job.as_str() {
                    return Some(args.result);
                }
            }
            None
        };
        let job_result = match tokio::time::timeout(self.timeout + TIMEOUT_MARGIN, wait).await {
            Ok(Some(result)) => result,
            Ok(None) => return Err(HostError::SignalStreamEnded { command }),
            Err(_) => {
                manager
                    .stop_unit(&unit, "replace")
                    .await
                    .map_err(call_error("Manager.StopUnit"))?;
                return Err(HostError::Timeout {
                    command,
                    timeout: self.timeout,
                });
            }
        };

        let (result, exit_status) = self.service_outcome(&manager, &unit).await?;
        // Release the unit; it has served its purpose.
        let _ = manager.stop_unit(&unit, "replace").await;
        let _ = manager.reset_failed_unit(&unit).await;

        if result == "timeout" {
            return Err(HostError::Timeout {
                command,
                timeout: self.timeout,
            });
        }
        if job_result != "done" || result != "success" || exit_status != 0 {
            let stderr = tail(&stderr_path).await;
            let _ = tokio::fs::remove_file(&stderr_path).await;
            let _ = tokio::fs::remove_file(&stdout_path).await;
            return Err(HostError::CommandFailed {
                command,
                job_result,
                result,
                exit_status,
                stderr,
            });
        }
        let _ = tokio::fs::remove_file(&stderr_path).await;
        Ok(Finished { stdout_path })
    }

    async fn service_outcome(
        &self,
        manager: &SystemdManagerProxy<'_>,
        unit: &str,
    ) -> Result<(String, i32), HostError> {
        let path = manager
            .get_unit(unit)
            .await
            .map_err(call_error("Manager.GetUnit"))?;
        let service = SystemdServiceProxy::builder(&self.connection)
            .path(path)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(call_error("systemd1.Service"))?;
        let result = service
            .result()
            .await
            .map_err(call_error("Service.Result"))?;
        let status = service
            .exec_main_status()
            .await
            .map_err(call_error("Service.ExecMainStatus"))?;
        Ok((result, status))
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

/// Wraps a failed D-Bus call's error with the call's name.
fn call_error(call: &'static str) -> impl FnOnce(zbus::Error) -> HostError {
    move |source| HostError::Call { call, source }
}

/// True when `error` means the bus connection itself went away (the peer closed it or
/// the socket broke) rather than a method answering with an error. During a reboot
/// request this is the host going down before its reply could be delivered.
pub fn connection_lost(error: &zbus::Error) -> bool {
    use std::io::ErrorKind;
    match error {
        zbus::Error::InputOutput(e) => matches!(
            e.kind(),
            ErrorKind::BrokenPipe
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::UnexpectedEof
                | ErrorKind::NotConnected
        ),
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::NoReply(_) | zbus::fdo::Error::Disconnected(_)
        ),
        _ => {
            is_error(error, "org.freedesktop.DBus.Error.Disconnected")
                || is_error(error, "org.freedesktop.DBus.Error.NoReply")
        }
    }
}

/// True when `error` is the D-Bus error `name` (e.g. `org.freedesktop.systemd1.NoSuchUnit`).
fn is_error(error: &zbus::Error, name: &str) -> bool {
    matches!(error, zbus::Error::MethodError(n, _, _) if n.as_str() == name)
}

/// `Manager.StopUnit`; a unit that is not loaded is fine.
async fn stop_if_loaded(manager: &SystemdManagerProxy<'_>, unit: &str) -> Result<(), HostError> {
    match manager.stop_unit(unit, "replace").await {
        Ok(_) => Ok(()),
        Err(e) if is_error(&e, "org.freedesktop.systemd1.NoSuchUnit") => Ok(()),
        Err(source) => Err(call_error("Manager.StopUnit")(source)),
    }
}

/// `Manager.Subscribe`; a client that is already subscribed is fine.
async fn subscribe(manager: &SystemdManagerProxy<'_>) -> Result<(), HostError> {
    match manager.subscribe().await {
        Ok(()) => Ok(()),
        Err(e) if is_error(&e, "org.freedesktop.systemd1.AlreadySubscribed") => Ok(()),
        Err(source) => Err(call_error("Manager.Subscribe")(source)),
    }
}

/// Follows `JobRemoved` for `bootc-status-updated.target`: each one moves the returned
/// counter. The counter's channel closes when the bus connection ends.
async fn follow_status_updates(
    connection: &Connection,
) -> Result<
    (
        tokio::sync::watch::Receiver<u64>,
        tokio::task::JoinHandle<()>,
    ),
    HostError,
> {
    let manager = SystemdManagerProxy::builder(connection)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .map_err(call_error("systemd1.Manager"))?;
    let mut removed = manager
        .receive_job_removed()
        .await
        .map_err(call_error("Manager.JobRemoved"))?;
    subscribe(&manager).await?;
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let task = tokio::spawn(async move {
        while let Some(signal) = removed.next().await {
            if signal
                .args()
                .is_ok_and(|args| args.unit == STATUS_UPDATED_TARGET)
            {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
        // The connection is gone: dropping `tx` closes the channel.
    });
    Ok((rx, task))
}

/// Removes a stale output file so the command's output starts empty.
async fn prepare_output(path: &Path, command: &str) -> Result<(), HostError> {
    match tokio::fs::remove_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(HostError::Output {
            command: command.to_owned(),
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The last [`STDERR_TAIL`] bytes of `path`, trimmed; empty when unreadable.
async fn tail(path: &Path) -> String {
    let Ok(bytes) = tokio::fs::read(path).await else {
        return String::new();
    };
    let start = bytes
        .len()
        .saturating_sub(usize::try_from(STDERR_TAIL).unwrap_or(usize::MAX));
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

/// True when a property read failed because the property does not exist.
fn is_unknown_property(error: &zbus::Error) -> bool {
    match error {
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::UnknownProperty(_) | zbus::fdo::Error::InvalidArgs(_)
        ),
        zbus::Error::MethodError(name, _, _) => matches!(
            name.as_str(),
            "org.freedesktop.DBus.Error.UnknownProperty" | "org.freedesktop.DBus.Error.InvalidArgs"
        ),
        _ => false,
    }
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

    async fn status(&self) -> Result<crate::bootc_status::Host, HostError> {
        let args = ["status", "--format=json", "--format-version=1"];
        let out = self.bootc(&args).await?;
        crate::bootc_status::parse(out.as_bytes()).map_err(|source| HostError::ParseStatus {
            command: format!("{} {}", self.bootc, args.join(" ")),
            source,
        })
    }

    async fn identity(&self) -> Result<BootIdentity, HostError> {
        let hostname = HostnameProxy::builder(&self.connection)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(call_error("hostname1"))?;
        let id = hostname
            .boot_id()
            .await
            .map_err(call_error("hostname1.BootID"))?;
        if id.len() != 16 {
            return Err(HostError::BadBootId { len: id.len() });
        }
        let boot_id = id.iter().map(|b| format!("{b:02x}")).collect();
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

    async fn stage(&self, pin: &bootc_crds::ImageRef) -> Result<(), HostError> {
        let reference = pin.to_string();
        if !pin.is_pin() || pin.pinned().as_deref() != Some(reference.as_str()) {
            return Err(HostError::NotAPin { reference });
        }
        if self.supports_download_only().await? {
            self.bootc(&["switch", "--download-only", &reference])
                .await?;
        } else {
            self.bootc(&["switch", &reference]).await?;
            self.bootc(&["upgrade", "--download-only"]).await?;
        }
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
        manager
            .reload()
            .await
            .map_err(call_error("Manager.Reload"))?;
        let _ = manager.reset_failed_unit(UPDATE_TIMER).await;
        Ok(())
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
        let pattern = format!("{UNIT_PREFIX}*.service");
        let units = manager
            .list_units_by_patterns(&["activating", "active", "deactivating"], &[&pattern])
            .await
            .map_err(call_error("Manager.ListUnitsByPatterns"))?;
        for (name, ..) in units {
            stop_if_loaded(&manager, &name).await?;
        }
        Ok(())
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.clone()
    }
}

impl Drop for DbusHost {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Writes `content` to `path` with mode 0600 through a temporary file in the same
/// directory (created 0700 when missing) and a rename, so readers never see half a
/// file; `None` removes `path`.
pub(crate) async fn write_private(path: &Path, content: Option<&[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

    let Some(content) = content else {
        return match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    };
    let path = path.to_owned();
    let content = content.to_vec();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let dir = path.parent().unwrap_or(Path::new("/"));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("auth");
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            // The mode of an existing temporary file is not changed by open().
            std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            file.write_all(&content)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        let result = write();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    })
    .await
    .map_err(std::io::Error::other)?
}
