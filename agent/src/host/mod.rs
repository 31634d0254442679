//! Host access: the [`Host`] trait the agent's logic talks to, and its D-Bus implementation.
//!
//! Every host action goes through the host's system bus, never a shell: bootc runs as a
//! transient systemd unit (its argv a list, with a timeout, its output in files), reboots
//! go through logind, the boot identity comes from hostname1 and the systemd Manager. A
//! reference that is not a canonical digest pin is refused before any call. The whole
//! contract is described in `docs/architecture.md` ("Host access").

use std::future::Future;
use std::time::Duration;

use bootc_crds::node::UnitHealth;
use bootc_crds::pool::SignaturePolicy;

use crate::bootc_status::BootcHost;

pub mod dbus;
pub mod progress;

pub use dbus::{CallTimeouts, DbusHost};
pub use progress::StageProgress;

/// The host's own update timer, which would update and reboot the host behind the pool's
/// back: the agent masks it at runtime ([`Host::mask_update_timer`]) while the node is in a
/// pool, and hands it back when it is not ([`Host::release_update_timer`]).
pub const UPDATE_TIMER: &str = "bootc-fetch-apply-updates.timer";

/// Which boot the host is in: what `lastReboot` records, to tell later whether a reboot
/// happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootIdentity {
    /// The kernel's boot ID (hostname1's `BootID`), as 32 lowercase hex digits.
    pub boot_id: String,
    /// The systemd Manager's `SoftRebootsCount` (0 when this systemd lacks it).
    pub soft_reboots: u64,
    /// Whether this systemd knows soft reboots (it has `SoftRebootsCount`).
    pub can_soft_reboot: bool,
}

