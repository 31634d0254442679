//! Nodes an admin holds (label `node.bootc.dev/hold=true`): not moved to a new target,
//! never given a slot, neither unavailable nor a problem, counted and named in the status;
//! a slot holder keeps going; lifting the hold lets the node go on.

use bootc_crds::conditions::pool_degraded;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn held(mut n: N) -> N {
    n.held = true;
    n
}

/// A node booted on `c` and asking for it.
fn idle_on(name: &'static str, c: char) -> N {
    node(name).with(c, DesiredImageState::Staged, agent(c, None, "Idle", None))
}

/// The desired image of the node's BootcNode update, if the plan writes one.
fn desired_of(plan: &Plan, name: &str) -> Option<String> {
    plan.actions.iter().find_map(|a| match a {
        Action::Update { node, spec, .. } if node == name => Some(spec.desired_image.clone()),
        _ => None,
    })
}

fn marks(plan: &Plan) -> Vec<(&str, bool)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::SetHeld { node, held } => Some((node.as_str(), *held)),
            _ => None,
        })
        .collect()
}

/// `(status, reason)` of a condition.
fn verdict<'a>(plan: &'a Plan, type_: &str) -> (&'a str, &'a str) {
    let c = condition_of(plan, type_);
    (c.status.as_str(), c.reason.as_str())
}

/// The plan of `nodes` once their states have not changed for 11 minutes.
fn plan_after_eleven_minutes(spec: BootcNodePoolSpec, nodes: &[N]) -> Plan {
    let mut snap = snapshot(spec, nodes);
    let unchanged = super::plan(&snap).progress;
    snap.progress = Some(Progress {
        since: now() - chrono::Duration::minutes(11),
        ..unchanged
    });
    super::plan(&snap)
}

#[test]
fn a_held_node_keeps_its_image_and_takes_no_staging_place() {
    // Target 'b'; every node runs 'a'. maxStaging 1: the held n1 comes first by name, yet
    // n2 gets the place.
    let mut spec = pool_spec(IntOrString::Int(1));
    spec.rollout.max_staging = Some(IntOrString::Int(1));
    let nodes = [
        held(idle_on("n1", 'a')),
        idle_on("n2", 'a'),
        held(node("n3")),
    ];
    let plan = super::plan(&snapshot(spec, &nodes));
    assert_eq!(desired_of(&plan, "n2"), Some(pin('b')));
    assert_eq!(desired_of(&plan, "n1"), None, "{:?}", plan.actions);
    // A new node that is held gets no BootcNode (it would start pulling).
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Create { node, .. } if node == "n3")),
        "{:?}",
        plan.actions
    );
    assert_eq!(plan.states["n1"], NodeState::Pending);
    assert_eq!(plan.states["n3"], NodeState::Pending);
    assert_eq!(plan.status.held_count, 2);
    // Only a node with a BootcNode can be marked.
    assert_eq!(marks(&plan), vec![("n1", true)]);
    assert_eq!(
        condition_of(&plan, "UpToDate").message,
        "0/3 updated; 1 pending, 2 held"
    );
}

#[test]
fn a_held_node_already_pulling_finishes_but_gets_no_new_target() {
    let pulling = || held(node("n1").staging());
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[pulling()]));
    assert_eq!(desired_of(&plan, "n1"), None, "{:?}", plan.actions);
    assert_eq!(plan.states["n1"], NodeState::Staging);
    assert_eq!(plan.status.staging_count, 1);

    // The target moves on to 'c': n1 keeps asking for 'b'.
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[pulling()]);
    snap.pool.spec.image.r#ref = pin('c');
    let plan = super::plan(&snap);
    assert_eq!(desired_of(&plan, "n1"), None, "{:?}", plan.actions);
    assert_eq!(plan.states["n1"], NodeState::Pending);
}

#[test]
fn a_held_node_gets_no_slot_and_spends_no_budget() {
    let nodes = [
        held(node("n1").staged()),
        node("n2").staged(),
        node("n3").staged(),
    ];
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &nodes));
    assert_eq!(granted(&plan), vec!["n2"], "the held node uses no slot");
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(3)), &nodes));
    assert_eq!(granted(&plan), vec!["n2", "n3"]);
    assert_eq!(plan.states["n1"], NodeState::Staged);
    assert_eq!(plan.status.staged_count, 1);
    assert_eq!(
        verdict(&plan, "Degraded"),
        ("False", pool_degraded::HEALTHY)
    );
}

