//! The set-up: the flags checked, then the API emulator, the image catalog and the
//! nodes, all up on v1.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use host_sim::cluster::{SimCluster, SimOptions};
use host_sim::memory::{Behaviour, Catalog};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{BenchArgs, REPO, SimTransport, secs};

/// The controller child's Lease namespace (created in the emulator).
pub(super) const LEASE_NAMESPACE: &str = "bootc-system";

/// What the flags come to.
pub(super) struct Settings {
    /// How often the controller is killed, if at all.
    pub(super) kill_every: Option<Duration>,
    /// `maxUnavailable` resolved against the node count.
    pub(super) budget: usize,
    /// `maxUnavailable` as the pool's spec gets it.
    pub(super) spec_budget: Value,
    /// Where the picture goes.
    pub(super) svg_path: PathBuf,
    /// Under `--controller-process`: the controller binary.
    pub(super) controller_binary: Option<PathBuf>,
    /// Where the controller child's output goes.
    pub(super) controller_log: PathBuf,
    /// Under `--canary`: the canary resolved against the node count, and the spec value.
    pub(super) canary: Option<(usize, Value)>,
    /// Under `--canary`: its soak, seconds.
    pub(super) canary_soak: u32,
    /// Under `--alert-gate`: how long its alert fires from the pool's creation.
    pub(super) alert_firing: Option<Duration>,
}

impl Settings {
    /// Checks the flags.
    pub(super) fn check(args: &BenchArgs) -> Result<Self, String> {
        if args.nodes == 0 {
            return Err("--nodes must be at least 1".to_owned());
        }
        if !(0.0..=1.0).contains(&args.api_fault_rate) {
            return Err("--api-fault-rate must be between 0 and 1".to_owned());
        }
        if args.kill_agents_rate < 0.0 {
            return Err("--kill-agents-rate must not be negative".to_owned());
        }
        let kill_every = match args.kill_controller_every {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                return Err("--kill-controller-every must be a positive number of seconds".into());
            }
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        let (budget, spec_budget) = budget(&args.max_unavailable, args.nodes)
            .map_err(|e| format!("--max-unavailable {e}"))?;
        let canary = match &args.canary {
            Some(c) => Some(self::budget(c, args.nodes).map_err(|e| format!("--canary {e}"))?),
            None => None,
        };
        if args.canary_soak > 604_800 {
            return Err("--canary-soak must be at most 604800 seconds (a week)".to_owned());
        }
        let alert_firing = match args.alert_firing_s {
            s if !(s >= 0.0 && s.is_finite()) => {
                return Err("--alert-firing-s must be a number of seconds, 0 or more".into());
            }
            s => args.alert_gate.then(|| Duration::from_secs_f64(s)),
        };
        let controller_binary = if args.controller_process {
            Some(super::child::controller_binary()?)
        } else {
            None
        };
        Ok(Settings {
            kill_every,
            budget,
            spec_budget,
            svg_path: args.json.with_extension("svg"),
            controller_binary,
            controller_log: args.json.with_extension("controller.log"),
            canary,
            canary_soak: args.canary_soak,
            alert_firing,
        })
    }
}

/// A count ("5") or a share ("10%") of `nodes` resolved (a percentage rounds down, but
/// is at least one node), and the spec value for it: `maxUnavailable` and the canary's
/// `nodes`. The error says what is wrong with the value, after the flag's name.
pub(super) fn budget(value: &str, nodes: usize) -> Result<(usize, Value), String> {
    let text = value.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let p: usize = percent
            .parse()
            .map_err(|_| format!("`{text}`: not a percentage"))?;
        if p == 0 || p > 100 {
            return Err(format!("`{text}`: must be 1% to 100%"));
        }
        Ok(((nodes * p / 100).max(1), json!(text)))
    } else {
        let n: usize = text
            .parse()
            .map_err(|_| format!("`{text}`: not a count or a percentage"))?;
        if n == 0 {
            return Err(format!("`{text}`: must be at least 1"));
        }
        Ok((n, json!(n)))
    }
}

