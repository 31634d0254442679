//! Instruction counts of the controller's planning, taken with valgrind's callgrind: a
//! figure a busy or noisy machine cannot move.
//!
//! `cargo bench -p instruction-counts` runs every case in its own `valgrind
//! --tool=callgrind` process, counting only inside the measured function, then prints the
//! table `docs/performance.md` keeps and fails when a case exceeds its ceiling in this
//! crate's `ceilings.txt`. Cases, on the fixed pools of `world.rs` beside this file:
//!
//! - `plan`: one `plan()` of a snapshot already built, nothing kept from an earlier plan;
//! - `reconcile`: what one reconcile computes between its reads and its writes: the
//!   members picked from the caches (the reflector stores the controller fills), their
//!   views, the snapshot, the plan, the status patch built and serialized when the
//!   status moved (`reconcile::pacing::status_write`, as the controller writes it;
//!   nothing when the pool has that status already), and the metrics set from the plan
//!   (`Metrics::set_plan`). The API calls
//!   themselves are not counted. The pool's candidates and views are read from scratch,
//!   as after a label or owner change (`reconcile::membership`, `reconcile::views`), and
//!   nothing is kept of the settled members (`plan::settled`);
//! - `one-change`: the same reconcile again after one member's BootcNode changed its
//!   status (a reconcile done first, uncounted): the candidates, the views and the
//!   settled members kept from it stand, the changed member's read and planned again;
//! - `one-label`: the same again after one member's Node got a label: a name that may
//!   have joined or left the pool, read by name;
//! - `status-write`: the status patch built and serialized when the status moved, as
//!   during a rollout (the pool's status one node behind the plan's), at most once a
//!   second per pool (`reconcile::pacing`);
//! - `decode`: 1,000 objects decoded, as a real cluster sends them (`watched.rs`): a
//!   kubelet's Nodes, the pools' BootcNodes and a Deployment's Pods, each in full
//!   (`k8s-openapi`'s and the CRD's own decoding) and lean (`reconcile::lean`, what the
//!   controller's watches and pod lists use).
//!
//! The bench counts with the allocator the controller ships with (mimalloc), its delayed
//! return of memory to the system turned off: that delay is a time, and would make the
//! counts depend on the clock.
//!
//! `-- --only plan` (or `reconcile`, a size, a state) runs the matching cases alone.

// A bench's fixed inputs are known good: a panic on one is a bug in the bench.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod watched;
mod world;

use std::hint::black_box;
use std::path::Path;
use std::process::{Command, ExitCode};

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::plan::{self, Plan, PoolView, Snapshot};
use bootc_pool_controller::reconcile::lean::Lean;
use bootc_pool_controller::reconcile::membership::Membership;
use bootc_pool_controller::reconcile::pacing;
use bootc_pool_controller::reconcile::views::{Among, Source, Views};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use world::State;

/// The allocator the controller ships with (its `main.rs`): what a reconcile's
/// allocations cost is counted as the controller pays it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The variable that tells a process to run one case (`plan 1000 all-staged`).
const CASE_VAR: &str = "BOOTC_POOL_INSTRUCTIONS_CASE";
const SIZES: [usize; 2] = [1_000, 10_000];
const KINDS: [&str; 5] = [
    "plan",
    "reconcile",
    "one-change",
    "one-label",
    "status-write",
];
/// The objects the `decode` cases decode, and how.
const DECODES: [&str; 6] = [
    "node-full",
    "node-lean",
    "bootc-full",
    "bootc-lean",
    "pod-full",
    "pod-lean",
];
const DECODED: usize = 1_000;

