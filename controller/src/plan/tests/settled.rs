//! What is kept of settled members between plans changes no plan: over random pools and
//! random changes between their plans, the plan made with what earlier plans kept is the
//! plan made from scratch, and kept outcomes were used.

use std::sync::Arc;

use bootc_crds::node::DrainBlocked;
use bootc_crds::pool::CanarySpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;

use super::*;

/// The member kinds the pools are made of: every path of the member pass.
const KINDS: usize = 25;

/// The property's pool: so much reboot timeout and soak that a few steps of the clock
/// ([`Change::Clock`]) run them out.
const REBOOT_TIMEOUT: i64 = 600;
const SOAK: i64 = 120;

/// `s` seconds before the first plan, as an annotation writes it.
fn ago(s: i64) -> String {
    (now() - chrono::Duration::seconds(s)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A slot holder approved `approved` seconds before the first plan, its agent
/// reporting `status`, its Node Ready or not.
fn approved_holder(n: N, approved: i64, status: BootcNodeStatus, ready: bool) -> N {
    let mut n = n
        .with('b', DesiredImageState::Booted, status)
        .slot()
        .annotate(APPROVED_AT_ANNOTATION, &ago(approved))
        .cordoned();
    n.ready = ready;
    n
}

/// An agent that recorded its reboot into the target `ago` seconds before the first plan.
fn recorded(mut status: BootcNodeStatus, ago: i64) -> BootcNodeStatus {
    status.last_reboot = Some(bootc_crds::node::LastReboot {
        digest: digest('b').to_string(),
        boot_id: "0123".into(),
        soft_reboots: 0,
        time: to_time(now() - chrono::Duration::seconds(ago)).unwrap(),
    });
    status
}

fn name(i: usize) -> &'static str {
    Box::leak(format!("n{i:02}").into_boxed_str())
}

/// Member `i` of kind `kind`, its BootcNode named as the controller's are.
fn member(i: usize, kind: usize) -> NodeView {
    let n = node(name(i));
    let mut n = match kind {
        0 => n.staged(),
        1 => n.staging(),
        2 => n.approved(),
        3 => n.staged().slot(),
        4 => n.rebooting().slot().cordoned(),
        5 => n.back().slot().cordoned(),
        6 => n.updated(),
        7 => n.with(
            'b',
            DesiredImageState::Staged,
            agent('a', Some('b'), "Staged", Some("disk")),
        ),
        8 => n.with(
            'b',
            DesiredImageState::Staged,
            agent('b', None, "Idle", Some("disk")),
        ),
        9 => n
            .staged()
            .annotate(DRAIN_FAILED_ANNOTATION, &digest('b').to_string()),
        10 => n,
        11 => n.with(
            'a',
            DesiredImageState::Staged,
            agent('a', None, "Idle", None),
        ),
        12 => n.updated(),
        13 => {
            let mut n = n.staged();
            bootc_mut(&mut n.bootc).metadata.deletion_timestamp = Some(to_time(now()).unwrap());
            n
        }
        14 => {
            let mut n = n.staged();
            n.ready = false;
            n
        }
        15 => {
            let mut n = n.staged();
            n.held = true;
            n
        }
        // Cordoned by someone else: waiting for a slot, and done.
        16 => n.staged().cordoned(),
        17 => n.updated().cordoned(),
        18 => {
            let mut n = n.staged().cordoned();
            n.ready = false;
            n
        }
        // Holders approved to reboot, whose part of the plan changes with the time: in
        // the reboot, its timeout running out;
        20 => approved_holder(
            n,
            300,
            recorded(agent('a', Some('b'), "Rebooting", None), 290),
            false,
        ),
        // back on the target, soaking;
        21 => approved_holder(n, 200, recorded(agent('b', None, "Idle", None), 150), true)
            .annotate(BACK_AT_ANNOTATION, &ago(30)),
        // down before its agent's record of the reboot is seen;
        22 => {
            let mut n = approved_holder(n, 60, agent('a', Some('b'), "Staged", None), false);
            n.ready_since = Some(now() - chrono::Duration::seconds(10));
            n
        }
        // past its reboot timeout;
        23 => approved_holder(
            n,
            2000,
            recorded(agent('a', Some('b'), "Rebooting", None), 1990),
            false,
        ),
        // its agent reporting Degraded.
        24 => approved_holder(n, 100, agent('a', Some('b'), "Staged", Some("disk")), true),
        _ => {
            let mut n = n.updated();
            n.role = "db";
            n
        }
    };
    if n.bootc.is_some() {
        let bootc = bootc_mut(&mut n.bootc);
        bootc.metadata.name = Some(name(i).to_owned());
        // Each member's agent left Idle at a time of its own, the later the higher `i`:
        // the longest Staging is a member's of its own.
        let left = to_time(now() - chrono::Duration::minutes(60 - i as i64)).unwrap();
        let idle = (bootc.status.iter_mut()).flat_map(|s| &mut s.conditions);
        for c in idle.filter(|c| c.type_ == conditions::IDLE) {
            c.last_transition_time = left.clone();
        }
    }
    let mut view = n.view();
    if kind == 12 {
        // Not labelled yet: the plan labels it.
        let info = view.node.as_mut().unwrap();
        info.labels_mut().remove(MANAGED_LABEL);
    }
    // Three zones, and some nodes in none: the grant order reads them.
    if let Some(info) = view.node.as_mut()
        && i % 4 != 3
    {
        let zone = format!("zone-{}", i % 3);
        info.labels_mut().insert(ZONE_LABEL.to_owned(), zone);
    }
    view
}

/// A change between two plans.
#[derive(Debug, Clone)]
enum Change {
    /// Member `i`'s objects replaced by those of a member of another kind.
    Replace(usize, usize),
    /// Member `i`'s Node turns Ready or NotReady, the object kept.
    Ready(usize),
    /// Member `i`'s agent reports anew (its BootcNode changed where it is held).
    Report(usize, bool),
    /// Member `i`'s Node labelled as another pool selects it, or the label taken off.
    Conflict(usize),
    /// Member `i`'s Node loses the managed label (someone took it off).
    Unlabel(usize),
    /// An admin holds member `i`, or lets it go.
    Hold(usize),
    /// The other pool selects every worker (`true`) or the labelled nodes alone: members
    /// claimed by it while their objects stay as they were.
    Rival(bool),
    /// The pool's target moves to another image.
    Target(char),
    /// The pool's budget.
    Budget(i32),
    /// The pool's `maxStaging`.
    Staging(Option<i32>),
    /// The pool's canary: so many nodes first (whose count of nodes on the target and
    /// Degraded the canary reads), or none.
    Canary(Option<i32>),
    /// The pull Secret's hash.
    Hash(Option<&'static str>),
    /// Member `i`'s agent reports it booted `c`'s per-arch image, pinned at a manifest
    /// list: its history entry is the target's when `c` is the target, the list's else.
    ListBoot(usize),
    /// The pool's own selector: workers (`false`), or workers no other team has labelled.
    Selector(bool),
    /// Member `i`'s agent reports `Drifted=True`, or no longer does.
    Drift(usize),
    /// Member `i`'s BootcNode says it is held (`status.held`), or no longer does.
    WrittenHeld(usize),
    /// Member `i`'s BootcNode says its drain is held up (`status.drainBlocked`), or no
    /// longer does.
    WrittenBlocked(usize),
    /// A drain of member `i` is running and held up, or none is.
    HeldUp(usize),
    /// Member `i`'s BootcNode is owned by the other pool, or by this one again.
    Owner(usize),
    /// Member `i`'s Node moves to the next zone (of four, the last none).
    Zone(usize),
    /// Member `i`'s agent has not answered its spec, or answers it again.
    Unanswered(usize),
    /// Member `i`'s `Idle` condition changed `m` minutes ago (its status kept).
    IdleSince(usize, i64),
    /// The clock moves on so many seconds (back, when negative: a step of the system's).
    Clock(i64),
}

fn change(size: usize) -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0..size, 0..KINDS).prop_map(|(i, k)| Change::Replace(i, k)),
        2 => (0..size).prop_map(Change::Ready),
        2 => (0..size, any::<bool>()).prop_map(|(i, done)| Change::Report(i, done)),
        1 => (0..size).prop_map(Change::Conflict),
        1 => (0..size).prop_map(Change::Unlabel),
        1 => (0..size).prop_map(Change::Hold),
        1 => any::<bool>().prop_map(Change::Rival),
        1 => prop::sample::select(vec!['b', 'c']).prop_map(Change::Target),
        1 => (1..4i32).prop_map(Change::Budget),
        1 => prop::option::of(1..3i32).prop_map(Change::Staging),
        1 => prop::option::of(1..3i32).prop_map(Change::Canary),
        1 => prop::option::of(prop::sample::select(vec!["h1", "h2"])).prop_map(Change::Hash),
        1 => any::<bool>().prop_map(Change::Selector),
        1 => (0..size).prop_map(Change::ListBoot),
        1 => (0..size).prop_map(Change::Drift),
        1 => (0..size).prop_map(Change::WrittenHeld),
        1 => (0..size).prop_map(Change::WrittenBlocked),
        1 => (0..size).prop_map(Change::HeldUp),
        1 => (0..size).prop_map(Change::Owner),
        1 => (0..size).prop_map(Change::Zone),
        1 => (0..size).prop_map(Change::Unanswered),
        1 => (0..size, 1..90i64).prop_map(|(i, m)| Change::IdleSince(i, m)),
        2 => (1..400i64).prop_map(Change::Clock),
        1 => (1..600i64).prop_map(|s| Change::Clock(-s)),
    ]
}

