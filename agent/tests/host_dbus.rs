//! `DbusHost` against fake systemd, logind and hostname1 services on a private
//! dbus-daemon; the commands run against a fake `bootc` script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bootc_crds::pool::SignaturePolicy;
use bootc_node_agent::host::{CallTimeouts, DbusHost, Host, HostError};
use bootc_node_agent::machine::Unlock;
use zbus::{Connection, OwnedObjectPath, OwnedVariant, fdo};

const PIN: &str =
    "quay.io/example/os@sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38";

/// A private dbus-daemon, killed (by its PID) on drop.
struct Bus {
    child: Child,
    address: String,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_bus(dir: &Path) -> Bus {
    let config = dir.join("bus.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
            dir.join("bus.sock").display()
        ),
    )
    .unwrap();
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("dbus-daemon on PATH");
    let stdout = child.stdout.take().unwrap();
    let mut bus = Bus {
        child,
        address: String::new(),
    };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    bus.address = line.trim().to_owned();
    assert!(!bus.address.is_empty(), "dbus-daemon printed no address");
    bus
}

/// What the fake systemd saw in one StartTransientUnit.
#[derive(Debug, Clone)]
struct Started {
    name: String,
    argv: Vec<String>,
    exec_path: String,
    service_type: String,
    timeout_usec: u64,
    stdout: String,
    stderr: String,
    /// Every `ExecStart` command, in order (systemd runs the next once one succeeds).
    commands: Vec<Vec<String>>,
    /// `ExecStopPost` commands.
    stop_post: Vec<Vec<String>>,
    /// `After=` units.
    after: Vec<String>,
}

#[derive(Debug, Default)]
struct Record {
    calls: Vec<String>,
    started: Vec<Started>,
    stopped: Vec<String>,
    masked: Vec<(Vec<String>, bool)>,
    unmasked: Vec<(Vec<String>, bool)>,
    /// Unit files `GetUnitFileState` finds: name → state (`enabled`, `disabled`, …); any
    /// other name has no unit file.
    unit_files: HashMap<String, String>,
    reboots: Vec<u64>,
    /// The error logind answers reboot requests with, when set.
    reboot_error: Option<zbus::fdo::Error>,
    /// How many of the next units systemd cannot set up (result `resources`, nothing
    /// run), as right after a daemon reload.
    spawn_failures: u32,
    kills: HashMap<String, tokio::sync::oneshot::Sender<()>>,
    /// Services created beside a socket unit, started by `StartUnit`: their properties and
    /// their socket's FIFO.
    pending: HashMap<String, (HashMap<String, OwnedVariant>, String)>,
    /// The FIFOs of listening sockets, held open read-write as systemd holds them.
    fifos: HashMap<String, (String, std::fs::File)>,
    /// Every progress socket created: (socket unit, FIFO path).
    sockets: Vec<(String, String)>,
    /// Units `LoadUnit` finds: name → (LoadState, ActiveState, SubState); any other
    /// name loads as `not-found`, as systemd loads a unit without a file.
    units: HashMap<String, (String, String, String)>,
    /// Calls (`LoadUnit`, `Reload`, hostname1's `BootID`) the fake takes and never
    /// answers.
    unanswered: Vec<&'static str>,
    /// How many times hostname1's `BootID` was read.
    boot_id_reads: u32,
    /// How long `Reload` takes to answer.
    reload_takes: Duration,
    /// How long `StartTransientUnit` takes to answer, once it started the unit.
    start_takes: Duration,
}

type Shared = Arc<Mutex<Record>>;

struct FakeManager {
    record: Shared,
    soft_reboots: Option<u32>,
    jobs: u32,
}

fn escape(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("_{b:02x}")
            }
        })
        .collect()
}

fn string_prop(props: &HashMap<String, OwnedVariant>, key: &str) -> String {
    String::try_from(props[key].try_clone().unwrap()).unwrap()
}

fn output_file(spec: &str) -> std::fs::File {
    assert!(spec.starts_with('/'), "an absolute output path: {spec}");
    std::fs::File::create(spec).unwrap()
}

