//! `--kubelet` (with `--real-bootc`): the demo starts neither the controller nor the
//! agents; what runs is what the install puts in the API, from the image it names. The
//! demo plays the kubelets: this machine's for the controller's Deployment (its replicas
//! run from their pod template, with in-cluster configuration, probed as declared) and
//! each node's for the agent's DaemonSet (its pod on every node whose labels match the
//! template's nodeSelector, restarted in each boot; see `host_sim::pods`). Both run with
//! podman, the image pulled from the demo's registry first.
//!
//! Every few seconds it reads the Deployment, the DaemonSet and the Nodes, and brings the
//! containers in line: a new image replaces the pods (an upgrade), a node that leaves
//! the selector loses its pod, the install's removal stops them all. It writes the two
//! objects' status as their controllers would (replicas, ready, updated), so `kubectl
//! rollout status` works as on a cluster; it makes no Pod objects.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use host_sim::NodeStatus;
use host_sim::pods::daemon::{NodeKubelet, container_for_node};
use host_sim::pods::spec::{PodIdentity, container_run};
use host_sim::pods::{
    Pod, Runtime, ServiceAccountFiles, podman_command, service_account_files, service_env,
};
use host_sim::real::SharedDirs;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;

use super::processes::Parts;

/// The install's namespace and objects.
pub(super) const NAMESPACE: &str = "bootc-system";
pub(super) const DEPLOYMENT: &str = "bootc-pool-controller";
pub(super) const DAEMONSET: &str = "bootc-node-agent";
/// How often the API is read.
const SYNC_EVERY: Duration = Duration::from_secs(2);

/// The containers the kubelets run, as `podman ps` lists them (only this demo's:
/// other containers on the machine are not its business).
pub(super) fn container_list() -> String {
    let podman = podman_command();
    let filter = format!("label={}", host_sim::pods::own_label());
    let out = std::process::Command::new(&podman[0])
        .args(&podman[1..])
        .args(["ps", "--filter", &filter])
        .args(["--format", "{{.Names}}  {{.Image}}  {{.Status}}"])
        .output();
    match out {
        Ok(o) => format!(
            "the containers (podman ps):\n{}",
            String::from_utf8_lossy(&o.stdout).trim_end()
        ),
        Err(e) => format!("podman ps: {e}"),
    }
}

/// Writes a container's log as `<dir>/<container>.log`; a log that cannot be written is
/// said on standard error.
fn keep_log(dir: &Path, container: &str, log: &str) {
    let path = dir.join(format!("{container}.log"));
    let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, log));
    if let Err(e) = written {
        eprintln!("bootc-sim demo kubelet: {}: {e}", path.display());
    }
}

/// When the agent's pod on `node` ends the run without a ready container: what the
/// kubelet started there, the end of the last container's log, and why the last start
/// failed (a start that failed last is reported even after a container that was ready),
/// so a run that failed says why.
fn report_unready(
    node: &str,
    seen: &[host_sim::pods::daemon::Incarnation],
    start_error: Option<String>,
) {
    if let Some(e) = &start_error {
        println!(
            "kubelet: the agent's pod on {node} ({} containers started there): the last start failed: {e}",
            seen.len()
        );
    }
    let Some(last) = seen.last() else {
        if start_error.is_none() {
            println!(
                "kubelet: the agent's pod on {node} never started a container; no start was tried: the node was not seen up"
            );
        }
        return;
    };
    if last.ready {
        return;
    }
    println!(
        "kubelet: the agent's container {} on {node} (boot {}, {} started there) never became ready; its log ends:\n{}",
        last.container,
        last.boot,
        seen.len(),
        last.log_tail()
    );
}

/// A node the DaemonSet may run on.
struct Seat {
    name: String,
    status: watch::Receiver<NodeStatus>,
    dirs: SharedDirs,
}

/// The kubelets' task; stopped (every container removed) by [`Kubelets::stop`] or drop.
#[derive(Debug)]
pub(crate) struct Kubelets {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Kubelets {
    /// Starts playing the kubelets for the nodes in `parts`, against `emulator`. When
    /// they stop, every container's log is written to `logs` (`<container>.log`).
    pub(super) fn start(parts: &Parts, client: Client, logs: PathBuf) -> Result<Self, String> {
        let emulator = parts.emulator.as_ref().ok_or("the API is not running")?;
        let seats = parts
            .real_nodes
            .iter()
            .map(|n| Seat {
                name: n.name().to_owned(),
                status: n.subscribe(),
                dirs: n.shared_dirs(),
            })
            .collect();
        let state = State {
            client,
            service: service_env(emulator),
            controller_files: service_account_files(emulator, NAMESPACE, DEPLOYMENT),
            agent_files: service_account_files(emulator, NAMESPACE, DAEMONSET),
            podman: podman_command(),
            seats,
            pulled: Vec::new(),
            replicas: Vec::new(),
            agents: BTreeMap::new(),
            logs,
        };
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(state.run(stopped));
        Ok(Kubelets { stop, task })
    }