/// Why a host operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The image to stage is not a canonical digest pin; nothing was sent to the host.
    #[error("refusing to stage `{reference}`: not a canonical digest pin (registry/repo@sha256:…)")]
    NotAPin {
        /// The reference as given.
        reference: String,
    },
    /// The work directory is not an absolute path.
    #[error("the host work directory `{path}` is not absolute")]
    WorkDirNotAbsolute {
        /// The path as given.
        path: String,
    },
    /// Connecting to the host's bus failed.
    #[error("cannot connect to the host's bus at `{address}`")]
    Connect {
        /// The bus address.
        address: String,
        /// The cause.
        #[source]
        source: zbus::Error,
    },
    /// A D-Bus call failed.
    #[error("D-Bus call {call} failed")]
    Call {
        /// The interface member called (`Manager.StartTransientUnit`, …).
        call: &'static str,
        /// The cause.
        #[source]
        source: zbus::Error,
    },
    /// The bus closed the `JobRemoved` signal stream before the command's job finished.
    #[error("the bus stopped delivering JobRemoved while `{command}` ran")]
    SignalStreamEnded {
        /// The command's argv, joined with spaces.
        command: String,
    },
    /// Preparing or reading a command's output file failed.
    #[error("cannot access `{path}`, output of `{command}`")]
    Output {
        /// The command's argv, joined with spaces.
        command: String,
        /// The output file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A command ran and failed.
    #[error(
        "`{command}` failed (job {job_result}, result {result}, exit status {exit_status}): {stderr}"
    )]
    CommandFailed {
        /// The command's argv, joined with spaces.
        command: String,
        /// The systemd job's result (`done`, `failed`, …).
        job_result: String,
        /// The service's `Result` (`success`, `exit-code`, …).
        result: String,
        /// The service's `ExecMainStatus`.
        exit_status: i32,
        /// The last 4 KiB of the command's standard error.
        stderr: String,
    },
    /// systemd could not set the command's unit up (its result `resources`: e.g. the
    /// executor or the unit's cgroup missing for a moment after a daemon reload), so the
    /// command never ran, even after the retries.
    #[error(
        "systemd could not start `{command}` (unit result `resources`, {attempts} attempts; \
         the command never ran, which is usually transient)"
    )]
    NotStarted {
        /// The command's argv, joined with spaces.
        command: String,
        /// How many units were tried.
        attempts: u32,
    },
    /// systemd could not start the program (the service's status 203/EXEC): it is missing
    /// or not executable on the host. Nothing ran, so there is no standard error to show.
    #[error("bootc not found: systemd could not run `{program}` on the host (`{command}`)")]
    NotFound {
        /// The program (`/usr/bin/bootc`).
        program: String,
        /// The command's argv, joined with spaces.
        command: String,
    },
    /// systemd could not set up bootc's progress pipe (the socket unit's start job
    /// ended with `result`); the staging is run again without progress reports.
    #[error("systemd could not open bootc's progress pipe `{socket}` (job {result})")]
    ProgressPipe {
        /// The socket unit.
        socket: String,
        /// Its start job's result.
        result: String,
    },
    /// A command did not finish in time; its unit was stopped.
    #[error("`{command}` did not finish within {timeout:?}")]
    Timeout {
        /// The command's argv, joined with spaces.
        command: String,
        /// The timeout it was given.
        timeout: Duration,
    },
    /// `bootc status` printed something the agent cannot read.
    #[error("cannot read the output of `{command}`")]
    ParseStatus {
        /// The command's argv, joined with spaces.
        command: String,
        /// The cause.
        #[source]
        source: crate::bootc_status::StatusError,
    },
    /// Writing or removing the host's registry credentials failed.
    #[error("cannot write the registry credentials `{path}`")]
    Credentials {
        /// The file, as the agent sees it.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The host answered something the agent cannot read (e.g. `bootc --version`
    /// printed no version).
    #[error("{what}")]
    Unexpected {
        /// What was unexpected.
        what: String,
    },
    /// hostname1's `BootID` is not 16 bytes.
    #[error("hostname1 BootID has {len} bytes, not 16")]
    BadBootId {
        /// The number of bytes received.
        len: usize,
    },
    /// A unit name to read is not a systemd unit name; nothing was sent to the host.
    #[error("refusing to read unit {name:?}: it {reason}")]
    BadUnitName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The states a unit whose `LoadState` is one of these reports as its `ActiveState`: the
/// unit is not there to be active (`not-found`), cannot be (`bad-setting`, `error`) or
/// must not be (`masked`), which says more than its `inactive`.
pub const NOT_LOADED: [&str; 4] = ["not-found", "bad-setting", "error", "masked"];

/// Refuses, before any call, a list holding a name that is not a systemd unit name (see
/// `bootc_crds::validate::check_unit_name`) or that names a template (`name@.service`),
/// which systemd refuses to load.
pub fn check_unit_names(names: &[String]) -> Result<(), HostError> {
    for name in names {
        let template = name
            .rsplit_once('.')
            .is_some_and(|(stem, _)| stem.ends_with('@'));
        let checked = bootc_crds::validate::check_unit_name(name).and_then(|()| {
            if template {
                Err(
                    "is a template, which has no state of its own: name an instance \
                     (`name@instance.service`)"
                        .to_owned(),
                )
            } else {
                Ok(())
            }
        });
        checked.map_err(|reason| HostError::BadUnitName {
            name: name.clone(),
            reason,
        })?;
    }
    Ok(())
}

impl HostError {
    /// A D-Bus call that got no answer within its bound ([`CallTimeouts`]).
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            HostError::Call { source: zbus::Error::InputOutput(e), .. }
                if e.kind() == std::io::ErrorKind::TimedOut
        )
    }

    /// Whether the host's bus went away under the call: the host is rebooting (or its
    /// bus restarting), which is no failure of the command or of the host.
    pub fn connection_lost(&self) -> bool {
        match self {
            HostError::Call { source, .. } => dbus::connection_lost(source),
            HostError::SignalStreamEnded { .. } => true,
            _ => false,
        }
    }
}

/// What the agent needs from the host. [`DbusHost`] talks to a real host; tests and scale
/// runs can provide their own.
pub trait Host: Send + Sync {
    /// `bootc status --format=json --format-version=1`, parsed.
    fn status(&self) -> impl Future<Output = Result<BootcHost, HostError>> + Send;

    /// The current boot's identity.
    fn identity(&self) -> impl Future<Output = Result<BootIdentity, HostError>> + Send;

    /// The version `bootc --version` reports (`1.1.4` of `bootc 1.1.4`).
    fn bootc_version(&self) -> impl Future<Output = Result<String, HostError>> + Send;

