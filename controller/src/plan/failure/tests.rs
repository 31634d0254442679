//! The lying node: one node reports a foreign image (another repository) booted since a
//! time far in the future. Its report is audited in `deployHistory`, but it steers
//! nothing: its times are bounded by the plan's clock, automatic rollback never goes to
//! it, and every other node is planned exactly as without the lie.

use std::collections::BTreeMap;
use std::sync::Arc;

use bootc_crds::MANAGED_LABEL;
use bootc_crds::conditions::to_time;
use bootc_crds::node::{
    BootcNode, BootcNodeSpec, BootcNodeStatus, BootedImage, ImageStatus, StagedImage,
};
use bootc_crds::pool::{BootcNodePool, BootcNodePoolSpec, DeployHistoryEntry, HistoryOrigin};
use chrono::{DateTime, Utc};

use crate::plan::tests::{digest, history, now, pin};
use crate::plan::world::{BootcView, NodeInfo, NodeView, PoolView, Snapshot};
use crate::plan::{Action, Plan, Target};

const FOREIGN: &str = "evil.example/os";

/// Pool `workers` on `b`, one reboot at a time, `onFailure: Rollback`.
fn spec() -> BootcNodePoolSpec {
    let pool: BootcNodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "workers"},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": pin('b')},
            "rollout": {"maxUnavailable": 1, "onFailure": "Rollback"},
        }
    }))
    .unwrap();
    pool.spec
}

fn image(reference: String, c: char) -> ImageStatus {
    ImageStatus {
        image: reference,
        image_digest: digest(c).to_string(),
        ..ImageStatus::default()
    }
}

/// A member booted on `booted` (since `since`), with `b` staged when `staged`.
fn member(name: &str, booted: ImageStatus, since: DateTime<Utc>, staged: bool) -> NodeView {
    let status = BootcNodeStatus {
        observed_generation: Some(1),
        booted: Some(BootedImage {
            image: booted,
            since: to_time(since),
        }),
        staged: staged.then(|| StagedImage {
            image: image(pin('b'), 'b'),
            download_only: true,
        }),
        ..BootcNodeStatus::default()
    };
    let mut object = BootcNode::new(name, BootcNodeSpec::staged(pin('b')));
    object.metadata.generation = Some(1);
    object.metadata.resource_version = Some(format!("rv-{name}"));
    object.status = Some(status);
    let labels = BTreeMap::from([
        ("role".to_owned(), "worker".to_owned()),
        (MANAGED_LABEL.to_owned(), String::new()),
    ]);
    NodeView {
        name: name.into(),
        node: Some(NodeInfo {
            ready: true,
            ..NodeInfo::with_labels(labels)
        }),
        bootc: Some(BootcView::new(Arc::new(object), Some("workers".to_owned()))),
    }
}

/// n1..n3 on `a` with `b` staged; n4 honest (on `a` like the others) or lying (a foreign
/// image, booted "since" ten years from now).
fn snapshot(lie: bool, history: Vec<DeployHistoryEntry>) -> Snapshot {
    let hour_ago = now() - chrono::Duration::hours(1);
    let mut nodes: Vec<NodeView> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| member(n, image(pin('a'), 'a'), hour_ago, true))
        .collect();
    nodes.push(if lie {
        let foreign = format!("{FOREIGN}@{}", digest('f'));
        member(
            "n4",
            image(foreign, 'f'),
            now() + chrono::Duration::days(3650),
            false,
        )
    } else {
        member("n4", image(pin('a'), 'a'), hour_ago, false)
    });
    Snapshot::of(
        PoolView {
            name: "workers".into(),
            generation: Some(1),
            spec: spec(),
            status: Some(bootc_crds::pool::BootcNodePoolStatus {
                target_image: Some(pin('b')),
                target_digest: Some(digest('b').to_string()),
                deploy_history: history,
                ..Default::default()
            }),
            deleting: false,
            finalized: true,
        },
        nodes,
        now(),
    )
}

/// The plan's actions and states, without what concerns n4.
fn others(plan: &Plan) -> (Vec<&Action>, Vec<(&str, &crate::plan::NodeState)>) {
    (
        plan.actions
            .iter()
            .filter(|a| a.node() != Some("n4"))
            .collect(),
        plan.states.iter().filter(|(n, _)| *n != "n4").collect(),
    )
}