/// The member whose view `change` changes, if any (the snapshot having `size` views).
fn touched(change: &Change, size: usize) -> Option<usize> {
    match *change {
        Change::Replace(i, _)
        | Change::Ready(i)
        | Change::Report(i, _)
        | Change::Conflict(i)
        | Change::Unlabel(i)
        | Change::Hold(i)
        | Change::ListBoot(i)
        | Change::Drift(i)
        | Change::WrittenHeld(i)
        | Change::WrittenBlocked(i)
        | Change::Owner(i)
        | Change::Zone(i)
        | Change::Unanswered(i)
        | Change::IdleSince(i, _) => Some(i % size),
        Change::Rival(_)
        | Change::Target(_)
        | Change::Budget(_)
        | Change::Staging(_)
        | Change::Canary(_)
        | Change::Hash(_)
        | Change::Selector(_)
        | Change::HeldUp(_)
        | Change::Clock(_) => None,
    }
}

fn apply(snap: &mut Snapshot, change: &Change) {
    let size = snap.nodes.len();
    match *change {
        Change::Replace(i, kind) => snap.nodes[i % size] = member(i % size, kind),
        Change::Ready(i) => {
            if let Some(info) = snap.nodes[i % size].node.as_mut() {
                info.ready = !info.ready;
            }
        }
        Change::Report(i, done) => {
            if let Some(bootc) = snap.nodes[i % size].bootc.as_mut() {
                // A copy when a kept outcome holds the object, as a cache's new object is.
                bootc.object_mut().status = Some(if done {
                    agent('b', None, "Idle", None)
                } else {
                    agent('a', Some('b'), "Staged", None)
                });
            }
        }
        Change::Conflict(i) => {
            if let Some(info) = snap.nodes[i % size].node.as_mut() {
                let mut labels = info.labels_mut();
                if labels.remove("team").is_none() {
                    labels.insert("team".to_owned(), "other".to_owned());
                }
            }
        }
        Change::Unlabel(i) => {
            if let Some(info) = snap.nodes[i % size].node.as_mut() {
                info.labels_mut().remove(MANAGED_LABEL);
            }
        }
        Change::Hold(i) => {
            if let Some(info) = snap.nodes[i % size].node.as_mut() {
                let mut labels = info.labels_mut();
                if labels.remove(bootc_crds::HOLD_LABEL).is_none() {
                    labels.insert(bootc_crds::HOLD_LABEL.to_owned(), "true".to_owned());
                }
            }
        }
        Change::Rival(all) => {
            let labels = if all {
                serde_json::json!({"role": "worker"})
            } else {
                serde_json::json!({"team": "other"})
            };
            let selector = serde_json::from_value(serde_json::json!({ "matchLabels": labels }));
            let mut selectors = (*snap.pool_selectors).clone();
            selectors[0].1 = selector.unwrap();
            snap.pool_selectors = Arc::new(selectors);
        }
        Change::Target(c) => snap.pool.spec.image.r#ref = pin(c),
        Change::Budget(n) => snap.pool.spec.rollout.max_unavailable = IntOrString::Int(n),
        Change::Staging(n) => snap.pool.spec.rollout.max_staging = n.map(IntOrString::Int),
        Change::Canary(n) => {
            snap.pool.spec.rollout.canary = n.map(|n| CanarySpec {
                nodes: IntOrString::Int(n),
                soak_seconds: 60,
            });
        }
        Change::Hash(h) => snap.pull_secret.hash = h.map(str::to_owned),
        Change::ListBoot(i) => {
            if let Some(bootc) = snap.nodes[i % size].bootc.as_mut() {
                let mut status = agent('c', None, "Idle", None);
                if let Some(booted) = status.booted.as_mut() {
                    booted.image.image = pin('e');
                }
                bootc.object_mut().status = Some(status);
            }
        }
        Change::Selector(untaken) => {
            let selector = if untaken {
                serde_json::json!({
                    "matchLabels": {"role": "worker"},
                    "matchExpressions": [{"key": "team", "operator": "DoesNotExist"}],
                })
            } else {
                serde_json::json!({"matchLabels": {"role": "worker"}})
            };
            snap.pool.spec.node_selector = serde_json::from_value(selector).unwrap();
        }
        Change::Drift(i) => {
            if let Some(status) = reported(snap, i) {
                let drifted = |c: &Condition| c.type_ == conditions::DRIFTED;
                if status.conditions.iter().any(drifted) {
                    status.conditions.retain(|c| !drifted(c));
                } else {
                    status.conditions.push(Condition {
                        type_: conditions::DRIFTED.to_owned(),
                        status: "True".to_owned(),
                        reason: "Changed".to_owned(),
                        message: "changed on the host".to_owned(),
                        last_transition_time: to_time(now()).unwrap(),
                        observed_generation: None,
                    });
                }
            }
        }
        Change::WrittenHeld(i) => {
            if let Some(status) = reported(snap, i) {
                status.held = match status.held {
                    Some(true) => None,
                    _ => Some(true),
                };
            }
        }
        Change::WrittenBlocked(i) => {
            if let Some(status) = reported(snap, i) {
                status.drain_blocked = match status.drain_blocked {
                    Some(_) => None,
                    None => Some(DrainBlocked {
                        message: "evicting shop/web-0: budget".to_owned(),
                        since: to_time(now()),
                    }),
                };
            }
        }
        Change::Owner(i) => {
            if let Some(bootc) = snap.nodes[i % size].bootc.as_mut() {
                // A new object, as the cache's is when the owner changes.
                bootc.object_mut().metadata.owner_references = None;
                let other = bootc.owner.as_deref() == Some(POOL);
                bootc.owner = Some(if other { "other" } else { POOL }.to_owned());
            }
        }
        Change::Zone(i) => {
            if let Some(info) = snap.nodes[i % size].node.as_mut() {
                let mut labels = info.labels_mut();
                let next = match labels.remove(ZONE_LABEL).as_deref() {
                    Some("zone-0") => Some("zone-1"),
                    Some("zone-1") => Some("zone-2"),
                    Some(_) => None,
                    None => Some("zone-0"),
                };
                if let Some(zone) = next {
                    labels.insert(ZONE_LABEL.to_owned(), zone.to_owned());
                }
            }
        }
        Change::Unanswered(i) => {
            if let Some(status) = reported(snap, i) {
                status.observed_generation = match status.observed_generation {
                    Some(1) => Some(0),
                    _ => Some(1),
                };
            }
        }
        Change::IdleSince(i, minutes) => {
            if let Some(status) = reported(snap, i) {
                let at = to_time(now() - chrono::Duration::minutes(minutes)).unwrap();
                for c in &mut status.conditions {
                    if c.type_ == conditions::IDLE {
                        c.last_transition_time = at.clone();
                    }
                }
            }
        }
        Change::Clock(s) => snap.now += chrono::Duration::seconds(s),
        Change::HeldUp(i) => {
            let node = name(i % size).to_owned();
            if snap.drains.remove(&node).is_none() {
                let blocked = Some("evicting shop/web-0: budget".to_owned());
                snap.drains.insert(node, DrainView::Running { blocked });
            }
        }
    }
}

