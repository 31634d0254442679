//! Reading the world for one plan: what the registry and the alert gate say, the pool's
//! nodes from the caches (through the overlay), the drains, the other pools' selectors,
//! the pods that block a reboot, and the progress the last plan left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::{BlockingPodsSpec, BootcNodePool};
use bootc_pool_common::error::error_chain;
use bootc_pool_common::node::{node_ready, owner_pool, ready_condition};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::core::labels::Selector;
use kube::runtime::reflector::ObjectRef;

use super::cache::{lock, node_boot_id, node_unschedulable};
use super::lean::Lean;
use super::views::{Source, Stamp, Taken};
use super::{Context, ReconcileError};
use crate::drain::{DrainOutcome, DrainState};
use crate::plan::world::BlockingPods;
use crate::plan::{
    BootcView, DrainView, Lookup, NodeInfo, NodeView, PoolView, PullSecretView, Snapshot,
};

impl Context {
    pub(super) fn bootc_of(&self, name: &str) -> Option<Arc<BootcNode>> {
        let cached = self.bootc.get(&ObjectRef::new(name));
        lock(&self.bootc_overlay).pick(name, cached)
    }

    pub(super) fn node_of(&self, name: &str) -> Option<Arc<Node>> {
        let cached = self.nodes.get(&ObjectRef::new(name));
        lock(&self.node_overlay).pick(name, cached)
    }

    /// Everything a plan of `pool` looks at: what the registry and the alert gate say,
    /// the caches, and the pods that block a reboot.
    /// With the snapshot comes what its members were read at, for [`Views::keep`].
    pub(super) async fn observe(
        &self,
        pool: &BootcNodePool,
    ) -> Result<(Snapshot, Stamp), ReconcileError> {
        let (lookup, pull_secret) = self.look_up(pool).await?;
        let gate = self.alert_gate(pool).await;
        let (mut snapshot, stamp) = self.snapshot(pool, lookup, pull_secret, gate);
        self.blocking_pods(&mut snapshot).await;
        Ok((snapshot, stamp))
    }

    /// The pods of `spec.disruption.blockingPods` on each member's Node. Pods that cannot
    /// be listed mark every member unknown, which holds them back.
    async fn blocking_pods(&self, snap: &mut Snapshot) {
        let Some(spec) = &snap.pool.spec.disruption.blocking_pods else {
            return;
        };
        let found = self.list_blocking(spec).await;
        for view in &mut snap.nodes {
            let Some(info) = view.node.as_mut() else {
                continue;
            };
            info.blocking_pods = match &found {
                Ok(by_node) => {
                    BlockingPods::Running(by_node.get(&*view.name).cloned().unwrap_or_default())
                }
                Err(e) => BlockingPods::Unknown(e.clone()),
            };
        }
    }

    /// The pods `spec` selects that have not finished, as `namespace/name` by node: one
    /// list by label selector, cluster-wide or per namespace named.
    async fn list_blocking(
        &self,
        spec: &BlockingPodsSpec,
    ) -> Result<BTreeMap<String, Vec<String>>, String> {
        let selector = Selector::try_from(spec.selector.clone())
            .map_err(|e| format!("spec.disruption.blockingPods.selector: {e}"))?;
        let params = ListParams::default().labels_from(&selector);
        let apis: Vec<Api<Lean<Pod>>> = if spec.namespaces.is_empty() {
            vec![Api::all(self.client.clone())]
        } else {
            spec.namespaces
                .iter()
                .map(|ns| Api::namespaced(self.client.clone(), ns))
                .collect()
        };
        let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for api in apis {
            let list = api.list(&params).await.map_err(|e| error_chain(&e))?;
            for Lean(pod) in list.items {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                if let Some(node) = node.filter(|_| !matches!(phase, Some("Succeeded" | "Failed")))
                {
                    let name =
                        format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                    by_node.entry(node).or_default().push(name);
                }
            }
        }
        Ok(by_node)
    }

    /// What the caches say, with what the registry and the alert gate said.
    fn snapshot(
        &self,
        pool: &BootcNodePool,
        lookup: Lookup,
        pull_secret: PullSecretView,
        gate: crate::plan::GateView,
    ) -> (Snapshot, Stamp) {
        let name = pool.name_any();
        let Taken {
            nodes,
            stamp,
            changes,
            ..
        } = self.views.take(pool, &self.membership, self);
        let drains = self
            .drainer
            .nodes()
            .into_iter()
            .filter(|n| {
                nodes
                    .binary_search_by(|v| (*v.name).cmp(n.as_str()))
                    .is_ok()
            })
            .filter_map(|n| Some((n.clone(), self.drain_view(&name, &n)?)))
            .collect();
        let (pool_selectors, pools) = lock(&self.pool_index).shared(&self.pools.state());
        // The BootcNodes name the copy, never the pool's source Secret.
        let mut spec = pool.spec.clone();
        if crate::plan::target::spec_problems(&spec).is_none() {
            spec.pull_secret_ref = pull_secret.copy.clone();
        }
        let snapshot = Snapshot {
            pool: PoolView {
                generation: pool.metadata.generation,
                spec,
                status: pool.status.clone(),
                name: name.clone(),
                deleting: pool.metadata.deletion_timestamp.is_some(),
                finalized: pool
                    .finalizers()
                    .iter()
                    .any(|f| f == crate::plan::FINALIZER),
            },
            lookup,
            pull_secret,
            pool_selectors,
            pools,
            gate,
            nodes,
            changes,
            drains,
            progress: super::cache::lock(&self.progress).get(&name).copied(),
            now: (self.deps.clock)(),
            settled: self.views.settled(&name),
        };
        (snapshot, stamp)
    }