impl FakeManager {
    /// Records the call `name`, and hands over the record for the rest of it.
    fn called(&self, name: impl Into<String>) -> std::sync::MutexGuard<'_, Record> {
        let mut record = self.record.lock().unwrap();
        record.calls.push(name.into());
        record
    }

    /// Records the call `name`.
    fn call(&self, name: impl Into<String>) {
        drop(self.called(name));
    }

    /// Runs a service's commands as systemd would, fd 3 the FIFO when `fifo` is given.
    fn run_service(
        &mut self,
        name: String,
        props: HashMap<String, OwnedVariant>,
        fifo: Option<String>,
        conn: &Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        let exec: Vec<(String, Vec<String>, bool)> =
            Vec::try_from(props["ExecStart"].try_clone().unwrap()).unwrap();
        let commands: Vec<Vec<String>> = exec.iter().map(|(_, argv, _)| argv.clone()).collect();
        let (exec_path, argv, _) = exec.into_iter().next().unwrap();
        let stop_post: Vec<Vec<String>> = props
            .get("ExecStopPost")
            .map(|v| {
                let list: Vec<(String, Vec<String>, bool)> =
                    Vec::try_from(v.try_clone().unwrap()).unwrap();
                list.into_iter().map(|(_, argv, _)| argv).collect()
            })
            .unwrap_or_default();
        let after: Vec<String> = props
            .get("After")
            .map(|v| Vec::try_from(v.try_clone().unwrap()).unwrap())
            .unwrap_or_default();
        let started = Started {
            commands: commands.clone(),
            stop_post,
            after,
            name: name.clone(),
            argv: argv.clone(),
            exec_path,
            service_type: string_prop(&props, "Type"),
            timeout_usec: u64::try_from(props["TimeoutStartUSec"].try_clone().unwrap()).unwrap(),
            stdout: string_prop(&props, "StandardOutputFile"),
            stderr: string_prop(&props, "StandardErrorFile"),
        };
        self.jobs += 1;
        let id = self.jobs;
        let job = OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}")).unwrap();
        let (stdout, stderr) = (started.stdout.clone(), started.stderr.clone());
        // Truncated once, appended by each command, as systemd's StandardOutputFile is.
        drop((output_file(&stdout), output_file(&stderr)));
        let append = |path: &str| std::fs::OpenOptions::new().append(true).open(path).unwrap();
        let spawn = move |argv: &Vec<String>| {
            let mut command = match &fifo {
                // As systemd passes a socket's descriptors: the FIFO, read-write, as fd 3.
                Some(fifo) => {
                    let mut c = tokio::process::Command::new("/bin/sh");
                    c.args(["-c", "f=$1; shift; exec \"$@\" 3<>\"$f\"", "sh", fifo]);
                    c.args(argv);
                    c
                }
                None => {
                    let mut c = tokio::process::Command::new(&argv[0]);
                    c.args(&argv[1..]);
                    c
                }
            };
            command
                .stdout(append(&stdout))
                .stderr(append(&stderr))
                .kill_on_drop(true)
                .spawn()
        };
        let cannot_set_up = {
            let mut record = self.record.lock().unwrap();
            let fail = record.spawn_failures > 0;
            record.spawn_failures = record.spawn_failures.saturating_sub(1);
            fail
        };
        let mut children = Vec::new();
        if !cannot_set_up {
            let first = spawn(&commands[0]).map_err(|e| fdo::Error::Failed(e.to_string()))?;
            children.push(first);
        }
        let (kill_tx, kill_rx) = tokio::sync::oneshot::channel();
        {
            let mut record = self.called("StartTransientUnit");
            record.started.push(started);
            record.kills.insert(name.clone(), kill_tx);
        }
        let conn = conn.clone();
        let job_path = job.clone();
        tokio::spawn(async move {
            let run_all = async {
                let Some(mut child) = children.pop() else {
                    return ("resources", 0);
                };
                let mut rest = commands[1..].iter();
                loop {
                    let code = child.wait().await.unwrap().code().unwrap_or(-1);
                    if code != 0 {
                        return ("exit-code", code);
                    }
                    match rest.next() {
                        Some(argv) => child = spawn(argv).unwrap(),
                        None => return ("success", 0),
                    }
                }
            };
            let (result, status) = tokio::select! {
                done = run_all => done,
                _ = kill_rx => ("signal", 15),
            };
            let unit_path = format!("/org/freedesktop/systemd1/unit/{}", escape(&name));
            conn.object_server()
                .at(
                    unit_path.as_str(),
                    FakeService {
                        result: result.into(),
                        status,
                    },
                )
                .await
                .unwrap();
            let job_result = if result == "success" {
                "done"
            } else {
                "failed"
            };
            conn.emit_signal(
                None::<&str>,
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "JobRemoved",
                &(id, job_path, name, job_result),
            )
            .await
            .unwrap();
        });
        Ok(job)
    }

    /// A progress socket: its FIFO made and held open, its service kept for `StartUnit`,
    /// its start job done at once.
    async fn start_socket(
        &mut self,
        name: String,
        props: &HashMap<String, OwnedVariant>,
        aux: Vec<(String, Vec<(String, OwnedVariant)>)>,
        conn: &Connection,
    ) -> OwnedObjectPath {
        let listen: Vec<(String, String)> =
            Vec::try_from(props["Listen"].try_clone().unwrap()).unwrap();
        let (kind, fifo) = listen.into_iter().next().unwrap();
        assert_eq!(kind, "FIFO");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {fifo}");
        let held = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let (service, service_props) = aux.into_iter().next().unwrap();
        let service_props: HashMap<String, OwnedVariant> = service_props.into_iter().collect();
        assert_eq!(
            u32::try_from(service_props["StartLimitBurst"].try_clone().unwrap()).unwrap(),
            1,
            "the service may start once"
        );
        self.jobs += 1;
        let id = self.jobs;
        let job = OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}")).unwrap();
        {
            let mut record = self.called("StartTransientUnit(socket)");
            record.sockets.push((name.clone(), fifo.clone()));
            record
                .pending
                .insert(service, (service_props, fifo.clone()));
            record.fifos.insert(name.clone(), (fifo, held));
        }
        let conn = conn.clone();
        let job_path = job.clone();
        tokio::spawn(async move {
            conn.emit_signal(
                None::<&str>,
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "JobRemoved",
                &(id, job_path, name, "done"),
            )
            .await
            .unwrap();
        });
        job
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl FakeManager {
    fn subscribe(&self) {
        self.call("Subscribe");
    }

    async fn start_transient_unit(
        &mut self,
        name: String,
        _mode: String,
        properties: Vec<(String, OwnedVariant)>,
        aux: Vec<(String, Vec<(String, OwnedVariant)>)>,
        #[zbus(connection)] conn: &Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        let props: HashMap<String, OwnedVariant> = properties.into_iter().collect();
        let takes = self.record.lock().unwrap().start_takes;
        let started = if name.ends_with(".socket") {
            Ok(self.start_socket(name, &props, aux, conn).await)
        } else {
            self.run_service(name, props, None, conn)
        };
        // Started, answered late (`start_takes`).
        tokio::time::sleep(takes).await;
        started
    }

    /// Starts a service created beside a socket: its ExecStart gets the FIFO as fd 3.
    async fn start_unit(
        &mut self,
        name: String,
        _mode: String,
        #[zbus(connection)] conn: &Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        if name.ends_with(".timer") {
            self.call(format!("StartUnit {name}"));
            return Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/0").unwrap());
        }
        let pending = self.record.lock().unwrap().pending.remove(&name);
        let Some((props, fifo)) = pending else {
            return Err(fdo::Error::Failed(format!("no unit {name}")));
        };
        self.call("StartUnit");
        self.run_service(name, props, Some(fifo), conn)
    }

    fn stop_unit(&self, name: String, _mode: String) -> OwnedObjectPath {
        let mut record = self.called("StopUnit");
        record.stopped.push(name.clone());
        if let Some(kill) = record.kills.remove(&name) {
            let _ = kill.send(());
        }
        if let Some((fifo, held)) = record.fifos.remove(&name) {
            drop(held);
            let _ = std::fs::remove_file(fifo);
        }
        OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/0").unwrap()
    }

    fn get_unit(&self, name: String) -> OwnedObjectPath {
        self.call("GetUnit");
        OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/unit/{}", escape(&name)))
            .unwrap()
    }

    /// Loads a unit without starting it: its object, with the Unit interface.
    async fn load_unit(
        &self,
        name: String,
        #[zbus(connection)] conn: &Connection,
    ) -> fdo::Result<OwnedObjectPath> {
        if self
            .called(format!("LoadUnit {name}"))
            .unanswered
            .contains(&"LoadUnit")
        {
            std::future::pending::<()>().await;
        }
        let path = format!("/org/freedesktop/systemd1/unit/{}", escape(&name));
        let unit = FakeUnit {
            name,
            record: self.record.clone(),
        };
        // Already served for an earlier load: that object answers from the record too.
        conn.object_server()
            .at(path.as_str(), unit)
            .await
            .map_err(|e| fdo::Error::Failed(e.to_string()))?;
        Ok(OwnedObjectPath::try_from(path).unwrap())
    }

    fn reset_failed_unit(&self, _name: String) {
        self.call("ResetFailedUnit");
    }

    fn mask_unit_files(
        &self,
        files: Vec<String>,
        runtime: bool,
        _force: bool,
    ) -> Vec<(String, String, String)> {
        self.called("MaskUnitFiles").masked.push((files, runtime));
        Vec::new()
    }

    async fn reload(&self) {
        let (unanswered, takes) = {
            let record = self.called("Reload");
            (record.unanswered.contains(&"Reload"), record.reload_takes)
        };
        if unanswered {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(takes).await;
    }

    fn unmask_unit_files(
        &self,
        files: Vec<String>,
        runtime: bool,
    ) -> Vec<(String, String, String)> {
        self.called("UnmaskUnitFiles")
            .unmasked
            .push((files, runtime));
        Vec::new()
    }

    fn get_unit_file_state(&self, file: String) -> fdo::Result<String> {
        self.called("GetUnitFileState")
            .unit_files
            .get(&file)
            .cloned()
            .ok_or_else(|| fdo::Error::FileNotFound(format!("No such file or directory: {file}")))
    }

    #[zbus(property)]
    fn soft_reboots_count(&self) -> fdo::Result<u32> {
        self.soft_reboots
            .ok_or_else(|| fdo::Error::UnknownProperty("SoftRebootsCount".into()))
    }
}

