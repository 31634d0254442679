//! Plays the kubelet for the pods of a Deployment or DaemonSet read back from the API:
//! runs each pod's container (see [`spec`]) with the service account mounted where a
//! kubelet mounts it and the API service's variables set, and runs its declared probes
//! (HTTP GET, or a command in the container) on their period and failure threshold.
//!
//! Two runtimes: the binary from the cargo target directory as a plain process, in its
//! own mount namespace (`unshare`, so the service account can be mounted at the standard
//! path without touching this machine's), or the template's image with `podman run`.
//! A plain process runs as the harness's user; podman applies the security context.
//!
//! The network is this machine's (`--network=host` for podman): the emulator and the
//! pods' servers listen on loopback only, and a pod here reaches the API at 127.0.0.1
//! where a real one would reach the service IP. Without a network namespace per pod, two
//! replicas cannot both listen on their declared port; so each declared container port
//! gets a free loopback port of its own, and an argument or variable that listens on all
//! addresses at that port (`0.0.0.0:8080`) is given `127.0.0.1:<that port>` instead. The
//! probes resolve the declared port (by name or number) through the same map.
//!
//! Only containers this harness started are stopped, by PID or container ID; dropping a
//! [`Pod`] stops its container (a failed test included).

pub mod daemon;
pub mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spec::{ContainerRun, Probe, ProbeAction};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where a kubelet mounts the service account.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How a pod's container is run.
#[derive(Debug, Clone)]
pub enum Runtime {
    /// The command's binary, by file name, from this directory.
    Process { bin_dir: PathBuf },
    /// `podman run` of the template's image, with this podman (a program and its first
    /// arguments: `scripts/image podman`, whose storage holds the image it built).
    Podman { podman: Vec<String> },
}

/// What a kubelet writes into the service-account volume.
#[derive(Debug, Clone)]
pub struct ServiceAccountFiles {
    pub token: String,
    pub ca_pem: String,
    pub namespace: String,
}

/// The probes' latest view of a pod.
#[derive(Debug, Default, Clone)]
pub struct ProbeState {
    pub ready: bool,
    /// The liveness probe failed `failureThreshold` times in a row (a kubelet would
    /// restart the container).
    pub liveness_tripped: bool,
    pub liveness_successes: u32,
    pub readiness_successes: u32,
}

#[derive(Debug)]
enum Running {
    Process(tokio::process::Child),
    Podman { id: String, podman: Vec<String> },
}

/// One running pod.
#[derive(Debug)]
pub struct Pod {
    pub name: String,
    pub run: ContainerRun,
    /// Declared container port → the loopback port it got.
    pub host_ports: BTreeMap<u16, u16>,
    running: Option<Running>,
    probes: Arc<Mutex<ProbeState>>,
    probe_tasks: Vec<tokio::task::JoinHandle<()>>,
    dir: tempfile::TempDir,
}

/// The variables a kubelet gives every container for the API's service: here the
/// emulator on loopback.
pub fn service_env(emulator: &kube_emulator::Emulator) -> Vec<(String, String)> {
    let port = emulator.addr().port().to_string();
    vec![
        ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port),
    ]
}

/// The service-account volume of `service_account` in the install's namespace: a token
/// (the emulator authenticates nobody, but a client must still send one) and the
/// emulator's CA.
pub fn service_account_files(
    emulator: &kube_emulator::Emulator,
    namespace: &str,
    service_account: &str,
) -> ServiceAccountFiles {
    ServiceAccountFiles {
        token: format!("{namespace}:{service_account}:token"),
        ca_pem: emulator.ca_pem().unwrap_or_default().to_owned(),
        namespace: namespace.to_owned(),
    }
}

fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Gives each declared port a loopback port and rewrites the all-addresses listens.
fn map_ports(run: &mut ContainerRun) -> Result<BTreeMap<u16, u16>, String> {
    let map = run
        .ports
        .values()
        .map(|p| Ok((*p, free_port()?)))
        .collect::<std::io::Result<BTreeMap<u16, u16>>>()
        .map_err(|e| format!("a free loopback port: {e}"))?;
    let rewrite = |s: &mut String| {
        for (c, h) in &map {
            for any in [format!("0.0.0.0:{c}"), format!("[::]:{c}")] {
                *s = s.replace(&any, &format!("127.0.0.1:{h}"));
            }
        }
    };
    run.args.iter_mut().for_each(rewrite);
    run.command.iter_mut().for_each(rewrite);
    run.env.iter_mut().for_each(|(_, v)| rewrite(v));
    Ok(map)
}