    /// Stops every container.
    pub(super) async fn stop(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the kubelets run and know.
struct State {
    client: Client,
    service: Vec<(String, String)>,
    controller_files: ServiceAccountFiles,
    agent_files: ServiceAccountFiles,
    podman: Vec<String>,
    seats: Vec<Seat>,
    /// Images pulled so far.
    pulled: Vec<String>,
    /// The controller's pods and the image they run.
    replicas: Vec<(String, Pod)>,
    /// The agent's pod per node, and its image.
    agents: BTreeMap<String, (String, NodeKubelet)>,
    /// Where the containers' logs are written when the kubelets stop.
    logs: PathBuf,
}

impl State {
    async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        loop {
            if let Err(e) = self.sync().await {
                eprintln!("bootc-sim demo kubelet: {e}");
            }
            tokio::select! {
                () = tokio::time::sleep(SYNC_EVERY) => {}
                _ = stopped.changed() => break,
            }
        }
        for (_, mut pod) in self.replicas.drain(..) {
            keep_log(&self.logs, &pod.name, &pod.logs());
            pod.kill().await;
        }
        for (node, (_, agent)) in std::mem::take(&mut self.agents) {
            let start_error = agent.last_start_error();
            let seen = agent.stop().await;
            for incarnation in &seen {
                keep_log(&self.logs, &incarnation.container, &incarnation.log);
            }
            report_unready(&node, &seen, start_error);
        }
    }

    async fn sync(&mut self) -> Result<(), String> {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), NAMESPACE);
        let deployment = deployments
            .get_opt(DEPLOYMENT)
            .await
            .map_err(|e| format!("reading the Deployment: {e}"))?;
        self.sync_controller(deployment.clone()).await?;
        let daemonsets: Api<DaemonSet> = Api::namespaced(self.client.clone(), NAMESPACE);
        let daemonset = daemonsets
            .get_opt(DAEMONSET)
            .await
            .map_err(|e| format!("reading the DaemonSet: {e}"))?;
        self.sync_agents(daemonset.clone()).await?;
        self.report(deployment, daemonset).await
    }

