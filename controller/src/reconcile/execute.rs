//! Carrying out a plan's actions: BootcNode creates, updates and deletes, Node labels and
//! cordons, drains, events. Each node's actions run in the plan's order, the nodes side by
//! side, with barriers before new slots and around the finalizer; a node's first failure
//! stops that node's remaining actions, its events included, so an event never reports a
//! write that failed. Events about the pool's status wait until the status is written. All
//! events are queued and sent in the background ([`super::event_queue`]). Every
//! action is counted and timed with its outcome; every failure is logged and recorded as
//! an `ActionFailed` event on the pool.

use std::collections::HashMap;

use bootc_crds::MANAGED_LABEL;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::cache::lock;
use super::lean::Lean;
use super::{Context, ReconcileError, api_error, is_status};
use crate::drain::{DrainOptions, DrainOutcome, DrainState};
use crate::metrics::DrainResult;
use crate::plan::{self, Action, PlannedEvent};
use crate::shared::FIELD_MANAGER;

/// How many nodes' actions of one pool run at once.
const CONCURRENT_NODES: usize = 32;

/// How many nodes' actions run at once in all pools together. The API client sends at
/// most `--api-max-in-flight` requests at once (32 by default), so many pools' actions
/// beyond a few dozen would only wait in it, each holding the kilobytes of a running
/// action and its queued request. A pool alone is not held back by it.
pub const CONCURRENT_NODES_IN_ALL: usize = 2 * CONCURRENT_NODES;

/// Carries out `actions`, but for the events about the pool's status, which are returned
/// for [`publish_all`] once the status is written. Returns the first error too; every
/// error is logged, counted and recorded as an event as it happens.
///
/// Each node's actions run in the plan's order, the nodes side by side (at most
/// [`CONCURRENT_NODES`] at once). Barriers keep what must come first: everything before
/// `grants_from` (slots released, nodes uncordoned) is done before a new slot's actions
/// start, and a pool-level action (the finalizer) waits for the nodes' actions planned
/// before it, and those after it wait for it.
///
/// The grants may count on the slots this plan releases (`Plan::releases`): when anything
/// before them failed, they are left to the next plan, which sees what was written.
pub(super) async fn execute_all<'p>(
    ctx: &Context,
    pool: &BootcNodePool,
    plan: &'p plan::Plan,
) -> (Option<ReconcileError>, Vec<&'p PlannedEvent>) {
    let actions = &plan.actions;
    let (before, grants) = actions.split_at(plan.grants_from.min(actions.len()));
    let mut first_error: Option<ReconcileError> = None;
    let mut pool_events = Vec::new();
    let mut node_events = Vec::new();
    for (i, segment) in [before, grants].into_iter().enumerate() {
        if i == 1 && first_error.is_some() && plan.releases > 0 {
            info!(pool = %pool.name_any(), "an action before the new slots failed; they wait for the next plan");
            pool_events.extend(segment.iter().filter_map(|a| match a {
                Action::Event(event) if event.node.is_none() => Some(event),
                _ => None,
            }));
            break;
        }
        let mut groups = ByNode::default();
        for action in segment {
            match (action, action.node()) {
                (Action::Event(event), None) => pool_events.push(event),
                (_, Some(node)) => groups.push(node, action),
                (_, None) => {
                    let taken = std::mem::take(&mut groups).into_lists();
                    let done = run_groups(ctx, pool, taken, &mut node_events).await;
                    first_error = first_error.or(done);
                    let (done, _) = run_group(ctx, pool, vec![action]).await;
                    first_error = first_error.or(done);
                }
            }
        }
        let done = run_groups(ctx, pool, groups.into_lists(), &mut node_events).await;
        first_error = first_error.or(done);
    }
    publish_nodes(ctx, pool, &node_events).await;
    (first_error, pool_events)
}

/// Records the node events of a plan whose writes succeeded, those alike merged (see
/// [`super::batch`]); each approval is counted in the metrics.
async fn publish_nodes(ctx: &Context, pool: &BootcNodePool, events: &[&PlannedEvent]) {
    let name = pool.name_any();
    for event in events {
        if event.reason == plan::events::REBOOT_APPROVED {
            ctx.deps.metrics.record_reboot_approved(&name);
        }
    }
    let merged = super::batch::merge(events);
    publish_all(ctx, pool, &merged.iter().collect::<Vec<_>>()).await;
    // Each on its Node too (unmerged), so that `kubectl describe node` says why the node
    // was cordoned, drained and rebooted: each node's in order, sent in the background
    // (see [`super::event_queue`]).
    let mut by_node = ByNode::default();
    for event in events {
        if let Some(node) = event.node.as_deref() {
            by_node.push(node, *event);
        }
    }
    for (node, events) in by_node.into_lists() {
        let Some(node) = ctx.node_of(node) else {
            continue;
        };
        let events = events.into_iter().map(kube_event).collect();
        ctx.events.on_node(node.object_ref(&()), events).await;
    }
}