/// Member `i`'s BootcNode status, to change (a copy when a kept outcome holds the
/// object, as a cache's new object is), when it has one.
fn reported(snap: &mut Snapshot, i: usize) -> Option<&mut BootcNodeStatus> {
    let size = snap.nodes.len();
    let bootc = snap.nodes[i % size].bootc.as_mut()?;
    bootc.object_mut().status.as_mut()
}

/// The pool's health read from every view of the snapshot with the plan's states, as
/// the rule says, to hold the plan's (found from the members planned in full and the
/// settled members' kept part) to.
fn health_read_whole(snap: &Snapshot, planned: &Plan) -> health::Health {
    let mut found = health::Health::default();
    for view in &snap.nodes {
        let Some(state) = planned.states.get(&view.name).copied() else {
            continue;
        };
        let Some(bootc) = &view.bootc else {
            continue;
        };
        let behind = bootc.status().and_then(|s| s.observed_generation) < bootc.generation();
        if !bootc.deleting() && bootc.generation().is_some() && behind {
            found.unreported += 1;
        }
        let since = match state {
            NodeState::Staging => bootc
                .status()
                .and_then(|s| {
                    (s.conditions.iter())
                        .find(|c| c.type_ == conditions::IDLE && c.status == "False")
                })
                .and_then(|c| conditions::from_time(&c.last_transition_time)),
            NodeState::Rebooting => Some(
                bootc
                    .annotations()
                    .get(bootc_crds::REBOOT_SLOT_ANNOTATION)
                    .map_or(snap.now, |t| t.parse().unwrap()),
            ),
            _ => None,
        };
        let at = usize::from(state == NodeState::Rebooting);
        if let Some(since) = since {
            let seconds = (snap.now - since).num_seconds().max(0);
            found.oldest[at] = found.oldest[at].max(seconds);
        }
    }
    found
}