pub(super) fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// The emulator and the nodes, up on v1.
pub(super) struct World {
    pub(super) emulator: kube_emulator::Emulator,
    pub(super) handle: kube_emulator::Handle,
    pub(super) client: Client,
    pub(super) cluster: Arc<SimCluster>,
    /// The pin of v1, which the nodes boot (and a node added again boots).
    pub(super) v1: String,
    /// What the pool's spec asks for first: the pin of v2, or under `--chaos` the tag
    /// `v2` in the registry.
    pub(super) v2: String,
    /// The digest every node must run at the end.
    pub(super) target_digest: String,
    /// How the nodes behave (for a node added again).
    pub(super) sim: SimOptions,
    /// The registry and its images, under `--chaos`.
    pub(super) chaos: Option<super::chaos::Images>,
    /// Under `--controller-process`: the emulator's kubeconfig for the child.
    pub(super) kubeconfig: Option<Kubeconfig>,
    /// Seconds the set-up took.
    pub(super) setup_s: f64,
}

/// The emulator's kubeconfig, written to a directory removed when this is dropped.
pub(super) struct Kubeconfig {
    pub(super) path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kubeconfig {
    /// Writes `emulator`'s kubeconfig and creates the controller's Lease namespace.
    async fn write(emulator: &kube_emulator::Emulator, client: &Client) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a directory: {e}"))?;
        let path = dir.path().join("kubeconfig");
        emulator
            .write_kubeconfig(&path)
            .map_err(|e| format!("cannot write the kubeconfig: {e}"))?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}}))
                .map_err(|e| format!("namespace {LEASE_NAMESPACE}: {e}"))?;
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|e| format!("cannot create the namespace {LEASE_NAMESPACE}: {e}"))?;
        Ok(Kubeconfig { path, _dir: dir })
    }
}

impl World {
    /// Starts the emulator and `args.nodes` nodes booted on v1.
    pub(super) async fn start(args: &BenchArgs) -> Result<Self, String> {
        let n = args.nodes;
        let started = Instant::now();
        let emulator = kube_emulator::Emulator::start()
            .await
            .map_err(|e| format!("cannot start the API emulator: {e}"))?;
        let handle = emulator.handle();
        let client = emulator
            .client()
            .map_err(|e| format!("cannot make a client: {e}"))?;
        let catalog = Catalog::new();
        let [v1, mut v2] = catalog.push_versions(REPO, [Some("k1"), Some("k2")]);
        let mut target_digest = digest('2');
        let chaos = if args.chaos {
            let images = super::chaos::Images::push(&catalog).await?;
            v2.clone_from(&images.v2_tag);
            target_digest.clone_from(&images.v3_digest);
            Some(images)
        } else {
            None
        };
        let cluster = match args.sim_transport {
            SimTransport::Local => SimCluster::start_local(&handle, catalog).await,
            SimTransport::Http => SimCluster::start(emulator.config(), catalog).await,
        }
        .map_err(|e| format!("cannot start the simulated cluster: {e}"))?;
        let sim = SimOptions {
            behaviour: Behaviour {
                stage_time: Duration::from_millis(args.stage_ms),
                reboot_time: Duration::from_millis(args.reboot_ms),
                ..Behaviour::default()
            },
            ready_delay: Duration::from_millis(args.ready_ms),
            node_labels: BTreeMap::from([("role".to_owned(), "worker".to_owned())]),
            ..SimOptions::default()
        };
        let width = n.to_string().len().max(3);
        for i in 1..=n {
            let name = format!("node-{i:0width$}");
            cluster
                .add_node(&name, &v1, &sim)
                .await
                .map_err(|e| format!("cannot add node {name}: {e}"))?;
        }
        let kubeconfig = match args.controller_process {
            true => Some(Kubeconfig::write(&emulator, &client).await?),
            false => None,
        };
        let setup_s = secs(started.elapsed());
        eprintln!("bootc-sim bench: {n} nodes up on v1 in {setup_s:.1} s; applying the pool");
        Ok(World {
            emulator,
            handle,
            client,
            cluster: Arc::new(cluster),
            v1,
            v2,
            target_digest,
            sim,
            chaos,
            kubeconfig,
            setup_s,
        })
    }

    /// Stops the nodes and the emulator.
    pub(super) async fn stop(self) {
        match Arc::try_unwrap(self.cluster) {
            Ok(cluster) => cluster.stop().await,
            Err(_) => tracing::warn!("bench: the cluster is still shared; left to the runtime"),
        }
        self.emulator.stop().await;
        if let Some(chaos) = self.chaos {
            chaos.stop().await;
        }
    }
}
