//! Pods that block a reboot (`spec.disruption.blockingPods`): a staged node they run on
//! gets no slot, named in the gate's verdict; the others go on; a holder goes on; pods
//! that cannot be listed hold every waiting node back.

use bootc_crds::pool::{BlockingPodsSpec, GatePhase, GateReason};

use super::*;
use crate::plan::world::BlockingPods;

fn blocking() -> BootcNodePoolSpec {
    let mut spec = pool_spec(IntOrString::Int(2));
    spec.disruption.blocking_pods = Some(BlockingPodsSpec {
        selector: serde_json::from_value(serde_json::json!({"matchLabels": {"app": "backup"}}))
            .unwrap(),
        namespaces: vec!["jobs".into()],
    });
    spec
}

/// `snap` with `pods` running on node `name`.
fn with_pods(snap: &mut Snapshot, name: &str, pods: BlockingPods) {
    let view = snap.nodes.iter_mut().find(|v| *v.name == *name).unwrap();
    view.node.as_mut().unwrap().blocking_pods = pods;
}

fn running(pods: &[&str]) -> BlockingPods {
    BlockingPods::Running(pods.iter().map(|p| (*p).to_owned()).collect())
}

#[test]
fn a_node_running_a_blocking_pod_gets_no_slot_and_is_named() {
    let nodes = [
        node("n1").staged(),
        node("n2").staged(),
        node("n3").staged(),
    ];
    let mut snap = snapshot(blocking(), &nodes);
    with_pods(&mut snap, "n1", running(&["jobs/backup-1"]));
    with_pods(&mut snap, "n2", BlockingPods::Running(Vec::new()));
    let plan = super::plan(&snap);
    assert_eq!(granted(&plan), vec!["n2", "n3"], "n1 runs a blocking pod");
    let verdict = plan
        .status
        .gates
        .iter()
        .find(|g| g.reason == GateReason::BlockingPods)
        .expect("the blocking-pods verdict");
    assert_eq!(verdict.closes, GatePhase::Slots);
    assert!(verdict.deliberate);
    assert_eq!(verdict.nodes, ["n1"]);
    assert_eq!(verdict.node_count, Some(1));
    assert_eq!(
        verdict.message,
        "pods that block a reboot run on n1 (jobs/backup-1)"
    );
    // Staging is not held back, and the pool looks again for the pod to finish.
    assert_eq!(plan.states.get("n1"), Some(&NodeState::Staged));
    assert!(
        plan.requeue_after
            .is_some_and(|d| d <= Duration::from_secs(15))
    );

    // Without the spec, the same pods hold nothing back.
    let mut open = snapshot(pool_spec(IntOrString::Int(3)), &nodes);
    with_pods(&mut open, "n1", running(&["jobs/backup-1"]));
    let plan = super::plan(&open);
    assert_eq!(granted(&plan), vec!["n1", "n2", "n3"]);
    assert!(plan.status.gates.is_empty(), "{:?}", plan.status.gates);
}

#[test]
fn when_only_blocked_nodes_are_left_the_rollout_is_not_stalled() {
    let nodes = [node("n1").staged(), node("n2").updated()];
    let mut snap = snapshot(blocking(), &nodes);
    with_pods(
        &mut snap,
        "n1",
        running(&[
            "jobs/backup-1",
            "jobs/backup-2",
            "jobs/backup-3",
            "jobs/backup-4",
        ]),
    );
    // Nothing has moved for an hour.
    snap.progress = Some(Progress {
        fingerprint: stall::fingerprint(&plan(&snap).states),
        since: now() - chrono::Duration::hours(1),
    });
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    let progressing = condition_of(&plan, "Progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "HeldNodesLeft")
    );
    assert!(
        progressing
            .message
            .contains("pods that block a reboot run on n1 (jobs/backup-1, jobs/backup-2, jobs/backup-3, 1 more)"),
        "{}",
        progressing.message
    );
}

#[test]
fn pods_that_cannot_be_listed_hold_back_every_waiting_node_but_not_a_holder() {
    let nodes = [
        node("n1").staged(),
        node("n2").staged(),
        node("n3").staged().slot().cordoned(),
    ];
    let mut snap = snapshot(blocking(), &nodes);
    let error = BlockingPods::Unknown("pods is forbidden".into());
    for n in ["n1", "n2", "n3"] {
        with_pods(&mut snap, n, error.clone());
    }
    let plan = super::plan(&snap);
    assert!(granted(&plan).is_empty());
    let verdict = &plan.status.gates[0];
    assert_eq!(verdict.reason, GateReason::BlockingPods);
    assert_eq!(verdict.nodes, ["n1", "n2"], "the holder goes on");
    assert!(
        verdict
            .message
            .contains("n1 (pods cannot be listed: pods is forbidden)"),
        "{}",
        verdict.message
    );
    assert_eq!(plan.states.get("n3"), Some(&NodeState::Rebooting));
}