/// The pool of the property: two at a time, with [`REBOOT_TIMEOUT`] and [`SOAK`].
fn timed_pool_spec() -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(2));
    spec.rollout.reboot_timeout_seconds = REBOOT_TIMEOUT;
    spec.rollout.post_reboot_delay_seconds = SOAK;
    spec
}

/// A snapshot of the property's pool with `nodes`, at [`now`].
fn timed_snapshot(nodes: Vec<NodeView>) -> Snapshot {
    let pool = PoolView {
        name: POOL.into(),
        generation: Some(1),
        spec: timed_pool_spec(),
        status: None,
        deleting: false,
        finalized: true,
    };
    Snapshot::of(pool, nodes, now())
}

/// A slot holder in its reboot is kept settled while its reboot timeout has not run
/// out, asking to be looked at again a second after it does; once it has, it is planned
/// again, and found unhealthy.
#[test]
fn a_settled_holder_is_planned_again_when_its_timeout_runs_out() {
    let mut snap = timed_snapshot(vec![member(0, 20), member(1, 6)]);
    let kept = Settled::default();
    let plan_at = |snap: &Snapshot, seconds: i64| {
        let mut at = snap.clone();
        at.now = now() + chrono::Duration::seconds(seconds);
        at.settled = kept.clone();
        let with = plan(&at);
        at.settled = Settled::default();
        assert_eq!(with, plan(&at), "{seconds} s on");
        with
    };
    let first = plan_at(&snap, 0);
    assert_eq!(kept.len(), 2, "the holder and the member done, kept");
    // Approved 300 s before, a timeout of 600 s: looked at again 301 s on.
    assert_eq!(
        first.requeue_after,
        Some(std::time::Duration::from_secs(301))
    );
    snap.pool.status = Some(first.status);
    let used = kept.used();
    let later = plan_at(&snap, 300);
    assert_eq!(kept.used() - used, 2, "both kept outcomes used, 300 s on");
    assert_eq!(later.requeue_after, Some(std::time::Duration::from_secs(1)));
    assert_eq!(later.states.get("n00"), Some(&NodeState::Rebooting));
    let used = kept.used();
    let overdue = plan_at(&snap, 301);
    assert_eq!(
        kept.used() - used,
        1,
        "the holder planned again once overdue"
    );
    let degraded = condition_of(&overdue, "Degraded");
    assert!(
        degraded.message.contains("node n00: RebootTimeout"),
        "{}",
        degraded.message
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Each plan of a pool changed step by step, made with what the plans before it
    /// kept, is the plan made with nothing kept; and kept outcomes were used. The plans
    /// made with what was kept are told which views changed, as the shell tells them,
    /// but for every third, which compares every view.
    #[test]
    fn a_plan_with_settled_members_kept_is_the_plan_from_scratch(
        kinds in prop::collection::vec(0..KINDS, 2..12),
        steps in prop::collection::vec(prop::collection::vec(change(12), 0..4), 1..8),
    ) {
        let nodes: Vec<NodeView> = kinds.iter().enumerate().map(|(i, &k)| member(i, k)).collect();
        let mut snap = timed_snapshot(nodes);
        let other: LabelSelector = serde_json::from_value(
            serde_json::json!({"matchLabels": {"team": "other"}}),
        ).unwrap();
        snap.pool_selectors = Arc::new(vec![
            ("other".to_owned(), other),
            (POOL.to_owned(), snap.pool.spec.node_selector.clone()),
        ]);
        let kept = Settled::default();
        for (serial, changes) in std::iter::once(&Vec::new()).chain(&steps).enumerate() {
            for c in changes {
                apply(&mut snap, c);
            }
            let mut changed: Vec<usize> =
                changes.iter().filter_map(|c| touched(c, snap.nodes.len())).collect();
            changed.sort_unstable();
            changed.dedup();
            let serial = serial as u64;
            let told = (serial % 3 != 2).then(|| ViewChanges {
                to: serial,
                from: serial.checked_sub(1),
                changed,
            });
            let (len, used) = (kept.len(), kept.used());
            let (matches, matched) = (kept.labels_len(), kept.labels_used());
            let (booted, gathered) = (kept.booted_len(), kept.booted_used());
            let mut with = snap.clone();
            with.settled = kept.clone();
            with.changes = told;
            let mut without = snap.clone();
            without.settled = Settled::default();
            let from_scratch = plan(&without);
            prop_assert_eq!(plan(&with), from_scratch.clone());
            prop_assert_eq!(&from_scratch.health, &health_read_whole(&snap, &from_scratch));
            if changes.is_empty() {
                // Nothing changed since the plan before: every outcome it kept was used.
                prop_assert_eq!(kept.used() - used, len as u64);
                // And every Node's match it kept.
                prop_assert_eq!(kept.labels_used() - matched, matches as u64);
                // And every booted report it gathered.
                prop_assert_eq!(kept.booted_used() - gathered, booted as u64);
            }
            // The next plan starts from this one's status, as the controller's does.
            snap.pool.status = Some(from_scratch.status);
        }
    }
}

/// The fingerprint of the states is taken again when a member joined, even where the
/// other members' names were read again (the same text at new addresses): the plan after
/// it, with the member gone again, has the fingerprint of its own states.
#[test]
fn a_member_joining_among_names_read_again_changes_the_fingerprint() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("a1").updated(), node("a2").staged()],
    );
    let kept = Settled::default();
    snap.settled = kept.clone();
    let alone = plan(&snap);
    // Both read again, and a3 joins.
    snap.nodes = vec![
        node("a1").updated().view(),
        node("a2").staged().view(),
        node("a3").updated().view(),
    ];
    let joined = plan(&snap);
    assert_ne!(joined.progress.fingerprint, alone.progress.fingerprint);
    // a3 leaves again.
    snap.nodes.pop();
    let left = plan(&snap);
    assert_eq!(left.progress.fingerprint, alone.progress.fingerprint);
}

