//! One command as a transient systemd unit: the argv goes as a list in `ExecStart`
//! (never through a shell), its output to files in the work directory, with an explicit
//! start timeout; the agent waits for the unit's job, reads the service's result, and
//! releases the unit.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tokio::task::JoinHandle;
use zbus::proxy::CacheProperties;
use zbus::{OwnedObjectPath, Variant};

use super::bus::{call_error, stop_if_loaded, subscribe};
use super::pipe::ProgressPipe;
use super::proxies::{JobRemovedStream, SystemdManagerProxy, SystemdServiceProxy};
use super::{DbusHost, UNIT_PREFIX};
use crate::host::HostError;

/// Extra time past the unit's own start timeout before the agent gives up.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(2);
/// The service status systemd gives when it cannot execute the program
/// (`EXIT_EXEC`, "203/EXEC").
const EXIT_EXEC: i32 = 203;
/// How many units a command gets when systemd cannot set them up (result `resources`).
const START_ATTEMPTS: u32 = 3;
/// The pause before the next of those, times the attempts so far.
const START_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How much of a command's standard error an error carries.
const STDERR_TAIL: u64 = 4096;

/// One `ExecStart` entry: path, argv, ignore-failure.
type ExecCommand = (String, Vec<String>, bool);

/// What a finished command left behind.
pub(super) struct Finished {
    /// The command's standard output, as the agent sees it.
    pub(super) stdout_path: PathBuf,
}

/// What one transient unit runs.
#[derive(Debug, Default, Clone)]
pub(super) struct UnitSpec {
    /// The commands (argv lists), one after the other: systemd starts the next as soon
    /// as one exits successfully, with no round trip through the agent.
    pub(super) commands: Vec<Vec<String>>,
    /// A command run when the unit stops, however it ended (`ExecStopPost`, its
    /// failure ignored).
    pub(super) stop_post: Option<Vec<String>>,
    /// Units this one is ordered after: at shutdown it is stopped before them.
    pub(super) after: Vec<String>,
    /// The digest being staged, when the commands are bootc's and should report their
    /// progress through a pipe (`--progress-fd 3`; see `pipe`).
    pub(super) progress: Option<String>,
}

/// The option that makes bootc write its progress reports to a file descriptor.
pub(super) const PROGRESS_FLAG: &str = "--progress-fd";

/// A command about to run: its unit, and its output files as the host and the agent see
/// them.
pub(super) struct BootcCommand {
    spec: UnitSpec,
    /// The argv joined with spaces, for messages.
    line: String,
    pub(super) unit: String,
    /// The progress pipe, when the commands report progress.
    pipe: Option<ProgressPipe>,
    host_stdout: PathBuf,
    host_stderr: PathBuf,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
}

impl DbusHost {
    /// Runs `argv` as a transient unit and waits for it; a command that fails, times out
    /// or cannot be started is an error.
    pub(super) async fn run(&self, argv: Vec<String>) -> Result<Finished, HostError> {
        self.run_unit(UnitSpec {
            commands: vec![argv],
            ..UnitSpec::default()
        })
        .await
    }

    /// Runs `spec`'s commands, one after the other, in one transient unit and waits for
    /// it; the first that fails ends it.
    ///
    /// A unit systemd could not set up (result `resources`: the command never ran; seen
    /// right after a daemon reload, such as the update timer's mask) is tried again, in a
    /// new unit, up to [`START_ATTEMPTS`] in all.
    pub(super) async fn run_unit(&self, spec: UnitSpec) -> Result<Finished, HostError> {
        let mut attempts = 1;
        loop {
            match self.run_unit_once(spec.clone()).await {
                Err(HostError::NotStarted { command, .. }) if attempts < START_ATTEMPTS => {
                    tracing::warn!(
                        %command,
                        attempts,
                        "systemd could not start the command's unit (result resources); \
                         trying again in a new unit"
                    );
                    tokio::time::sleep(START_RETRY_PAUSE * attempts).await;
                    attempts += 1;
                }
                Err(HostError::NotStarted { command, .. }) => {
                    return Err(HostError::NotStarted { command, attempts });
                }
                other => return other,
            }
        }
    }

