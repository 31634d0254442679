//! A DaemonSet's pod on one real-bootc node, as the node's kubelet runs it: the container
//! is started (by podman) once the node is up and, when the node reboots (the agent
//! exits as the node's bus goes), started again in the next boot. Each container is an
//! [`Incarnation`]: the boot it ran in, whether its readiness probe passed, its memory
//! cgroup's limit and high-water mark, and the container list while it ran.
//!
//! The hostPath volumes are mounted from where this machine holds the node's directories
//! ([`SharedDirs`]).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use tokio::sync::watch;

use super::spec::{ContainerRun, PodIdentity, container_run};
use super::{Pod, Runtime, ServiceAccountFiles};
use crate::NodeStatus;
use crate::node::NodePhase;
use crate::real::SharedDirs;

/// How often a running container is looked at.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How long the kubelet waits before trying a container that could not start again.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// One container the kubelet started for the node's pod.
#[derive(Debug, Clone, Default)]
pub struct Incarnation {
    /// The container's name (`<pod>-boot<N>`).
    pub container: String,
    /// The node's boot it ran in.
    pub boot: u64,
    /// The memory cgroup's limit (bytes), as last read.
    pub memory_limit: u64,
    /// The memory cgroup's high-water mark (bytes), as last read.
    pub memory_peak: u64,
    /// The readiness probe passed at least once.
    pub ready: bool,
    /// `podman ps` of the pod's containers while it ran, once it was ready.
    pub listing: String,
    /// Its whole log, once it exited.
    pub log: String,
}

