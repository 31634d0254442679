//! A pod template turned into what a kubelet would run for one pod: the command line
//! with `$(VAR)` expanded, the environment (fieldRefs and the API service's variables),
//! the security context, the memory limit, the hostPath mounts and the probes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec, Probe as KubeProbe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Who a pod is: what its fieldRefs read.
#[derive(Debug, Clone)]
pub struct PodIdentity {
    pub name: String,
    pub namespace: String,
    pub service_account: String,
    /// The node it is bound to (`spec.nodeName`), for a DaemonSet's pods.
    pub node_name: Option<String>,
}

/// What a probe does.
#[derive(Debug, Clone)]
pub enum ProbeAction {
    /// `GET path` on the container's port (a named port resolved to its number).
    HttpGet { path: String, port: u16 },
    /// The command run in the container; exit status 0 passes.
    Exec(Vec<String>),
}

/// A probe as declared.
#[derive(Debug, Clone)]
pub struct Probe {
    pub action: ProbeAction,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
}

/// One container of a pod, as the kubelet would start it.
#[derive(Debug, Clone)]
pub struct ContainerRun {
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Declared container ports by name.
    pub ports: BTreeMap<String, u16>,
    pub liveness: Option<Probe>,
    pub readiness: Option<Probe>,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub read_only_root: bool,
    pub no_new_privileges: bool,
    pub cap_drop: Vec<String>,
    pub cap_add: Vec<String>,
    pub seccomp: Option<String>,
    pub memory_limit: Option<String>,
    pub host_paths: Vec<HostPathMount>,
}

/// A hostPath volume mounted into the container.
#[derive(Debug, Clone)]
pub struct HostPathMount {
    /// The path on the node (rewritten by the harness to where this machine holds it).
    pub path: String,
    /// The volume's `type` (`Socket`, `DirectoryOrCreate`, …); empty when unset.
    pub kind: String,
    pub mount_path: String,
    pub read_only: bool,
}

/// Expands `$(VAR)` from `env` as the kubelet does: `$$` is a literal `$`, an unknown
/// variable stays as written.
pub fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(')
            && let Some(end) = body.find(')')
            && let Some((_, v)) = env.iter().rev().find(|(k, _)| *k == body[..end])
        {
            out.push_str(v);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn field_ref(path: &str, pod: &PodIdentity) -> Result<String, String> {
    match path {
        "metadata.name" => Ok(pod.name.clone()),
        "metadata.namespace" => Ok(pod.namespace.clone()),
        "spec.serviceAccountName" => Ok(pod.service_account.clone()),
        "spec.nodeName" => pod
            .node_name
            .clone()
            .ok_or_else(|| "fieldRef spec.nodeName on a pod bound to no node".to_owned()),
        other => Err(format!("fieldRef {other} is not played by this kubelet")),
    }
}

/// The container's environment: the API service's variables first (as the kubelet
/// injects them), then the declared ones in order, each expanded against those before.
fn environment(
    c: &Container,
    pod: &PodIdentity,
    service: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = service.to_vec();
    for EnvVar {
        name,
        value,
        value_from,
    } in c.env.iter().flatten()
    {
        let v = match (value, value_from) {
            (Some(v), _) => expand(v, &env),
            (None, Some(from)) => match &from.field_ref {
                Some(f) => field_ref(&f.field_path, pod)?,
                None => return Err(format!("env {name}: only fieldRef sources are played")),
            },
            (None, None) => String::new(),
        };
        env.push((name.clone(), v));
    }
    Ok(env)
}

fn seconds(s: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(u64::try_from(s.unwrap_or(default)).unwrap_or(0))
}

fn probe(p: Option<&KubeProbe>, ports: &BTreeMap<String, u16>) -> Result<Option<Probe>, String> {
    let Some(p) = p else { return Ok(None) };
    let action = match (&p.http_get, &p.exec) {
        (Some(get), _) => ProbeAction::HttpGet {
            path: get.path.clone().unwrap_or_else(|| "/".into()),
            port: match &get.port {
                IntOrString::Int(n) => u16::try_from(*n).map_err(|e| e.to_string())?,
                IntOrString::String(name) => *ports
                    .get(name)
                    .ok_or_else(|| format!("probe port {name} is not a declared port"))?,
            },
        },
        (None, Some(exec)) => ProbeAction::Exec(exec.command.clone().unwrap_or_default()),
        (None, None) => return Err("only httpGet and exec probes are played".into()),
    };
    Ok(Some(Probe {
        action,
        initial_delay: seconds(p.initial_delay_seconds, 0),
        period: seconds(p.period_seconds, 10),
        timeout: seconds(p.timeout_seconds, 1),
        failure_threshold: u32::try_from(p.failure_threshold.unwrap_or(3)).unwrap_or(3),
    }))
}

/// The container's volume mounts, each of a hostPath volume (the only kind played).
fn host_paths(spec: &PodSpec, c: &Container) -> Result<Vec<HostPathMount>, String> {
    let mut mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == m.name)
            .ok_or_else(|| format!("volumeMount {} names no volume", m.name))?;
        let host = volume
            .host_path
            .as_ref()
            .ok_or_else(|| format!("volume {}: only hostPath volumes are played", m.name))?;
        mounts.push(HostPathMount {
            path: host.path.clone(),
            kind: host.type_.clone().unwrap_or_default(),
            mount_path: m.mount_path.clone(),
            read_only: m.read_only.unwrap_or(false),
        });
    }
    Ok(mounts)
}