struct FakeService {
    result: String,
    status: i32,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Service")]
impl FakeService {
    #[zbus(property)]
    fn result(&self) -> String {
        self.result.clone()
    }

    #[zbus(property)]
    fn exec_main_status(&self) -> i32 {
        self.status
    }
}

/// A unit object, answering its states from the record.
struct FakeUnit {
    name: String,
    record: Shared,
}

impl FakeUnit {
    fn states(&self) -> (String, String, String) {
        let record = self.record.lock().unwrap();
        record.units.get(&self.name).cloned().unwrap_or_else(|| {
            (
                "not-found".to_owned(),
                "inactive".to_owned(),
                "dead".to_owned(),
            )
        })
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl FakeUnit {
    #[zbus(property)]
    fn load_state(&self) -> String {
        self.record
            .lock()
            .unwrap()
            .calls
            .push(format!("Get LoadState {}", self.name));
        self.states().0
    }

    #[zbus(property)]
    fn active_state(&self) -> String {
        self.states().1
    }

    #[zbus(property)]
    fn sub_state(&self) -> String {
        self.states().2
    }
}

struct FakeLogin {
    record: Shared,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl FakeLogin {
    fn reboot_with_flags(&self, flags: u64) -> zbus::fdo::Result<()> {
        let mut record = self.record.lock().unwrap();
        record.calls.push("RebootWithFlags".into());
        record.reboots.push(flags);
        record.reboot_error.clone().map_or(Ok(()), Err)
    }
}

struct FakeHostname {
    record: Shared,
    boot_id: Vec<u8>,
}

#[zbus::interface(name = "org.freedesktop.hostname1")]
impl FakeHostname {
    #[zbus(property, name = "BootID")]
    async fn boot_id(&self) -> Vec<u8> {
        let unanswered = {
            let mut record = self.record.lock().unwrap();
            record.boot_id_reads += 1;
            record.unanswered.contains(&"BootID")
        };
        if unanswered {
            std::future::pending::<()>().await;
        }
        self.boot_id.clone()
    }
}

const FAKE_BOOTC: &str = r#"#!/bin/sh
d=$(dirname "$0")
# `--progress-fd N` comes last: report on N, and leave it out of the recorded call.
progress=
if [ $# -ge 2 ]; then
  eval "pen=\${$(($# - 1))}"; eval "fd=\${$#}"
  if [ "$pen" = "--progress-fd" ]; then
    progress=$fd; n=$(($# - 2)); args=; i=0
    for a in "$@"; do i=$((i + 1)); [ $i -le $n ] && args="$args $a"; done
    set -- $args
  fi
fi
if [ -n "$progress" ]; then
  printf '%s\n' '{"type":"Start","version":"0.1.0"}' \
    '{"type":"ProgressBytes","task":"pulling","description":"Pulling Image","id":"i","bytesCached":0,"bytes":5,"bytesTotal":10,"stepsCached":0,"steps":0,"stepsTotal":1,"subtasks":[]}' >&"$progress"
fi
echo "$*" >> "$d/calls"
case "$*" in
  "status --format=json --format-version=1") cat "$d/status.json"; exit 0;;
  "--version") echo "bootc 1.1.4"; exit 0;;
  "switch --help")
    echo "Usage: bootc switch [OPTIONS] <TARGET>"
    if [ -e "$d/download-only" ]; then echo "      --download-only  Download and stage only"; fi
    exit 0;;
esac
if [ -e "$d/fail" ]; then echo "error: $(cat "$d/fail")" >&2; exit 1; fi
if [ -e "$d/hang" ]; then exec sleep 600; fi
echo "ok"
"#;

const STATUS_JSON: &str = r#"{
  "apiVersion": "org.containers.bootc/v1",
  "kind": "BootcHost",
  "metadata": {"name": "host"},
  "spec": {"image": {"image": "quay.io/example/os:latest", "transport": "registry"}, "bootOrder": "default"},
  "status": {
    "staged": null,
    "booted": {
      "image": {
        "image": {"image": "quay.io/example/os:latest", "transport": "registry"},
        "architecture": "amd64",
        "version": "1.0",
        "timestamp": null,
        "imageDigest": "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38"
      },
      "cachedUpdate": null,
      "incompatible": false,
      "pinned": false,
      "downloadOnly": false,
      "ostree": {"checksum": "439f6bd2e2361bee292c1f31840d798c5ac5ba76483b8021dc9f7b0164ac0f48", "deploySerial": 0, "stateroot": "default"}
    },
    "rollback": null,
    "rollbackQueued": false,
    "type": "bootcHost"
  }
}"#;

struct Fixture {
    _bus: Bus,
    _server: Connection,
    _hostname: Connection,
    dir: tempfile::TempDir,
    record: Shared,
    host: DbusHost,
}

impl Fixture {
    fn bootc_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn flag(&self, name: &str, content: &str) {
        std::fs::write(self.dir.path().join(name), content).unwrap();
    }

    /// Stages `pin()` under `policy`, then every bootc command run so far.
    async fn stage(&self, policy: SignaturePolicy) -> Vec<String> {
        self.host.stage(&pin(), policy).await.unwrap();
        self.bootc_calls()
    }

    /// The last unit started.
    fn last_started(&self) -> Started {
        self.record.lock().unwrap().started.last().unwrap().clone()
    }
}

async fn fixture(soft_reboots: Option<u32>, timeout: Duration) -> Fixture {
    fixture_with(soft_reboots, timeout, CallTimeouts::default()).await
}

/// [`fixture`], the host's D-Bus calls bounded by `calls`.
async fn fixture_with(
    soft_reboots: Option<u32>,
    timeout: Duration,
    calls: CallTimeouts,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let bus = start_bus(dir.path());
    let bootc = dir.path().join("bootc");
    std::fs::write(&bootc, FAKE_BOOTC).unwrap();
    std::fs::set_permissions(&bootc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("status.json"), STATUS_JSON).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let record = Shared::default();
    let server = zbus::connection::Builder::address(bus.address.as_str())
        .name("org.freedesktop.systemd1")
        .name("org.freedesktop.login1")
        .serve_at(
            "/org/freedesktop/systemd1",
            FakeManager {
                record: record.clone(),
                soft_reboots,
                jobs: 0,
            },
        )
        .serve_at(
            "/org/freedesktop/login1",
            FakeLogin {
                record: record.clone(),
            },
        )
        .build()
        .await
        .unwrap();
    // A process of its own, as hostnamed is: one that does not answer holds up no other.
    let hostname = zbus::connection::Builder::address(bus.address.as_str())
        .name("org.freedesktop.hostname1")
        .serve_at(
            "/org/freedesktop/hostname1",
            FakeHostname {
                record: record.clone(),
                boot_id: (0u8..16).collect(),
            },
        )
        .build()
        .await
        .unwrap();
    let host = DbusHost::connect_with(&bus.address, &work, timeout, calls)
        .await
        .unwrap()
        .with_bootc_path(bootc.display().to_string());
    // Connecting subscribes to systemd's signals (to follow bootc's status target); the
    // tests look at what happens after that.
    {
        let mut record = record.lock().unwrap();
        assert_eq!(
            record.calls,
            vec!["Subscribe".to_owned()],
            "connect subscribes once"
        );
        record.calls.clear();
    }
    Fixture {
        _bus: bus,
        _server: server,
        _hostname: hostname,
        dir,
        record,
        host,
    }
}

fn pin() -> bootc_crds::ImageRef {
    bootc_crds::ImageRef::parse(PIN).unwrap()
}

/// The calls recorded, in order, of those that start with one of `prefixes`.
fn calls_starting_with<'r>(record: &'r Record, prefixes: &[&str]) -> Vec<&'r str> {
    record
        .calls
        .iter()
        .map(String::as_str)
        .filter(|c| prefixes.iter().any(|p| c.starts_with(p)))
        .collect()
}

fn bootc_path(f: &Fixture) -> PathBuf {
    f.dir.path().join("bootc")
}

#[tokio::test]
async fn stage_uses_switch_download_only_when_supported() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.flag("download-only", "");
    let progress = f.host.progress();
    f.host
        .stage(&pin(), SignaturePolicy::Default)
        .await
        .unwrap();
    let seen = progress.borrow().clone().expect("bootc's report");
    assert_eq!((seen.bytes_done, seen.bytes_total), (5, 10), "{seen:?}");
    assert_eq!(seen.digest, PIN.rsplit_once('@').unwrap().1);
    assert_eq!(
        f.bootc_calls(),
        vec![
            "switch --help".to_owned(),
            format!("switch --download-only {PIN}")
        ]
    );
    // The answer to --help is cached.
    f.host
        .stage(&pin(), SignaturePolicy::Default)
        .await
        .unwrap();
    assert_eq!(f.bootc_calls().len(), 3);

