//! The nodes: seeded on v1 as an installer would leave them, then booted under
//! `systemd-nspawn` (the first alone: it builds or checks the cached node image).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bootc_standin::ImageResolver as _;
use host_sim::{Node, NodeOptions};
use kube::Client;
use tokio::time::Instant;

use super::processes::Parts;
use super::step;

/// What booting the nodes needs.
pub(super) struct NodeSetup<'a> {
    /// How many nodes.
    pub(super) count: usize,
    /// The work directory (state directories under `nodes/`).
    pub(super) dir: &'a Path,
    /// The registry's `host:port` and v1's digest.
    pub(super) registry_host: &'a str,
    pub(super) v1: &'a str,
    /// The API, for the kubelet's part.
    pub(super) client: &'a Client,
    /// The bootc stand-in binary.
    pub(super) standin: &'a Path,
    /// How long a node may take to boot.
    pub(super) boot_timeout: Duration,
}

impl NodeSetup<'_> {
    /// Seeds and boots the nodes (kept in `parts`, sorted by name).
    pub(super) async fn boot(&self, parts: &mut Parts, started: Instant) -> Result<(), String> {
        let options = self.seed()?;
        step(
            started,
            &format!(
                "booting {} nspawn nodes (the first run builds the node image, which takes a few minutes) …",
                options.len()
            ),
        );
        let mut options = options.into_iter();
        // The first alone: it builds (or checks) the cached node image.
        if let Some(first) = options.next() {
            let name = first.name.clone();
            let node = Node::start(first).await.map_err(|e| {
                format!(
                    "node {name} did not boot (building the node image or booting it failed): {e}"
                )
            })?;
            parts.nodes.push(node);
        }
        let mut booting = tokio::task::JoinSet::new();
        for o in options {
            booting.spawn(async move {
                let name = o.name.clone();
                Node::start(o)
                    .await
                    .map_err(|e| format!("node {name} did not boot: {e}"))
            });
        }
        let mut first_error = None;
        while let Some(joined) = booting.join_next().await {
            match joined {
                Ok(Ok(node)) => parts.nodes.push(node),
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(e) => first_error = first_error.or(Some(format!("a node's start failed: {e}"))),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        parts.nodes.sort_by(|a, b| a.name().cmp(b.name()));
        step(started, &format!("{} nodes up", parts.nodes.len()));
        Ok(())
    }

    /// Gives every node's state directory v1 as its booted deployment; returns the
    /// nodes' options.
    fn seed(&self) -> Result<Vec<NodeOptions>, String> {
        let seed_root = self.dir.join("seed-root");
        std::fs::create_dir_all(&seed_root).map_err(|e| format!("{}: {e}", seed_root.display()))?;
        let v1_pin = format!("{}/os@{}", self.registry_host, self.v1);
        let info = bootc_standin::HttpResolver::new(&seed_root)
            .resolve(&v1_pin)
            .map_err(|e| format!("cannot resolve {v1_pin}: {e}"))?;
        let pid = std::process::id();
        let mut options = Vec::new();
        for i in 1..=self.count {
            let name = format!("demo{pid}-n{i:02}");
            let state_dir: PathBuf = self.dir.join("nodes").join(&name);
            bootc_standin::seed(&state_dir, info.clone())
                .map_err(|e| format!("cannot seed {name}: {e}"))?;
            let mut o = NodeOptions::new(&name, &state_dir, self.standin);
            o.kube = Some(self.client.clone());
            o.boot_timeout = self.boot_timeout;
            options.push(o);
        }
        Ok(options)
    }
}