/// Items grouped by node, each node's in the order given, the nodes in the order first
/// seen (a plan may touch thousands of nodes: each is found through an index).
struct ByNode<'a, T> {
    lists: Vec<(&'a str, Vec<T>)>,
    index: HashMap<&'a str, usize>,
}

impl<T> Default for ByNode<'_, T> {
    fn default() -> Self {
        ByNode {
            lists: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<'a, T> ByNode<'a, T> {
    fn push(&mut self, node: &'a str, item: T) {
        let lists = &mut self.lists;
        let i = *self.index.entry(node).or_insert_with(|| {
            lists.push((node, Vec::new()));
            lists.len() - 1
        });
        lists[i].1.push(item);
    }

    fn into_lists(self) -> Vec<(&'a str, Vec<T>)> {
        self.lists
    }
}

/// Runs each node's actions (in order), the nodes side by side; the first error. The
/// node events whose writes succeeded go to `said`.
async fn run_groups<'p>(
    ctx: &Context,
    pool: &BootcNodePool,
    groups: Vec<(&str, Vec<&'p Action>)>,
    said: &mut Vec<&'p PlannedEvent>,
) -> Option<ReconcileError> {
    let mut waiting = groups.into_iter().map(|(_, list)| list);
    let start = |list| in_turn(ctx, move || run_group(ctx, pool, list));
    let mut running = futures::stream::FuturesUnordered::new();
    for list in waiting.by_ref().take(CONCURRENT_NODES) {
        running.push(start(list));
    }
    let mut first_error = None;
    while let Some((result, events)) = running.next().await {
        first_error = first_error.or(result);
        said.extend(events);
        if let Some(list) = waiting.next() {
            running.push(start(list));
        }
    }
    first_error
}

/// `group()` run once a turn among all pools' nodes' actions is free. Its future is made
/// (and boxed) only then, so a group waiting for its turn holds a few bytes; each holds
/// at most one turn, and takes it before it starts, so no pool waits on another's.
async fn in_turn<F: Future>(ctx: &Context, group: impl FnOnce() -> F) -> F::Output {
    // The semaphore is never closed.
    let _turn = ctx.node_turns.acquire().await.ok();
    Box::pin(group()).await
}

/// Runs `list` in order; the first failure stops the rest (its events included, so an
/// event never reports a write that failed) and is returned, with the events reached.
async fn run_group<'p>(
    ctx: &Context,
    pool: &BootcNodePool,
    list: Vec<&'p Action>,
) -> (Option<ReconcileError>, Vec<&'p PlannedEvent>) {
    let name = pool.name_any();
    let mut said = Vec::new();
    for action in list {
        if let Action::Event(event) = action {
            said.push(event);
            continue;
        }
        let started = std::time::Instant::now();
        let result = execute(ctx, pool, action).await;
        let outcome = match &result {
            Ok(()) => "ok",
            Err(e) => e.reason(),
        };
        ctx.deps
            .metrics
            .observe_action(&name, action.kind(), outcome, started.elapsed());
        if let Err(e) = result {
            warn!(pool = %name, action = action.kind(), node = action.node(), error = %e, "action failed");
            surface(ctx, pool, action, &e).await;
            return (Some(e), said);
        }
    }
    (None, said)
}

/// Records a failed action as an `ActionFailed` event on the pool (a lost race, which the
/// next plan redoes at once, is not worth one).
async fn surface(ctx: &Context, pool: &BootcNodePool, action: &Action, e: &ReconcileError) {
    if matches!(e, ReconcileError::Conflict(_)) {
        return;
    }
    let what = match action.node() {
        Some(node) => format!("{} of node {node}", action.kind()),
        None => action.kind().to_owned(),
    };
    let event = PlannedEvent {
        node: None,
        warning: true,
        reason: plan::events::ACTION_FAILED,
        message: format!("{what} failed: {e}; retrying with backoff"),
    };
    publish_all(ctx, pool, &[&event]).await;
}

/// Records `events` on the pool, in order (queued: see [`super::event_queue`]; best
/// effort, the status carries the same facts); the log says each at once.
pub(super) async fn publish_all(ctx: &Context, pool: &BootcNodePool, events: &[&PlannedEvent]) {
    if events.is_empty() {
        return;
    }
    let name = pool.name_any();
    for event in events {
        info!(pool = %name, reason = event.reason, "{}", event.message);
    }
    let events = events.iter().map(|e| kube_event(e)).collect();
    ctx.events
        .on_pool(&name, pool.object_ref(&()), events)
        .await;
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

async fn execute(
    ctx: &Context,
    pool: &BootcNodePool,
    action: &Action,
) -> Result<(), ReconcileError> {
    match action {
        Action::Create { node, spec } => create(ctx, pool, node, spec).await,
        Action::Label { node } => label(ctx, node, true).await,
        Action::Unlabel { node } => label(ctx, node, false).await,
        Action::Cordon { node } => cordon(ctx, pool, node, true).await,
        Action::Uncordon { node } => cordon(ctx, pool, node, false).await,
        Action::Update {
            node,
            resource_version,
            spec,
            annotations,
        } => {
            let Some(current) = ctx.bootc_of(node) else {
                return Err(ReconcileError::Conflict(format!("BootcNode {node}")));
            };
            let mut object = (*current).clone();
            object.metadata.resource_version = resource_version.clone();
            object.spec = spec.clone();
            let map = object.annotations_mut();
            for (key, value) in annotations {
                match value {
                    Some(v) => map.insert(key.clone(), v.clone()),
                    None => map.remove(key),
                };
            }
            object.status = None;
            let api: Api<Lean<BootcNode>> = Api::all(ctx.client.clone());
            let Lean(updated) = api
                .replace(node, &PostParams::default(), &Lean(object))
                .await
                .map_err(api_error(format!("BootcNode {node}")))?;
            lock(&ctx.bootc_overlay).wrote(node, updated);
            Ok(())
        }
        Action::StartDrain { node } => {
            let options = DrainOptions::from_pool(&pool.spec);
            ctx.drainer.start(&pool.name_any(), node, options);
            Ok(())
        }
        Action::CancelDrain { node } => {
            ctx.drainer.cancel(node);
            Ok(())
        }
        Action::ForgetDrain { node } => {
            forget_drain(ctx, pool, node);
            Ok(())
        }
        Action::Delete { node } => delete(ctx, pool, node).await,
        Action::SetDrainBlocked { node, blocked } => {
            patch_status(ctx, node, json!({ "drainBlocked": blocked })).await
        }
        Action::SetHeld { node, held } => {
            // `null` removes the field: it is there only while the node is held.
            let held = held.then_some(true);
            patch_status(ctx, node, json!({ "held": held })).await
        }
        Action::Event(event) => {
            publish_all(ctx, pool, &[event]).await;
            Ok(())
        }
        Action::AddFinalizer => finalizer(ctx, pool, true).await,
        Action::RemoveFinalizer => {
            finalizer(ctx, pool, false).await?;
            let name = pool.name_any();
            info!(pool = %name, "clean-up done; the pool may go");
            ctx.let_go(&name);
            Ok(())
        }
    }
}

/// Merges `fields` into the BootcNode's status: the controller's own fields only, which
/// the agent's merge patches never name.
async fn patch_status(
    ctx: &Context,
    node: &str,
    fields: serde_json::Value,
) -> Result<(), ReconcileError> {
    let api: Api<Lean<BootcNode>> = Api::all(ctx.client.clone());
    let patch = Patch::Merge(json!({ "status": fields }));
    let Lean(updated) = api
        .patch_status(node, &params(), &patch)
        .await
        .map_err(api_error(format!("BootcNode {node} status")))?;
    lock(&ctx.bootc_overlay).wrote(node, updated);
    Ok(())
}

async fn create(
    ctx: &Context,
    pool: &BootcNodePool,
    node: &str,
    spec: &bootc_crds::BootcNodeSpec,
) -> Result<(), ReconcileError> {
    let mut object = BootcNode::new(node, spec.clone());
    object.metadata.owner_references = pool.controller_owner_ref(&()).map(|o| vec![o]);
    let api: Api<Lean<BootcNode>> = Api::all(ctx.client.clone());
    match api.create(&PostParams::default(), &Lean(object)).await {
        Ok(Lean(created)) => {
            info!(pool = %pool.name_any(), %node, "BootcNode created");
            lock(&ctx.bootc_overlay).wrote(node, created);
            Ok(())
        }
        // Another pool (or an earlier run) made it; the next plan sees it.
        Err(e) if is_status(&e, 409) => Err(ReconcileError::Conflict(format!("BootcNode {node}"))),
        Err(e) => Err(api_error(format!("create BootcNode {node}"))(e)),
    }
}

async fn label(ctx: &Context, node: &str, on: bool) -> Result<(), ReconcileError> {
    let value = on.then_some("");
    let patch = json!({"metadata": {"labels": {MANAGED_LABEL: value}}});
    let api: Api<Lean<Node>> = Api::all(ctx.client.clone());
    match api.patch(node, &params(), &Patch::Merge(&patch)).await {
        Ok(Lean(updated)) => {
            lock(&ctx.node_overlay).wrote(node, updated);
            Ok(())
        }
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(api_error(format!("label Node {node}"))(e)),
    }
}

async fn cordon(
    ctx: &Context,
    pool: &BootcNodePool,
    node: &str,
    on: bool,
) -> Result<(), ReconcileError> {
    let patch = json!({"spec": {"unschedulable": if on { Some(true) } else { None }}});
    let api: Api<Lean<Node>> = Api::all(ctx.client.clone());
    match api.patch(node, &params(), &Patch::Merge(&patch)).await {
        Ok(Lean(updated)) => {
            let what = if on { "cordoned" } else { "uncordoned" };
            info!(pool = %pool.name_any(), %node, cordon = on, "Node {what}");
            lock(&ctx.node_overlay).wrote(node, updated);
            Ok(())
        }
        Err(e) if is_status(&e, 404) && !on => Ok(()),
        Err(e) => Err(api_error(format!("cordon Node {node}"))(e)),
    }
}

/// Puts the controller's finalizer on the pool or takes it off, other finalizers kept,
/// with the pool's `resourceVersion` as a precondition.
async fn finalizer(ctx: &Context, pool: &BootcNodePool, on: bool) -> Result<(), ReconcileError> {
    let mut finalizers: Vec<String> = pool
        .finalizers()
        .iter()
        .filter(|f| *f != plan::FINALIZER)
        .cloned()
        .collect();
    if on {
        finalizers.push(plan::FINALIZER.to_owned());
    }
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": pool.resource_version(),
    }});
    let name = pool.name_any();
    let api: Api<BootcNodePool> = Api::all(ctx.client.clone());
    match api.patch(&name, &params(), &Patch::Merge(&patch)).await {
        Ok(written) => {
            ctx.wrote_pool(written);
            Ok(())
        }
        // Gone already: nothing left to finalize.
        Err(e) if is_status(&e, 404) && !on => Ok(()),
        Err(e) => Err(api_error(format!("finalizer of pool {name}"))(e)),
    }
}