/// What the kubelet would run for `pod` from the template's only container.
pub fn container_run(
    template: &PodTemplateSpec,
    pod: &PodIdentity,
    service: &[(String, String)],
) -> Result<ContainerRun, String> {
    let spec = template.spec.as_ref().ok_or("the template has no spec")?;
    let [c] = spec.containers.as_slice() else {
        return Err("one container per pod is played".into());
    };
    let env = environment(c, pod, service)?;
    let ports: BTreeMap<String, u16> = c
        .ports
        .iter()
        .flatten()
        .filter_map(|p| Some((p.name.clone()?, u16::try_from(p.container_port).ok()?)))
        .collect();
    let pod_sc = spec.security_context.clone().unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let caps = sc.capabilities.clone().unwrap_or_default();
    Ok(ContainerRun {
        image: c.image.clone().ok_or("the container has no image")?,
        command: c
            .command
            .iter()
            .flatten()
            .map(|a| expand(a, &env))
            .collect(),
        args: c.args.iter().flatten().map(|a| expand(a, &env)).collect(),
        liveness: probe(c.liveness_probe.as_ref(), &ports)?,
        readiness: probe(c.readiness_probe.as_ref(), &ports)?,
        run_as_user: sc.run_as_user.or(pod_sc.run_as_user),
        run_as_group: sc.run_as_group.or(pod_sc.run_as_group),
        read_only_root: sc.read_only_root_filesystem.unwrap_or(false),
        no_new_privileges: sc.allow_privilege_escalation == Some(false),
        cap_drop: caps.drop.unwrap_or_default(),
        cap_add: caps.add.unwrap_or_default(),
        seccomp: sc
            .seccomp_profile
            .or(pod_sc.seccomp_profile)
            .map(|p| p.type_),
        memory_limit: c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .map(|q| q.0.clone()),
        host_paths: host_paths(spec, c)?,
        env,
        ports,
    })
}

/// A Kubernetes memory quantity (`256Mi`, `1G`, `512`) in bytes, for `podman --memory`.
pub fn memory_bytes(q: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, factor) in UNITS {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().ok().map(|n| n * factor);
        }
    }
    q.parse().ok()
}

#[cfg(test)]
#[test]
fn expansion_follows_the_kubelet() {
    let env = vec![("A".to_string(), "x".to_string())];
    assert_eq!(expand("--a=$(A)", &env), "--a=x");
    assert_eq!(expand("$(B)-$$(A)-$", &env), "$(B)-$(A)-$");
    assert_eq!(memory_bytes("256Mi"), Some(256 << 20));
}