/// A plan told which views changed keeps the views it holds up to date: a later plan
/// told nothing compares with them, and a view back at an object it held two plans
/// before (a write read back from the cache's older copy) is a change.
#[test]
fn a_view_back_at_an_older_object_after_a_told_plan_is_a_change() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("a1").updated(), node("a2").staged()],
    );
    let kept = Settled::default();
    snap.settled = kept.clone();
    let told = |from: u64, changed: Vec<usize>| ViewChanges {
        to: from + 1,
        from: Some(from),
        changed,
    };
    snap.changes = Some(ViewChanges {
        to: 1,
        from: None,
        changed: Vec::new(),
    });
    let staged = plan(&snap);
    // a2 reports it runs the target: a new object, and the shell says so.
    let older = snap.nodes[1].clone();
    snap.nodes[1] = node("a2").updated().view();
    snap.changes = Some(told(1, vec![1]));
    let done = plan(&snap);
    assert_ne!(done.states, staged.states, "a2's new report is read");
    // a2's older object again, and the shell tells nothing.
    snap.nodes[1] = older;
    snap.changes = None;
    let again = plan(&snap);
    let mut from_scratch = snap.clone();
    from_scratch.settled = Settled::default();
    assert_eq!(again, plan(&from_scratch));
    assert_eq!(again.states, staged.states);
}