    let record = f.record.lock().unwrap();
    let started = &record.started[1];
    let bootc = bootc_path(&f).display().to_string();
    assert_eq!(started.exec_path, bootc);
    assert_eq!(
        started.argv,
        vec![
            bootc,
            "switch".into(),
            "--download-only".into(),
            PIN.into(),
            "--progress-fd".into(),
            "3".into()
        ]
    );
    // The staging got its FIFO from a socket unit of its own name, created beside it and
    // stopped first when it ended.
    let (socket, fifo) = record.sockets[0].clone();
    assert_eq!(socket, started.name.replace(".service", ".socket"));
    assert!(fifo.ends_with(".progress"), "{fifo}");
    assert!(!Path::new(&fifo).exists(), "the FIFO is removed");
    let stop = |unit: &str| record.stopped.iter().position(|u| u == unit).unwrap();
    assert!(stop(&socket) < stop(&started.name), "{:?}", record.stopped);
    assert_eq!(started.service_type, "oneshot");
    assert_eq!(started.timeout_usec, 30_000_000);
    let work = f.dir.path().join("work").display().to_string();
    assert_eq!(started.stdout, format!("{work}/{}.out", started.name));
    assert_eq!(started.stderr, format!("{work}/{}.err", started.name));
    assert!(started.name.starts_with("bootc-node-agent-"));
    assert!(started.name.ends_with(".service"));
    // Subscribe precedes every StartTransientUnit.
    let first_start = record
        .calls
        .iter()
        .position(|c| c == "StartTransientUnit")
        .unwrap();
    assert!(record.calls[..first_start].contains(&"Subscribe".to_owned()));
}