    /// The drain of `node` for `pool`, as the plan sees it; `None` when there is none
    /// (or it was cancelled, or belongs to another pool).
    fn drain_view(&self, pool: &str, node: &str) -> Option<DrainView> {
        match self.drainer.state(node)? {
            DrainState::Running {
                pool: p,
                last_error,
                ..
            } if p == pool => Some(DrainView::Running {
                blocked: last_error,
            }),
            DrainState::Finished {
                pool: p, result, ..
            } if p == pool => match result {
                Ok(DrainOutcome::Drained { .. }) => Some(DrainView::Drained),
                Ok(DrainOutcome::TimedOut {
                    waiting_for,
                    last_error,
                }) => {
                    let left = format!("still on the node: {}", waiting_for.join(", "));
                    Some(DrainView::TimedOut {
                        message: match last_error {
                            Some(e) => format!("{e}; {left}"),
                            None => left,
                        },
                    })
                }
                Ok(DrainOutcome::Cancelled) => None,
                Err(e) => Some(DrainView::TimedOut {
                    message: e.to_string(),
                }),
            },
            _ => None,
        }
    }
}

/// Every node a pool's selector matches or whose BootcNode it owns is read through the
/// overlay, which also knows objects just created or labelled.
impl Source for Context {
    fn nodes(&self) -> &kube::runtime::reflector::Store<Node> {
        &self.nodes
    }

    fn bootcs(&self) -> &kube::runtime::reflector::Store<BootcNode> {
        &self.bootc
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.node_of(name)
    }

    fn bootc(&self, name: &str) -> Option<Arc<BootcNode>> {
        self.bootc_of(name)
    }

    fn created(&self) -> Vec<String> {
        lock(&self.bootc_overlay).names().cloned().collect()
    }

    fn written(&self, among: Option<super::views::Among<'_>>) -> Vec<String> {
        let mut names = lock(&self.bootc_overlay).all_names(among);
        names.extend(lock(&self.node_overlay).all_names(among));
        names
    }
}

/// The names that may be members of `pool`: the Nodes its selector matches and the
/// BootcNodes it owns.
pub fn candidates(
    pool: &BootcNodePool,
    nodes: impl IntoIterator<Item = Arc<Node>>,
    bootc: impl IntoIterator<Item = Arc<BootcNode>>,
) -> BTreeSet<String> {
    let name = pool.name_any();
    let selected: Vec<Arc<Node>> = nodes
        .into_iter()
        .filter(|n| bootc_crds::selector::matches(&pool.spec.node_selector, n.labels()))
        .collect();
    let owned: Vec<Arc<BootcNode>> = bootc
        .into_iter()
        .filter(|b| owner_pool(b).as_deref() == Some(name.as_str()))
        .collect();
    // The names sorted and each copied once (a Node and its BootcNode share one): the
    // set is then built from sorted input in one pass.
    let mut names: Vec<&str> = selected
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .chain(owned.iter().filter_map(|b| b.metadata.name.as_deref()))
        .collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().map(str::to_owned).collect()
}

/// The members of `pool` among `names`, as a plan sees them: a name is a member while the
/// pool's selector matches its Node or the pool owns its BootcNode (`node_of` and
/// `bootc_of` read the objects).
pub fn members(
    pool: &BootcNodePool,
    names: BTreeSet<String>,
    node_of: impl Fn(&str) -> Option<Arc<Node>>,
    bootc_of: impl Fn(&str) -> Option<Arc<BootcNode>>,
) -> Vec<NodeView> {
    let name = pool.name_any();
    let selects =
        |node: &Node| bootc_crds::selector::matches(&pool.spec.node_selector, node.labels());
    // Room for every name at once: grown by doubling, the views were copied again and
    // again (a twentieth of a reconcile that reads 10,000 members).
    let mut views = Vec::with_capacity(names.len());
    views.extend(names.into_iter().filter_map(|n| {
        let node = node_of(&n);
        let bootc = bootc_of(&n);
        let owned = bootc
            .as_deref()
            .is_some_and(|b| owner_pool(b).as_deref() == Some(name.as_str()));
        let matching = node.as_deref().is_some_and(selects);
        (owned || matching).then(|| NodeView {
            name: n.into(),
            node: node.map(node_info),
            bootc: bootc.map(bootc_view),
        })
    }));
    views
}

/// What a plan reads of a Node.
pub fn node_info(node: Arc<Node>) -> NodeInfo {
    let ready = ready_condition(&node);
    NodeInfo {
        ready: node_ready(&node),
        unschedulable: node_unschedulable(&node),
        boot_id: node_boot_id(&node).map(str::to_owned),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .and_then(bootc_crds::conditions::from_time),
        heartbeat: ready
            .and_then(|c| c.last_heartbeat_time.as_ref())
            .and_then(bootc_crds::conditions::from_time),
        blocking_pods: BlockingPods::None,
        zone: NodeInfo::zone_of(&node),
        node,
    }
}

/// What a plan reads of a BootcNode.
pub fn bootc_view(b: Arc<BootcNode>) -> BootcView {
    let owner = owner_pool(&b);
    BootcView::new(b, owner)
}
