use bootc_crds::conditions::to_time;
use bootc_crds::node::{BootedImage, ImageStatus, StagedImage};
use bootc_crds::pool::{BootcNodePool, DrainSpec};
use chrono::TimeZone;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::conditions;
use bootc_crds::node::{BootcNode, BootcNodeSpec, BootcNodeStatus, DesiredImageState};
use bootc_crds::pool::{BootcNodePoolSpec, BootcNodePoolStatus};
use bootc_crds::{
    APPROVED_AT_ANNOTATION, BACK_AT_ANNOTATION, DRAIN_FAILED_ANNOTATION, Digest, MANAGED_LABEL,
    REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION,
};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};

use super::*;

mod gates;

pub(super) use gates::history;

const POOL: &str = "workers";

pub(super) fn digest(c: char) -> Digest {
    format!("sha256:{}", c.to_string().repeat(64))
        .parse()
        .unwrap()
}

pub(super) fn pin(c: char) -> String {
    format!("quay.io/os/node@{}", digest(c))
}

pub(super) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
}

fn pool_spec(max_unavailable: IntOrString) -> BootcNodePoolSpec {
    let pool: BootcNodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": pin('b')},
            "rollout": {"maxUnavailable": max_unavailable},
        }
    }))
    .unwrap();
    pool.spec
}

fn labels(role: &str, managed: bool) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([("role".to_owned(), role.to_owned())]);
    if managed {
        l.insert(MANAGED_LABEL.to_owned(), String::new());
    }
    l
}

fn image(c: char) -> ImageStatus {
    ImageStatus {
        image: pin(c),
        image_digest: digest(c).to_string(),
        ..ImageStatus::default()
    }
}

fn agent_condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: to_time(now()).unwrap(),
    }
}

/// What an agent reports: booted on `booted`, optionally `staged` (locked), idle reason.
fn agent(
    booted: char,
    staged: Option<char>,
    reason: &str,
    degraded: Option<&str>,
) -> BootcNodeStatus {
    BootcNodeStatus {
        observed_generation: Some(1),
        booted: Some(BootedImage {
            image: image(booted),
            since: to_time(now() - chrono::Duration::hours(1)),
        }),
        staged: staged.map(|c| StagedImage {
            image: image(c),
            download_only: true,
        }),
        conditions: vec![
            agent_condition(
                conditions::IDLE,
                if reason == "Idle" { "True" } else { "False" },
                reason,
                "",
            ),
            match degraded {
                Some(m) => agent_condition(conditions::DEGRADED, "True", "Error", m),
                None => agent_condition(conditions::DEGRADED, "False", "Healthy", ""),
            },
        ],
        ..BootcNodeStatus::default()
    }
}

/// A test member's BootcNode, to change.
fn bootc_mut(bootc: &mut Option<BootcView>) -> &mut BootcNode {
    bootc
        .as_mut()
        .expect("the member has a BootcNode")
        .object_mut()
}

/// A test member's BootcNode status, to change.
fn status_mut(bootc: &mut Option<BootcView>) -> &mut BootcNodeStatus {
    bootc_mut(bootc)
        .status
        .as_mut()
        .expect("the BootcNode has a status")
}

struct N {
    name: &'static str,
    role: &'static str,
    ready: bool,
    unschedulable: bool,
    /// Carries the hold label.
    held: bool,
    /// When its Node turned Ready, by the kubelet's clock.
    ready_since: Option<DateTime<Utc>>,
    bootc: Option<BootcView>,
}

fn node(name: &'static str) -> N {
    N {
        name,
        role: "worker",
        ready: true,
        unschedulable: false,
        held: false,
        ready_since: None,
        bootc: None,
    }
}

impl N {
    fn with(mut self, desired: char, state: DesiredImageState, status: BootcNodeStatus) -> Self {
        self.bootc = Some(BootcView::of_parts(
            Some(POOL),
            Some(1),
            Some(format!("rv-{}", self.name)),
            BTreeMap::new(),
            BootcNodeSpec {
                desired_image_state: state,
                ..BootcNodeSpec::staged(pin(desired))
            },
            Some(status),
        ));
        self
    }

    fn staged(self) -> Self {
        self.with(
            'b',
            DesiredImageState::Staged,
            agent('a', Some('b'), "Staged", None),
        )
    }

    /// Staging the target.
    fn staging(self) -> Self {
        self.moving_to_b(DesiredImageState::Staged, agent('a', None, "Staging", None))
    }

    /// Approved for its reboot into the target, not yet rebooting.
    fn approved(self) -> Self {
        self.moving_to_b(
            DesiredImageState::Booted,
            agent('a', Some('b'), "Staged", None),
        )
    }

    /// In the reboot it was approved for.
    fn rebooting(self) -> Self {
        self.moving_to_b(
            DesiredImageState::Booted,
            agent('a', Some('b'), "Rebooting", None),
        )
    }

    /// Back on the target after its reboot, the approval not yet taken back.
    fn back(self) -> Self {
        self.moving_to_b(DesiredImageState::Booted, agent('b', None, "Idle", None))
    }

    /// Done: on the target, its desired state back to staged.
    fn updated(self) -> Self {
        self.moving_to_b(DesiredImageState::Staged, agent('b', None, "Idle", None))
    }

    /// Told to move to the target `b`, in `state`, reporting `status`.
    fn moving_to_b(self, state: DesiredImageState, status: BootcNodeStatus) -> Self {
        self.with('b', state, status)
    }

    fn annotate(mut self, key: &str, value: &str) -> Self {
        bootc_mut(&mut self.bootc)
            .annotations_mut()
            .insert(key.into(), value.into());
        self
    }

    fn slot(self) -> Self {
        self.annotate(REBOOT_SLOT_ANNOTATION, "2026-11-22T11:50:00Z")
    }

    fn cordoned(mut self) -> Self {
        self.unschedulable = true;
        self
    }

    fn view(&self) -> NodeView {
        let mut labels = labels(self.role, self.bootc.is_some());
        if self.held {
            labels.insert(bootc_crds::HOLD_LABEL.to_owned(), "true".to_owned());
        }
        let mut info = NodeInfo {
            ready: self.ready,
            unschedulable: self.unschedulable,
            boot_id: None,
            ready_since: self.ready_since,
            heartbeat: None,
            ..NodeInfo::with_labels(labels)
        };
        // Named as the cluster names it.
        Arc::make_mut(&mut info.node).metadata.name = Some(self.name.to_owned());
        NodeView {
            name: self.name.into(),
            node: Some(info),
            bootc: self.bootc.clone(),
        }
    }
}

fn snapshot(spec: BootcNodePoolSpec, nodes: &[N]) -> Snapshot {
    Snapshot::of(
        PoolView {
            name: POOL.into(),
            generation: Some(1),
            spec,
            status: None,
            deleting: false,
            finalized: true,
        },
        nodes.iter().map(N::view).collect(),
        now(),
    )
}

fn granted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Update {
                node, annotations, ..
            } if annotations
                .get(REBOOT_SLOT_ANNOTATION)
                .is_some_and(Option::is_some) =>
            {
                Some(node.clone())
            }
            _ => None,
        })
        .collect()
}

fn condition_of<'a>(plan: &'a Plan, type_: &str) -> &'a Condition {
    plan.status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
}

fn event_reasons(plan: &Plan) -> Vec<&'static str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.reason),
            _ => None,
        })
        .collect()
}

/// The spec of the BootcNode the plan creates or updates for `name` (its first such
/// write).
fn written<'a>(plan: &'a Plan, name: &str) -> &'a BootcNodeSpec {
    plan.actions
        .iter()
        .find_map(|a| match a {
            Action::Create { node, spec } | Action::Update { node, spec, .. } if node == name => {
                Some(spec)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no write of {name}: {:?}", plan.actions))
}

fn actions_for<'a>(plan: &'a Plan, name: &str) -> Vec<&'a Action> {
    plan.actions
        .iter()
        .filter(|a| a.node() == Some(name))
        .collect()
}

#[test]
fn new_members_get_a_bootc_node_and_the_label() {
    let mut other = node("db-1");
    other.role = "db";
    let snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1"), node("n2"), other],
    );
    let plan = super::plan(&snap);
    let created: Vec<_> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { node, spec } => Some((node.as_str(), spec.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 2);
    assert_eq!(created[0].0, "n1");
    assert_eq!(created[0].1.desired_image, pin('b'));
    assert_eq!(created[0].1.desired_image_state, DesiredImageState::Staged);
    assert!(plan.actions.contains(&Action::Label { node: "n1".into() }));
    assert!(actions_for(&plan, "db-1").is_empty());
    assert_eq!(plan.status.node_count, 2);
    assert_eq!(plan.status.target_image.as_deref(), Some(pin('b').as_str()));
    assert_eq!(condition_of(&plan, "UpToDate").reason, "RolloutInProgress");
    assert_eq!(
        condition_of(&plan, "UpToDate").message,
        "0/2 updated; 2 pending"
    );
    assert_eq!(
        event_reasons(&plan),
        vec![events::TARGET_RESOLVED, events::ROLLOUT_STARTED]
    );
}

