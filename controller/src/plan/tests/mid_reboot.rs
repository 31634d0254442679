//! A node in the reboot it was approved for keeps its slot and its BootcNode until the
//! reboot is over, whatever happens to the pool meanwhile (a new target, the node leaving,
//! the pool deleted): freed earlier, its NotReady would come on top of the slots given to
//! other nodes. An approval the agent has not recorded is revoked before the node goes.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

/// The node's actions that free its slot or let it go.
fn lets_go(plan: &Plan, name: &str) -> Vec<String> {
    actions_for(plan, name)
        .into_iter()
        .filter(|a| match a {
            Action::Update { annotations, .. } => {
                annotations.get(REBOOT_SLOT_ANNOTATION) == Some(&None)
            }
            Action::Uncordon { .. } | Action::Delete { .. } => true,
            _ => false,
        })
        .map(|a| format!("{a:?}"))
        .collect()
}

/// A holder whose agent recorded its reboot into `b` from boot `0123` (10 s ago) and is
/// back on `b` (Idle), the Node showing boot `node_boot`, Ready with a heartbeat of 5 s
/// ago.
fn recorded(node_boot: &str) -> Snapshot {
    back_after_reboot(node_boot, Some(now() - chrono::Duration::seconds(5)))
}

/// n1's approval is revoked first (`Staged`, on condition of the version read, as the
/// agent's record is), then the node is uncordoned and its BootcNode deleted.
fn revoked_then_let_go(plan: &Plan) {
    let n1 = actions_for(plan, "n1");
    let Some(Action::Update {
        resource_version,
        spec,
        ..
    }) = n1.first()
    else {
        panic!("the revocation comes first: {n1:?}")
    };
    assert_eq!(spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(
        resource_version.as_deref(),
        Some("rv-n1"),
        "on condition of the version read, as the agent's record is"
    );
    assert!(
        n1.contains(&&Action::Uncordon { node: "n1".into() }),
        "{n1:?}"
    );
    assert!(
        n1.contains(&&Action::Delete { node: "n1".into() }),
        "{n1:?}"
    );
}

#[test]
fn a_new_target_keeps_the_slot_until_the_kubelet_reports_from_the_new_boot() {
    // The agent is back and idle, the Node still Ready from before the reboot: its
    // NotReady may yet come, so the slot stays (the new target is written all the same).
    let mut snap = recorded("0123");
    snap.pool.spec.image.r#ref = pin('c');
    let plan = super::plan(&snap);
    assert!(lets_go(&plan, "n1").is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.states.get("n1"), Some(&NodeState::Rebooting));
    let updates: Vec<_> = actions_for(&plan, "n1")
        .into_iter()
        .filter_map(|a| match a {
            Action::Update { spec, .. } => Some(spec.desired_image.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(updates, vec![pin('c')], "the new target is written");

    // The kubelet of the new boot has reported: the slot is freed for the new target.
    let mut snap = recorded("89ab");
    snap.pool.spec.image.r#ref = pin('c');
    let plan = super::plan(&snap);
    assert_eq!(lets_go(&plan, "n1").len(), 2, "{:?}", plan.actions);
}

#[test]
fn a_pool_deleted_mid_reboot_keeps_the_node_until_its_reboot_is_over() {
    let mut snap = recorded("0123");
    deleting(&mut snap);
    let plan = super::plan(&snap);
    assert!(actions_for(&plan, "n1").is_empty(), "{:?}", plan.actions);
    assert!(!plan.actions.contains(&Action::RemoveFinalizer));
    assert!(
        plan.requeue_after.is_some(),
        "the reboot timeout is awaited"
    );

    // NotReady, with the agent saying it reboots: the same.
    let mut snap = recorded("0123");
    snap.nodes[0].node.as_mut().unwrap().ready = false;
    status_mut(&mut snap.nodes[0].bootc).conditions[0] =
        agent_condition(conditions::IDLE, "False", "Rebooting", "");
    deleting(&mut snap);
    assert!(actions_for(&super::plan(&snap), "n1").is_empty());

    // Back from the new boot: the approval is revoked, then the node let go.
    let mut snap = recorded("89ab");
    deleting(&mut snap);
    let plan = super::plan(&snap);
    revoked_then_let_go(&plan);
}

#[test]
fn a_node_leaving_mid_reboot_keeps_its_slot_until_its_reboot_is_over() {
    let mut snap = recorded("0123");
    snap.nodes[0]
        .node
        .as_mut()
        .unwrap()
        .labels_mut()
        .insert("role".into(), "other".into());
    let plan = super::plan(&snap);
    assert!(actions_for(&plan, "n1").is_empty(), "{:?}", plan.actions);
}

#[test]
fn an_approval_not_yet_recorded_is_revoked_before_the_node_goes() {
    // Approved and drained; the agent has not recorded a reboot (Staged).
    let approved = node("n1").approved().slot().cordoned();
    let mut snap = snapshot(pool_spec(IntOrString::Int(1)), &[approved]);
    deleting(&mut snap);
    let plan = super::plan(&snap);
    revoked_then_let_go(&plan);
}

#[test]
fn a_reboot_past_its_timeout_no_longer_holds_the_node() {
    let mut snap = recorded("0123");
    snap.pool.spec.rollout.reboot_timeout_seconds = 60;
    bootc_mut(&mut snap.nodes[0].bootc)
        .annotations_mut()
        .insert(APPROVED_AT_ANNOTATION.into(), "2026-11-22T11:00:00Z".into());
    deleting(&mut snap);
    let plan = super::plan(&snap);
    assert!(
        actions_for(&plan, "n1").contains(&&Action::Delete { node: "n1".into() }),
        "{:?}",
        plan.actions
    );
}

#[test]
fn a_halt_naming_hundreds_of_nodes_lists_five_and_counts_the_rest() {
    let long = "bootc: error: ".to_owned() + &"the pull failed; ".repeat(100);
    let nodes: Vec<N> = (0..300)
        .map(|i| {
            let name: &'static str = Box::leak(format!("node-{i:03}").into_boxed_str());
            node(name)
                .with(
                    'b',
                    DesiredImageState::Booted,
                    agent('a', None, "Staging", Some(&long)),
                )
                .slot()
                .cordoned()
        })
        .collect();
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(300)), &nodes));
    let halt = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Event(e) if e.reason == events::ROLLOUT_HALTED => Some(e.message.clone()),
            _ => None,
        })
        .expect("a RolloutHalted event");
    assert!(halt.contains("; and 295 more"), "{halt}");
    assert_eq!(halt.matches("node node-").count(), 5, "{halt}");
}