fn desired_images(plan: &Plan) -> Vec<(&str, &str)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Update { node, spec, .. } => Some((node.as_str(), spec.desired_image.as_str())),
            _ => None,
        })
        .collect()
}

/// `snap` planned again after `b` was marked failed by its own rollout.
fn failed_b(snap: &Snapshot) -> Snapshot {
    let target = Target::from_ref(&pin('b')).unwrap();
    super::marked(snap, &target, "n1: UnhealthyUnits".to_owned())
}

#[test]
fn a_lying_node_is_audited_but_steers_nothing() {
    let history = vec![history('a', 4, 24 * 60)];
    let honest = crate::plan::plan(&snapshot(false, history.clone()));
    let lying = crate::plan::plan(&snapshot(true, history));

    // Audited: the foreign digest has an entry, observed, its times the plan's `now`.
    let f = lying
        .status
        .deploy_history
        .iter()
        .find(|e| e.digest == digest('f').to_string())
        .expect("the foreign digest is audited");
    assert_eq!(f.image, format!("{FOREIGN}@{}", digest('f')));
    assert_eq!(f.origin, HistoryOrigin::Observed);
    assert_eq!(f.node_count, 1);
    assert_eq!(f.last_deployed, to_time(now()).unwrap());
    assert_eq!(f.first_deployed, to_time(now()).unwrap());
    let a = &lying
        .status
        .deploy_history
        .iter()
        .find(|e| e.digest == digest('a').to_string());
    assert_eq!(a.map(|e| e.origin), Some(HistoryOrigin::Targeted));
    // The other nodes: the same slots, order, states and actions as without the lie.
    assert_eq!(others(&lying), others(&honest));

    // Planned again from its own status: nothing changes (no write), even an hour on.
    let mut again = snapshot(true, lying.status.deploy_history.clone());
    again.pool.status = Some(lying.status.clone());
    assert_eq!(crate::plan::plan(&again).status, lying.status);
    again.now = now() + chrono::Duration::hours(1);
    assert_eq!(
        crate::plan::plan(&again).status.deploy_history,
        lying.status.deploy_history
    );

    // `b` fails: the pool rolls back to `a`, the last digest it targeted, never to the
    // newer foreign one; every other node is planned as without the lie.
    let mut honest_next = snapshot(false, Vec::new());
    honest_next.pool.status = Some(honest.status.clone());
    let mut lying_next = snapshot(true, Vec::new());
    lying_next.pool.status = Some(lying.status.clone());
    let honest_back = crate::plan::plan(&failed_b(&honest_next));
    let lying_back = crate::plan::plan(&failed_b(&lying_next));
    assert_eq!(lying_back.status.target_image, Some(pin('a')));
    assert!(
        desired_images(&lying_back)
            .iter()
            .filter(|(n, _)| *n != "n4")
            .all(|(_, image)| *image == pin('a')),
        "{:?}",
        desired_images(&lying_back)
    );
    assert_eq!(others(&lying_back), others(&honest_back));
}

#[test]
fn with_only_the_lie_to_go_back_to_the_pool_rolls_back_to_nothing() {
    // The history the pool had before: only what nodes reported, none of it targeted.
    let mut observed = history('a', 4, 24 * 60);
    observed.origin = HistoryOrigin::Observed;
    let honest = crate::plan::plan(&failed_b(&snapshot(false, vec![observed.clone()])));
    let first = crate::plan::plan(&snapshot(true, vec![observed]));
    let mut lying = snapshot(true, Vec::new());
    lying.pool.status = Some(first.status.clone());
    let lying = crate::plan::plan(&failed_b(&lying));
    assert_eq!(lying.status.target_image, Some(pin('b')));
    let d = lying
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded")
        .unwrap();
    assert_eq!(d.reason, "TargetFailed");
    assert!(
        d.message.contains("ran no other image before"),
        "{}",
        d.message
    );
    assert!(
        !desired_images(&lying)
            .iter()
            .any(|(_, i)| i.contains(FOREIGN))
    );
    assert_eq!(others(&lying), others(&honest));
}
