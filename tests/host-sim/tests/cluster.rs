//! The simulated cluster against the API emulator, with the test playing the controller
//! by hand: a staged node rebooted on approval (NotReady, then Ready, a new agent, Idle
//! on the new image), the invariant checker counting unavailable nodes and flagging more
//! than the budget, nodes removed, agents killed, pods bound and evicted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::BootcNode;
use bootc_node_agent::host::Host as _;
use host_sim::cluster::{Invariants, PodOwner, SimCluster, SimOptions};
use host_sim::fixtures::{
    DEADLINE, approve, bootc_node, create_node, digest, idle_reason, wait_for,
};
use host_sim::memory::{Behaviour, Catalog, NextBoot};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{EvictParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::time::Instant;

const REPO: &str = "registry.test/os";
const SETTLE: Duration = Duration::from_secs(10);

fn options() -> SimOptions {
    SimOptions {
        behaviour: Behaviour {
            stage_time: Duration::from_millis(50),
            reboot_time: Duration::from_millis(200),
            ..Behaviour::default()
        },
        ready_delay: Duration::from_millis(100),
        poll_interval: Duration::from_secs(5),
        node_labels: BTreeMap::from([("role".to_owned(), "worker".to_owned())]),
    }
}

/// The emulator, a client of it, and a cluster of `nodes` on v1 with v2 in their
/// catalog: (emulator, client, cluster, v1, v2).
async fn setup(nodes: &[&str]) -> (Emulator, Client, SimCluster, String, String) {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions(REPO, [Some("k1"), Some("k2")]);
    let cluster = SimCluster::start(emulator.config(), catalog).await.unwrap();
    for name in nodes {
        cluster.add_node(name, &v1, &options()).await.unwrap();
    }
    (emulator, client, cluster, v1, v2)
}

async fn wait_reason(api: &Api<BootcNode>, name: &str, reason: &str) -> BootcNode {
    wait_for(&format!("{name} to report {reason}"), async || {
        let n = api.get(name).await.ok()?;
        (idle_reason(&n)? == reason).then_some(n)
    })
    .await
}

fn node_ready(node: &Node) -> Option<bool> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True")
}

fn node_boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