    /// Pulls and stages `pin` locked: `bootc switch --download-only PIN` when this bootc
    /// supports it, else `bootc switch PIN` then `bootc upgrade --download-only`; with
    /// [`SignaturePolicy::Enforce`], `switch` carries `--enforce-container-sigpolicy`
    /// (see [`dbus::argv::staging_commands`]), so the host's container signature policy
    /// decides whether the image may be staged.
    fn stage(
        &self,
        pin: &bootc_crds::ImageRef,
        policy: SignaturePolicy,
    ) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Locks the staged deployment of the image the host tracks: `bootc upgrade
    /// --download-only`, which every bootc with download-only has, and which locks a
    /// deployment staged unlocked without pulling anything new when the tracked image
    /// has not moved. (`switch --download-only` of the tracked image does not lock it:
    /// bootc answers "Image specification is unchanged", bootc issue #2425.)
    fn lock(&self) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Makes the staged (or rollback) deployment the next boot's.
    fn unlock(
        &self,
        how: crate::machine::Unlock,
    ) -> impl Future<Output = Result<(), HostError>> + Send;

    /// The named units' states in the running boot, in the order given: systemd's
    /// `ActiveState` and `SubState` of each, loading (never starting) a unit that is not
    /// loaded; a unit whose `LoadState` is one of [`NOT_LOADED`] reports that state as
    /// its `ActiveState`. Names that are not unit names are refused before any call
    /// ([`check_unit_names`]).
    fn unit_states(
        &self,
        names: &[String],
    ) -> impl Future<Output = Result<Vec<UnitHealth>, HostError>> + Send;

    /// Reboots the host (`soft`: userspace only).
    fn reboot(&self, soft: bool) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Masks `bootc-fetch-apply-updates.timer` at runtime and stops it.
    fn mask_update_timer(&self) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Hands the update timer back as the host had it: removes the runtime mask and, if
    /// the timer is enabled (so it ran before the mask), starts it again. A mask of the
    /// host's own (in `/etc`) stays, and a disabled timer stays stopped.
    fn release_update_timer(&self) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Writes `auth` (a containers `auth.json`) to the host's `/run/ostree/auth.json`
    /// with mode 0600, replacing it atomically; `None` removes the file.
    fn write_credentials(
        &self,
        auth: Option<&[u8]>,
    ) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Stops the agent's commands still running on the host (its own and those a
    /// previous agent process left behind). A command stopped this way fails.
    fn cancel(&self) -> impl Future<Output = Result<(), HostError>> + Send;

    /// Waits, up to the command timeout, for the commands a previous agent process
    /// left running to end on their own (a restarted agent must not cut short a pull or
    /// an unlock it did not see finish); how many were running when it was called.
    fn await_leftovers(&self) -> impl Future<Output = Result<usize, HostError>> + Send;

    /// A counter that moves whenever the host signals that bootc's status may have
    /// changed. The channel closes when the host connection is lost.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// How far the staging in flight has got, as bootc reports it (`None` before the
    /// first report). Hosts that cannot tell keep it `None`.
    fn progress(&self) -> tokio::sync::watch::Receiver<Option<StageProgress>>;
}

#[cfg(test)]
mod tests {
    use super::{HostError, check_unit_names};

    #[test]
    fn only_unit_names_of_loadable_units_pass() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        check_unit_names(&names(&[
            "boot-complete.target",
            "getty@tty1.service",
            "dev-disk-by\\x2dlabel-root.device",
        ]))
        .unwrap();
        for bad in [
            "",
            "sshd",
            "x.conf",
            "../etc/passwd.service",
            "a b.service",
            "getty@.service",
        ] {
            let err = check_unit_names(&names(&["ok.service", bad])).unwrap_err();
            assert!(
                matches!(&err, HostError::BadUnitName { name, .. } if name == bad),
                "{bad:?}: {err:?}"
            );
            assert!(
                err.to_string().starts_with("refusing to read unit"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_broken_bus_reads_as_the_host_going_down_and_nothing_else_does() {
        let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let lost = HostError::Call {
            call: "Manager.Subscribe",
            source: zbus::Error::InputOutput(std::sync::Arc::new(broken)),
        };
        assert!(lost.connection_lost());
        assert!(
            HostError::SignalStreamEnded {
                command: "x".into()
            }
            .connection_lost()
        );
        let failed = HostError::CommandFailed {
            command: "bootc switch".into(),
            job_result: "failed".into(),
            result: "exit-code".into(),
            exit_status: 1,
            stderr: "error: pull".into(),
        };
        assert!(!failed.connection_lost());
        let refused = HostError::Call {
            call: "Manager.StartTransientUnit",
            source: zbus::Error::Failure("Access denied".into()),
        };
        assert!(!refused.connection_lost());
    }
}