#[test]
fn slots_go_to_staged_healthy_nodes_in_name_order_up_to_the_budget() {
    let nodes = [
        node("n5").staged(),
        node("n2").staged(),
        node("n4").staged(),
        node("n1").staged(),
        node("n3").staged(),
    ];
    for (budget, want) in [
        (IntOrString::Int(2), vec!["n1", "n2"]),
        (IntOrString::String("40%".into()), vec!["n1", "n2"]),
        (IntOrString::String("10%".into()), vec!["n1"]),
        (IntOrString::Int(7), vec!["n1", "n2", "n3", "n4", "n5"]),
    ] {
        let plan = super::plan(&snapshot(pool_spec(budget.clone()), &nodes));
        assert_eq!(granted(&plan), want, "{budget:?}");
        // Each grant: slot first, then cordon, then drain.
        let n1 = actions_for(&plan, "n1");
        assert!(matches!(n1[0], Action::Update { .. }), "{n1:?}");
        assert_eq!(n1[1], &Action::Cordon { node: "n1".into() });
        assert_eq!(n1[2], &Action::StartDrain { node: "n1".into() });
    }
}

#[test]
fn a_full_budget_names_five_holders_and_the_not_ready_members_that_count() {
    // Seven slot holders and two NotReady members without a slot fill a budget of nine
    // while a staged node waits; a NotReady holder is named once, as a holder.
    let names = ["n01", "n02", "n03", "n04", "n05", "n06", "n07"];
    let mut nodes: Vec<N> = names.iter().map(|n| node(n).rebooting().slot()).collect();
    nodes[6].ready = false;
    for n in ["n08", "n09"] {
        nodes.push(N {
            ready: false,
            ..node(n).updated()
        });
    }
    nodes.push(node("n10").staged());
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(9)), &nodes));
    assert!(granted(&plan).is_empty(), "{:?}", plan.actions);
    let verdict = plan
        .status
        .gates
        .iter()
        .find(|g| g.reason == GateReason::BudgetFull)
        .unwrap_or_else(|| panic!("no budget verdict: {:?}", plan.status.gates));
    assert_eq!(
        verdict.message,
        "reboot budget full: 9/9 slots in use (maxUnavailable 9): \
         held by n01; n02; n03; n04; n05; and 2 more; \
         NotReady nodes count too: n08; n09"
    );
}

#[test]
fn the_grant_records_an_admin_cordon_and_does_not_cordon_again() {
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.disruption.respect_cordon = false;
    let snap = snapshot(spec, &[node("n1").staged().cordoned()]);
    let plan = super::plan(&snap);
    let n1 = actions_for(&plan, "n1");
    let Action::Update { annotations, .. } = n1[0] else {
        panic!("{n1:?}")
    };
    assert!(annotations.contains_key(WAS_CORDONED_ANNOTATION));
    assert!(!n1.contains(&&Action::Cordon { node: "n1".into() }));
}

#[test]
fn holders_and_not_ready_nodes_use_the_budget() {
    let mut down = node("n0").staged();
    down.ready = false;
    let nodes = [
        down,
        node("n1").staged().slot().cordoned(),
        node("n2").staged(),
        node("n3").staged(),
    ];
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(3)), &nodes));
    assert_eq!(
        granted(&plan),
        vec!["n2"],
        "3 - holder - NotReady = 1 free slot"
    );
}

#[test]
fn a_drained_holder_is_approved_once() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").staged().slot().cordoned()],
    );
    snap.drains
        .insert("n1".into(), DrainView::Running { blocked: None });
    let waiting = super::plan(&snap);
    assert!(
        actions_for(&waiting, "n1").is_empty(),
        "{:?}",
        waiting.actions
    );
    snap.drains.insert("n1".into(), DrainView::Drained);
    let plan = super::plan(&snap);
    let n1 = actions_for(&plan, "n1");
    let Action::Update {
        spec,
        annotations,
        resource_version,
        ..
    } = n1[0]
    else {
        panic!("{n1:?}")
    };
    assert_eq!(spec.desired_image_state, DesiredImageState::Booted);
    assert_eq!(resource_version.as_deref(), Some("rv-n1"));
    assert!(annotations.contains_key(APPROVED_AT_ANNOTATION));
    assert_eq!(n1[1], &Action::ForgetDrain { node: "n1".into() });
    assert!(event_reasons(&plan).contains(&events::REBOOT_APPROVED));
    assert_eq!(plan.status.updating_count, 1);
}

#[test]
fn a_holder_not_yet_cordoned_is_cordoned_and_drained_before_anything_else() {
    let plan = super::plan(&snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").staged().slot()],
    ));
    assert_eq!(
        actions_for(&plan, "n1"),
        vec![
            &Action::Cordon { node: "n1".into() },
            &Action::StartDrain { node: "n1".into() }
        ]
    );
}

#[test]
fn a_node_back_on_target_is_uncordoned_then_released() {
    let back = node("n1")
        .back()
        .slot()
        .annotate(APPROVED_AT_ANNOTATION, "2026-11-22T11:55:00Z")
        .cordoned();
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[back]));
    let n1 = actions_for(&plan, "n1");
    assert_eq!(n1[0], &Action::Uncordon { node: "n1".into() });
    let Action::Update {
        spec, annotations, ..
    } = n1[1]
    else {
        panic!("{n1:?}")
    };
    assert_eq!(spec.desired_image_state, DesiredImageState::Staged);
    for key in [
        REBOOT_SLOT_ANNOTATION,
        WAS_CORDONED_ANNOTATION,
        APPROVED_AT_ANNOTATION,
    ] {
        assert_eq!(annotations.get(key), Some(&None), "{key}");
    }
    assert!(event_reasons(&plan).contains(&events::NODE_UPDATED));
    assert_eq!(plan.status.updated_count, 1);
    assert_eq!(condition_of(&plan, "UpToDate").reason, "AllUpdated");
}

#[test]
fn an_admin_cordon_survives_the_update() {
    let back = node("n1")
        .back()
        .slot()
        .annotate(WAS_CORDONED_ANNOTATION, "")
        .cordoned();
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[back]));
    let n1 = actions_for(&plan, "n1");
    assert!(
        !n1.contains(&&Action::Uncordon { node: "n1".into() }),
        "{n1:?}"
    );
    assert!(matches!(n1[0], Action::Update { .. }));
}

#[test]
fn the_soak_time_holds_the_slot() {
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.rollout.post_reboot_delay_seconds = 7200;
    let back = node("n1")
        .back()
        .slot()
        .annotate(BACK_AT_ANNOTATION, "2026-11-22T11:00:00Z")
        .cordoned();
    let plan = super::plan(&snapshot(spec, &[back, node("n2").staged()]));
    assert!(actions_for(&plan, "n1").is_empty());
    assert!(granted(&plan).is_empty());
    // Seen back an hour ago, two hours of soak: back in an hour (and the second the
    // API's whole-second times may have cut off).
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(3601)));
}

#[test]
fn the_soak_runs_on_the_controllers_clock() {
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.rollout.post_reboot_delay_seconds = 600;
    // The node's clock says it booted the target and turned Ready a day ago; the
    // controller has not seen it back before this plan.
    let back = |ready_since| {
        let mut status = agent('b', None, "Idle", None);
        status.booted.as_mut().unwrap().since = to_time(now() - chrono::Duration::days(1));
        let mut n = node("n1")
            .with('b', DesiredImageState::Booted, status)
            .slot()
            .cordoned();
        n.ready_since = Some(ready_since);
        n
    };
    let day_ago = now() - chrono::Duration::days(1);
    let plan = super::plan(&snapshot(
        spec.clone(),
        &[back(day_ago), node("n2").staged()],
    ));
    assert!(granted(&plan).is_empty());
    let [Action::Update { annotations, .. }] = actions_for(&plan, "n1")[..] else {
        panic!("{:?}", actions_for(&plan, "n1"));
    };
    assert_eq!(
        annotations.get(BACK_AT_ANNOTATION),
        Some(&Some("2026-11-22T12:00:00Z".to_owned())),
        "the controller stamps the moment it saw the node back"
    );
    assert!(
        !annotations.contains_key(REBOOT_SLOT_ANNOTATION),
        "{annotations:?}"
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(600)));
    // Stamped five minutes ago: the node's old Ready does not end the soak, …
    let stamped =
        |ready_since| back(ready_since).annotate(BACK_AT_ANNOTATION, "2026-11-22T11:55:00Z");
    let plan = super::plan(&snapshot(
        spec.clone(),
        &[stamped(day_ago), node("n2").staged()],
    ));
    assert!(actions_for(&plan, "n1").is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(301)));
    // … a Ready since (by the kubelet's clock) a minute ago restarts it, …
    let minute_ago = now() - chrono::Duration::minutes(1);
    let plan = super::plan(&snapshot(
        spec.clone(),
        &[stamped(minute_ago), node("n2").staged()],
    ));
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(541)));
    // … and one from the kubelet's future counts as now: it waits longer, never shorter.
    let future = now() + chrono::Duration::days(1);
    let plan = super::plan(&snapshot(spec, &[stamped(future), node("n2").staged()]));
    assert!(actions_for(&plan, "n1").is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(600)));
}

