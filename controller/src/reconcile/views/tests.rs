#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::Event;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

use super::*;
use crate::reconcile::membership::tests::pool;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn node(name: &str, role: &str, ready: bool, rv: u64) -> Node {
    let ready = if ready { "True" } else { "False" };
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": name, "labels": {"role": role},
                     "resourceVersion": rv.to_string()},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }))
    .unwrap()
}

fn bootc(name: &str, owner: Option<&str>, image: u8, rv: u64) -> BootcNode {
    let owners: Vec<serde_json::Value> = owner
        .iter()
        .map(|o| {
            json!({"apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
                   "name": o, "uid": o, "controller": true})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": name, "ownerReferences": owners,
                     "resourceVersion": rv.to_string()},
        "spec": {"desiredImage": format!("registry.test/os@sha256:{image}")},
    }))
    .unwrap()
}

/// The caches as the watch streams fill them (each event applied, then told to the
/// membership), and the controller's own BootcNode writes not yet delivered.
struct World {
    nodes: Store<Node>,
    node_writer: Writer<Node>,
    bootcs: Store<BootcNode>,
    bootc_writer: Writer<BootcNode>,
    written: BTreeMap<String, Arc<BootcNode>>,
    membership: Membership,
    rv: u64,
}

impl Source for World {
    fn nodes(&self) -> &Store<Node> {
        &self.nodes
    }
    fn bootcs(&self) -> &Store<BootcNode> {
        &self.bootcs
    }
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes
            .get(&kube::runtime::reflector::ObjectRef::new(name))
    }
    fn bootc(&self, name: &str) -> Option<Arc<BootcNode>> {
        let cached = self
            .bootcs
            .get(&kube::runtime::reflector::ObjectRef::new(name));
        self.written.get(name).cloned().or(cached)
    }
    fn created(&self) -> Vec<String> {
        self.written.keys().cloned().collect()
    }
    fn written(&self, among: Option<Among<'_>>) -> Vec<String> {
        self.written
            .keys()
            .filter(|n| among.is_none_or(|among| among.contains(n)))
            .cloned()
            .collect()
    }
}

/// One thing that happens between two reconciles.
#[derive(Debug, Clone)]
enum Step {
    /// A Node delivered: its role (worker or infra) and readiness.
    Node(usize, bool, bool),
    NodeGone(usize),
    /// A BootcNode delivered: owned by the pool, another or none; its image.
    Bootc(usize, u8, u8),
    BootcGone(usize),
    /// A Node delivered again with its readiness flipped, its labels as they were.
    Ready(usize),
    /// A BootcNode delivered again with another image, its owner as it was.
    Image(usize, u8),
    /// The controller wrote a BootcNode the pool owns (not yet delivered); only a member's.
    Write(usize, u8),
    /// The watch delivered what the controller wrote.
    Deliver(usize),
    /// The Node watch relisted.
    Relist,
    /// The pool's selector changed.
    Selector,
    Reconcile,
}

fn step() -> impl Strategy<Value = Step> {
    let i = 0..NAMES.len();
    prop_oneof![
        1 => (i.clone(), any::<bool>(), any::<bool>()).prop_map(|(i, w, r)| Step::Node(i, w, r)),
        1 => i.clone().prop_map(Step::NodeGone),
        1 => (i.clone(), 0..3u8, 0..3u8).prop_map(|(i, o, m)| Step::Bootc(i, o, m)),
        1 => i.clone().prop_map(Step::BootcGone),
        6 => i.clone().prop_map(Step::Ready),
        6 => (i.clone(), 0..3u8).prop_map(|(i, m)| Step::Image(i, m)),
        3 => (i.clone(), 0..3u8).prop_map(|(i, m)| Step::Write(i, m)),
        3 => i.prop_map(Step::Deliver),
        1 => Just(Step::Relist),
        1 => Just(Step::Selector),
        8 => Just(Step::Reconcile),
    ]
}