#[tokio::test]
async fn stage_falls_back_to_switch_then_upgrade() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    assert_eq!(
        f.stage(SignaturePolicy::Default).await,
        vec![
            "switch --help".to_owned(),
            format!("switch {PIN}"),
            "upgrade --download-only".to_owned()
        ]
    );
    // Both in one unit, stopped before ostree finalizes at shutdown, locking on its way
    // out: a reboot between the two cannot apply the unlocked deployment.
    let unit = f.last_started();
    assert_eq!(unit.commands.len(), 2, "{unit:?}");
    assert_eq!(
        unit.stop_post,
        vec![vec![
            "/usr/bin/touch".to_owned(),
            "/run/ostree/staged-deployment-locked".to_owned()
        ]]
    );
    assert_eq!(
        unit.after,
        vec!["ostree-finalize-staged.service".to_owned()]
    );
}

#[tokio::test]
async fn enforce_puts_the_sigpolicy_flag_on_switch_on_either_path() {
    // `switch --download-only`: one command, the flag on it.
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.flag("download-only", "");
    assert_eq!(
        f.stage(SignaturePolicy::Enforce).await,
        vec![
            "switch --help".to_owned(),
            format!("switch --download-only --enforce-container-sigpolicy {PIN}")
        ]
    );
    assert_eq!(
        f.last_started().argv[1..5],
        [
            "switch",
            "--download-only",
            "--enforce-container-sigpolicy",
            PIN
        ]
    );

    // The fallback: the flag on `switch`; `upgrade --download-only` (which refuses it
    // on 1.16.9) follows the reference `switch` recorded with it.
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    assert_eq!(
        f.stage(SignaturePolicy::Enforce).await,
        vec![
            "switch --help".to_owned(),
            format!("switch --enforce-container-sigpolicy {PIN}"),
            "upgrade --download-only".to_owned()
        ]
    );
    let unit = f.last_started();
    assert_eq!(unit.commands.len(), 2, "{unit:?}");
    // Without Enforce, neither path carries the flag: the two tests above.
}

#[tokio::test]
async fn failing_command_surfaces_its_stderr() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.flag("fail", "pulling image: manifest unknown");
    let err = f.host.unlock(Unlock::FromDownloaded).await.unwrap_err();
    match &err {
        HostError::CommandFailed {
            command,
            result,
            exit_status,
            stderr,
            ..
        } => {
            assert!(
                command.ends_with("bootc upgrade --from-downloaded"),
                "{command}"
            );
            assert_eq!(result, "exit-code");
            assert_eq!(*exit_status, 1);
            assert_eq!(stderr, "error: pulling image: manifest unknown");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("manifest unknown"));
}

#[tokio::test]
async fn hanging_command_times_out_and_is_stopped() {
    let f = fixture(Some(0), Duration::from_secs(1)).await;
    f.flag("hang", "");
    let begin = Instant::now();
    let err = f.host.unlock(Unlock::Rollback).await.unwrap_err();
    assert!(matches!(err, HostError::Timeout { .. }), "{err:?}");
    assert!(begin.elapsed() < Duration::from_secs(20));
    let record = f.record.lock().unwrap();
    assert_eq!(record.stopped, vec![record.started[0].name.clone()]);
    assert_eq!(f.bootc_calls(), vec!["rollback".to_owned()]);
}

#[tokio::test]
async fn unlock_already_unlocked_runs_nothing() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.host.unlock(Unlock::AlreadyUnlocked).await.unwrap();
    assert!(f.record.lock().unwrap().calls.is_empty());
}

#[tokio::test]
async fn reboot_sends_flags() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.host.reboot(false).await.unwrap();
    f.host.reboot(true).await.unwrap();
    assert_eq!(f.record.lock().unwrap().reboots, vec![0, 4]);
}