impl Incarnation {
    /// The last 20 lines of its log.
    pub fn log_tail(&self) -> String {
        let lines: Vec<&str> = self.log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// The DaemonSet's container for `node`: the template's only container for a pod of
/// `pod` bound to the node, its hostPath volumes pointed at where this machine holds the
/// node's directories.
pub fn container_for_node(
    daemonset: &DaemonSet,
    pod: &PodIdentity,
    service: &[(String, String)],
    node: &SharedDirs,
) -> Result<ContainerRun, String> {
    let template = &daemonset
        .spec
        .as_ref()
        .ok_or("the DaemonSet has no spec")?
        .template;
    let mut run = container_run(template, pod, service)?;
    for m in &mut run.host_paths {
        let here = node.host_path(Path::new(&m.path)).ok_or_else(|| {
            format!(
                "hostPath {} is not a directory the node shares with this machine",
                m.path
            )
        })?;
        m.path = here.display().to_string();
    }
    Ok(run)
}

/// The node's kubelet, for one pod of a DaemonSet: a task that runs its container
/// whenever the node is up. Dropping it without [`NodeKubelet::stop`] aborts the task,
/// and the running container is removed with its [`Pod`].
#[derive(Debug)]
pub struct NodeKubelet {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    seen: Arc<Mutex<Vec<Incarnation>>>,
    failed: Arc<Mutex<Option<String>>>,
}

/// What the task works with.
struct Parts {
    name: String,
    node: watch::Receiver<NodeStatus>,
    podman: Vec<String>,
    run: ContainerRun,
    files: ServiceAccountFiles,
    seen: Arc<Mutex<Vec<Incarnation>>>,
    /// Why the last container could not be started, if it could not.
    failed: Arc<Mutex<Option<String>>>,
}

impl NodeKubelet {
    /// Starts running pod `name`'s container `run` on the node whose status `node`
    /// follows ([`crate::Node::subscribe`]), with `podman` (a program and its first
    /// arguments).
    pub fn start(
        node: watch::Receiver<NodeStatus>,
        name: &str,
        podman: Vec<String>,
        run: ContainerRun,
        files: ServiceAccountFiles,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let seen = Arc::default();
        let failed = Arc::default();
        let parts = Parts {
            name: name.to_owned(),
            node,
            podman,
            run,
            files,
            seen: Arc::clone(&seen),
            failed: Arc::clone(&failed),
        };
        let task = tokio::spawn(run_pod(parts, stopped));
        NodeKubelet {
            stop,
            task,
            seen,
            failed,
        }
    }

    /// Why the last attempt to start a container failed, if it did (a kubelet retries):
    /// for a report of a pod that never started.
    pub fn last_start_error(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The containers so far, the running one last.
    pub fn seen(&self) -> Vec<Incarnation> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops the running container and the task; the containers it ran.
    pub async fn stop(mut self) -> Vec<Incarnation> {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for NodeKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run_pod(mut parts: Parts, mut stopped: watch::Receiver<bool>) {
    let runtime = Runtime::Podman {
        podman: parts.podman.clone(),
    };
    loop {
        let up = parts.node.wait_for(|s| s.phase == NodePhase::Up).await;
        let Ok(boot) = up.map(|s| s.boots) else {
            return;
        };
        if *stopped.borrow() {
            return;
        }
        let container = format!("{}-boot{boot}", parts.name);
        let started = Pod::start(&runtime, &container, parts.run.clone(), &parts.files).await;
        let mut pod = match started {
            Ok(pod) => pod,
            Err(e) => {
                // The node's bus socket may not be there yet: a kubelet retries.
                tracing::info!("kubelet: {container} not started: {e}");
                *parts.failed.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(format!("{container}: {e}"));
                tokio::select! {
                    () = tokio::time::sleep(RETRY_PAUSE) => continue,
                    _ = stopped.changed() => return,
                }
            }
        };
        *parts.failed.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let index = record(&parts.seen, |seen| {
            seen.push(Incarnation {
                container: container.clone(),
                boot,
                ..Incarnation::default()
            });
            seen.len() - 1
        });
        loop {
            tokio::select! {
                alive = look(&pod, &parts, index) => if !alive { break },
                _ = stopped.changed() => {
                    keep_log(&pod, &parts, index);
                    pod.kill().await;
                    return;
                }
            }
        }
        keep_log(&pod, &parts, index);
        pod.kill().await;
    }
}

/// Keeps the container's log in its [`Incarnation`] (when it exited, or when the
/// kubelet stops it).
fn keep_log(pod: &Pod, parts: &Parts, index: usize) {
    let log = pod.logs();
    record(&parts.seen, |seen| seen[index].log = log);
}

fn record<T>(seen: &Mutex<Vec<Incarnation>>, f: impl FnOnce(&mut Vec<Incarnation>) -> T) -> T {
    f(&mut seen.lock().unwrap_or_else(PoisonError::into_inner))
}

fn podman_out(podman: &[String], args: &[&str]) -> String {
    std::process::Command::new(&podman[0])
        .args(&podman[1..])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// One look at the running container, after a pause: records its memory cgroup's
/// figures, readiness and, once ready, the container list. `false` once it has exited.
async fn look(pod: &Pod, parts: &Parts, index: usize) -> bool {
    tokio::time::sleep(LOOK_EVERY).await;
    let id = pod.container_id().unwrap_or_default();
    let format = "{{.State.Running}} {{.State.Pid}}";
    let state = podman_out(&parts.podman, &["inspect", "--format", format, id]);
    let Some(("true", pid)) = state.trim().split_once(' ') else {
        return false;
    };
    let memory = memory_cgroup(pid);
    let ready = pod.probes().readiness_successes > 0;
    let needs_listing = ready && record(&parts.seen, |s| s[index].listing.is_empty());
    let listing = if needs_listing {
        let filter = format!("name={}", parts.name);
        let own = format!("label={}", super::own_label());
        podman_out(
            &parts.podman,
            &["ps", "--filter", &filter, "--filter", &own],
        )
    } else {
        String::new()
    };
    record(&parts.seen, |seen| {
        let this = &mut seen[index];
        if let Some((limit, peak)) = memory {
            this.memory_limit = limit;
            this.memory_peak = this.memory_peak.max(peak);
        }
        this.ready |= ready;
        if needs_listing {
            this.listing = listing;
        }
    });
    true
}

/// The memory cgroup (v1 or v2) of process `pid`: its limit and high-water mark.
pub fn memory_cgroup(pid: &str) -> Option<(u64, u64)> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let read =
        |path: String| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if !v2 && controllers.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            let limit = read(format!("{dir}/memory.limit_in_bytes"))?;
            return Some((limit, read(format!("{dir}/memory.max_usage_in_bytes"))?));
        }
        if v2 && controllers.is_empty() {
            let dir = format!("/sys/fs/cgroup{path}");
            let limit = read(format!("{dir}/memory.max"))?;
            return Some((limit, read(format!("{dir}/memory.peak"))?));
        }
    }
    None
}