impl World {
    fn new() -> World {
        let (nodes, node_writer) = reflector::store::<Node>();
        let (bootcs, bootc_writer) = reflector::store::<BootcNode>();
        World {
            nodes,
            node_writer,
            bootcs,
            bootc_writer,
            written: BTreeMap::new(),
            membership: Membership::default(),
            rv: 0,
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn node_event(&mut self, event: Event<Node>) {
        self.node_writer.apply_watcher_event(&event);
        self.membership.node_event(&event);
    }

    fn bootc_event(&mut self, event: Event<BootcNode>) {
        self.bootc_writer.apply_watcher_event(&event);
        self.membership.bootc_event(&event);
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Node(i, worker, ready) => {
                let role = if worker { "worker" } else { "infra" };
                let rv = self.next_rv();
                self.node_event(Event::Apply(node(NAMES[i], role, ready, rv)));
            }
            Step::NodeGone(i) => {
                if let Some(n) = self.node(NAMES[i]) {
                    self.node_event(Event::Delete((*n).clone()));
                }
            }
            Step::Bootc(i, owner, image) => {
                let owner = [Some("workers"), Some("others"), None][usize::from(owner)];
                let rv = self.next_rv();
                self.bootc_event(Event::Apply(bootc(NAMES[i], owner, image, rv)));
            }
            Step::BootcGone(i) => {
                let cached = self
                    .bootcs
                    .get(&kube::runtime::reflector::ObjectRef::new(NAMES[i]));
                if let Some(b) = cached {
                    self.written.remove(NAMES[i]);
                    self.bootc_event(Event::Delete((*b).clone()));
                }
            }
            Step::Ready(i) => {
                if let Some(n) = self.node(NAMES[i]) {
                    let mut n = (*n).clone();
                    let rv = self.next_rv();
                    n.metadata.resource_version = Some(rv.to_string());
                    let ready = n.status.as_mut().and_then(|s| s.conditions.as_mut());
                    for c in ready.into_iter().flatten() {
                        c.status = if c.status == "True" { "False" } else { "True" }.to_owned();
                    }
                    self.node_event(Event::Apply(n));
                }
            }
            Step::Image(i, image) => {
                let cached = self
                    .bootcs
                    .get(&kube::runtime::reflector::ObjectRef::new(NAMES[i]));
                if let Some(b) = cached {
                    let mut b = (*b).clone();
                    b.metadata.resource_version = Some(self.next_rv().to_string());
                    b.spec.desired_image = format!("registry.test/os@sha256:{image}");
                    self.bootc_event(Event::Apply(b));
                }
            }
            Step::Write(i, image) => {
                let rv = self.next_rv();
                let b = bootc(NAMES[i], Some("workers"), image, rv);
                self.written.insert(NAMES[i].to_owned(), Arc::new(b));
            }
            Step::Deliver(i) => {
                if let Some(b) = self.written.remove(NAMES[i]) {
                    self.bootc_event(Event::Apply((*b).clone()));
                }
            }
            Step::Relist => {
                let all: Vec<Node> = self.nodes.state().iter().map(|n| (**n).clone()).collect();
                self.node_event(Event::Init);
                for n in all {
                    self.node_event(Event::InitApply(n));
                }
                self.node_event(Event::InitDone);
            }
            Step::Selector | Step::Reconcile => {}
        }
    }

    /// What a reconcile reads from scratch: the candidates the caches name and those the
    /// writes created, each read and checked.
    fn read_whole(&self, pool: &BootcNodePool) -> Vec<NodeView> {
        let mut names = observe::candidates(pool, self.nodes.state(), self.bootcs.state());
        names.extend(self.created());
        observe::members(pool, names, |n| self.node(n), |n| self.bootc(n))
    }
}

/// The same view by address: the very name and objects, as Ready.
fn same_view(a: &NodeView, b: &NodeView) -> bool {
    let node = match (&a.node, &b.node) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a.node, &b.node) && a.ready == b.ready,
        (None, None) => true,
        _ => false,
    };
    let bootc = match (&a.bootc, &b.bootc) {
        (Some(a), Some(b)) => Arc::ptr_eq(a.object(), b.object()),
        (None, None) => true,
        _ => false,
    };
    Arc::ptr_eq(&a.name, &b.name) && node && bootc
}