#[test]
fn a_rollout_done_but_for_held_nodes_is_not_stalled() {
    let nodes = [
        idle_on("n1", 'b'),
        idle_on("n2", 'b'),
        held(node("n3").staged()),
    ];
    let plan = plan_after_eleven_minutes(pool_spec(IntOrString::Int(1)), &nodes);
    assert_eq!(
        verdict(&plan, "UpToDate"),
        ("False", conditions::up_to_date::ROLLOUT_IN_PROGRESS)
    );
    assert_eq!(
        condition_of(&plan, "UpToDate").message,
        "2/3 updated; 1 held"
    );
    assert_eq!(
        verdict(&plan, "Progressing"),
        ("True", conditions::progressing::HELD_NODES_LEFT)
    );
    let message = &condition_of(&plan, "Progressing").message;
    assert!(
        message.contains("held: n3") && message.contains(bootc_crds::HOLD_LABEL),
        "{message}"
    );
    assert_eq!(
        verdict(&plan, "Degraded"),
        ("False", pool_degraded::HEALTHY)
    );
    assert_eq!(plan.status.held_count, 1);
    assert!(!event_reasons(&plan).contains(&events::ROLLOUT_COMPLETE));

    // A node that is not held and does not move is still a stall.
    let nodes = [
        idle_on("n1", 'b'),
        node("n2").staging(),
        held(node("n3").staged()),
    ];
    let plan = plan_after_eleven_minutes(pool_spec(IntOrString::Int(1)), &nodes);
    assert_eq!(
        verdict(&plan, "Progressing"),
        ("False", conditions::progressing::STALLED)
    );
}

#[test]
fn a_slot_holder_that_is_held_keeps_going() {
    let mut snap = snapshot(
        pool_spec(IntOrString::Int(1)),
        &[held(node("n1").staged().slot().cordoned())],
    );
    snap.drains.insert("n1".into(), DrainView::Drained);
    let plan = super::plan(&snap);
    let n1 = actions_for(&plan, "n1");
    let Action::Update {
        spec, annotations, ..
    } = n1[0]
    else {
        panic!("{n1:?}")
    };
    assert_eq!(spec.desired_image_state, DesiredImageState::Booted);
    assert!(annotations.contains_key(APPROVED_AT_ANNOTATION));
    assert!(event_reasons(&plan).contains(&events::REBOOT_APPROVED));
    assert_eq!(plan.states["n1"], NodeState::Rebooting);
    assert_eq!(
        condition_of(&plan, "UpToDate").message,
        "0/1 updated; 1 rebooting"
    );
}

#[test]
fn a_held_slot_holder_keeps_its_image_when_the_target_moves() {
    // The target moves to 'c' while n1 (held) reboots into 'b' and n2 (held) is approved
    // for 'b' but has not rebooted.
    let rebooting = held(node("n1").rebooting().slot().cordoned());
    let approved = held(node("n2").approved().slot().cordoned());
    let mut snap = snapshot(pool_spec(IntOrString::Int(2)), &[rebooting, approved]);
    snap.pool.spec.image.r#ref = pin('c');
    let plan = super::plan(&snap);
    assert_eq!(desired_of(&plan, "n1"), None, "nothing to write mid-reboot");
    assert_eq!(plan.states["n1"], NodeState::Rebooting);

    let n2 = actions_for(&plan, "n2");
    assert_eq!(n2[0], &Action::Uncordon { node: "n2".into() });
    let Action::Update {
        spec, annotations, ..
    } = n2[1]
    else {
        panic!("{n2:?}")
    };
    assert_eq!(spec.desired_image, pin('b'), "no new target while held");
    assert_eq!(
        spec.desired_image_state,
        DesiredImageState::Staged,
        "no approval without a slot"
    );
    assert_eq!(annotations.get(REBOOT_SLOT_ANNOTATION), Some(&None));
    assert_eq!(plan.states["n2"], NodeState::Pending);
}

#[test]
fn lifting_the_hold_lets_the_node_go_on_and_clears_the_mark() {
    let mark = |mut n: N| {
        status_mut(&mut n.bootc).held = Some(true);
        n
    };
    let staged = held(mark(node("n1").staged()));
    let on_a = held(mark(idle_on("n2", 'a')));
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[staged, on_a]));
    assert!(
        marks(&plan).is_empty(),
        "already marked: {:?}",
        plan.actions
    );
    assert!(granted(&plan).is_empty());
    assert_eq!(desired_of(&plan, "n2"), None);

    // The hold lifted.
    let staged = mark(node("n1").staged());
    let on_a = mark(idle_on("n2", 'a'));
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(1)), &[staged, on_a]));
    assert_eq!(granted(&plan), vec!["n1"]);
    assert_eq!(desired_of(&plan, "n2"), Some(pin('b')));
    assert_eq!(marks(&plan), vec![("n1", false), ("n2", false)]);
    assert_eq!(plan.status.held_count, 0);
}