#[test]
fn paused_pools_approve_in_flight_nodes_but_grant_no_new_slots() {
    let mut spec = pool_spec(IntOrString::Int(2));
    spec.rollout.paused = true;
    let mut snap = snapshot(
        spec,
        &[node("n1").staged().slot().cordoned(), node("n2").staged()],
    );
    snap.drains.insert("n1".into(), DrainView::Drained);
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    assert!(event_reasons(&plan).contains(&events::REBOOT_APPROVED));
    assert_eq!(condition_of(&plan, "UpToDate").reason, "Paused");
}

#[test]
fn unhealthy_holders_halt_the_rollout() {
    let approved = |name| node(name).rebooting().slot().cordoned();
    let mut not_ready = approved("n1");
    not_ready.ready = false;
    let degraded = node("n2")
        .with(
            'b',
            DesiredImageState::Booted,
            agent(
                'a',
                None,
                "Staging",
                Some("the host rebooted into a instead of b"),
            ),
        )
        .slot()
        .cordoned();
    let nodes = [not_ready, degraded, node("n3").staged()];
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(5)), &nodes));
    assert!(granted(&plan).is_empty());
    let d = condition_of(&plan, "Degraded");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("True", "RolloutHalted")
    );
    assert!(d.message.contains("n1: NotReady"), "{}", d.message);
    assert!(d.message.contains("n2: Error"), "{}", d.message);
    assert!(event_reasons(&plan).contains(&events::ROLLOUT_HALTED));

    // One heals: below the threshold, approvals resume.
    let mut healed = approved("n1");
    healed.ready = true;
    let nodes = [
        healed,
        node("n2")
            .with(
                'b',
                DesiredImageState::Booted,
                agent('a', None, "Staging", Some("x")),
            )
            .slot()
            .cordoned(),
        node("n3").staged(),
    ];
    let plan2 = super::plan(&snapshot(pool_spec(IntOrString::Int(5)), &nodes));
    assert_eq!(granted(&plan2), vec!["n3"]);
    assert_eq!(condition_of(&plan2, "Degraded").reason, "NodeDegraded");
}

/// Seven holders unhealthy: the halt's message names the first five, each with why, and
/// counts the rest.
#[test]
fn a_halt_lists_five_unhealthy_holders_and_counts_the_rest() {
    let mut spec = pool_spec(IntOrString::Int(10));
    spec.rollout.halt_after_unhealthy = 3;
    let down = |name| {
        let mut n = node(name).rebooting().slot().cordoned();
        n.ready = false;
        n
    };
    let nodes: Vec<_> = ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]
        .into_iter()
        .map(down)
        .collect();
    let plan = super::plan(&snapshot(spec, &nodes));
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "RolloutHalted");
    let listed = "7 slot holders are unhealthy (haltAfterUnhealthy 3): node n1: NotReady; \
                  node n2: NotReady; node n3: NotReady; node n4: NotReady; node n5: NotReady; \
                  and 2 more;";
    assert!(d.message.contains(listed), "{}", d.message);
}

/// n1 approved to reboot two hours ago and still down, n2 staged; one unhealthy node
/// halts the pool.
fn reboot_two_hours_ago() -> Snapshot {
    let mut spec = pool_spec(IntOrString::Int(3));
    spec.rollout.halt_after_unhealthy = 1;
    let late = node("n1")
        .rebooting()
        .slot()
        .annotate(APPROVED_AT_ANNOTATION, "2026-11-22T10:00:00Z")
        .cordoned();
    snapshot(spec, &[late, node("n2").staged()])
}

#[test]
fn a_reboot_past_its_timeout_is_unhealthy() {
    let snap = reboot_two_hours_ago();
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    let why = format!(
        "node n1: RebootTimeout: not back Ready on the target within {}s of its approval",
        snap.pool.spec.rollout.reboot_timeout_seconds
    );
    assert!(
        condition_of(&plan, "Degraded").message.contains(&why),
        "{:?}",
        plan.status.conditions
    );
}

/// A view's time stamps are read once; when its object changes they are read again: an
/// approval moved to a minute ago is no longer past its timeout.
#[test]
fn an_approval_changed_in_its_view_is_read_again() {
    let mut snap = reboot_two_hours_ago();
    let timed_out = |plan: &Plan| {
        condition_of(plan, "Degraded")
            .message
            .contains("RebootTimeout")
    };
    assert!(timed_out(&super::plan(&snap)));
    assert_eq!(&*snap.nodes[0].name, "n1");
    bootc_mut(&mut snap.nodes[0].bootc)
        .annotations_mut()
        .insert(APPROVED_AT_ANNOTATION.into(), "2026-11-22T11:59:00Z".into());
    assert!(!timed_out(&super::plan(&snap)));
}

#[test]
fn a_drain_timeout_frees_the_slot_and_marks_the_node() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").staged().slot().cordoned(), node("n2").staged()],
    );
    snap.drains.insert(
        "n1".into(),
        DrainView::TimedOut {
            message: "pod default/web-0: Cannot evict pod as it would violate the pod's disruption budget".into(),
        },
    );
    let plan = super::plan(&snap);
    let n1 = actions_for(&plan, "n1");
    assert_eq!(n1[0], &Action::Uncordon { node: "n1".into() });
    let Action::Update { annotations, .. } = n1[1] else {
        panic!("{n1:?}")
    };
    assert_eq!(annotations.get(REBOOT_SLOT_ANNOTATION), Some(&None));
    assert_eq!(
        annotations.get(DRAIN_FAILED_ANNOTATION),
        Some(&Some(digest('b').to_string()))
    );
    assert_eq!(n1[2], &Action::ForgetDrain { node: "n1".into() });
    assert!(event_reasons(&plan).contains(&events::DRAIN_FAILED));
    assert_eq!(plan.states["n1"], NodeState::Degraded);
    // The freed slot is reused on the next plan, not this one.
    assert!(granted(&plan).is_empty());

    // Next plan: the node is not given a slot again for this digest; n2 is.
    let snap2 = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[
            node("n1")
                .staged()
                .annotate(DRAIN_FAILED_ANNOTATION, &digest('b').to_string()),
            node("n2").staged(),
        ],
    );
    let plan2 = super::plan(&snap2);
    assert_eq!(granted(&plan2), vec!["n2"]);
    let d = condition_of(&plan2, "Degraded");
    assert_eq!(d.reason, "NodeDegraded");
    assert!(d.message.contains("n1: DrainTimeout"), "{}", d.message);
    assert!(d.message.contains(DRAIN_FAILED_ANNOTATION), "{}", d.message);
}

#[test]
fn a_node_leaving_mid_drain_is_released_and_forgotten() {
    let mut leaving = node("n1").staged().slot().cordoned();
    leaving.role = "db";
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[leaving]);
    snap.drains
        .insert("n1".into(), DrainView::Running { blocked: None });
    let plan = super::plan(&snap);
    assert_eq!(
        actions_for(&plan, "n1"),
        vec![
            &Action::CancelDrain { node: "n1".into() },
            &Action::Uncordon { node: "n1".into() },
            &Action::Delete { node: "n1".into() },
            &Action::Unlabel { node: "n1".into() },
        ]
    );
    assert_eq!(plan.status.node_count, 0);
}

#[test]
fn a_node_selected_by_two_pools_is_left_alone_by_both() {
    let nodes = [node("n1"), node("n2").staged()];
    let mut snap = snapshot(pool_spec(IntOrString::Int(2)), &nodes);
    snap.pool_selectors = std::sync::Arc::new(vec![(
        "gpu".into(),
        LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "role".into(),
                    operator: "Exists".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        },
    )]);
    // n1 has no BootcNode yet: not created. n2 is ours: kept, but gets no slot.
    let plan = super::plan(&snap);
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Create { .. }))
    );
    assert!(granted(&plan).is_empty());
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "NodeConflict");
    assert!(d.message.contains("gpu and workers"), "{}", d.message);
    assert!(event_reasons(&plan).contains(&events::NODE_CONFLICT));

    // The other pool's BootcNode on a node we also select: skipped, named.
    let mut foreign = node("n3").staged();
    foreign.bootc.as_mut().unwrap().owner = Some("gpu".into());
    let snap = snapshot(
        pool_spec(IntOrString::Int(2)),
        &[foreign, node("n4").staged()],
    );
    let plan = super::plan(&snap);
    assert!(actions_for(&plan, "n3").is_empty());
    assert_eq!(
        granted(&plan),
        vec!["n4"],
        "the uncontested node still rolls"
    );
    assert_eq!(plan.status.node_count, 1);
}