/// Runs `steps`, reconciling (take, compare, keep) at every `Reconcile` and at the end;
/// returns the kept views' counts (read whole, refreshed) and how many takes told
/// which views they read again.
fn run(steps: &[Step]) -> Result<(u64, u64, u64), TestCaseError> {
    let mut world = World::new();
    for i in 0..NAMES.len() {
        world.apply(&Step::Node(i, i % 3 != 0, true));
        world.apply(&Step::Bootc(i, u8::from(i % 4 == 0), 0));
    }
    let views = Views::default();
    let mut selector = "worker";
    let reconcile = Step::Reconcile;
    // The members the last reconcile planned for.
    let mut planned: Vec<String> = Vec::new();
    // Only a first reconcile, a relist and a selector changed since the last reconcile
    // read everything again: labels, owners, new objects and deletions are read by name.
    let mut relisted = true;
    let mut selector_then = "";
    // The views the last reconcile kept, and what the take that read them numbered them.
    let mut kept: Option<(Vec<NodeView>, u64)> = None;
    let mut told = 0;
    for step in [&reconcile].into_iter().chain(steps).chain([&reconcile]) {
        // A pool writes only the BootcNodes of members its last reconcile read (its plan
        // acts on those), whatever changed since.
        if let Step::Write(i, _) = step
            && !planned.iter().any(|n| n == NAMES[*i])
        {
            continue;
        }
        world.apply(step);
        if matches!(step, Step::Relist) {
            relisted = true;
        }
        if matches!(step, Step::Selector) {
            selector = if selector == "worker" {
                "infra"
            } else {
                "worker"
            };
        }
        if matches!(step, Step::Reconcile) {
            let pool = pool(selector);
            let (whole_before, _) = views.counts();
            let taken = views.take(&pool, &world.membership, &world);
            prop_assert_eq!(&taken.nodes, &world.read_whole(&pool), "after {:?}", steps);
            let read_whole = views.counts().0 > whole_before;
            let expected = relisted || selector != selector_then;
            prop_assert_eq!(read_whole, expected, "read whole? after {:?}", steps);
            relisted = false;
            selector_then = selector;
            planned = taken.nodes.iter().map(|v| v.name.to_string()).collect();
            // Told which views were read again: every other view is the very one kept.
            let changes = taken.changes.as_ref().expect("the views numbered");
            prop_assert_eq!(changes.to, taken.stamp.serial());
            if let Some(from) = changes.from {
                told += 1;
                let (before, serial) = kept.as_ref().expect("views kept to count from");
                prop_assert_eq!(from, *serial);
                prop_assert_eq!(before.len(), taken.nodes.len());
                prop_assert!(changes.changed.windows(2).all(|w| w[0] < w[1]));
                for (i, (was, now)) in before.iter().zip(&taken.nodes).enumerate() {
                    if !changes.changed.contains(&i) {
                        prop_assert!(same_view(was, now), "view {} after {:?}", i, steps);
                    }
                }
            }
            kept = Some((taken.nodes.clone(), taken.stamp.serial()));
            views.keep("workers", taken);
        }
    }
    let (whole, refreshed) = views.counts();
    Ok((whole, refreshed, told))
}

/// Over random changes, what the kept views give is what a reconcile would read from
/// scratch; most reconciles refresh what was kept (which the comparison then checks).
/// Changes that move the candidates (labels, owners, deletions, relists, the selector)
/// are rarer than status changes and writes, as in a rollout.
#[test]
fn kept_views_are_what_a_fresh_read_gives() {
    let mut runner = TestRunner::new(Config {
        cases: 512,
        ..Config::default()
    });
    let totals = std::cell::Cell::new((0, 0, 0));
    runner
        .run(&prop::collection::vec(step(), 1..40), |steps| {
            let (whole, refreshed, told) = run(&steps)?;
            let (w, r, t) = totals.get();
            totals.set((w + whole, r + refreshed, t + told));
            Ok(())
        })
        .unwrap();
    let (whole, refreshed, told) = totals.get();
    assert!(
        refreshed > whole,
        "refreshed {refreshed}, read whole {whole}: the refresh was barely exercised"
    );
    // Most refreshes add or take out no member, and tell which views they read again.
    assert!(
        told * 2 > refreshed,
        "told {told} of {refreshed} refreshes: the changes told were barely checked"
    );
}

/// A change to one member is read; one kept back from the membership (applied to the
/// cache without its watch event being told) is not: the views were kept, not rebuilt.
#[test]
fn a_reconcile_reads_only_what_changed() {
    let mut world = World::new();
    for (i, name) in NAMES.iter().enumerate() {
        let rv = world.next_rv();
        world.node_event(Event::Apply(node(name, "worker", true, rv)));
        let rv = world.next_rv();
        world.bootc_event(Event::Apply(bootc(name, Some("workers"), 1, rv)));
        assert_eq!(world.nodes.state().len(), i + 1);
    }
    let views = Views::default();
    let pool = pool("worker");
    let first = views.take(&pool, &world.membership, &world);
    assert_eq!(first.nodes.len(), NAMES.len());
    views.keep("workers", first);

    // "a" told, "b" behind the membership's back.
    let rv = world.next_rv();
    world.bootc_event(Event::Apply(bootc("a", Some("workers"), 2, rv)));
    let rv = world.next_rv();
    world
        .bootc_writer
        .apply_watcher_event(&Event::Apply(bootc("b", Some("workers"), 2, rv)));
    let taken = views.take(&pool, &world.membership, &world);
    let image = |name: &str| {
        let view = taken.nodes.iter().find(|v| *v.name == *name).unwrap();
        view.bootc.as_ref().unwrap().spec().desired_image.clone()
    };
    assert_eq!(image("a"), "registry.test/os@sha256:2");
    assert_eq!(image("b"), "registry.test/os@sha256:1");
    assert_eq!(views.counts(), (1, 1));
}

/// A source that notes every name it reads.
struct Counting<'w> {
    world: &'w World,
    read: std::cell::RefCell<BTreeSet<String>>,
}

