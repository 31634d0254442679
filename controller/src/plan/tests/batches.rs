//! A new target reaches the members in batches of `RETARGETS_PER_PLAN` per plan, in
//! name order, and the first written stage and take slots while the rest wait.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::staging::RETARGETS_PER_PLAN;
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
    let total = RETARGETS_PER_PLAN * 2 + 200;
    let idle_on_b = |i| {
        node(name(i)).with(
            'b',
            DesiredImageState::Staged,
            agent('b', None, "Idle", None),
        )
    };
    let spec = pool_spec(IntOrString::Int(10));
    let nodes: Vec<N> = (0..total).map(idle_on_b).collect();
    let mut snap = snapshot(spec.clone(), &nodes);
    snap.pool.spec.image.r#ref = pin('c');
    let first = super::plan(&snap);
    let written = retargeted(&first, 'c');
    let want: Vec<String> = (0..RETARGETS_PER_PLAN)
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
    let waiting = name(RETARGETS_PER_PLAN);
    assert_eq!(first.states[waiting], NodeState::Pending);
    assert_eq!(first.states[name(total - 1)], NodeState::Pending);

    // Next plan: the first batch has staged 'c'; the next batch is written, and slots go
    // to the staged nodes of the first.
    let next: Vec<N> = (0..total)
        .map(|i| {
            if i < RETARGETS_PER_PLAN {
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
    let want: Vec<String> = (RETARGETS_PER_PLAN..RETARGETS_PER_PLAN * 2)
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
    assert!(granted.iter().all(|n| *n < name(RETARGETS_PER_PLAN)));

    // Last plan: the rest fit in one batch.
    let last: Vec<N> = (0..total)
        .map(|i| {
            if i < RETARGETS_PER_PLAN * 2 {
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
    assert_eq!(retargeted(&third, 'c').len(), 200);
}