/// The kept outcomes are used: a pool planned twice without a change plans its settled
/// members once, a change to one member's objects plans that one again, and a member
/// joining or leaving leaves the others' in use.
#[test]
fn an_unchanged_settled_member_is_not_planned_again() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[
            node("a1").updated(),
            node("a2").staged(),
            node("a3").staged().slot(),
            node("a4"),
        ],
    );
    for view in &mut snap.nodes {
        if let Some(bootc) = view.bootc.as_mut() {
            bootc.object_mut().metadata.name = Some(view.name.to_string());
        }
    }
    let kept = Settled::default();
    snap.settled = kept.clone();
    let first = plan(&snap);
    // a1 (done) and a2 (staged, a candidate) are settled; a3 holds a slot, a4 has no
    // BootcNode yet.
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept.used(), 0);
    let second = plan(&snap);
    assert_eq!(second, first);
    assert_eq!(kept.used(), 2);
    // a2's agent reports again: a new object, planned again.
    let object = BootcNode::clone(snap.nodes[1].bootc.as_ref().unwrap().object());
    snap.nodes[1].bootc = Some(BootcView::new(Arc::new(object), Some(POOL.to_owned())));
    let third = plan(&snap);
    assert_eq!(third, first);
    assert_eq!(kept.used(), 3, "only a1 used again");
    // A node before them leaves the pool: theirs are found by name.
    snap.nodes.insert(0, node("a0").updated().view());
    plan(&snap);
    assert_eq!(kept.used(), 5, "a1 and a2 used again");
    snap.nodes.remove(0);
    plan(&snap);
    assert_eq!(kept.used(), 7, "a1 and a2 used again");
    // A new target: nothing kept holds.
    snap.pool.spec.image.r#ref = pin('c');
    plan(&snap);
    assert_eq!(kept.used(), 7);
}