fn write_service_account(dir: &Path, files: &ServiceAccountFiles) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let sa = dir.join("serviceaccount");
    std::fs::create_dir(&sa)?;
    for (name, text) in [
        ("token", &files.token),
        ("ca.crt", &files.ca_pem),
        ("namespace", &files.namespace),
    ] {
        std::fs::write(sa.join(name), text)?;
        std::fs::set_permissions(sa.join(name), std::fs::Permissions::from_mode(0o644))?;
    }
    // Readable by the container's user, as a kubelet's projected volume is.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&sa, std::fs::Permissions::from_mode(0o755))?;
    Ok(sa)
}

/// Mounts the service account at the standard path inside a private mount namespace
/// (a tmpfs over `/run`, which `/var/run` links to), then runs the container's command.
const PROCESS_SETUP: &str = r#"set -eu
sa=$1
shift
mount -t tmpfs -o mode=0755 pod-run /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
mount --bind "$sa" /run/secrets/kubernetes.io/serviceaccount
exec "$@"
"#;

impl Pod {
    /// Starts the pod's container and its probes.
    pub async fn start(
        runtime: &Runtime,
        name: &str,
        mut run: ContainerRun,
        files: &ServiceAccountFiles,
    ) -> Result<Pod, String> {
        let host_ports = map_ports(&mut run)?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sa = write_service_account(dir.path(), files).map_err(|e| e.to_string())?;
        let log = dir.path().join("container.log");
        let running = match runtime {
            Runtime::Process { bin_dir } => start_process(bin_dir, &run, &sa, &log)?,
            Runtime::Podman { podman } => start_podman(podman, name, &run, &sa).await?,
        };
        let mut pod = Pod {
            name: name.to_owned(),
            run,
            host_ports,
            running: Some(running),
            probes: Arc::default(),
            probe_tasks: Vec::new(),
            dir,
        };
        pod.start_probes();
        Ok(pod)
    }

    fn start_probes(&mut self) {
        let kinds = [
            (self.run.readiness.clone(), false),
            (self.run.liveness.clone(), true),
        ];
        for (probe, liveness) in kinds {
            let Some(mut probe) = probe else { continue };
            if let ProbeAction::HttpGet { port, .. } = &mut probe.action {
                *port = self.host_ports.get(port).copied().unwrap_or(*port);
            }
            let exec_in = match &self.running {
                Some(Running::Podman { id, podman }) => Some((podman.clone(), id.clone())),
                _ => None,
            };
            let state = self.probes.clone();
            self.probe_tasks
                .push(tokio::spawn(run_probe(probe, exec_in, liveness, state)));
        }
    }

    /// The probes' latest view.
    pub fn probes(&self) -> ProbeState {
        self.probes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The container's ID, when podman runs it.
    pub fn container_id(&self) -> Option<&str> {
        match &self.running {
            Some(Running::Podman { id, .. }) => Some(id),
            _ => None,
        }
    }

    /// The loopback port the named declared port got.
    pub fn port(&self, name: &str) -> Option<u16> {
        let declared = self.run.ports.get(name)?;
        self.host_ports.get(declared).copied()
    }

    /// What the container printed (plain processes; podman's through `podman logs`).
    pub fn logs(&self) -> String {
        match &self.running {
            Some(Running::Podman { id, podman }) => std::process::Command::new(&podman[0])
                .args(&podman[1..])
                .args(["logs", id])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout).into_owned()
                        + &String::from_utf8_lossy(&o.stderr)
                })
                .unwrap_or_default(),
            _ => std::fs::read_to_string(self.dir.path().join("container.log")).unwrap_or_default(),
        }
    }

    /// Kills the container (SIGKILL, by its PID or container ID) and stops probing it;
    /// it is not restarted.
    pub async fn kill(&mut self) {
        self.probe_tasks.iter().for_each(|t| t.abort());
        match self.running.take() {
            Some(Running::Process(mut child)) => {
                let _ = child.kill().await;
            }
            Some(Running::Podman { id, podman }) => remove_container(&podman, &id),
            None => {}
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.probe_tasks.iter().for_each(|t| t.abort());
        match self.running.take() {
            Some(Running::Process(mut child)) => {
                let _ = child.start_kill();
            }
            Some(Running::Podman { id, podman }) => remove_container(&podman, &id),
            None => {}
        }
    }
}

