//! `--controller-process`: the real `bootc-pool-controller` binary as a child process
//! against the emulator, in place of the in-process reconciler. Its own CPU time and
//! peak resident size are read from `/proc/<pid>` until just before it is stopped, and
//! its `/metrics` is scraped then. A child is always stopped by its own PID (SIGTERM,
//! then SIGKILL): by [`ControllerChild::stop`], or when dropped (a failed or panicking
//! bench included).

use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, SysconfVar, sysconf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::stats::status_kib;

/// How long the controller has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// How often a running child's usage is read (its last reading counts if it dies).
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// How long a scrape of `/metrics` may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a stopping child is checked for its exit.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// The controller binary, found as the demo finds it (beside this executable).
pub(super) fn controller_binary() -> Result<PathBuf, String> {
    crate::demo::controller_binary().map_err(|e| format!("--controller-process: {e}"))
}

/// A child's own cost, or the sum (CPU) and maximum (memory) over several children.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Usage {
    /// User and system CPU time, seconds.
    pub(super) cpu_s: f64,
    /// Peak resident size (`VmHWM`), MiB.
    pub(super) peak_rss_mib: f64,
}

impl Usage {
    /// `pid`'s usage now, from `/proc/<pid>/stat` and `/proc/<pid>/status`.
    fn of(pid: u32) -> Option<Usage> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        Some(Usage {
            cpu_s: cpu_ticks(&stat)? as f64 / clock_ticks(),
            peak_rss_mib: status_kib(&status, "VmHWM")? / 1024.0,
        })
    }

    /// Adds a later child's usage: CPU summed, the larger peak kept.
    pub(super) fn add(&mut self, other: Usage) {
        self.cpu_s += other.cpu_s;
        self.peak_rss_mib = self.peak_rss_mib.max(other.peak_rss_mib);
    }
}

/// This process's own user and system CPU time, seconds (its children's not included).
pub(super) fn own_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    Some(cpu_ticks(&stat)? as f64 / clock_ticks())
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks.
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`_SC_CLK_TCK`), 100 when it cannot be read.
fn clock_ticks() -> f64 {
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as f64,
        _ => 100.0,
    }
}

/// How to start the controller.
#[derive(Debug, Clone)]
pub(super) struct Launch {
    pub(super) binary: PathBuf,
    pub(super) kubeconfig: PathBuf,
    pub(super) lease_namespace: String,
    /// The registries reached over plain HTTP (the `--chaos` registry).
    pub(super) insecure_registries: Vec<String>,
    /// Where its output goes (appended to, one run after another).
    pub(super) log: PathBuf,
}

/// A running controller child process.
#[derive(Debug)]
pub(super) struct ControllerChild {
    child: Child,
    metrics_addr: SocketAddr,
    /// Its usage when last read.
    last: Usage,
}

/// A free port on loopback for the child's `/metrics`.
fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