#[tokio::test]
async fn a_reboot_request_cut_off_by_the_bus_going_away_is_the_reboot_under_way() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.record.lock().unwrap().reboot_error =
        Some(zbus::fdo::Error::NoReply("the host went down".into()));
    f.host.reboot(false).await.unwrap();

    // A refusal is still an error, with logind's words in it.
    f.record.lock().unwrap().reboot_error = Some(zbus::fdo::Error::AccessDenied(
        "Interactive authentication required.".into(),
    ));
    let error = f.host.reboot(false).await.unwrap_err().to_string();
    assert!(error.contains("RebootWithFlags"), "{error}");
    assert_eq!(f.record.lock().unwrap().reboots, vec![0, 0]);
}

#[tokio::test]
async fn bootc_version_is_what_bootc_version_prints() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    assert_eq!(f.host.bootc_version().await.unwrap(), "1.1.4");
    assert_eq!(f.bootc_calls(), vec!["--version"]);
}

#[tokio::test]
async fn a_unit_systemd_cannot_set_up_is_tried_again_in_a_new_unit() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    // Two units fail to start (as right after a daemon reload): the third runs.
    f.record.lock().unwrap().spawn_failures = 2;
    assert_eq!(f.host.bootc_version().await.unwrap(), "1.1.4");
    let names: Vec<String> = {
        let record = f.record.lock().unwrap();
        record.started.iter().map(|s| s.name.clone()).collect()
    };
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0] != names[1] && names[1] != names[2], "{names:?}");
    // Three in a row: an error that says the command never ran.
    f.record.lock().unwrap().spawn_failures = 3;
    let error = f.host.bootc_version().await.unwrap_err();
    assert!(
        matches!(error, HostError::NotStarted { attempts: 3, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("never ran"), "{message}");
    assert!(!message.contains("exit status"), "{message}");
    assert_eq!(f.record.lock().unwrap().started.len(), 6);
}

#[test]
fn the_version_is_the_first_line_without_the_program_name() {
    use bootc_node_agent::host::dbus::parse_bootc_version;
    assert_eq!(
        parse_bootc_version("bootc 1.1.4\n").as_deref(),
        Some("1.1.4")
    );
    assert_eq!(
        parse_bootc_version("\nbootc 1.16.9-standin\nmore\n").as_deref(),
        Some("1.16.9-standin")
    );
    assert_eq!(parse_bootc_version("1.2.0").as_deref(), Some("1.2.0"));
    assert_eq!(parse_bootc_version(""), None);
    assert_eq!(parse_bootc_version("bootc\n"), None);
}

#[test]
fn connection_lost_is_only_the_connection_going_away() {
    use bootc_node_agent::host::dbus::connection_lost;
    use std::io::{Error, ErrorKind};
    let io = |kind| zbus::Error::InputOutput(std::sync::Arc::new(Error::new(kind, "socket")));
    assert!(connection_lost(&io(ErrorKind::BrokenPipe)));
    assert!(connection_lost(&io(ErrorKind::ConnectionReset)));
    assert!(connection_lost(&io(ErrorKind::UnexpectedEof)));
    assert!(!connection_lost(&io(ErrorKind::PermissionDenied)));
    assert!(!connection_lost(&zbus::Error::InvalidReply));
}

#[tokio::test]
async fn identity_reads_boot_id_and_soft_reboots() {
    let f = fixture(Some(3), Duration::from_secs(30)).await;
    let id = f.host.identity().await.unwrap();
    assert_eq!(id.boot_id, "000102030405060708090a0b0c0d0e0f");
    assert_eq!(id.soft_reboots, 3);
    assert!(id.can_soft_reboot);
}

#[tokio::test]
async fn the_boot_id_is_read_once_per_connection() {
    let f = fixture(Some(1), Duration::from_secs(30)).await;
    for _ in 0..3 {
        let id = f.host.identity().await.unwrap();
        assert_eq!(id.boot_id, "000102030405060708090a0b0c0d0e0f");
    }
    assert_eq!(
        f.record.lock().unwrap().boot_id_reads,
        1,
        "hostname1 asked once"
    );
}

#[tokio::test]
async fn a_hostname1_that_does_not_answer_gives_way_to_the_kernel_boot_id() {
    let f = fixture_with(Some(0), Duration::from_secs(30), SHORT_CALLS).await;
    f.record.lock().unwrap().unanswered.push("BootID");
    let (id, took) = within(Duration::from_secs(20), "identity", f.host.identity()).await;
    let id = id.unwrap();
    // What this machine's kernel says, written as hostname1 writes it.
    let kernel = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(id.boot_id, kernel.trim().replace('-', ""));
    assert!(
        took >= SHORT_CALLS.call,
        "hostname1 given up after {took:?}"
    );
    {
        let record = f.record.lock().unwrap();
        assert_eq!(record.boot_id_reads, 1);
        let cat: Vec<&Started> = record
            .started
            .iter()
            .filter(|s| s.argv.first().is_some_and(|p| p.ends_with("/cat")))
            .collect();
        assert_eq!(cat.len(), 1, "one `cat` unit: {:?}", record.started);
    }
    // Asked once, answered once: the next pass asks nobody.
    f.host.identity().await.unwrap();
    let record = f.record.lock().unwrap();
    assert_eq!(record.boot_id_reads, 1);
    assert_eq!(record.started.len(), 1);
}

#[tokio::test]
async fn identity_without_soft_reboots_count() {
    let f = fixture(None, Duration::from_secs(30)).await;
    let id = f.host.identity().await.unwrap();
    assert_eq!(id.soft_reboots, 0);
    assert!(!id.can_soft_reboot);
}

#[tokio::test]
async fn non_pins_are_refused_before_any_bus_call() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    for reference in [
        "quay.io/example/os:latest",
        "quay.io/example/os:latest@sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38",
    ] {
        let image = bootc_crds::ImageRef::parse(reference).unwrap();
        let err = f
            .host
            .stage(&image, SignaturePolicy::Default)
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::NotAPin { .. }), "{err:?}");
    }
    // An option-looking reference does not even parse as an image reference.
    assert!(bootc_crds::ImageRef::parse("--apply").is_err());
    assert!(f.record.lock().unwrap().calls.is_empty());
    assert!(f.bootc_calls().is_empty());
}