fn remove_container(podman: &[String], id: &str) {
    let _ = std::process::Command::new(&podman[0])
        .args(&podman[1..])
        .args(["rm", "-f", "-t", "0", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn start_process(
    bin_dir: &Path,
    run: &ContainerRun,
    sa: &Path,
    log: &Path,
) -> Result<Running, String> {
    if !run.host_paths.is_empty() {
        return Err("a plain process mounts no hostPath volume: run it with podman".into());
    }
    let (program, rest) = run
        .command
        .split_first()
        .ok_or("the container has no command")?;
    let file = Path::new(program)
        .file_name()
        .ok_or("the command names no file")?;
    let binary = bin_dir.join(file);
    if !binary.is_file() {
        return Err(format!(
            "{} is missing: build it first (cargo build -p {})",
            binary.display(),
            file.to_string_lossy()
        ));
    }
    let out = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let child = tokio::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            PROCESS_SETUP,
            "sh",
        ])
        .arg(sa)
        .arg(&binary)
        .args(rest)
        .args(&run.args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("unshare (util-linux) runs the pod's process: {e}"))?;
    Ok(Running::Process(child))
}

/// The label on every container this process starts, so that what it lists
/// of podman's containers is its own, whatever else runs on the machine.
pub fn own_label() -> String {
    format!("io.bootc-pool.started-by={}", std::process::id())
}

/// `podman run` arguments for `run`, the security context applied.
fn podman_args(name: &str, run: &ContainerRun, sa: &Path) -> Vec<String> {
    let mut a: Vec<String> = ["run", "-d", "--pull=never"].map(String::from).to_vec();
    // Loopback only here; a pod would reach the API through the service IP instead.
    a.push("--network=host".into());
    a.push(format!("--name={name}"));
    a.push(format!("--label={}", own_label()));
    a.push(format!(
        "--volume={}:{SERVICE_ACCOUNT_DIR}:ro",
        sa.display()
    ));
    match (run.run_as_user, run.run_as_group) {
        (Some(u), Some(g)) => a.push(format!("--user={u}:{g}")),
        (Some(u), None) => a.push(format!("--user={u}")),
        _ => {}
    }
    if run.read_only_root {
        a.push("--read-only".into());
    }
    if run.no_new_privileges {
        a.push("--security-opt=no-new-privileges".into());
    }
    // RuntimeDefault is podman's default profile; Unconfined turns it off.
    if run.seccomp.as_deref() == Some("Unconfined") {
        a.push("--security-opt=seccomp=unconfined".into());
    }
    a.extend(run.cap_drop.iter().map(|c| format!("--cap-drop={c}")));
    a.extend(run.cap_add.iter().map(|c| format!("--cap-add={c}")));
    for m in &run.host_paths {
        let ro = if m.read_only { ":ro" } else { "" };
        a.push(format!("--volume={}:{}{ro}", m.path, m.mount_path));
    }
    if let Some(bytes) = run.memory_limit.as_deref().and_then(spec::memory_bytes) {
        a.push(format!("--memory={bytes}"));
    }
    a.extend(run.env.iter().map(|(k, v)| format!("--env={k}={v}")));
    if !run.command.is_empty() {
        let json = serde_json::to_string(&run.command).unwrap_or_default();
        a.push(format!("--entrypoint={json}"));
    }
    a.push(run.image.clone());
    a.extend(run.args.iter().cloned());
    a
}

/// What a kubelet checks of each hostPath volume's `type` before it starts the
/// container (`DirectoryOrCreate` makes the directory).
fn prepare_host_paths(run: &ContainerRun) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt as _;
    for m in &run.host_paths {
        let path = Path::new(&m.path);
        let meta = std::fs::metadata(path);
        let fits = match m.kind.as_str() {
            "" => true,
            "DirectoryOrCreate" => std::fs::create_dir_all(path).is_ok(),
            "Directory" => meta.is_ok_and(|m| m.is_dir()),
            "Socket" => meta.is_ok_and(|m| m.file_type().is_socket()),
            "File" => meta.is_ok_and(|m| m.is_file()),
            other => return Err(format!("hostPath type {other} is not played")),
        };
        if !fits {
            return Err(format!(
                "hostPath {} is not a {} (the kubelet would not start the pod)",
                m.path, m.kind
            ));
        }
    }
    Ok(())
}