async fn patch_bootc_node(api: &Api<BootcNode>, name: &str, patch: serde_json::Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn set_slot(api: &Api<BootcNode>, name: &str, held: bool) {
    let value = if held { json!("pool-a") } else { json!(null) };
    patch_bootc_node(
        api,
        name,
        json!({"metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: value}}}),
    )
    .await;
}

async fn cordon(nodes: &Api<Node>, name: &str, on: bool) {
    let patch = json!({"spec": {"unschedulable": on}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_approved_node_reboots_goes_not_ready_and_comes_back_idle_on_the_new_image() {
    let (emulator, client, cluster, v1, v2) = setup(&["n1", "n2"]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let api: Api<BootcNode> = Api::all(client.clone());

    // The Nodes as a kubelet registers them.
    for name in ["n1", "n2"] {
        let node = nodes.get(name).await.unwrap();
        let labels = node.metadata.labels.clone().unwrap();
        assert_eq!(labels.get("role").map(String::as_str), Some("worker"));
        assert_eq!(
            labels.get("kubernetes.io/hostname").map(String::as_str),
            Some(name)
        );
        assert_eq!(node_ready(&node), Some(true));
        let host = cluster.host(name).unwrap();
        assert_eq!(node_boot_id(&node).replace('-', ""), host.boot_id());
    }
    assert_eq!(cluster.nodes(), ["n1", "n2"]);

    let checker = Invariants::follow(emulator.handle(), 1, BTreeSet::new());
    for (name, image) in [("n1", &v2), ("n2", &v1)] {
        create_node(&api, &bootc_node(name, image)).await;
    }
    wait_reason(&api, "n2", "Idle").await;
    let staged = wait_reason(&api, "n1", "Staged").await;
    assert_eq!(
        staged.status.unwrap().staged.unwrap().image.image_digest,
        digest('2')
    );
    let host = cluster.host("n1").unwrap();
    assert_eq!(host.counters().reboots, 0, "no reboot without approval");
    let boot_before = host.boot_id();

    // Every change from here on, to read n1's readiness from.
    let mut events = emulator.handle().events();
    // The controller's part, by hand: cordon, slot, Booted.
    cordon(&nodes, "n1", true).await;
    approve(&api, "n1", "pool-a").await;

    let idle = wait_reason(&api, "n1", "Idle").await;
    let status = idle.status.unwrap();
    assert_eq!(status.booted.unwrap().image.image_digest, digest('2'));
    assert_eq!(status.last_reboot.unwrap().boot_id, boot_before);
    assert_ne!(host.boot_id(), boot_before);
    assert_eq!(host.counters().reboots, 1);
    assert_eq!(
        cluster.agent_starts("n1"),
        Some(2),
        "a new agent after the reboot"
    );
    assert_eq!(cluster.agent_starts("n2"), Some(1));
    let node = wait_for("n1 Ready on its new boot", async || {
        let node = nodes.get("n1").await.ok()?;
        (node_ready(&node) == Some(true) && node_boot_id(&node).replace('-', "") == host.boot_id())
            .then_some(node)
    })
    .await;
    assert_eq!(node_ready(&node), Some(true));
    // n1's Ready condition as stored, change by change: Ready, NotReady, Ready.
    let mut readiness: Vec<String> = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.key.plural != "nodes" || event.object["metadata"]["name"] != "n1" {
            continue;
        }
        let ready = event.object["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        if readiness.last() != Some(&ready) {
            readiness.push(ready);
        }
    }
    assert_eq!(readiness, ["True", "False", "True"]);

    // The NotReady spell was seen: n1 went Ready → NotReady once, and with its cordon,
    // slot and NotReady it counted as one unavailable node.
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.reboots.get("n1"), Some(&1), "{report:?}");
    assert_eq!(report.reboots.get("n2"), Some(&0), "{report:?}");
    assert_eq!(report.max_unavailable_seen, 1, "{report:?}");
    assert!(report.violations.is_empty(), "{report:?}");
    assert_eq!(report.left_cordoned, ["n1"]);
    assert_eq!(report.unavailable_now, ["n1"]);

    // Release the slot, uncordon: clean.
    patch_bootc_node(
        &api,
        "n1",
        json!({
            "metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: null}},
            "spec": {"desiredImageState": "Staged"},
        }),
    )
    .await;
    cordon(&nodes, "n1", false).await;
    let report = checker.settled(SETTLE).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    assert!(report.unavailable_now.is_empty(), "{report:?}");
    cluster.stop().await;
}

#[tokio::test]
async fn the_checker_counts_cordons_slots_and_not_ready_nodes_and_flags_more_than_the_budget() {
    let (emulator, client, cluster, v1, _) = setup(&["n1", "n2", "n3", "n4"]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let api: Api<BootcNode> = Api::all(client.clone());
    for name in ["n1", "n2", "n3", "n4"] {
        create_node(&api, &bootc_node(name, &v1)).await;
    }
    // An admin cordoned n4 before the rollout: that cordon is not ours.
    cordon(&nodes, "n4", true).await;
    let checker = Invariants::follow(emulator.handle(), 1, BTreeSet::from(["n4".to_owned()]));
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.max_unavailable_seen, 0, "{report:?}");

    // Within the budget: n1 cordoned and holding a slot is one node.
    cordon(&nodes, "n1", true).await;
    set_slot(&api, "n1", true).await;
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.max_unavailable_seen, 1, "{report:?}");
    assert!(report.violations.is_empty(), "{report:?}");

    // A second slot: over the budget.
    set_slot(&api, "n2", true).await;
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.max_unavailable_seen, 2, "{report:?}");
    assert_eq!(report.max_slots_seen, 2, "{report:?}");
    assert_eq!(report.violations.len(), 1, "{report:?}");
    let violation = &report.violations[0];
    assert!(
        violation.starts_with("rv ")
            && violation.contains("n1 (cordoned, reboot-slot)")
            && violation.contains("n2 (reboot-slot)")
            && !violation.contains("n4"),
        "{violation}"
    );

    // A host that goes down for good: its Node goes NotReady and counts, even though
    // the admin's cordon does not.
    let n4 = cluster.host("n4").unwrap();
    n4.set_next_boot(NextBoot::Never);
    n4.reboot(false).await.unwrap();
    wait_for("n4 NotReady", async || {
        let node = nodes.get("n4").await.ok()?;
        (node_ready(&node) == Some(false)).then_some(())
    })
    .await;
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.max_unavailable_seen, 3, "{report:?}");
    assert_eq!(report.violations.len(), 2, "{report:?}");
    assert!(report.violations[1].contains("n4 (NotReady)"), "{report:?}");
    assert_eq!(report.reboots.get("n4"), Some(&1), "{report:?}");
    assert_eq!(report.unavailable_now, ["n1", "n2", "n4"]);
    assert!(
        !cluster.agent_running("n4"),
        "no agent while the host is down"
    );

    // Slots released, n1 still cordoned: still over the budget with n4 down (a new
    // instant, since the set changed), and n1 is left cordoned; n4 is the admin's.
    set_slot(&api, "n1", false).await;
    set_slot(&api, "n2", false).await;
    let report = checker.settled(SETTLE).await;
    assert_eq!(report.left_cordoned, ["n1"]);
    assert!(!report.is_clean());
    assert_eq!(report.violations.len(), 3, "{report:?}");
    assert!(
        report.violations[2].contains("n1 (cordoned); n4 (NotReady)"),
        "{report:?}"
    );
    cordon(&nodes, "n1", false).await;
    let report = checker.settled(SETTLE).await;
    assert!(report.left_cordoned.is_empty(), "{report:?}");
    assert_eq!(report.unavailable_now, ["n4"]);
    assert_eq!(
        report.violations.len(),
        3,
        "violations are kept: {report:?}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn remove_node_stops_its_agent_and_deletes_the_node_and_its_pods() {
    let (_emulator, client, cluster, v1, v2) = setup(&["n1", "n2"]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let api: Api<BootcNode> = Api::all(client.clone());
    create_node(&api, &bootc_node("n1", &v1)).await;
    wait_reason(&api, "n1", "Idle").await;
    cluster
        .add_pod("n1", "apps", "web-1", BTreeMap::new(), PodOwner::None)
        .await
        .unwrap();
    cluster
        .add_pod("n2", "apps", "web-2", BTreeMap::new(), PodOwner::None)
        .await
        .unwrap();
    let host = cluster.host("n1").unwrap();

    cluster.remove_node("n1").await.unwrap();
    assert!(nodes.get_opt("n1").await.unwrap().is_none());
    assert!(nodes.get_opt("n2").await.unwrap().is_some());
    assert!(cluster.host("n1").is_none());
    assert_eq!(cluster.nodes(), ["n2"]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "apps");
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["web-2"], "pods bound to the removed node are gone");

    // Its agent is gone: a new desired image is not staged. The same change made after
    // it to n2, whose agent runs, is staged there: by then n1's agent, were it alive,
    // would have had its event too.
    patch_bootc_node(&api, "n1", json!({"spec": {"desiredImage": v2}})).await;
    create_node(&api, &bootc_node("n2", &v2)).await;
    let n2 = cluster.host("n2").unwrap();
    wait_for("n2 staged", async || {
        (n2.counters().stages >= 1).then_some(())
    })
    .await;
    assert_eq!(host.counters().stages, 0);
    assert_eq!(
        idle_reason(&api.get("n1").await.unwrap()),
        Some("Idle"),
        "nobody reports for the removed node"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_killed_agent_is_restarted_and_carries_on() {
    let (_emulator, client, cluster, v1, v2) = setup(&["n1"]).await;
    let api: Api<BootcNode> = Api::all(client.clone());
    create_node(&api, &bootc_node("n1", &v1)).await;
    wait_reason(&api, "n1", "Idle").await;
    assert_eq!(cluster.agent_starts("n1"), Some(1));
    assert!(cluster.agent_running("n1"));
    assert!(!cluster.kill_agent("nope").await);

    // Killed mid-stage: the pull hangs, the agent dies, a new one takes over.
    let host = cluster.host("n1").unwrap();
    host.set_behaviour(Behaviour {
        stage_hangs: true,
        ..options().behaviour
    });
    patch_bootc_node(&api, "n1", json!({"spec": {"desiredImage": v2}})).await;
    wait_for("the pull to start", async || {
        (host.counters().stages == 1).then_some(())
    })
    .await;
    // Pulls from now on complete; the one in flight keeps hanging.
    host.set_behaviour(options().behaviour);
    assert!(cluster.kill_agent("n1").await);
    wait_for("a second agent", async || {
        (cluster.agent_starts("n1") == Some(2)).then_some(())
    })
    .await;
    // The new agent cancels the orphaned pull and stages again.
    let staged = wait_reason(&api, "n1", "Staged").await;
    assert_eq!(
        staged.status.unwrap().staged.unwrap().image.image_digest,
        digest('2')
    );
    assert_eq!(host.counters().cancelled_stages, 1);
    assert_eq!(host.counters().reboots, 0);
    cluster.stop().await;
}

#[tokio::test]
async fn pods_are_bound_to_nodes_with_their_owners_and_can_be_evicted() {
    let (_emulator, client, cluster, _, _) = setup(&["n1"]).await;
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let cases = [
        (
            "web-1",
            PodOwner::ReplicaSet("web".to_owned()),
            Some("ReplicaSet"),
        ),
        (
            "web-2",
            PodOwner::ReplicaSet("web".to_owned()),
            Some("ReplicaSet"),
        ),
        (
            "agent",
            PodOwner::DaemonSet("agent".to_owned()),
            Some("DaemonSet"),
        ),
        ("bare", PodOwner::None, None),
    ];
    for (name, owner, _) in &cases {
        cluster
            .add_pod("n1", "apps", name, labels.clone(), owner.clone())
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "apps");
    for (name, _, kind) in &cases {
        let pod = pods.get(name).await.unwrap();
        assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("n1"));
        let owner = pod
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .next();
        assert_eq!(owner.as_ref().map(|o| o.kind.as_str()), *kind, "{name}");
        assert!(owner.is_none_or(|o| o.controller == Some(true) && !o.uid.is_empty()));
        let status = pod.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(
            status
                .conditions
                .unwrap()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        );
    }
    // One ReplicaSet for both of its pods.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "apps");
    assert_eq!(
        replica_sets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // A drain's eviction deletes the pod; nothing recreates it.
    pods.evict("web-1", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("web-1").await.unwrap().is_none());
    let on_node = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_node.items.len(), 3);
    assert!(replica_sets.get_opt("web").await.unwrap().is_some());
    cluster.stop().await;
}

#[tokio::test]
async fn the_kubelet_marks_the_node_ready_only_the_ready_delay_after_the_host_is_up() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let catalog = Catalog::new();
    let v1 = catalog.push(REPO, "v1", &digest('1'), None);
    let cluster = SimCluster::start(emulator.config(), catalog).await.unwrap();
    let delay = Duration::from_secs(2);
    let host = cluster
        .add_node(
            "n1",
            &v1,
            &SimOptions {
                ready_delay: delay,
                ..options()
            },
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut boots = host.boots();
    let boot_before = host.boot_id();
    wait_for("the first agent", async || {
        cluster.agent_running("n1").then_some(())
    })
    .await;
    // Any reboot (here one the host does on its own) takes the Node down, and its
    // agent with it, even one without a BootcNode to follow.
    host.reboot(false).await.unwrap();
    wait_for("n1 NotReady", async || {
        (node_ready(&nodes.get("n1").await.ok()?) == Some(false)).then_some(())
    })
    .await;
    tokio::time::timeout(DEADLINE, boots.changed())
        .await
        .unwrap()
        .unwrap();
    let up = Instant::now();
    assert!(host.is_up());
    assert_eq!(
        node_ready(&nodes.get("n1").await.unwrap()),
        Some(false),
        "not Ready as soon as the host is up"
    );
    let node = wait_for("n1 Ready", async || {
        let node = nodes.get("n1").await.ok()?;
        (node_ready(&node) == Some(true)).then_some(node)
    })
    .await;
    assert!(up.elapsed() >= delay - Duration::from_millis(200));
    assert_ne!(host.boot_id(), boot_before);
    assert_eq!(node_boot_id(&node).replace('-', ""), host.boot_id());
    wait_for("a new agent", async || {
        (cluster.agent_starts("n1") == Some(2)).then_some(())
    })
    .await;
    cluster.stop().await;
}