    async fn run_unit_once(&self, spec: UnitSpec) -> Result<Finished, HostError> {
        let command = self.prepare(spec).await?;
        let manager = self.manager().await?;
        subscribe(&manager).await?;
        let mut removed = manager
            .receive_job_removed()
            .await
            .map_err(call_error("Manager.JobRemoved"))?;
        let started = match &command.pipe {
            None => self.start_unit(&manager, &command).await.map(|j| (j, None)),
            Some(pipe) => self
                .start_with_pipe(&manager, &command, pipe, &mut removed)
                .await
                .map(|(job, reader)| (job, Some(reader))),
        };
        let (job, reader) = match started {
            Ok(started) => started,
            Err(e) => {
                if e.timed_out() {
                    // systemd never answered the start, but may have started the unit
                    // all the same: nothing of this command may run on unwatched.
                    let _ = stop_if_loaded(&manager, &command.unit).await;
                    if let Some(pipe) = &command.pipe {
                        let _ = stop_if_loaded(&manager, &pipe.socket).await;
                    }
                }
                return Err(e);
            }
        };
        let waited = self
            .wait_for_job(&manager, &command, &mut removed, &job)
            .await;
        if let (Some(pipe), Some(reader)) = (&command.pipe, reader) {
            self.close_pipe(&manager, pipe, reader).await;
        }
        self.outcome(&manager, command, waited?).await
    }