    /// Writes the Deployment's and the DaemonSet's status as their controllers would
    /// (so `kubectl rollout status` and `kubectl get deploy,ds` read as on a cluster).
    async fn report(
        &self,
        deployment: Option<Deployment>,
        daemonset: Option<DaemonSet>,
    ) -> Result<(), String> {
        let params = PatchParams::default();
        if let Some(d) = deployment {
            let replicas = self.replicas.len();
            let ready = self
                .replicas
                .iter()
                .filter(|(_, p)| p.probes().ready)
                .count();
            let status = json!({"status": {
                "observedGeneration": d.metadata.generation,
                "replicas": replicas, "updatedReplicas": replicas,
                "readyReplicas": ready, "availableReplicas": ready,
            }});
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), NAMESPACE);
            api.patch_status(DEPLOYMENT, &params, &Patch::Merge(&status))
                .await
                .map_err(|e| format!("writing the Deployment's status: {e}"))?;
        }
        if let Some(ds) = daemonset {
            let scheduled = self.agents.len();
            let ready = self
                .agents
                .values()
                .filter(|(_, k)| k.seen().last().is_some_and(|i| i.ready))
                .count();
            let status = json!({"status": {
                "observedGeneration": ds.metadata.generation,
                "desiredNumberScheduled": scheduled, "currentNumberScheduled": scheduled,
                "updatedNumberScheduled": scheduled, "numberMisscheduled": 0,
                "numberReady": ready, "numberAvailable": ready,
            }});
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), NAMESPACE);
            api.patch_status(DAEMONSET, &params, &Patch::Merge(&status))
                .await
                .map_err(|e| format!("writing the DaemonSet's status: {e}"))?;
        }
        Ok(())
    }

    /// Pulls `image` from the demo's registry (plain HTTP on loopback), once.
    async fn pull(&mut self, image: &str) -> Result<(), String> {
        if self.pulled.iter().any(|i| i == image) {
            return Ok(());
        }
        let out = tokio::process::Command::new(&self.podman[0])
            .args(&self.podman[1..])
            .args(["pull", "--quiet", "--tls-verify=false", image])
            .output()
            .await
            .map_err(|e| format!("podman pull {image}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "podman pull {image}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        println!("kubelet: pulled {image}");
        self.pulled.push(image.to_owned());
        Ok(())
    }

    async fn sync_controller(&mut self, deployment: Option<Deployment>) -> Result<(), String> {
        let Some(spec) = deployment.and_then(|d| d.spec) else {
            for (_, mut pod) in self.replicas.drain(..) {
                pod.kill().await;
            }
            return Ok(());
        };
        let image = template_image(&spec.template)?;
        let wanted = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
        if self.replicas.iter().any(|(i, _)| *i != image) {
            println!("kubelet: the Deployment's image is now {image}: replacing its pods");
            for (_, mut pod) in self.replicas.drain(..) {
                pod.kill().await;
            }
        }
        while self.replicas.len() > wanted {
            if let Some((_, mut pod)) = self.replicas.pop() {
                pod.kill().await;
            }
        }
        if self.replicas.len() < wanted {
            self.pull(&image).await?;
        }
        let runtime = Runtime::Podman {
            podman: self.podman.clone(),
        };
        while self.replicas.len() < wanted {
            let pod = PodIdentity {
                name: format!("{DEPLOYMENT}-7d9f8b6c5-r{}", self.replicas.len()),
                namespace: NAMESPACE.to_owned(),
                service_account: DEPLOYMENT.to_owned(),
                node_name: None,
            };
            let run = container_run(&spec.template, &pod, &self.service)?;
            let started = Pod::start(&runtime, &pod.name, run, &self.controller_files).await?;
            println!("kubelet: started {} from {image}", pod.name);
            self.replicas.push((image.clone(), started));
        }
        Ok(())
    }

    async fn sync_agents(&mut self, daemonset: Option<DaemonSet>) -> Result<(), String> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut wanted: BTreeMap<String, String> = BTreeMap::new();
        if let Some(ds) = &daemonset {
            let template = &ds
                .spec
                .as_ref()
                .ok_or("the DaemonSet has no spec")?
                .template;
            let image = template_image(template)?;
            let selector = template
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default();
            for seat in &self.seats {
                let node = nodes.get_opt(&seat.name).await.map_err(|e| e.to_string())?;
                let labels = node.and_then(|n| n.metadata.labels).unwrap_or_default();
                if selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                    wanted.insert(seat.name.clone(), image.clone());
                }
            }
        }
        let gone: Vec<String> = self
            .agents
            .iter()
            .filter(|(node, (image, _))| wanted.get(*node) != Some(image))
            .map(|(node, _)| node.clone())
            .collect();
        for node in gone {
            if let Some((_, agent)) = self.agents.remove(&node) {
                println!("kubelet: removing the agent's pod from {node}");
                agent.stop().await;
            }
        }
        let Some(ds) = daemonset else { return Ok(()) };
        for (node, image) in wanted {
            if self.agents.contains_key(&node) {
                continue;
            }
            self.pull(&image).await?;
            let agent = self.start_agent(&ds, &node)?;
            println!("kubelet: the agent's pod runs on {node} from {image}");
            self.agents.insert(node, (image, agent));
        }
        Ok(())
    }

    fn start_agent(&self, ds: &DaemonSet, node: &str) -> Result<NodeKubelet, String> {
        let seat = self
            .seats
            .iter()
            .find(|s| s.name == node)
            .ok_or_else(|| format!("no node {node}"))?;
        let pod = PodIdentity {
            name: format!("{DAEMONSET}-{node}"),
            namespace: NAMESPACE.to_owned(),
            service_account: DAEMONSET.to_owned(),
            node_name: Some(node.to_owned()),
        };
        let run = container_for_node(ds, &pod, &self.service, &seat.dirs)?;
        Ok(NodeKubelet::start(
            seat.status.clone(),
            &pod.name,
            self.podman.clone(),
            run,
            self.agent_files.clone(),
        ))
    }
}

fn template_image(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> Result<String, String> {
    template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .ok_or_else(|| "the pod template names no image".to_owned())
}