#[test]
fn a_new_target_revokes_pending_approvals() {
    // Target moved back to 'a' (a rollback) while n1 was approved but had not rebooted,
    // n2 was mid-reboot, and n3 had been updated to 'b'.
    let mut spec = pool_spec(IntOrString::Int(2));
    spec.image.r#ref = pin('a');
    let approved = node("n1").approved().slot().cordoned();
    let rebooting = node("n2").rebooting().slot().cordoned();
    let updated = node("n3").updated();
    let mut snap = snapshot(spec, &[approved, rebooting, updated]);
    snap.pool.spec.image.r#ref = pin('a');
    let plan = super::plan(&snap);

    let n1 = actions_for(&plan, "n1");
    assert_eq!(n1[0], &Action::Uncordon { node: "n1".into() });
    let Action::Update {
        spec, annotations, ..
    } = n1[1]
    else {
        panic!("{n1:?}")
    };
    assert_eq!(spec.desired_image, pin('a'));
    assert_eq!(spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(annotations.get(REBOOT_SLOT_ANNOTATION), Some(&None));

    let n2 = actions_for(&plan, "n2");
    assert_eq!(n2.len(), 1, "{n2:?}");
    let Action::Update {
        spec, annotations, ..
    } = n2[0]
    else {
        panic!("{n2:?}")
    };
    assert_eq!(spec.desired_image, pin('a'));
    assert!(
        annotations.is_empty(),
        "the slot stays while the node reboots"
    );

    let n3 = actions_for(&plan, "n3");
    let Action::Update { spec, .. } = n3[0] else {
        panic!("{n3:?}")
    };
    assert_eq!(
        spec.desired_image,
        pin('a'),
        "updated nodes are brought back"
    );
}

#[test]
fn an_invalid_spec_does_nothing_and_lists_every_problem() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1"), node("n2").staged()],
    );
    // Two problems the spec check finds: a budget of 0 and a reference with a space.
    snap.pool.spec.rollout.max_unavailable = IntOrString::Int(0);
    snap.pool.spec.image.r#ref = "quay.io/os/node:bad tag".into();
    let plan = super::plan(&snap);
    assert!(
        plan.actions.iter().all(|a| matches!(a, Action::Event(_))),
        "{:?}",
        plan.actions
    );
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "InvalidSpec");
    assert!(d.message.contains("maxUnavailable") && d.message.contains("image.ref"));
}

#[test]
fn stale_agent_reports_neither_degrade_nor_qualify_a_node() {
    let mut n1 = node("n1").with(
        'b',
        DesiredImageState::Staged,
        agent('a', Some('b'), "Staged", Some("old error")),
    );
    bootc_mut(&mut n1.bootc).metadata.generation = Some(2);
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[n1]));
    assert!(granted(&plan).is_empty());
    assert_eq!(plan.states["n1"], NodeState::Staging);
    assert_eq!(condition_of(&plan, "Degraded").reason, "Healthy");
}

#[test]
fn manifest_list_pins_match_the_per_architecture_digest() {
    // The pool targets a manifest-list digest 'b'; the agent reports per-arch digest 'c'
    // with the list digest inside the tracked reference.
    let mut status = agent('a', None, "Idle", None);
    status.booted = Some(BootedImage {
        image: ImageStatus {
            image: pin('b'),
            image_digest: digest('c').to_string(),
            ..ImageStatus::default()
        },
        since: None,
    });
    let plan = super::plan(&snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").with('b', DesiredImageState::Staged, status)],
    ));
    assert_eq!(plan.states["n1"], NodeState::UpToDate);
}

#[test]
fn a_target_in_the_rollback_slot_counts_as_staged() {
    // Back to 'a' after an update to 'b': 'a' is the rollback deployment, nothing to pull.
    let mut status = agent('b', None, "Staged", None);
    status.rollback = Some(image('a'));
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").with('a', DesiredImageState::Staged, status)],
    );
    snap.pool.spec.image.r#ref = pin('a');
    let plan = super::plan(&snap);
    assert_eq!(granted(&plan), vec!["n1"], "{:?}", plan.states);
}

#[test]
fn the_pull_secret_hash_reaches_every_bootc_node_and_a_resolution_error_keeps_the_target() {
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.pull_secret_ref = Some(bootc_crds::pool::SecretRef {
        name: "pull".into(),
        namespace: "default".into(),
    });
    let mut snap = snapshot(spec, &[node("n1"), node("n2").staged()]);
    snap.pull_secret.hash = Some("sha256:abc".into());
    // The pool follows a tag that resolved to pin('b') before; the registry is down now.
    snap.pool.spec.image.r#ref = "quay.io/os/node:stable".into();
    snap.pool.status = Some(BootcNodePoolStatus {
        target_image: Some(pin('b')),
        target_digest: Some(digest('b').to_string()),
        last_resolved_time: to_time(now() - chrono::Duration::minutes(1)),
        ..BootcNodePoolStatus::default()
    });
    snap.lookup = Lookup::Failed {
        message: "registry quay.io: connection refused".into(),
        retry_after: Duration::from_secs(30),
    };
    let plan = super::plan(&snap);
    let spec = written(&plan, "n1");
    assert_eq!(spec.pull_secret_hash.as_deref(), Some("sha256:abc"));
    let n2 = actions_for(&plan, "n2");
    let updates: Vec<_> = n2
        .iter()
        .filter(|a| matches!(a, Action::Update { .. }))
        .collect();
    assert_eq!(updates.len(), 1, "one write per node: {n2:?}");
    // That one write is the grant's, after the barrier with the rest of n2's grant.
    let before = &plan.actions[..plan.grants_from];
    assert!(
        before.iter().all(|a| a.node() != Some("n2")),
        "{:?}",
        plan.actions
    );
    let Action::Update { spec, .. } = updates[0] else {
        panic!("{n2:?}")
    };
    assert_eq!(spec.pull_secret_hash.as_deref(), Some("sha256:abc"));
    // The last good target still rolls out; the problem is reported.
    assert_eq!(granted(&plan), vec!["n2"]);
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "TagResolutionError");
    assert!(d.message.contains("connection refused"));
}

/// A pool moved from a tag to a pinned digest has no tag to resolve: the times of the
/// last and next resolution leave its status. A tag not asked yet keeps them as they were.
#[test]
fn a_pinned_ref_clears_the_resolve_times_and_a_tag_not_asked_yet_keeps_them() {
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[node("n1").staged()]);
    let resolved = BootcNodePoolStatus {
        target_image: Some(pin('b')),
        target_digest: Some(digest('b').to_string()),
        last_resolved_time: to_time(now() - chrono::Duration::minutes(1)),
        next_resolve_time: to_time(now() + chrono::Duration::minutes(4)),
        ..BootcNodePoolStatus::default()
    };
    snap.pool.status = Some(resolved.clone());
    let pinned = super::plan(&snap).status;
    assert_eq!(
        (pinned.last_resolved_time, pinned.next_resolve_time),
        (None, None)
    );
    snap.pool.spec.image.r#ref = "quay.io/os/node:stable".into();
    snap.lookup = Lookup::NotAsked;
    let tag = super::plan(&snap).status;
    assert_eq!(
        (tag.last_resolved_time, tag.next_resolve_time),
        (resolved.last_resolved_time, resolved.next_resolve_time)
    );
}

/// A tag not asked yet has no target, and says which tag; a pinned ref and a tag
/// resolved have one.
#[test]
fn a_tag_not_asked_yet_has_no_target_and_names_its_tag() {
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[node("n1").staged()]);
    assert_eq!(
        super::target::decide(&snap).target,
        Ok(Target::from_ref(&pin('b')).unwrap())
    );
    snap.pool.spec.image.r#ref = "quay.io/os/node:stable".into();
    snap.lookup = Lookup::NotAsked;
    assert_eq!(
        super::target::decide(&snap).target,
        Err(TargetProblem::Resolution(
            "image.ref \"quay.io/os/node:stable\" is a tag that has not been resolved yet".into()
        ))
    );
    snap.lookup = Lookup::Resolved {
        target: Target::from_ref(&pin('c')).unwrap(),
        version: None,
        at: now(),
    };
    assert_eq!(
        super::target::decide(&snap).target,
        Ok(Target::from_ref(&pin('c')).unwrap())
    );
}