#[tokio::test]
async fn status_parses_the_json() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    let status = f.host.status().await.unwrap();
    let booted = status.status.booted.as_ref().unwrap();
    assert_eq!(
        booted.image.as_ref().unwrap().image_digest.to_string(),
        "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38"
    );
    assert_eq!(
        f.bootc_calls(),
        vec!["status --format=json --format-version=1".to_owned()]
    );
}

#[tokio::test]
async fn mask_update_timer_masks_at_runtime_and_stops() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    f.host.mask_update_timer().await.unwrap();
    let record = f.record.lock().unwrap();
    // Stop first, then mask, then reload so the mask takes effect (real systemd fails
    // a timer that is still active at the reload).
    let order = calls_starting_with(&record, &["StopUnit", "MaskUnitFiles", "Reload"]);
    assert_eq!(order, vec!["StopUnit", "MaskUnitFiles", "Reload"]);
    assert_eq!(
        record.masked,
        vec![(vec!["bootc-fetch-apply-updates.timer".to_owned()], true)]
    );
    assert_eq!(
        record.stopped,
        vec!["bootc-fetch-apply-updates.timer".to_owned()]
    );
}

#[tokio::test]
async fn release_update_timer_unmasks_and_starts_the_timer_only_if_enabled() {
    const TIMER: &str = "bootc-fetch-apply-updates.timer";
    // (unit file state, or none: no unit file) → whether the timer is started again.
    for (state, started) in [
        (Some("enabled"), true),
        (Some("disabled"), false),
        (Some("masked"), false),
        (Some("static"), false),
        (None, false),
    ] {
        let f = fixture(Some(0), Duration::from_secs(30)).await;
        if let Some(state) = state {
            let mut record = f.record.lock().unwrap();
            record.unit_files.insert(TIMER.to_owned(), state.to_owned());
        }
        f.host.release_update_timer().await.unwrap();
        let record = f.record.lock().unwrap();
        let wanted = ["UnmaskUnitFiles", "Reload", "GetUnitFileState", "StartUnit"];
        let calls = calls_starting_with(&record, &wanted);
        let mut expected = vec!["UnmaskUnitFiles", "Reload", "GetUnitFileState"];
        let start = format!("StartUnit {TIMER}");
        if started {
            expected.push(&start);
        }
        assert_eq!(calls, expected, "unit file {state:?}");
        // Only the runtime mask (the agent's own) is removed.
        assert_eq!(record.unmasked, vec![(vec![TIMER.to_owned()], true)]);
    }
}

#[tokio::test]
async fn bootc_status_updated_target_moves_the_change_counter() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    let mut changes = f.host.changes();
    let job = |n: u32| OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{n}"));
    for (n, unit) in [
        (901, "something-else.service"),
        (902, "bootc-status-updated.target"),
    ] {
        f._server
            .emit_signal(
                None::<&str>,
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "JobRemoved",
                &(n, job(n).unwrap(), unit, "done"),
            )
            .await
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(10), changes.changed())
        .await
        .expect("a change is signalled")
        .unwrap();
    assert_eq!(
        *changes.borrow_and_update(),
        1,
        "only the bootc target counts"
    );
    // The channel closes when the bus connection ends.
    drop(f._server);
    drop(f._bus);
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        while changes.changed().await.is_ok() {}
    })
    .await;
    assert!(closed.is_ok(), "the change channel closes with the bus");
}