async fn start_podman(
    podman: &[String],
    name: &str,
    run: &ContainerRun,
    sa: &Path,
) -> Result<Running, String> {
    prepare_host_paths(run)?;
    let out = tokio::process::Command::new(&podman[0])
        .args(&podman[1..])
        .args(podman_args(name, run, sa))
        .output()
        .await
        .map_err(|e| format!("podman is on the PATH: {e}"))?;
    if !out.status.success() {
        // `podman run` creates the container before it starts it: one that could not
        // start stays, and holds its name against every retry. A kubelet's failed start
        // leaves nothing behind, so neither does this one.
        remove_container(podman, name);
        return Err(format!(
            "podman run: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    Ok(Running::Podman {
        id: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        podman: podman.to_vec(),
    })
}

/// `GET path` on loopback `port` as a kubelet's httpGet probe: the status, or `None`
/// when nothing answered within `timeout`.
pub async fn http_get(port: u16, path: &str, timeout: Duration) -> Option<(u16, String)> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        Some((code, body))
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

/// One probe's verdict: an HTTP answer below 400, or the command's exit status 0 (run in
/// the container by `podman exec`; a plain process has no container to run it in).
async fn probe_once(probe: &Probe, exec_in: Option<&(Vec<String>, String)>) -> bool {
    match (&probe.action, exec_in) {
        (ProbeAction::HttpGet { path, port }, _) => http_get(*port, path, probe.timeout)
            .await
            .is_some_and(|(code, _)| (200..400).contains(&code)),
        (ProbeAction::Exec(command), Some((podman, id))) => {
            let run = tokio::process::Command::new(&podman[0])
                .args(&podman[1..])
                .args(["exec", id.as_str()])
                .args(command)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .status();
            // podman exec takes its own time to start; the declared timeout is the
            // command's, so allow it a few seconds more.
            let limit = probe.timeout + Duration::from_secs(5);
            matches!(tokio::time::timeout(limit, run).await, Ok(Ok(s)) if s.success())
        }
        (ProbeAction::Exec(_), None) => false,
    }
}

async fn run_probe(
    probe: Probe,
    exec_in: Option<(Vec<String>, String)>,
    liveness: bool,
    state: Arc<Mutex<ProbeState>>,
) {
    tokio::time::sleep(probe.initial_delay).await;
    let mut failures = 0u32;
    let mut tick = tokio::time::interval(probe.period);
    loop {
        tick.tick().await;
        let ok = probe_once(&probe, exec_in.as_ref()).await;
        failures = if ok { 0 } else { failures + 1 };
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        if liveness {
            s.liveness_successes += u32::from(ok);
            s.liveness_tripped |= failures >= probe.failure_threshold;
        } else if ok {
            s.ready = true;
            s.readiness_successes += 1;
        } else if failures >= probe.failure_threshold {
            s.ready = false;
        }
    }
}

/// Waits until `check` gives `Some`, polling every 200 ms, for at most `limit`.
pub async fn until<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `scripts/image podman` as a program and its first argument: podman with the storage
/// and configuration the script builds the image with, so the image it built is there.
pub fn podman_command() -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/image");
    vec![script.display().to_string(), "podman".to_owned()]
}

/// Set to `1` to skip the test on purpose on a machine without podman.
const SKIP_ENV: &str = "BOOTC_SKIP_IMAGE";

/// Whether podman is here to run the test: `Some` when it is; `None` (reported) when it is
/// absent and `BOOTC_SKIP_IMAGE=1`; otherwise, and always under `CI=true`, a panic.
pub fn podman_for_test(test: &str) -> Option<()> {
    let found = std::process::Command::new("podman")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    match (found, env("CI") == "true", env(SKIP_ENV) == "1") {
        (true, _, _) => Some(()),
        (false, true, _) => panic!("podman is missing, and under CI=true {test} fails"),
        (false, false, true) => {
            let line = format!("SKIPPED {test}: podman is missing and {SKIP_ENV}=1\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
        (false, false, false) => panic!(
            "podman is missing (scripts/install-packages installs it); to skip {test} on \
             purpose, set {SKIP_ENV}=1"
        ),
    }
}