/// What the spec says of the target is kept between plans with the spec it was read
/// from: every change of the spec is read again, whatever was kept before it.
#[test]
fn the_spec_read_again_whenever_it_changes() {
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[node("n1").staged()]);
    let pinned = |c| Ok(Target::from_ref(&pin(c)).unwrap());
    assert_eq!(super::target::decide(&snap).target, pinned('b'));
    snap.pool.spec.image.r#ref = pin('c');
    assert_eq!(super::target::decide(&snap).target, pinned('c'));
    // A field the target does not come from: the spec is valid no more.
    snap.pool.spec.rollout.max_unavailable = IntOrString::Int(0);
    let invalid = super::target::decide(&snap).target;
    assert!(
        matches!(&invalid, Err(TargetProblem::InvalidSpec(p)) if p.len() == 1),
        "{invalid:?}"
    );
    snap.pool.spec.rollout.max_unavailable = IntOrString::Int(1);
    assert_eq!(super::target::decide(&snap).target, pinned('c'));
    snap.pool.spec.image.r#ref = pin('b');
    assert_eq!(super::target::decide(&snap).target, pinned('b'));
    assert_eq!(super::target::decide(&snap).target, pinned('b'));
}

#[test]
fn a_pull_secret_the_controller_may_not_read_degrades_the_pool_below_graver_reasons() {
    let not_allowed = "the pull Secret apps/pull is in a namespace the controller may not read";
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.pull_secret_ref = None;
    let mut snap = snapshot(spec.clone(), &[node("n1")]);
    snap.pull_secret.not_allowed = Some(not_allowed.into());
    let plan = super::plan(&snap);
    let d = condition_of(&plan, "Degraded");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("True", "PullSecretNotAllowed")
    );
    assert_eq!(d.message, not_allowed);
    // The members name no Secret: nothing of it reaches them.
    let created = written(&plan, "n1");
    assert_eq!(created.pull_secret_ref, None);
    assert_eq!(created.pull_secret_hash, None);

    // Over a tag that cannot be resolved (without its credentials).
    snap.pool.spec.image.r#ref = "quay.io/os/node:stable".into();
    snap.lookup = Lookup::Failed {
        message: "registry quay.io: 401 Unauthorized".into(),
        retry_after: Duration::from_secs(30),
    };
    let plan = super::plan(&snap);
    assert_eq!(
        condition_of(&plan, "Degraded").reason,
        "PullSecretNotAllowed"
    );
    // Planning again from its own status keeps the transition time.
    let first = condition_of(&plan, "Degraded").clone();
    snap.pool.status = Some(plan.status.clone());
    let again = super::plan(&snap);
    assert_eq!(condition_of(&again, "Degraded"), &first);

    // An invalid spec is graver.
    let mut snap = snapshot(spec, &[node("n1")]);
    snap.pull_secret.not_allowed = Some(not_allowed.into());
    snap.pool.spec.image.r#ref = "not a reference".into();
    let plan = super::plan(&snap);
    assert_eq!(condition_of(&plan, "Degraded").reason, "InvalidSpec");
}

#[test]
fn planning_again_from_its_own_status_changes_nothing() {
    let nodes = [
        node("n1").staged().slot().cordoned(),
        node("n2").updated(),
        node("n3").staged(),
    ];
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &nodes);
    snap.drains
        .insert("n1".into(), DrainView::Running { blocked: None });
    let first = super::plan(&snap);
    snap.pool.status = Some(first.status.clone());
    snap.now = now() + chrono::Duration::minutes(3);
    let second = super::plan(&snap);
    assert_eq!(first.status, second.status, "no status write");
    assert!(event_reasons(&second).is_empty(), "{:?}", second.actions);
    assert_eq!(
        condition_of(&second, "UpToDate").message,
        "1/3 updated; 1 staged, 1 rebooting"
    );
}

#[test]
fn every_node_state_is_counted() {
    let nodes = [
        node("pending"),
        node("staging").staging(),
        node("staged").staged(),
        node("rebooting").staged().slot().cordoned(),
        node("updated").updated(),
        node("degraded").with(
            'b',
            DesiredImageState::Staged,
            agent('a', None, "Staging", Some("pull failed")),
        ),
    ];
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.drain_timeout_for_tests();
    let mut snap = snapshot(spec, &nodes);
    snap.drains
        .insert("rebooting".into(), DrainView::Running { blocked: None });
    let plan = super::plan(&snap);
    let s = &plan.status;
    assert_eq!(
        (
            s.node_count,
            s.updated_count,
            s.updating_count,
            s.staged_count,
            s.degraded_count
        ),
        (6, 1, 1, 1, 1)
    );
    assert_eq!(plan.states["pending"], NodeState::Pending);
    assert_eq!(plan.states["staging"], NodeState::Staging);
    let d = condition_of(&plan, "Degraded");
    assert_eq!(d.reason, "NodeDegraded");
    assert!(
        d.message.contains("node degraded: Error: pull failed"),
        "{}",
        d.message
    );
}

trait ForTests {
    fn drain_timeout_for_tests(&mut self);
}

impl ForTests for BootcNodePoolSpec {
    fn drain_timeout_for_tests(&mut self) {
        self.rollout.drain_timeout_seconds = Some(60);
        self.disruption.drain = DrainSpec::default();
    }
}

#[test]
fn max_staging_holds_nodes_back_with_their_desired_image_unchanged() {
    // Target moves to 'c': six nodes booted on 'b' (desired 'b'), none has 'c'.
    // maxStaging 2: a node that would start pulling waits, its desiredImage unchanged.
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.rollout.max_staging = Some(IntOrString::Int(2));
    let on = |name, desired, booted, staged, idle| {
        node(name).with(
            desired,
            DesiredImageState::Staged,
            agent(booted, staged, idle, None),
        )
    };
    let idle_on_b = |name| on(name, 'b', 'b', None, "Idle");
    let pulling = |name| on(name, 'c', 'b', None, "Staging");
    let steps = [
        // Two are retargeted, the other four wait untouched.
        (
            vec![
                idle_on_b("n1"),
                idle_on_b("n2"),
                idle_on_b("n3"),
                idle_on_b("n4"),
                idle_on_b("n5"),
                idle_on_b("n6"),
            ],
            vec!["n1", "n2"],
        ),
        // Next plan: n1 and n2 are pulling (desired 'c', not staged yet): still no place.
        (
            vec![
                pulling("n1"),
                pulling("n2"),
                idle_on_b("n3"),
                idle_on_b("n4"),
                idle_on_b("n5"),
                idle_on_b("n6"),
            ],
            vec![],
        ),
        // n1 staged: one place frees, n3 goes.
        (
            vec![
                on("n1", 'c', 'b', Some('c'), "Staged"),
                pulling("n2"),
                idle_on_b("n3"),
                idle_on_b("n4"),
            ],
            vec!["n3"],
        ),
    ];
    for (step, (nodes, retargeted)) in steps.into_iter().enumerate() {
        let mut snap = snapshot(spec.clone(), &nodes);
        snap.pool.spec.image.r#ref = pin('c');
        let plan = super::plan(&snap);
        // Every write but a slot's grant is a retarget to 'c': nobody else is written.
        let updated: Vec<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Update {
                    node, annotations, ..
                } if !annotations.contains_key(REBOOT_SLOT_ANNOTATION) => Some(node.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(updated, retargeted, "step {step}: {:?}", plan.actions);
        for a in &plan.actions {
            if let Action::Update { spec, .. } = a {
                assert_eq!(spec.desired_image, pin('c'), "step {step}");
            }
        }
    }
}

/// A window from 15:00 to 16:00 UTC every day: closed at `now()` (12:00).
fn window_at_three() -> bootc_crds::pool::MaintenanceWindow {
    serde_json::from_value(serde_json::json!({
        "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
        "start": "15:00",
        "duration": "1h",
        "timeZone": "UTC",
    }))
    .unwrap()
}

#[test]
fn outside_a_window_no_slot_is_granted_and_the_opening_is_awaited() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(2)),
        &[node("n1").staged(), node("n2").staged()],
    );
    snap.pool.spec.rollout.maintenance_windows = vec![window_at_three()];
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(3 * 3600) + Duration::from_millis(10))
    );
    let up = condition_of(&plan, "UpToDate");
    assert_eq!(up.reason, "OutsideMaintenanceWindow");
    assert!(
        up.message.contains("2026-11-22T15:00:00Z"),
        "{}",
        up.message
    );
    // Approvals in flight still finish.
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(2)),
        &[node("n1").staged().slot().cordoned()],
    );
    snap.pool.spec.rollout.maintenance_windows = vec![window_at_three()];
    snap.drains.insert("n1".into(), DrainView::Drained);
    assert!(event_reasons(&super::plan(&snap)).contains(&events::REBOOT_APPROVED));
}