#[tokio::test]
async fn credentials_are_written_private_atomically_and_removed() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    let root = tempfile::tempdir().unwrap();
    let host = f.host.with_host_root(root.path());
    let file = root.path().join("run/ostree/auth.json");
    host.write_credentials(Some(br#"{"auths":{"a":{"auth":"eDp5"}}}"#))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        br#"{"auths":{"a":{"auth":"eDp5"}}}"#
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    host.write_credentials(Some(br#"{"auths":{}}"#))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), br#"{"auths":{}}"#);
    assert_eq!(mode(&file), 0o600);
    // Nothing but the file itself is left in the directory.
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("auth.json")]);
    host.write_credentials(None).await.unwrap();
    assert!(!file.exists());
    host.write_credentials(None).await.unwrap();
}

fn set_unit(f: &Fixture, name: &str, states: (&str, &str, &str)) {
    let (load, active, sub) = states;
    f.record.lock().unwrap().units.insert(
        name.to_owned(),
        (load.to_owned(), active.to_owned(), sub.to_owned()),
    );
}

#[tokio::test]
async fn unit_states_load_each_unit_and_read_its_states_in_order() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    set_unit(&f, "kubelet.service", ("loaded", "active", "running"));
    set_unit(&f, "boot-complete.target", ("loaded", "inactive", "dead"));
    set_unit(&f, "broken.service", ("loaded", "failed", "failed"));
    set_unit(&f, "starting.service", ("loaded", "activating", "start"));
    set_unit(&f, "masked.service", ("masked", "inactive", "dead"));
    set_unit(&f, "typo.service", ("bad-setting", "inactive", "dead"));
    let names: Vec<String> = [
        "kubelet.service",
        "broken.service",
        "missing.service",
        "starting.service",
        "masked.service",
        "typo.service",
        "boot-complete.target",
    ]
    .iter()
    .map(|n| (*n).to_owned())
    .collect();
    let units = f.host.unit_states(&names).await.unwrap();
    let got: Vec<(&str, &str, &str)> = units
        .iter()
        .map(|u| {
            (
                u.name.as_str(),
                u.active_state.as_str(),
                u.sub_state.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("kubelet.service", "active", "running"),
            ("broken.service", "failed", "failed"),
            ("missing.service", "not-found", "dead"),
            ("starting.service", "activating", "start"),
            ("masked.service", "masked", "dead"),
            ("typo.service", "bad-setting", "dead"),
            ("boot-complete.target", "inactive", "dead"),
        ]
    );
    // Loaded, never started: LoadUnit then the properties, one unit after the other.
    let calls = f.record.lock().unwrap().calls.clone();
    let expected: Vec<String> = names
        .iter()
        .flat_map(|n| [format!("LoadUnit {n}"), format!("Get LoadState {n}")])
        .collect();
    assert_eq!(calls, expected);

    // Read again later: the states as they are now.
    set_unit(&f, "starting.service", ("loaded", "active", "exited"));
    let again = f.host.unit_states(&names[3..4]).await.unwrap();
    assert_eq!(again[0].active_state, "active");
    assert_eq!(again[0].sub_state, "exited");
    assert!(f.host.unit_states(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn unit_names_that_are_not_unit_names_are_refused_before_any_bus_call() {
    let f = fixture(Some(0), Duration::from_secs(30)).await;
    for bad in [
        "kubelet",
        "../../etc/shadow.service",
        "a b.service",
        "x.conf",
        "",
        "getty@.service",
        "--help.service\n",
    ] {
        let names = vec!["kubelet.service".to_owned(), bad.to_owned()];
        let err = f.host.unit_states(&names).await.unwrap_err();
        assert!(
            matches!(&err, HostError::BadUnitName { name, .. } if name == bad),
            "{bad:?}: {err:?}"
        );
        assert!(
            err.to_string().contains(&format!("{bad:?}")),
            "the error names the unit: {err}"
        );
    }
    assert!(f.record.lock().unwrap().calls.is_empty(), "nothing sent");
}

/// Calls bounded to 300 ms, a reload to 3 s.
const SHORT_CALLS: CallTimeouts = CallTimeouts {
    call: Duration::from_millis(300),
    reload: Duration::from_secs(3),
};

/// Runs `call`, failing the test if it has not returned within `deadline`.
async fn within<T>(deadline: Duration, what: &str, call: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    match tokio::time::timeout(deadline, call).await {
        Ok(out) => (out, start.elapsed()),
        Err(_) => panic!("{what} did not return within {deadline:?}: the call hangs"),
    }
}

#[tokio::test]
async fn a_call_systemd_never_answers_fails_after_the_call_timeout() {
    let f = fixture_with(Some(0), Duration::from_secs(30), SHORT_CALLS).await;
    set_unit(&f, "kubelet.service", ("loaded", "active", "running"));
    let names = vec!["kubelet.service".to_owned()];
    // Answered: the bound changes nothing.
    assert_eq!(
        f.host.unit_states(&names).await.unwrap()[0].active_state,
        "active"
    );
    f.record.lock().unwrap().unanswered.push("LoadUnit");
    let (result, took) = within(
        Duration::from_secs(20),
        "unit_states",
        f.host.unit_states(&names),
    )
    .await;
    let e = result.unwrap_err();
    assert!(e.timed_out(), "a timeout, naming the call: {e}");
    assert!(e.to_string().contains("Manager.LoadUnit"), "{e}");
    assert!(took >= SHORT_CALLS.call, "gave up after {took:?}");
    // The call was made, and not answered.
    let calls = f.record.lock().unwrap().calls.clone();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("LoadUnit")).count(),
        2,
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_reload_may_take_longer_than_a_call_but_not_for_ever() {
    let f = fixture_with(Some(0), Duration::from_secs(30), SHORT_CALLS).await;
    // Slower than any other call may be, within the reload's own bound.
    f.record.lock().unwrap().reload_takes = SHORT_CALLS.call * 3;
    let (result, took) = within(Duration::from_secs(20), "mask", f.host.mask_update_timer()).await;
    result.unwrap();
    assert!(
        took >= SHORT_CALLS.call * 3,
        "the reload answered after {took:?}"
    );
    // Never answered: the reload fails at its bound, naming the call.
    f.record.lock().unwrap().unanswered.push("Reload");
    let (result, took) = within(Duration::from_secs(20), "mask", f.host.mask_update_timer()).await;
    let e = result.unwrap_err();
    assert!(e.timed_out(), "a timeout, naming the call: {e}");
    assert!(e.to_string().contains("Manager.Reload"), "{e}");
    assert!(took >= SHORT_CALLS.reload, "gave up after {took:?}");
    let record = f.record.lock().unwrap();
    assert_eq!(calls_starting_with(&record, &["Reload"]).len(), 2);
}

#[tokio::test]
async fn a_unit_whose_start_is_answered_too_late_is_stopped_not_left_running() {
    let f = fixture_with(Some(0), Duration::from_secs(30), SHORT_CALLS).await;
    f.record.lock().unwrap().start_takes = SHORT_CALLS.call * 3;
    let pin = pin();
    let staging = f.host.stage(&pin, SignaturePolicy::Default);
    let (result, _) = within(Duration::from_secs(20), "stage", staging).await;
    let e = result.unwrap_err();
    assert!(e.timed_out(), "{e}");
    assert!(e.to_string().contains("Manager.StartTransientUnit"), "{e}");
    // systemd started the unit all the same: the agent stops it (systemd gets to the
    // stop once the late start is answered).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (started, stopped) = {
            let r = f.record.lock().unwrap();
            let started: Vec<String> = r.started.iter().map(|s| s.name.clone()).collect();
            (started, r.stopped.clone())
        };
        if !started.is_empty() && started.iter().all(|n| stopped.contains(n)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "started {started:?}, stopped {stopped:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