    /// Creates the progress pipe's socket and the service in one call, waits for the
    /// socket to listen, starts reading the FIFO, and starts the service: its start job,
    /// and the reader.
    async fn start_with_pipe(
        &self,
        manager: &SystemdManagerProxy<'_>,
        command: &BootcCommand,
        pipe: &ProgressPipe,
        removed: &mut JobRemovedStream,
    ) -> Result<(OwnedObjectPath, JoinHandle<()>), HostError> {
        let mut service = self.service_properties(command);
        ProgressPipe::limit_starts(&mut service);
        let socket = pipe.socket_properties(&command.unit);
        let aux: [(&str, &[(&str, Variant<'_>)]); 1] = [(command.unit.as_str(), &service)];
        let job = manager
            .start_transient_unit(&pipe.socket, "fail", &socket, &aux)
            .await
            .map_err(call_error("Manager.StartTransientUnit"))?;
        let result = self.wait_for_job(manager, command, removed, &job).await?;
        if result != "done" {
            let _ = manager.reset_failed_unit(&pipe.socket).await;
            return Err(HostError::ProgressPipe {
                socket: pipe.socket.clone(),
                result,
            });
        }
        let reader = self.start_reading(pipe);
        match manager.start_unit(&command.unit, "fail").await {
            Ok(job) => Ok((job, reader)),
            Err(source) => {
                self.close_pipe(manager, pipe, reader).await;
                Err(call_error("Manager.StartUnit")(source))
            }
        }
    }

    /// Names the command's unit and output files, and makes the output start empty.
    async fn prepare(&self, mut spec: UnitSpec) -> Result<BootcCommand, HostError> {
        let line = spec
            .commands
            .iter()
            .map(|argv| argv.join(" "))
            .collect::<Vec<_>>()
            .join("`, then `");
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // Unique to this DbusHost, not to the process: an agent in a pod has the same
        // PID (1 in its namespace) in every incarnation, while the units of the one
        // before may still run.
        let unit = format!("{UNIT_PREFIX}{}-{n}.service", self.instance);
        let host_stdout = self.work_dir.join(format!("{unit}.out"));
        let host_stderr = self.work_dir.join(format!("{unit}.err"));
        let stdout_path = self.local(&host_stdout);
        let stderr_path = self.local(&host_stderr);
        let local_dir = self.local(&self.work_dir);
        tokio::fs::create_dir_all(&local_dir)
            .await
            .map_err(|source| HostError::Output {
                command: line.clone(),
                path: local_dir.display().to_string(),
                source,
            })?;
        for path in [&stdout_path, &stderr_path] {
            prepare_output(path, &line).await?;
        }
        let pipe = spec.progress.as_ref().map(|digest| {
            let stem = unit.trim_end_matches(".service");
            let host_fifo = self.work_dir.join(format!("{stem}.progress"));
            ProgressPipe {
                socket: format!("{stem}.socket"),
                local_fifo: self.local(&host_fifo),
                host_fifo,
                digest: digest.clone(),
            }
        });
        if pipe.is_some() {
            for argv in &mut spec.commands {
                argv.extend([PROGRESS_FLAG.to_owned(), "3".to_owned()]);
            }
        }
        Ok(BootcCommand {
            spec,
            line,
            unit,
            pipe,
            host_stdout,
            host_stderr,
            stdout_path,
            stderr_path,
        })
    }

    /// Starts the command's transient unit; the path of its start job.
    async fn start_unit(
        &self,
        manager: &SystemdManagerProxy<'_>,
        command: &BootcCommand,
    ) -> Result<OwnedObjectPath, HostError> {
        let properties = self.service_properties(command);
        manager
            .start_transient_unit(&command.unit, "fail", &properties, &[])
            .await
            .map_err(call_error("Manager.StartTransientUnit"))
    }

    /// The transient service's properties.
    pub(super) fn service_properties(
        &self,
        command: &BootcCommand,
    ) -> Vec<(&'static str, Variant<'static>)> {
        let exec: Vec<ExecCommand> = command
            .spec
            .commands
            .iter()
            .map(|argv| (argv[0].clone(), argv.clone(), false))
            .collect();
        // The timeout covers all of the unit's commands.
        let timeout_usec = u64::try_from(self.timeout.as_micros()).unwrap_or(u64::MAX);
        let mut properties: Vec<(&'static str, Variant<'static>)> = vec![
            (
                "Description",
                Variant::from(format!("bootc-node-agent: {}", command.line)),
            ),
            ("Type", Variant::from("oneshot")),
            ("RemainAfterExit", Variant::from(true)),
            ("ExecStart", Variant::from(exec)),
            // The D-Bus form of `StandardOutput=file:PATH` (systemd rejects the
            // `file:` string on the bus).
            (
                "StandardOutputFile",
                Variant::from(command.host_stdout.display().to_string()),
            ),
            (
                "StandardErrorFile",
                Variant::from(command.host_stderr.display().to_string()),
            ),
            ("TimeoutStartUSec", Variant::from(timeout_usec)),
        ];
        if let Some(argv) = &command.spec.stop_post {
            let post: Vec<ExecCommand> = vec![(argv[0].clone(), argv.clone(), true)];
            properties.push(("ExecStopPost", Variant::from(post)));
        }
        if !command.spec.after.is_empty() {
            properties.push(("After", Variant::from(command.spec.after.clone())));
        }
        properties
    }

    /// Waits for `job` to be removed: its result (`done`, `failed`, …). Past the
    /// timeout the unit is stopped.
    pub(super) async fn wait_for_job(
        &self,
        manager: &SystemdManagerProxy<'_>,
        command: &BootcCommand,
        removed: &mut JobRemovedStream,
        job: &OwnedObjectPath,
    ) -> Result<String, HostError> {
        let wait = async {
            while let Some(signal) = removed.next().await {
                let Ok(args) = signal.args() else { continue };
                if args.job.as_str() == job.as_str() {
                    return Some(args.result);
                }
            }
            None
        };
        match tokio::time::timeout(self.timeout + TIMEOUT_MARGIN, wait).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(HostError::SignalStreamEnded {
                command: command.line.clone(),
            }),
            Err(_) => {
                manager
                    .stop_unit(&command.unit, "replace")
                    .await
                    .map_err(call_error("Manager.StopUnit"))?;
                Err(HostError::Timeout {
                    command: command.line.clone(),
                    timeout: self.timeout,
                })
            }
        }
    }

    /// Reads how the service ended, releases the unit, and gives the command's result.
    async fn outcome(
        &self,
        manager: &SystemdManagerProxy<'_>,
        command: BootcCommand,
        job_result: String,
    ) -> Result<Finished, HostError> {
        let (result, exit_status) = self.service_outcome(manager, &command.unit).await?;
        // Release the unit; it has served its purpose.
        let _ = manager.stop_unit(&command.unit, "replace").await;
        let _ = manager.reset_failed_unit(&command.unit).await;

        if result == "timeout" {
            return Err(HostError::Timeout {
                command: command.line,
                timeout: self.timeout,
            });
        }
        if result == "resources" {
            let _ = tokio::fs::remove_file(&command.stderr_path).await;
            let _ = tokio::fs::remove_file(&command.stdout_path).await;
            return Err(HostError::NotStarted {
                command: command.line,
                attempts: 1,
            });
        }
        if result == "exit-code" && exit_status == EXIT_EXEC {
            let _ = tokio::fs::remove_file(&command.stderr_path).await;
            let _ = tokio::fs::remove_file(&command.stdout_path).await;
            return Err(HostError::NotFound {
                program: command
                    .spec
                    .commands
                    .first()
                    .and_then(|argv| argv.first())
                    .cloned()
                    .unwrap_or_default(),
                command: command.line,
            });
        }
        if job_result != "done" || result != "success" || exit_status != 0 {
            let stderr = tail(&command.stderr_path).await;
            let _ = tokio::fs::remove_file(&command.stderr_path).await;
            let _ = tokio::fs::remove_file(&command.stdout_path).await;
            return Err(HostError::CommandFailed {
                command: command.line,
                job_result,
                result,
                exit_status,
                stderr,
            });
        }
        let _ = tokio::fs::remove_file(&command.stderr_path).await;
        Ok(Finished {
            stdout_path: command.stdout_path,
        })
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