#[test]
fn grants_spread_across_zones() {
    let zoned = |name: &'static str, zone: &str| {
        let n = node(name).staged();
        let mut view = n.view();
        view.node
            .as_mut()
            .unwrap()
            .labels_mut()
            .insert(ZONE_LABEL.into(), zone.into());
        view
    };
    let views = [
        zoned("a1", "z1"),
        zoned("a2", "z1"),
        zoned("a3", "z1"),
        zoned("b1", "z2"),
        zoned("b2", "z2"),
        zoned("c1", "z3"),
    ];
    let refs: Vec<&NodeView> = views.iter().collect();
    let order: Vec<&str> = grant_order(refs.iter().copied(), usize::MAX)
        .iter()
        .map(|v| &*v.name)
        .collect();
    assert_eq!(order, vec!["a1", "b1", "c1", "a2", "b2", "a3"]);
}

#[test]
fn no_progress_for_ten_minutes_is_a_stall_and_progress_clears_it() {
    let nodes = [node("n1").staged(), node("n2").staging()];
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.rollout.paused = false;
    let mut snap = snapshot(spec, &nodes);
    // The members' states as the last plan left them, unchanged for 11 minutes.
    let unchanged = super::plan(&snap).progress;
    snap.progress = Some(Progress {
        since: now() - chrono::Duration::minutes(11),
        ..unchanged
    });
    let stalled = super::plan(&snap);
    let p = condition_of(&stalled, "Progressing");
    assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", "Stalled"));
    assert!(p.message.contains("11 minutes"), "{}", p.message);

    snap.progress = Some(Progress {
        since: now() - chrono::Duration::minutes(4),
        ..unchanged
    });
    let advancing = super::plan(&snap);
    let p = condition_of(&advancing, "Progressing");
    assert_eq!(
        (p.status.as_str(), p.reason.as_str()),
        ("True", "Advancing")
    );
    // Planned again when the stall would begin.
    assert!(
        advancing
            .requeue_after
            .is_some_and(|d| d <= Duration::from_secs(6 * 60 + 1)),
        "{:?}",
        advancing.requeue_after
    );
}

#[test]
fn the_update_event_says_whether_the_reboot_was_soft() {
    // The same boot however written: the Node's kubelet writes a UUID, the agent 32 hex
    // digits, and either may be in capitals.
    for (recorded, node_boot, want) in [
        ("0123", "0123", "after a soft reboot"),
        ("0123", "4567", "after a reboot"),
        ("0a1b", "0A-1B", "after a soft reboot"),
        ("0a1b", "0A-1C", "after a reboot"),
    ] {
        let mut snap = back_after_reboot(node_boot, Some(now()));
        let bootc = bootc_mut(&mut snap.nodes[0].bootc);
        bootc.spec.reboot_policy = bootc_crds::pool::RebootPolicy::AllowSoftReboot;
        let last = bootc.status.as_mut().and_then(|s| s.last_reboot.as_mut());
        last.unwrap().boot_id = recorded.into();
        let plan = super::plan(&snap);
        let message = plan
            .actions
            .iter()
            .find_map(|a| match a {
                Action::Event(e) if e.reason == events::NODE_UPDATED => Some(e.message.clone()),
                _ => None,
            })
            .unwrap();
        assert!(message.contains(want), "{message}");
    }
}

/// A holder back on the target, Ready as far as the Node says, after its agent recorded a
/// reboot for the target from boot `0123` at `now - 10s`.
fn back_after_reboot(node_boot: &str, heartbeat: Option<DateTime<Utc>>) -> Snapshot {
    let mut status = agent('b', None, "Idle", None);
    status.last_reboot = Some(bootc_crds::node::LastReboot {
        digest: digest('b').to_string(),
        boot_id: "0123".into(),
        soft_reboots: 0,
        time: to_time(now() - chrono::Duration::seconds(10)).unwrap(),
    });
    let back = node("n1")
        .with('b', DesiredImageState::Booted, status)
        .slot()
        .cordoned();
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[back]);
    let info = snap.nodes[0].node.as_mut().unwrap();
    info.boot_id = Some(node_boot.into());
    info.heartbeat = heartbeat;
    snap
}

fn released(plan: &Plan) -> bool {
    plan.actions.iter().any(|a| {
        matches!(a, Action::Update { annotations, .. }
            if annotations.get(REBOOT_SLOT_ANNOTATION) == Some(&None))
    })
}

#[test]
fn a_ready_left_over_from_before_the_reboot_does_not_free_the_slot() {
    // The Node still shows the boot ID and a heartbeat from before the reboot: the
    // kubelet has not reported since, so its Ready says nothing about this boot.
    let stale = super::plan(&back_after_reboot(
        "0123",
        Some(now() - chrono::Duration::seconds(30)),
    ));
    assert!(!released(&stale), "{:?}", stale.actions);
    assert_eq!(stale.states.get("n1"), Some(&NodeState::Rebooting));
    assert!(
        stale
            .requeue_after
            .is_some_and(|d| d <= Duration::from_secs(2)),
        "{:?}",
        stale.requeue_after
    );

    // A new boot ID is the kubelet of the new boot (without a heartbeat, or with one
    // since the reboot's record).
    for heartbeat in [None, Some(now() - chrono::Duration::seconds(5))] {
        let full = super::plan(&back_after_reboot("89ab", heartbeat));
        assert!(released(&full), "{heartbeat:?}: {:?}", full.actions);
    }
    // Another boot ID with a heartbeat older than the record is a boot before the
    // recorded one: the Node has not reported through two reboots.
    let older = super::plan(&back_after_reboot(
        "4567",
        Some(now() - chrono::Duration::seconds(30)),
    ));
    assert!(!released(&older), "{:?}", older.actions);
    // With soft reboots allowed: the same boot ID (a soft reboot) with a heartbeat since
    // the reboot; the Node's boot ID may carry dashes.
    let soft_allowed = |node_boot: &str, heartbeat| {
        let mut snap = back_after_reboot(node_boot, Some(heartbeat));
        bootc_mut(&mut snap.nodes[0].bootc).spec.reboot_policy =
            bootc_crds::pool::RebootPolicy::AllowSoftReboot;
        super::plan(&snap)
    };
    let soft = soft_allowed("0-1-2-3", now());
    assert!(released(&soft), "{:?}", soft.actions);
    // A heartbeat in the very second of the reboot counts (both at second precision).
    let same_second = soft_allowed("0123", now() - chrono::Duration::seconds(10));
    assert!(released(&same_second), "{:?}", same_second.actions);
    // Full reboots only: the boot ID unchanged is the old boot whatever the heartbeat
    // says (a heartbeat from before the reboot, in its very second, looked like one
    // after it).
    for heartbeat in [now(), now() - chrono::Duration::seconds(10)] {
        let full_only = super::plan(&back_after_reboot("0123", Some(heartbeat)));
        assert!(
            !released(&full_only),
            "{heartbeat:?}: {:?}",
            full_only.actions
        );
    }
    // A Node without a boot ID: the heartbeat is all there is.
    let no_boot_id = super::plan(&back_after_reboot("", Some(now())));
    assert!(released(&no_boot_id), "{:?}", no_boot_id.actions);
}

#[test]
fn without_a_reboot_record_for_the_target_the_node_is_judged_as_before() {
    // A record for another digest (an earlier rollout) asks nothing of the kubelet.
    let mut snap = back_after_reboot("0123", Some(now() - chrono::Duration::hours(2)));
    status_mut(&mut snap.nodes[0].bootc)
        .last_reboot
        .as_mut()
        .unwrap()
        .digest = digest('a').to_string();
    assert!(released(&super::plan(&snap)));
    // Nor does a Node without boot ID or heartbeat (nothing to judge by).
    let mut snap = back_after_reboot("", None);
    snap.nodes[0].node.as_mut().unwrap().boot_id = None;
    assert!(released(&super::plan(&snap)));
}

#[test]
fn a_kubelet_silent_since_the_reboot_runs_into_the_reboot_timeout() {
    let mut snap = back_after_reboot("0123", Some(now() - chrono::Duration::minutes(30)));
    snap.pool.spec.rollout.reboot_timeout_seconds = 60;
    let annotations = &mut bootc_mut(&mut snap.nodes[0].bootc).annotations_mut();
    annotations.insert(APPROVED_AT_ANNOTATION.into(), "2026-11-22T11:00:00Z".into());
    let plan = super::plan(&snap);
    assert!(!released(&plan));
    let degraded = condition_of(&plan, "Degraded");
    assert!(
        degraded.message.contains("RebootTimeout"),
        "{}",
        degraded.message
    );
}