impl ControllerChild {
    /// Starts the controller; `lease` names its Lease (each child its own, so that one
    /// started after a SIGKILL need not wait for its predecessor's lease to expire).
    pub(super) fn start(launch: &Launch, lease: &str) -> Result<Self, String> {
        let open = |path: &Path| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))
        };
        let metrics_addr = free_port()?;
        let mut command = Command::new(&launch.binary);
        command
            .arg("--kubeconfig")
            .arg(&launch.kubeconfig)
            .args(["--log-format", "text", "--lease-name", lease])
            .args(["--lease-namespace", &launch.lease_namespace])
            .args(["--metrics-addr", &metrics_addr.to_string()]);
        for registry in &launch.insecure_registries {
            command.args(["--insecure-registry", registry]);
        }
        let child = command
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(open(&launch.log)?)
            .stderr(open(&launch.log)?)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", launch.binary.display()))?;
        Ok(ControllerChild {
            child,
            metrics_addr,
            last: Usage::default(),
        })
    }

    /// Reads its usage (kept as the last reading); false once it has exited.
    pub(super) fn sample(&mut self) -> bool {
        if self.exited() {
            return false;
        }
        if let Some(usage) = Usage::of(self.child.id()) {
            self.last = usage;
        }
        true
    }

    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Its `/metrics` text, if it answers.
    async fn scrape(&self) -> Option<String> {
        scrape(self.metrics_addr).await
    }

    fn signal(&mut self, signal: Signal) {
        // Only a child not yet reaped: its PID is still its own.
        if self.exited() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Scrapes its metrics, reads its usage a last time, then stops it: SIGKILL at once
    /// when `abruptly`, else SIGTERM and SIGKILL after [`GRACE`]. Returns the usage and
    /// the metrics text.
    pub(super) async fn stop(mut self, abruptly: bool) -> (Usage, Option<String>) {
        let metrics = self.scrape().await;
        self.sample();
        if abruptly {
            self.signal(Signal::SIGKILL);
        } else {
            self.signal(Signal::SIGTERM);
            let deadline = Instant::now() + GRACE;
            while !self.exited() && Instant::now() < deadline {
                tokio::time::sleep(EXIT_POLL).await;
            }
            if !self.exited() {
                tracing::warn!("bench: the controller did not stop within {GRACE:?}; killed");
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.last, metrics)
    }
}

impl Drop for ControllerChild {
    /// SIGTERM, then SIGKILL after [`GRACE`], for a child not stopped by [`Self::stop`].
    fn drop(&mut self) {
        if self.exited() {
            return;
        }
        self.signal(Signal::SIGTERM);
        let deadline = std::time::Instant::now() + GRACE;
        while !self.exited() && std::time::Instant::now() < deadline {
            std::thread::sleep(EXIT_POLL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `/metrics` text served at `addr`, if it answers within [`SCRAPE_TIMEOUT`].
async fn scrape(addr: SocketAddr) -> Option<String> {
    let get = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response).into_owned();
        text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, get)
        .await
        .ok()
        .flatten()
}

/// The controller child running now: its PID and its `/metrics` address.
pub(super) type Live = std::sync::Arc<std::sync::Mutex<Option<(u32, SocketAddr)>>>;

/// What the running child shows now: its resident size (`VmRSS`, MiB), its own CPU time
/// (seconds) and its metrics text; `None` each when there is no child or it does not
/// answer.
pub(super) async fn probe(live: &Live) -> Probe {
    let now = *live
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some((pid, addr)) = now else {
        return Probe::default();
    };
    let rss_mib = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| status_kib(&status, "VmRSS"))
        .map(|kib| kib / 1024.0);
    let cpu = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| cpu_ticks(&stat))
        .map(|ticks| (pid, ticks as f64 / clock_ticks()));
    Probe {
        rss_mib,
        cpu,
        metrics: scrape(addr).await,
    }
}

/// What [`probe`] read of the running controller.
#[derive(Debug, Default)]
pub(super) struct Probe {
    pub(super) rss_mib: Option<f64>,
    /// Its process ID and CPU seconds so far (a restarted child starts again from 0).
    pub(super) cpu: Option<(u32, f64)>,
    pub(super) metrics: Option<String>,
}

/// What the controller children came to.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) kills: u32,
    /// Their CPU time summed, their largest peak.
    pub(super) usage: Usage,
    /// Their `/metrics` texts, one after another (a histogram parsed from it sums them).
    pub(super) metrics: String,
}

/// Why a child was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The bench is over.
    Stop,
    /// Its time under `--kill-controller-every` was up.
    Kill,
    /// It exited by itself.
    Exited,
}

/// The controller as a child process, killed (SIGKILL) and started again every
/// `kill_every` if set, until `stop` says true; then stopped with SIGTERM.
pub(super) async fn controller_process_loop(
    launch: Launch,
    kill_every: Option<Duration>,
    mut stop: watch::Receiver<bool>,
    live: Live,
) -> Outcome {
    let set_live = |now: Option<(u32, SocketAddr)>| {
        *live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    };
    let mut outcome = Outcome::default();
    let mut run = 0u32;
    loop {
        run += 1;
        let mut child = match ControllerChild::start(&launch, &format!("bench-controller-{run}")) {
            Ok(child) => child,
            Err(e) => {
                eprintln!("bootc-sim bench: {e}");
                return outcome;
            }
        };
        let kill = async {
            match kill_every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(kill);
        set_live(Some((child.child.id(), child.metrics_addr)));
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        let end = loop {
            tokio::select! {
                _ = tick.tick() => if !child.sample() { break End::Exited },
                () = &mut kill => break End::Kill,
                _ = stop.wait_for(|s| *s) => break End::Stop,
            }
        };
        set_live(None);
        let (usage, metrics) = child.stop(end != End::Stop).await;
        outcome.usage.add(usage);
        outcome.metrics.push_str(&metrics.unwrap_or_default());
        match end {
            End::Stop => return outcome,
            End::Kill => outcome.kills += 1,
            End::Exited => {
                eprintln!(
                    "bootc-sim bench: the controller exited by itself (see {}); starting it again",
                    launch.log.display()
                );
                let pause = tokio::time::sleep(Duration::from_secs(1));
                tokio::select! {
                    () = pause => {}
                    _ = stop.wait_for(|s| *s) => return outcome,
                }
            }
        }
    }
}