fn main() -> ExitCode {
    if let Ok(case) = std::env::var(CASE_VAR) {
        return run_case(&case);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only: Vec<&str> = args
        .iter()
        .skip_while(|a| *a != "--only")
        .skip(1)
        .map(String::as_str)
        .collect();
    match drive(&only) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every case (those `only` names), each under callgrind; the table, then the ceilings.
fn drive(only: &[&str]) -> Result<(), String> {
    let ceilings = ceilings()?;
    let mut over = Vec::new();
    println!("| case | members | state | instructions | ceiling |");
    println!("| --- | ---: | --- | ---: | ---: |");
    let grid = KINDS.iter().flat_map(|kind| {
        SIZES.iter().flat_map(move |size| {
            State::ALL
                .iter()
                .map(move |state| format!("{kind} {size} {}", state.name()))
        })
    });
    let decodes = DECODES.iter().map(|d| format!("decode {DECODED} {d}"));
    for case in grid.chain(decodes) {
        if !only.is_empty() && !case.split(' ').any(|w| only.contains(&w)) {
            continue;
        }
        let counted = count(&case)?;
        let ceiling = ceilings.iter().find(|(c, _)| *c == case).map(|(_, n)| *n);
        let words: Vec<&str> = case.split(' ').collect();
        println!(
            "| {} | {} | {} | {} | {} |",
            words[0],
            words[1],
            words[2],
            thousands(counted),
            ceiling.map_or_else(|| "none".to_owned(), thousands)
        );
        match ceiling {
            None => over.push(format!("{case}: no line in ceilings.txt")),
            Some(c) if counted > c => over.push(format!("{case}: {counted} > {c}")),
            Some(_) => {}
        }
    }
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!("over the ceiling: {}", over.join("; ")))
    }
}

/// The ceilings: `kind size state instructions` a line, `#` comments.
fn ceilings() -> Result<Vec<(String, u64)>, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ceilings.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (case, n) = l
                .rsplit_once(' ')
                .ok_or_else(|| format!("ceilings.txt: `{l}` is not `kind size state count`"))?;
            let n = n
                .replace('_', "")
                .parse()
                .map_err(|e| format!("ceilings.txt: `{l}`: {e}"))?;
            Ok((case.to_owned(), n))
        })
        .collect()
}

