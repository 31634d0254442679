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

/// The emulator's buffer of changes for the invariant checker, per node (see
/// [`World::start`]).
const EVENTS_PER_NODE: usize = 16;

/// The label that puts a node in its pool.
pub(super) const POOL_LABEL: &str = "pool";

/// The controller child's Lease namespace (created in the emulator).
pub(super) const LEASE_NAMESPACE: &str = "bootc-system";

/// One pool of the bench: its name, its nodes, its budget and the pool it comes after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PoolPlan {
    pub(super) name: String,
    pub(super) nodes: Vec<String>,
    /// `maxUnavailable` resolved against the pool's size.
    pub(super) budget: usize,
    /// Under --ordered: the pool this one waits for (`spec.rollout.after`).
    pub(super) after: Option<String>,
}

/// The pools of `--pools`: the nodes in contiguous blocks of names, `--max-unavailable`
/// resolved against each pool's size, the first `ordered` pools one after another.
pub(super) fn layout(args: &BenchArgs) -> Result<Vec<PoolPlan>, String> {
    let (n, pools) = (args.nodes, args.pools);
    if pools == 0 || pools > n {
        return Err(format!("--pools must be 1 to the number of nodes ({n})"));
    }
    if args.ordered > pools {
        return Err(format!("--ordered must be at most --pools ({pools})"));
    }
    let width = n.to_string().len().max(3);
    let mut plans: Vec<PoolPlan> = (1..=pools)
        .map(|k| PoolPlan {
            name: match pools {
                1 => super::POOL.to_owned(),
                _ => format!("{}-{k:03}", super::POOL),
            },
            nodes: Vec::new(),
            budget: 0,
            after: None,
        })
        .collect();
    for j in 0..n {
        plans[j * pools / n]
            .nodes
            .push(format!("node-{:0width$}", j + 1));
    }
    for k in 0..pools {
        let (budget, _) = budget(&args.max_unavailable, plans[k].nodes.len())
            .map_err(|e| format!("--max-unavailable {e}"))?;
        plans[k].budget = budget;
        if k > 0 && k < args.ordered {
            plans[k].after = Some(plans[k - 1].name.clone());
        }
    }
    Ok(plans)
}

/// What the flags come to.
pub(super) struct Settings {
    /// How often the controller is killed, if at all.
    pub(super) kill_every: Option<Duration>,
    /// The pools (one unless `--pools`).
    pub(super) pools: Vec<PoolPlan>,
    /// `maxUnavailable` resolved against each pool's size, summed.
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
        let (_, spec_budget) = budget(&args.max_unavailable, args.nodes)
            .map_err(|e| format!("--max-unavailable {e}"))?;
        let pools = layout(args)?;
        let budget = pools.iter().map(|p| p.budget).sum();
        if args.rollouts == 0 || args.rollouts > 200 {
            return Err("--rollouts must be 1 to 200".to_owned());
        }
        let several = args.pools > 1 || args.rollouts > 1;
        if several && (args.chaos || args.canary.is_some()) {
            return Err(
                "--chaos and --canary take one pool and one rollout (no --pools or --rollouts)"
                    .to_owned(),
            );
        }
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
            pools,
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
    /// The digest every node must run at the end of the first rollout.
    pub(super) target_digest: String,
    /// Under `--rollouts`: the pins and digests of the rollouts after the first.
    pub(super) next: Vec<(String, String)>,
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

/// Adds every pool's nodes, booted on `v1` and labelled with their pool.
async fn add_nodes(
    cluster: &SimCluster,
    pools: &[PoolPlan],
    v1: &str,
    sim: &SimOptions,
) -> Result<(), String> {
    for pool in pools {
        let mut labelled = sim.clone();
        labelled
            .node_labels
            .insert(POOL_LABEL.to_owned(), pool.name.clone());
        for name in &pool.nodes {
            cluster
                .add_node(name, v1, &labelled)
                .await
                .map_err(|e| format!("cannot add node {name}: {e}"))?;
        }
    }
    Ok(())
}

/// The versions of the rollouts after the first (`--rollouts`), pushed to the catalog
/// (`r2`, `r3`, …, kernels alternating): their pins and digests.
fn next_versions(cluster: &SimCluster, rollouts: usize) -> Vec<(String, String)> {
    (2..=rollouts)
        .map(|k| {
            let digest = format!("sha256:{k:064x}");
            let kernel = format!("k{}", 1 + k % 2);
            let pin = cluster
                .catalog()
                .push(REPO, &format!("r{k}"), &digest, Some(&kernel));
            (pin, digest)
        })
        .collect()
}

impl World {
    /// Starts the emulator and `args.nodes` nodes booted on v1, each labelled with its
    /// pool.
    pub(super) async fn start(args: &BenchArgs, pools: &[PoolPlan]) -> Result<Self, String> {
        let n = args.nodes;
        let started = Instant::now();
        // The invariant checker and the state follower read the emulator's stream of
        // changes beside the watches; with many pools a rollout's changes come faster
        // than a busy process reads them, so their buffer grows with the nodes (the
        // watches' own buffers stay as they are).
        let defaults = kube_emulator::EmulatorOptions::default();
        let options = kube_emulator::EmulatorOptions {
            observer_buffer: (n * EVENTS_PER_NODE).max(defaults.observer_buffer),
            ..defaults
        };
        let emulator = kube_emulator::Emulator::start_with(options)
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
        let mut sim = SimOptions {
            behaviour: Behaviour {
                stage_time: Duration::from_millis(args.stage_ms),
                reboot_time: Duration::from_millis(args.reboot_ms),
                ..Behaviour::default()
            },
            ready_delay: Duration::from_millis(args.ready_ms),
            node_labels: BTreeMap::from([("role".to_owned(), "worker".to_owned())]),
            ..SimOptions::default()
        };
        add_nodes(&cluster, pools, &v1, &sim).await?;
        // A node added again (under --chaos, one pool) goes back into the first pool.
        sim.node_labels
            .insert(POOL_LABEL.to_owned(), pools[0].name.clone());
        let next = next_versions(&cluster, args.rollouts);
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
            next,
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
