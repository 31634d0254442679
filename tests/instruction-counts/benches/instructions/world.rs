//! The fixed pools the instruction counts are taken on: `size` members named
//! `node-00000`…, spread over three zones, in one of a few typical states of a rollout
//! from image `a` to image `b`, with the status the previous plan wrote.

use std::collections::BTreeMap;

use bootc_crds::conditions::{self, to_time};
use bootc_crds::node::{
    BootcNode, BootcNodeSpec, BootcNodeStatus, BootedImage, DesiredImageState, ImageStatus,
    StagedImage,
};
use bootc_crds::pool::BootcNodePool;
use bootc_crds::{APPROVED_AT_ANNOTATION, MANAGED_LABEL, REBOOT_SLOT_ANNOTATION};
use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference};

pub const POOL: &str = "workers";

/// Where the rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Every member has staged `b`; no slot is granted yet.
    AllStaged,
    /// A third done, a wave of 5 % in its reboot, the rest staged.
    WaveRebooting,
    /// Every member runs `b`.
    AllDone,
}

impl State {
    pub const ALL: [State; 3] = [State::AllStaged, State::WaveRebooting, State::AllDone];

    pub fn name(self) -> &'static str {
        match self {
            State::AllStaged => "all-staged",
            State::WaveRebooting => "wave-rebooting",
            State::AllDone => "all-done",
        }
    }

    pub fn parse(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What member `i` of `size` is doing.
    fn member(self, i: usize, size: usize) -> Member {
        match self {
            State::AllStaged => Member::Staged,
            State::AllDone => Member::Done,
            State::WaveRebooting if i < size / 3 => Member::Done,
            State::WaveRebooting if i < size / 3 + size / 20 => Member::Rebooting,
            State::WaveRebooting => Member::Staged,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Staged,
    Rebooting,
    Done,
}

/// The time every plan of the bench is made at.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn pin(c: char) -> String {
    format!("quay.io/os/node@{}", digest(c))
}

/// The pool: `role=worker` nodes on image `b`, 5 % at a time.
pub fn pool() -> BootcNodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL, "uid": "pool-uid", "generation": 1},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": pin('b')},
            "rollout": {"maxUnavailable": "5%"},
        }
    }))
    .expect("the bench's pool is valid")
}

/// The Nodes and BootcNodes of a pool of `size` members in `state`.
pub fn objects(size: usize, state: State) -> (Vec<Node>, Vec<BootcNode>) {
    (0..size)
        .map(|i| {
            let name = format!("node-{i:05}");
            let member = state.member(i, size);
            (node(&name, i, member), bootc_node(&name, member))
        })
        .unzip()
}

fn node(name: &str, i: usize, member: Member) -> Node {
    let labels = BTreeMap::from([
        ("role".to_owned(), "worker".to_owned()),
        (MANAGED_LABEL.to_owned(), String::new()),
        (
            "topology.kubernetes.io/zone".to_owned(),
            format!("zone-{}", i % 3),
        ),
    ]);
    let rebooting = member == Member::Rebooting;
    let ready = NodeCondition {
        type_: "Ready".into(),
        status: if rebooting { "False" } else { "True" }.into(),
        last_transition_time: to_time(now() - chrono::Duration::hours(2)),
        last_heartbeat_time: to_time(now() - chrono::Duration::seconds(10)),
        ..NodeCondition::default()
    };
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels),
            creation_timestamp: to_time(now() - chrono::Duration::days(30)),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(rebooting),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![ready]),
            node_info: Some(NodeSystemInfo {
                boot_id: format!("boot-{name}"),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

fn bootc_node(name: &str, member: Member) -> BootcNode {
    let state = match member {
        Member::Rebooting => DesiredImageState::Booted,
        Member::Staged | Member::Done => DesiredImageState::Staged,
    };
    let mut b = BootcNode::new(
        name,
        BootcNodeSpec {
            desired_image_state: state,
            ..BootcNodeSpec::staged(pin('b'))
        },
    );
    b.metadata.generation = Some(1);
    b.metadata.resource_version = Some(format!("rv-{name}"));
    b.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "node.bootc.dev/v1alpha1".into(),
        kind: "BootcNodePool".into(),
        name: POOL.into(),
        uid: "pool-uid".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    if member == Member::Rebooting {
        let at = "2026-11-22T11:58:00Z".to_owned();
        b.metadata.annotations = Some(BTreeMap::from([
            (REBOOT_SLOT_ANNOTATION.to_owned(), at.clone()),
            (APPROVED_AT_ANNOTATION.to_owned(), at),
        ]));
    }
    b.status = Some(report(member));
    b
}

/// What the member's agent reports.
fn report(member: Member) -> BootcNodeStatus {
    let (booted, staged, reason) = match member {
        Member::Staged => ('a', Some('b'), "Staged"),
        Member::Rebooting => ('a', Some('b'), "Rebooting"),
        Member::Done => ('b', None, "Idle"),
    };
    let image = |c| ImageStatus {
        image: pin(c),
        image_digest: digest(c),
        ..ImageStatus::default()
    };
    let condition = |type_: &str, status: &str, reason: &str| Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: to_time(now() - chrono::Duration::minutes(5)).unwrap(),
    };
    let idle = if reason == "Idle" { "True" } else { "False" };
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
            condition(conditions::IDLE, idle, reason),
            condition(conditions::DEGRADED, "False", "Healthy"),
        ],
        ..BootcNodeStatus::default()
    }
}