impl Source for Counting<'_> {
    fn nodes(&self) -> &Store<Node> {
        self.world.nodes()
    }
    fn bootcs(&self) -> &Store<BootcNode> {
        self.world.bootcs()
    }
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.read.borrow_mut().insert(name.to_owned());
        self.world.node(name)
    }
    fn bootc(&self, name: &str) -> Option<Arc<BootcNode>> {
        self.read.borrow_mut().insert(name.to_owned());
        self.world.bootc(name)
    }
    fn created(&self) -> Vec<String> {
        self.world.created()
    }
    fn written(&self, among: Option<Among<'_>>) -> Vec<String> {
        self.world.written(among)
    }
}

/// With many pools, every pool's reconcile would read every node any watch delivered or
/// the controller wrote since its last one. A change to another pool's node is not read:
/// no label or owner moved, so it cannot have become a member.
#[test]
fn a_change_to_another_pools_node_is_not_read() {
    let mut world = World::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (role, owner) = if i % 2 == 0 {
            ("worker", "workers")
        } else {
            ("infra", "others")
        };
        let rv = world.next_rv();
        world.node_event(Event::Apply(node(name, role, true, rv)));
        let rv = world.next_rv();
        world.bootc_event(Event::Apply(bootc(name, Some(owner), 1, rv)));
    }
    let views = Views::default();
    let pool = pool("worker");
    let first = views.take(&pool, &world.membership, &world);
    assert_eq!(first.nodes.len(), NAMES.len() / 2);
    views.keep("workers", first);

    // "a" is a member, "b" and "d" belong to the other pool: all three delivered. The
    // controller wrote "c" (a member) and "b", neither delivered yet.
    world.apply(&Step::Image(0, 2));
    world.apply(&Step::Ready(1));
    world.apply(&Step::Image(3, 2));
    world.apply(&Step::Write(2, 2));
    let rv = world.next_rv();
    let theirs = bootc("b", Some("others"), 2, rv);
    world.written.insert("b".to_owned(), Arc::new(theirs));
    let counting = Counting {
        world: &world,
        read: Default::default(),
    };
    let taken = views.take(&pool, &world.membership, &counting);
    assert_eq!(
        views.counts(),
        (1, 1),
        "the views were refreshed, not rebuilt"
    );
    assert_eq!(
        counting.read.into_inner(),
        BTreeSet::from(["a".to_owned(), "c".to_owned()]),
        "only the members that changed or were written are read"
    );
    assert_eq!(taken.nodes, world.read_whole(&pool));
}

/// A node whose labels now select it joins, one whose labels no longer do leaves, and a
/// node that only changed to another role of no interest is read and left out: each read
/// by name, the views refreshed rather than rebuilt. Before, any label change anywhere
/// read every member of every pool again.
#[test]
fn a_label_change_is_read_by_name() {
    let mut world = World::new();
    for (i, name) in NAMES.iter().enumerate() {
        let role = if i < 3 { "worker" } else { "infra" };
        let rv = world.next_rv();
        world.node_event(Event::Apply(node(name, role, true, rv)));
    }
    let views = Views::default();
    let pool = pool("worker");
    let first = views.take(&pool, &world.membership, &world);
    assert_eq!(first.nodes.len(), 3);
    views.keep("workers", first);

    // "d" joins (infra → worker), "a" leaves (worker → infra), "e" changes from infra to
    // another role, and "b" only changes its readiness.
    world.apply(&Step::Node(3, true, true));
    world.apply(&Step::Node(0, false, true));
    let rv = world.next_rv();
    world.node_event(Event::Apply(node("e", "storage", true, rv)));
    world.apply(&Step::Ready(1));
    let counting = Counting {
        world: &world,
        read: Default::default(),
    };
    let taken = views.take(&pool, &world.membership, &counting);
    assert_eq!(views.counts(), (1, 1), "refreshed, not rebuilt");
    assert_eq!(
        counting.read.into_inner(),
        BTreeSet::from(["a", "b", "d", "e"].map(str::to_owned)),
        "the moved names and the changed member are read, nothing else"
    );
    let names: Vec<&str> = taken.nodes.iter().map(|v| &*v.name).collect();
    assert_eq!(names, ["b", "c", "d"]);
    assert_eq!(taken.nodes, world.read_whole(&pool));
}

#[test]
fn a_nodes_facts_keep_its_zone_label() {
    let mut zoned = node("a", "worker", true, 1);
    zoned
        .labels_mut()
        .insert(crate::plan::ZONE_LABEL.to_owned(), "zone-b".to_owned());
    assert_eq!(node_info(Arc::new(zoned)).zone.as_deref(), Some("zone-b"));
    assert_eq!(node_info(Arc::new(node("b", "worker", true, 1))).zone, None);
}