/// Runs `case` in a process of its own under callgrind; the instructions counted inside
/// the measured function.
fn count(case: &str) -> Result<u64, String> {
    let dir = std::env::temp_dir().join(format!("bootc-pool-instructions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = dir.join("callgrind.out");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let run = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=*measured_*",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .env(CASE_VAR, case)
        // mimalloc gives memory back to the system after a delay: when, the clock
        // decides, and with it how many instructions a case counts. Not at all here.
        .env("MIMALLOC_PURGE_DELAY", "-1")
        .output()
        .map_err(|e| format!("valgrind (is it installed?): {e}"))?;
    let result = summary(&out);
    let _ = std::fs::remove_dir_all(&dir);
    if !run.status.success() {
        return Err(format!(
            "{case}: valgrind exited with {}: {}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    match result? {
        0 => Err(format!(
            "{case}: nothing counted (the measured function was not seen)"
        )),
        n => Ok(n),
    }
}

/// The `summary:` line of a callgrind output file.
fn summary(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .ok_or_else(|| format!("{}: no summary line", path.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("{}: summary: {e}", path.display()))
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Sets `case` up, then runs its measured function once.
fn run_case(case: &str) -> ExitCode {
    let words: Vec<&str> = case.split(' ').collect();
    if let ["decode", size, what] = words.as_slice() {
        return run_decode(size.parse().unwrap_or(0), what);
    }
    let (kind, size, state) = match words.as_slice() {
        [kind, size, state] => (*kind, size.parse::<usize>().ok(), State::parse(state)),
        _ => ("", None, None),
    };
    let (Some(size), Some(state)) = (size, state) else {
        eprintln!("error: {CASE_VAR}=`{case}` is not `kind size state`");
        return ExitCode::from(2);
    };
    let caches = Caches::filled(size, state);
    let pool = caches.planned_once();
    match kind {
        "plan" => {
            let snap = caches.snapshot(&pool);
            black_box(measured_plan(black_box(&snap)));
        }
        "reconcile" => {
            caches.membership.forget(&pool.name_any());
            caches.views.forget(&pool.name_any());
            black_box(measured_reconcile(black_box(&pool), black_box(&caches)));
        }
        "one-change" | "one-label" => {
            black_box(reconcile(&pool, &caches));
            let mut caches = caches;
            if kind == "one-change" {
                caches.change_one(size / 2);
            } else {
                caches.label_one(size / 2);
            }
            black_box(measured_reconcile(black_box(&pool), black_box(&caches)));
        }
        "status-write" => {
            let new = plan::plan(&caches.snapshot(&pool)).status;
            let mut old = new.clone();
            old.updated_count -= 1;
            // The setup's freed memory gathered first, as for `decode`.
            drop(black_box(Vec::<u8>::with_capacity(64 * 1024)));
            black_box(measured_status_write(black_box(&old), black_box(&new)));
        }
        _ => {
            eprintln!("error: unknown kind `{kind}` ({})", KINDS.join(", "));
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

/// Decodes `size` objects of the kind and in the way `what` names.
fn run_decode(size: usize, what: &str) -> ExitCode {
    let texts = |values: Vec<serde_json::Value>| -> Vec<Vec<u8>> {
        values
            .iter()
            .map(|v| serde_json::to_vec(v).unwrap())
            .collect()
    };
    let objects = match what.split('-').next() {
        Some("node") => texts((0..size).map(watched::node).collect()),
        Some("pod") => texts((0..size).map(watched::pod).collect()),
        _ => texts(watched::bootc_nodes(size)),
    };
    // The setup's freed memory gathered now (a first large allocation would gather it),
    // so that the count is the decoding's alone.
    drop(black_box(Vec::<u8>::with_capacity(64 * 1024)));
    match what {
        "node-full" => drop(black_box(measured_decode::<Node>(&objects))),
        "node-lean" => drop(black_box(measured_decode::<Lean<Node>>(&objects))),
        "bootc-full" => drop(black_box(measured_decode::<BootcNode>(&objects))),
        "bootc-lean" => drop(black_box(measured_decode::<Lean<BootcNode>>(&objects))),
        "pod-full" => drop(black_box(measured_decode::<Pod>(&objects))),
        "pod-lean" => drop(black_box(measured_decode::<Lean<Pod>>(&objects))),
        _ => {
            eprintln!("error: unknown decode `{what}` ({})", DECODES.join(", "));
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

/// Every text decoded as a `K`, kept (as a cache keeps it).
#[inline(never)]
fn measured_decode<K: serde::de::DeserializeOwned>(texts: &[Vec<u8>]) -> Vec<K> {
    texts
        .iter()
        .map(|t| serde_json::from_slice(black_box(t)).expect("a watched object decodes"))
        .collect()
}

#[inline(never)]
fn measured_plan(snap: &Snapshot) -> Plan {
    plan::plan(snap)
}

#[inline(never)]
fn measured_status_write(
    old: &bootc_crds::pool::BootcNodePoolStatus,
    new: &bootc_crds::pool::BootcNodePoolStatus,
) -> Vec<u8> {
    let body = pacing::status_write(Some(old), new).expect("the status moved");
    serde_json::to_vec(&body).expect("a status serializes")
}

#[inline(never)]
fn measured_reconcile(pool: &BootcNodePool, caches: &Caches) -> Vec<u8> {
    reconcile(pool, caches)
}

/// Reads, plans, writes the status as the controller does when it moved, sets the
/// metrics, keeps the views read.
fn reconcile(pool: &BootcNodePool, caches: &Caches) -> Vec<u8> {
    let mut taken = caches.views.take(pool, &caches.membership, caches);
    let mut snap = caches.snapshot_of(pool, std::mem::take(&mut taken.nodes));
    snap.changes = taken.changes.take();
    let plan = plan::plan(&snap);
    // The controller writes the status only when it moved, and then as a merge patch
    // that also removes what the new status no longer has.
    let patch = pacing::status_write(pool.status.as_ref(), &plan.status)
        .map(|body| serde_json::to_vec(&body).expect("a status serializes"))
        .unwrap_or_default();
    // What the plan says, the metrics say too.
    caches.metrics.set_plan(&pool.name_any(), &plan);
    taken.nodes = snap.nodes;
    caches.views.keep(&pool.name_any(), taken);
    patch
}

/// The controller's caches of Nodes and BootcNodes, filled as its watches fill them, and
/// the pools' candidates, views and settled members kept between reconciles.
struct Caches {
    nodes: Store<Node>,
    node_writer: Writer<Node>,
    bootc: Store<BootcNode>,
    bootc_writer: Writer<BootcNode>,
    membership: Membership,
    views: Views,
    metrics: Metrics,
}

/// The bench writes nothing: every object comes from the caches.
impl Source for Caches {
    fn nodes(&self) -> &Store<Node> {
        &self.nodes
    }
    fn bootcs(&self) -> &Store<BootcNode> {
        &self.bootc
    }
    fn node(&self, name: &str) -> Option<std::sync::Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }
    fn bootc(&self, name: &str) -> Option<std::sync::Arc<BootcNode>> {
        self.bootc.get(&ObjectRef::new(name))
    }
    fn created(&self) -> Vec<String> {
        Vec::new()
    }
    fn written(&self, _among: Option<Among<'_>>) -> Vec<String> {
        Vec::new()
    }
}

impl Caches {
    fn filled(size: usize, state: State) -> Caches {
        let (nodes, bootc) = world::objects(size, state);
        let membership = Membership::default();
        let (bootc, bootc_writer) = fill(bootc, |e| membership.bootc_event(e));
        let (nodes, node_writer) = fill(nodes, |e| membership.node_event(e));
        Caches {
            nodes,
            node_writer,
            bootc,
            bootc_writer,
            membership,
            views: Views::default(),
            metrics: Metrics::default(),
        }
    }

    /// Member `i`'s agent reported again: its BootcNode has a new resourceVersion and a
    /// fresh condition time, as a watch event delivers it.
    fn change_one(&mut self, i: usize) {
        let name = format!("node-{i:05}");
        let mut changed = (*self.bootc.get(&ObjectRef::new(&name)).expect("a member")).clone();
        changed.metadata.resource_version = Some(format!("rv-{name}-2"));
        if let Some(c) = changed
            .status
            .as_mut()
            .and_then(|s| s.conditions.first_mut())
        {
            c.last_transition_time =
                bootc_crds::conditions::to_time(world::now()).expect("the bench's time is valid");
        }
        let event = watcher::Event::Apply(changed);
        self.bootc_writer.apply_watcher_event(&event);
        self.membership.bootc_event(&event);
    }

    /// Member `i`'s Node got a label (a rack), as a watch event delivers it.
    fn label_one(&mut self, i: usize) {
        let name = format!("node-{i:05}");
        let mut changed = (*self.nodes.get(&ObjectRef::new(&name)).expect("a member")).clone();
        changed.metadata.resource_version = Some(format!("rv-{name}-2"));
        changed
            .labels_mut()
            .insert("example.com/rack".to_owned(), "r2".to_owned());
        let event = watcher::Event::Apply(changed);
        self.node_writer.apply_watcher_event(&event);
        self.membership.node_event(&event);
    }

    /// The pool with the status a first plan of these caches wrote; nothing kept.
    fn planned_once(&self) -> BootcNodePool {
        let mut pool = world::pool();
        pool.status = Some(plan::plan(&self.snapshot(&pool)).status);
        self.views.forget(&pool.name_any());
        pool
    }

    /// What a reconcile of `pool` reads from the caches.
    fn snapshot(&self, pool: &BootcNodePool) -> Snapshot {
        let taken = self.views.take(pool, &self.membership, self);
        self.snapshot_of(pool, taken.nodes)
    }

    /// The snapshot of `pool` with `members`.
    fn snapshot_of(&self, pool: &BootcNodePool, members: Vec<plan::NodeView>) -> Snapshot {
        let view = PoolView {
            name: pool.name_any(),
            generation: pool.metadata.generation,
            spec: pool.spec.clone(),
            status: pool.status.clone(),
            deleting: false,
            finalized: true,
        };
        let mut snap = Snapshot::of(view, members, world::now());
        // What the pool's plans kept of its settled members, as the controller keeps it.
        snap.settled = self.views.settled(&pool.name_any());
        snap
    }
}

/// A cache of `objects`, each event also told to `tell`.
fn fill<K>(objects: Vec<K>, tell: impl Fn(&watcher::Event<K>)) -> (Store<K>, Writer<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = reflector::store::<K>();
    for object in objects {
        let event = watcher::Event::Apply(object);
        writer.apply_watcher_event(&event);
        tell(&event);
    }
    (store, writer)
}