/// Whether the pool's selector matches a Node is found once per Node object and
/// selector: a plan finds it again for a Node replaced since the plan before, for every
/// Node when the selector changed, and for none otherwise, members joining and leaving
/// included.
#[test]
fn a_selector_is_matched_again_only_for_changed_nodes() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("a1").updated(), node("a2").staged(), node("a3")],
    );
    let kept = Settled::default();
    snap.settled = kept.clone();
    let first = plan(&snap);
    assert_eq!(kept.labels_used(), 0);
    assert_eq!(plan(&snap), first);
    assert_eq!(kept.labels_used(), 3);
    // a2's Node gets a label: a new object, matched again.
    let info = snap.nodes[1].node.as_mut().unwrap();
    info.labels_mut().insert("rack".to_owned(), "r2".to_owned());
    assert_eq!(plan(&snap), first);
    assert_eq!(kept.labels_used(), 5, "a1 and a3 taken again");
    // A node before them joins: the others' found by name.
    snap.nodes.insert(0, node("a0").updated().view());
    plan(&snap);
    assert_eq!(kept.labels_used(), 8);
    snap.nodes.remove(0);
    plan(&snap);
    assert_eq!(kept.labels_used(), 11);
    // Another selector: every Node matched again, and the answer is the new one's.
    snap.pool.spec.node_selector =
        serde_json::from_value(serde_json::json!({"matchLabels": {"role": "db"}})).unwrap();
    let none = plan(&snap);
    assert_eq!(kept.labels_used(), 11);
    assert!(none.states.is_empty(), "{:?}", none.states);
}