mod admin_hold;
mod batches;
mod blocking_pods;
mod fail_closed;
mod mid_reboot;
mod settled;

fn deleting(snap: &mut Snapshot) {
    snap.pool.deleting = true;
}

#[test]
fn a_new_pool_gets_the_finalizer_first() {
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[node("n1")]);
    snap.pool.finalized = false;
    let plan = super::plan(&snap);
    assert_eq!(plan.actions.first(), Some(&Action::AddFinalizer));
    snap.pool.finalized = true;
    assert!(!super::plan(&snap).actions.contains(&Action::AddFinalizer));
}

#[test]
fn deleting_a_pool_lets_every_node_go_before_the_finalizer() {
    // n1 holds a slot and was cordoned by the pool; n2 was cordoned by an admin before
    // its slot; n3 is staged and waits.
    let n1 = node("n1").staged().slot().cordoned();
    let n2 = node("n2")
        .staged()
        .slot()
        .annotate(WAS_CORDONED_ANNOTATION, "")
        .cordoned();
    let n3 = node("n3").staged();
    let mut snap = snapshot(pool_spec(IntOrString::Int(2)), &[n1, n2, n3]);
    snap.drains
        .insert("n1".into(), DrainView::Running { blocked: None });
    deleting(&mut snap);
    let plan = super::plan(&snap);
    assert!(actions_for(&plan, "n1").contains(&&Action::CancelDrain { node: "n1".into() }));
    assert!(actions_for(&plan, "n1").contains(&&Action::Uncordon { node: "n1".into() }));
    assert!(
        !actions_for(&plan, "n2").contains(&&Action::Uncordon { node: "n2".into() }),
        "an admin's cordon stays"
    );
    for n in ["n1", "n2", "n3"] {
        let acts = actions_for(&plan, n);
        assert!(
            acts.contains(&&Action::Delete { node: n.into() }),
            "{n}: {acts:?}"
        );
        assert!(
            acts.contains(&&Action::Unlabel { node: n.into() }),
            "{n}: {acts:?}"
        );
        assert!(
            !acts
                .iter()
                .any(|a| matches!(a, Action::Update { .. } | Action::Cordon { .. })),
            "{n}: nothing new is asked of a node: {acts:?}"
        );
    }
    assert!(!plan.actions.contains(&Action::RemoveFinalizer), "not yet");

    // Once the BootcNodes are gone and the labels off, the finalizer comes off.
    let mut snap = snapshot(pool_spec(IntOrString::Int(2)), &[node("n1"), node("n2")]);
    for view in &mut snap.nodes {
        view.node
            .as_mut()
            .unwrap()
            .labels_mut()
            .remove(MANAGED_LABEL);
    }
    deleting(&mut snap);
    assert_eq!(super::plan(&snap).actions, vec![Action::RemoveFinalizer]);
}

#[test]
fn a_node_another_pool_selects_keeps_its_label_when_this_pool_goes() {
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[node("n1").staged()]);
    std::sync::Arc::make_mut(&mut snap.pool_selectors).push((
        "other".into(),
        serde_json::from_value(serde_json::json!({"matchLabels": {"role": "worker"}})).unwrap(),
    ));
    deleting(&mut snap);
    let acts = super::plan(&snap).actions;
    assert!(acts.contains(&Action::Delete { node: "n1".into() }));
    assert!(!acts.contains(&Action::Unlabel { node: "n1".into() }));
}

#[test]
fn a_blocked_drain_is_named_in_the_bootc_node_and_announced_once() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").staged().slot().cordoned()],
    );
    let why = "evicting default/web-0: Cannot evict pod as it would violate the pod's disruption budget web";
    snap.drains.insert(
        "n1".into(),
        DrainView::Running {
            blocked: Some(why.into()),
        },
    );
    let plan = super::plan(&snap);
    let up = condition_of(&plan, "UpToDate");
    assert!(
        up.message.contains("node n1: drain blocked") && up.message.contains("web-0"),
        "{}",
        up.message
    );
    let acts = actions_for(&plan, "n1");
    let Some(Action::SetDrainBlocked {
        blocked: Some(written),
        ..
    }) = acts
        .iter()
        .find(|a| matches!(a, Action::SetDrainBlocked { .. }))
    else {
        panic!("no drainBlocked written: {acts:?}");
    };
    assert_eq!(written.message, why);
    let blocked: Vec<_> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) if e.reason == events::DRAIN_BLOCKED => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].node.as_deref(), Some("n1"));
    assert!(blocked[0].message.contains("disruption budget web"));
    // The event comes after the write it reports.
    let write_at = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::SetDrainBlocked { .. }));
    let event_at = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::Event(e) if e.reason == events::DRAIN_BLOCKED));
    assert!(write_at < event_at);

    // Already written: neither a second write nor a second event while it stays so.
    let written = written.clone();
    let bootc = snap.nodes[0].bootc.as_mut().unwrap();
    bootc
        .object_mut()
        .status
        .get_or_insert_with(Default::default)
        .drain_blocked = Some(written);
    let again = super::plan(&snap);
    assert!(!event_reasons(&again).contains(&events::DRAIN_BLOCKED));
    assert!(
        !again
            .actions
            .iter()
            .any(|a| matches!(a, Action::SetDrainBlocked { .. }))
    );
    assert!(condition_of(&again, "UpToDate").message.contains("web-0"));

    // The budget gives way: the drain moves again and the note is cleared.
    snap.drains
        .insert("n1".into(), DrainView::Running { blocked: None });
    let moving = super::plan(&snap);
    assert!(moving.actions.contains(&Action::SetDrainBlocked {
        node: "n1".into(),
        blocked: None
    }));
    assert!(
        !condition_of(&moving, "UpToDate")
            .message
            .contains("blocked")
    );
}

#[test]
fn the_new_slots_come_after_everything_that_frees_one() {
    // n1 is back on the target and gives its slot up; with a budget of one, n2 gets it in
    // the same plan, after the barrier.
    let back = node("n1")
        .back()
        .slot()
        .annotate(APPROVED_AT_ANNOTATION, "2026-11-22T11:55:00Z")
        .cordoned();
    let nodes = [back, node("n2").staged(), node("n3").staged()];
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &nodes));
    assert_eq!(plan.releases, 1);
    let (before, grants) = plan.actions.split_at(plan.grants_from);
    assert!(released(&Plan {
        actions: before.to_vec(),
        ..plan.clone()
    }));
    assert!(
        before.contains(&Action::Uncordon { node: "n1".into() }),
        "{before:?}"
    );
    // Nothing before the barrier hands out a slot; the grant, its cordon and drain are
    // all after it.
    let before_plan = Plan {
        actions: before.to_vec(),
        ..plan.clone()
    };
    assert!(granted(&before_plan).is_empty(), "{before:?}");
    assert_eq!(granted(&plan), vec!["n2"]);
    assert!(grants.contains(&Action::Cordon { node: "n2".into() }));
    assert!(grants.contains(&Action::StartDrain { node: "n2".into() }));
    // No grant: nothing but the pool's events after the barrier.
    let idle = super::plan(&snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n1").updated()],
    ));
    let after = &idle.actions[idle.grants_from..];
    assert!(
        after
            .iter()
            .all(|a| matches!(a, Action::Event(e) if e.node.is_none())),
        "{after:?}"
    );
}