/// Forgets a finished drain, recording how long it took and how it ended.
fn forget_drain(ctx: &Context, pool: &BootcNodePool, node: &str) {
    if let Some(DrainState::Finished {
        since,
        finished,
        result,
        ..
    }) = ctx.drainer.state(node)
    {
        let outcome = match result {
            Ok(DrainOutcome::Drained { .. }) => DrainResult::Drained,
            Ok(DrainOutcome::Cancelled) => DrainResult::Cancelled,
            _ => DrainResult::TimedOut,
        };
        let took = finished.duration_since(since);
        ctx.deps
            .metrics
            .observe_drain(&pool.name_any(), outcome, took);
    }
    ctx.drainer.forget(node);
}

async fn delete(ctx: &Context, pool: &BootcNodePool, node: &str) -> Result<(), ReconcileError> {
    let uid = ctx.bootc_of(node).and_then(|b| b.meta().uid.clone());
    let api: Api<BootcNode> = Api::all(ctx.client.clone());
    match api.delete(node, &DeleteParams::default()).await {
        Ok(_) => {
            info!(pool = %pool.name_any(), %node, "BootcNode deleted");
            lock(&ctx.bootc_overlay).deleted(node, uid.clone());
            Ok(())
        }
        Err(e) if is_status(&e, 404) => {
            lock(&ctx.bootc_overlay).deleted(node, uid.clone());
            Ok(())
        }
        Err(e) => Err(api_error(format!("delete BootcNode {node}"))(e)),
    }
}

/// The event's `action`: its reason and a short hash of its message. kube's recorder counts
/// events with the same reason and action as one series and keeps the first message, so
/// without the hash a second node's `RebootApproved`, a new target's `TargetResolved` or
/// another action's `ActionFailed` would only raise the first one's count.
fn series_action(event: &PlannedEvent) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    event.message.hash(&mut hasher);
    format!("{}-{:08x}", event.reason, hasher.finish() as u32)
}

/// `event` as kube's recorder takes it.
fn kube_event(event: &PlannedEvent) -> KubeEvent {
    KubeEvent {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.to_owned(),
        note: Some(super::batch::fit_note(&event.message)),
        action: series_action(event),
        secondary: None,
    }
}