/// A booted report counts for the history while its node has a state. Two nodes trade
/// places, their objects as they were: another pool claims one, then the other. The
/// member is then another node, though as many nodes have a state. Each report counts
/// in the plan where its node is a member, as it does in a plan from scratch.
#[test]
fn reports_count_for_the_member_when_two_nodes_trade_places() {
    // a1 runs the target, a2 the image before it: their reports count apart.
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("a1").updated(), node("a2").staged()],
    );
    for (view, team) in snap.nodes.iter_mut().zip(["y", "x"]) {
        let info = view.node.as_mut().unwrap();
        info.labels_mut().insert("team".to_owned(), team.to_owned());
        // Not owned by the pool: a node another pool claims leaves it.
        view.bootc.as_mut().unwrap().owner = None;
    }
    let claim = |snap: &mut Snapshot, team: &str| {
        let selector = serde_json::json!({"matchLabels": {"team": team}});
        snap.pool_selectors = Arc::new(vec![
            (
                "other".to_owned(),
                serde_json::from_value(selector).unwrap(),
            ),
            (POOL.to_owned(), snap.pool.spec.node_selector.clone()),
        ]);
    };
    let kept = Settled::default();
    let mut with = snap.clone();
    with.settled = kept.clone();
    let names = |plan: &Plan| {
        plan.states
            .iter()
            .map(|(n, _)| n.to_owned())
            .collect::<Vec<_>>()
    };
    for (team, member) in [("y", "a2"), ("x", "a1"), ("y", "a2")] {
        claim(&mut snap, team);
        claim(&mut with, team);
        let planned = plan(&with);
        assert_eq!(
            names(&planned),
            [member],
            "the other pool claims team {team}"
        );
        let mut from_scratch = snap.clone();
        from_scratch.settled = Settled::default();
        assert_eq!(
            planned,
            plan(&from_scratch),
            "the other pool claims team {team}"
        );
        snap.pool.status = Some(planned.status.clone());
        with.pool.status = Some(planned.status);
    }
}