/// An approved holder whose agent recorded its reboot for the target from boot `0123`
/// `ago` seconds ago, approved as long ago, and reports the target booted when `back`;
/// the Node NotReady.
fn rebooting(name: &'static str, ago: i64, back: bool) -> N {
    let mut status = if back {
        agent('b', None, "Rebooting", None)
    } else {
        agent('a', Some('b'), "Rebooting", None)
    };
    let at = now() - chrono::Duration::seconds(ago);
    status.last_reboot = Some(bootc_crds::node::LastReboot {
        digest: digest('b').to_string(),
        boot_id: "0123".into(),
        soft_reboots: 0,
        time: to_time(at).unwrap(),
    });
    let mut n = node(name)
        .with('b', DesiredImageState::Booted, status)
        .slot()
        .annotate(
            APPROVED_AT_ANNOTATION,
            &at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
        .cordoned();
    n.ready = false;
    n
}

/// The pool's plan with `nodes`, the Nodes of the first two showing boot ID `boot`.
fn plan_with_boot(nodes: &[N], boot: &str) -> Plan {
    let mut snap = snapshot(pool_spec(IntOrString::Int(2)), nodes);
    for n in snap.nodes.iter_mut().take(2) {
        n.node.as_mut().unwrap().boot_id = Some(boot.into());
    }
    super::plan(&snap)
}

#[test]
fn holders_down_in_their_own_reboot_do_not_halt_the_rollout() {
    let halted = |plan: &Plan| condition_of(plan, "Degraded").reason == "RolloutHalted";
    // Two holders (haltAfterUnhealthy 2) down in the reboots they were approved for: the
    // Node still shows the boot the agent recorded before rebooting.
    let nodes = [
        rebooting("n1", 20, false),
        rebooting("n2", 20, false),
        node("n3").staged(),
    ];
    let plan = plan_with_boot(&nodes, "0123");
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    assert!(granted(&plan).is_empty(), "the budget is full");
    // Their kubelets report NotReady from the new boot while the agents do not yet
    // report the target: still the update.
    let plan = plan_with_boot(&nodes, "4567");
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));

    // Both run the target (seen `booted_ago` s ago), their kubelets report from the new
    // boot, NotReady since before that or shortly after: a kubelet starting, still the
    // update.
    let back_down_since = |booted_ago: i64, down_ago: i64| {
        let mut snap = snapshot(
            pool_spec(IntOrString::Int(2)),
            &[
                rebooting("n1", 20, true),
                rebooting("n2", 20, true),
                node("n3").staged(),
            ],
        );
        for n in snap.nodes.iter_mut().take(2) {
            let info = n.node.as_mut().unwrap();
            info.boot_id = Some("4567".into());
            info.ready_since = Some(now() - chrono::Duration::seconds(down_ago));
            let status = status_mut(&mut n.bootc);
            status.booted.as_mut().unwrap().since =
                to_time(now() - chrono::Duration::seconds(booted_ago));
        }
        super::plan(&snap)
    };
    let plan = back_down_since(10, 15);
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    let plan = back_down_since(10, 5);
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    let plan = back_down_since(100, 41);
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    // NotReady again a minute after they were back: that is unhealthy, and it halts.
    let plan = back_down_since(100, 39);
    assert!(halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    let message = &condition_of(&plan, "Degraded").message;
    assert!(
        message.contains("n1: NotReady") && message.contains("n2: NotReady"),
        "{message}"
    );

    // Still down past rebootTimeoutSeconds (default 1800 s): that halts too.
    let late = [
        rebooting("n1", 4000, false),
        rebooting("n2", 4000, false),
        node("n3").staged(),
    ];
    let plan = plan_with_boot(&late, "0123");
    assert!(halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    assert!(
        condition_of(&plan, "Degraded")
            .message
            .contains("RebootTimeout")
    );
}

#[test]
fn a_notready_before_the_reboot_record_is_seen_is_waited_for_briefly() {
    let halted = |plan: &Plan| condition_of(plan, "Degraded").reason == "RolloutHalted";
    // n1 approved `approved_ago` s ago, its Node NotReady since `down_ago` s ago, its
    // agent not yet seen to record the reboot (the BootcNode's watch behind the Node's).
    let plan_down = |approved_ago: i64, down_ago: i64| {
        let approved_at = now() - chrono::Duration::seconds(approved_ago);
        let mut n1 = node("n1")
            .rebooting()
            .slot()
            .annotate(
                APPROVED_AT_ANNOTATION,
                &approved_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            )
            .cordoned();
        n1.ready = false;
        n1.ready_since = Some(now() - chrono::Duration::seconds(down_ago));
        let mut spec = pool_spec(IntOrString::Int(2));
        spec.rollout.halt_after_unhealthy = 1;
        super::plan(&snapshot(spec, &[n1, node("n2").staged()]))
    };
    // Down since after the approval, 5 s ago: the reboot. Looked at again when the
    // grace ends, 25 s from now.
    let plan = plan_down(20, 5);
    assert!(!halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    assert!(
        plan.requeue_after
            .is_some_and(|d| d <= Duration::from_secs(25)),
        "{:?}",
        plan.requeue_after
    );
    // Past the grace with still no record: unhealthy.
    let plan = plan_down(60, 31);
    assert!(halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    let message = &condition_of(&plan, "Degraded").message;
    assert!(message.contains("n1: NotReady"), "{message}");
    // Down since before the approval: not the reboot, unhealthy at once.
    let plan = plan_down(20, 25);
    assert!(halted(&plan), "{:?}", condition_of(&plan, "Degraded"));
    // The bounds, in the whole seconds both times are kept in: down in the second of
    // the approval is the reboot's, a second before it is not; the grace ends 30 s
    // after the NotReady, and at that moment it has ended.
    assert!(!halted(&plan_down(20, 20)), "down in the approval's second");
    assert!(
        halted(&plan_down(20, 21)),
        "down a second before the approval"
    );
    assert!(!halted(&plan_down(40, 29)), "a second of grace left");
    assert!(halted(&plan_down(40, 30)), "the grace ends now");
}

#[test]
fn the_signature_policy_reaches_every_bootc_node() {
    use bootc_crds::pool::SignaturePolicy;
    assert_eq!(
        pool_spec(IntOrString::Int(1)).image.signature_policy,
        SignaturePolicy::Default,
        "unset is Default"
    );
    let mut pool: serde_json::Value = serde_json::json!({
        "nodeSelector": {"matchLabels": {"role": "worker"}},
        "image": {"ref": pin('b'), "signaturePolicy": "Enforce"},
    });
    let spec: BootcNodePoolSpec = serde_json::from_value(pool.clone()).unwrap();
    assert_eq!(spec.image.signature_policy, SignaturePolicy::Enforce);
    // n1 is new; n2 has a BootcNode (staged, written before the pool asked for Enforce).
    let snap = snapshot(spec, &[node("n1"), node("n2").staged()]);
    let plan = super::plan(&snap);
    let created = written(&plan, "n1");
    assert_eq!(created.signature_policy, SignaturePolicy::Enforce);
    let updated = written(&plan, "n2");
    assert_eq!(updated.signature_policy, SignaturePolicy::Enforce);
    assert_eq!(updated.desired_image, pin('b'), "the target is kept");

    // Back to Default: the BootcNodes follow.
    pool["image"]["signaturePolicy"] = "Default".into();
    let mut snap = snapshot(
        serde_json::from_value(pool).unwrap(),
        &[node("n2").staged()],
    );
    bootc_mut(&mut snap.nodes[0].bootc).spec.signature_policy = SignaturePolicy::Enforce;
    let plan = super::plan(&snap);
    let updated = written(&plan, "n2");
    assert_eq!(updated.signature_policy, SignaturePolicy::Default);
}

#[test]
fn degraded_nodes_are_counted_by_their_reason() {
    let failed = |name, reason: &str| {
        let mut n = node(name).with(
            'b',
            DesiredImageState::Staged,
            agent('a', None, "Staging", Some("error: Switching: …")),
        );
        let status = status_mut(&mut n.bootc);
        for c in &mut status.conditions {
            if c.type_ == conditions::DEGRADED {
                c.reason = reason.to_owned();
            }
        }
        n
    };
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[
            failed("n1", "InsufficientSpace"),
            failed("n2", "ImageNotFound"),
            failed("n3", "InsufficientSpace"),
            node("n4").staged().slot().cordoned(),
            node("n5").staged(),
        ],
    );
    snap.drains.insert(
        "n4".into(),
        DrainView::TimedOut {
            message: "pod default/web-0: Cannot evict pod".into(),
        },
    );
    let plan = super::plan(&snap);
    let counted: Vec<(&str, i32)> = plan
        .status
        .degraded_by_reason
        .iter()
        .map(|r| (r.reason.as_str(), r.count))
        .collect();
    assert_eq!(
        counted,
        [
            ("InsufficientSpace", 2),
            ("DrainTimeout", 1),
            ("ImageNotFound", 1)
        ]
    );
    assert_eq!(plan.status.degraded_count, 4);
    // Healthy again: the list is empty.
    let plan = super::plan(&snapshot(
        pool_spec(IntOrString::Int(1)),
        &[node("n5").staged()],
    ));
    assert!(plan.status.degraded_by_reason.is_empty());
}

#[test]
fn drifted_nodes_are_counted_apart() {
    let drifted = |name| {
        let mut n = node(name).staged();
        status_mut(&mut n.bootc).conditions.push(agent_condition(
            conditions::DRIFTED,
            "True",
            "UsrOverlay",
            "/usr carries a writable overlay",
        ));
        n
    };
    let mut in_sync = node("n3").staged();
    status_mut(&mut in_sync.bootc)
        .conditions
        .push(agent_condition(conditions::DRIFTED, "False", "InSync", ""));
    let plan = super::plan(&snapshot(
        pool_spec(IntOrString::Int(1)),
        &[drifted("n1"), drifted("n2"), in_sync],
    ));
    assert_eq!(plan.status.drifted_count, 2);
    assert_eq!(plan.status.degraded_count, 0, "drift is not degradation");
}
