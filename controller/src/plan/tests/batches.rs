//! A new target reaches the members in batches of one wave's worth per plan (bounded),
//! in name order, and the first written stage and take slots while the rest wait.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::staging::{RETARGET_BATCH_MAX, RETARGET_BATCH_MIN};
use super::*;

fn name(i: usize) -> &'static str {
    Box::leak(format!("n{i:05}").into_boxed_str())
}

/// Whom `plan` moves to image `to`, in order (before its slot grants).
fn retargeted(plan: &Plan, to: char) -> Vec<String> {
    plan.actions[..plan.grants_from]
        .iter()
        .filter_map(|a| match a {
            Action::Update { node, spec, .. } if spec.desired_image == pin(to) => {
                Some(node.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_new_target_is_written_in_batches_and_the_first_batch_takes_slots_first() {
    let total = RETARGET_BATCH_MIN * 2 + 60;
    let idle_on_b = |i| node(name(i)).updated();
    let spec = pool_spec(IntOrString::Int(10));
    let nodes: Vec<N> = (0..total).map(idle_on_b).collect();
    let mut snap = snapshot(spec.clone(), &nodes);
    snap.pool.spec.image.r#ref = pin('c');
    let first = super::plan(&snap);
    let written = retargeted(&first, 'c');
    let want: Vec<String> = (0..RETARGET_BATCH_MIN)
        .map(|i| name(i).to_owned())
        .collect();
    assert_eq!(written, want, "the first batch, in name order");
    assert!(
        first
            .requeue_after
            .is_some_and(|d| d <= Duration::from_secs(1)),
        "the rest are planned again soon: {:?}",
        first.requeue_after
    );
    let waiting = name(RETARGET_BATCH_MIN);
    assert_eq!(first.states[waiting], NodeState::Pending);
    assert_eq!(first.states[name(total - 1)], NodeState::Pending);

    // Next plan: the first batch has staged 'c'; the next batch is written, and slots go
    // to the staged nodes of the first.
    let next: Vec<N> = (0..total)
        .map(|i| {
            if i < RETARGET_BATCH_MIN {
                node(name(i)).with(
                    'c',
                    DesiredImageState::Staged,
                    agent('b', Some('c'), "Staged", None),
                )
            } else {
                idle_on_b(i)
            }
        })
        .collect();
    let mut snap = snapshot(spec, &next);
    snap.pool.spec.image.r#ref = pin('c');
    let second = super::plan(&snap);
    let want: Vec<String> = (RETARGET_BATCH_MIN..RETARGET_BATCH_MIN * 2)
        .map(|i| name(i).to_owned())
        .collect();
    assert_eq!(retargeted(&second, 'c'), want, "the second batch");
    let granted: Vec<&str> = second.actions[second.grants_from..]
        .iter()
        .filter_map(|a| match a {
            Action::Update {
                node, annotations, ..
            } if annotations.contains_key(REBOOT_SLOT_ANNOTATION) => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(granted.len(), 10, "the budget, all to the first batch");
    assert!(granted.iter().all(|n| *n < name(RETARGET_BATCH_MIN)));

    // Last plan: the rest fit in one batch.
    let last: Vec<N> = (0..total)
        .map(|i| {
            if i < RETARGET_BATCH_MIN * 2 {
                node(name(i)).with(
                    'c',
                    DesiredImageState::Staged,
                    agent('b', None, "Staging", None),
                )
            } else {
                idle_on_b(i)
            }
        })
        .collect();
    let mut snap = snapshot(pool_spec(IntOrString::Int(10)), &last);
    snap.pool.spec.image.r#ref = pin('c');
    let third = super::plan(&snap);
    assert_eq!(retargeted(&third, 'c').len(), 60);
}

#[test]
fn joining_nodes_are_created_and_labelled_in_batches() {
    let total = RETARGET_BATCH_MAX + 30;
    let nodes: Vec<N> = (0..total).map(|i| node(name(i))).collect();
    let plan = super::plan(&snapshot(pool_spec(IntOrString::Int(700)), &nodes));
    let created: Vec<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let labelled: Vec<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Label { node } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let want: Vec<&str> = (0..RETARGET_BATCH_MAX).map(name).collect();
    assert_eq!(created, want);
    assert_eq!(labelled, want, "labelled with their BootcNode");
    assert!(
        plan.requeue_after
            .is_some_and(|d| d <= Duration::from_secs(1))
    );
    assert_eq!(plan.states[name(total - 1)], NodeState::Pending);
}

#[test]
fn a_batch_is_one_wave_within_its_bounds() {
    use super::super::staging::retarget_batch;
    assert_eq!(retarget_batch(1), RETARGET_BATCH_MIN);
    assert_eq!(retarget_batch(250), 250);
    assert_eq!(retarget_batch(5_000), RETARGET_BATCH_MAX);
}
