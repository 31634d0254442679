//! The controller against a real registry (Debian's docker-registry on loopback, images
//! built with umoci and pushed with skopeo), the API emulator and simulated nodes: tags
//! followed push after push, manifest lists, pull secrets, failures that keep the last
//! target, deployHistory across restarts, /metrics during a rollout, and two replicas
//! with one leader.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::leader::LeaseConfig;
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::Dependencies;
use bootc_pool_controller::resolve::{Resolver, ResolverOptions};
use bootc_pool_controller::server::{Health, Server};
use common::*;
use host_sim::cluster::{Invariants, SimCluster, SimOptions};
use host_sim::fixtures::pull_secret;
use host_sim::memory::Catalog;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use kube_emulator::Emulator;
use serde_json::{Value, json};
use test_registry::Registry;
use tokio::sync::oneshot;
use tokio::time::Instant;

fn options(registry: &Registry, metrics: &Metrics) -> Dependencies {
    Dependencies {
        resolver: Resolver::new(ResolverOptions {
            insecure_registries: vec![registry.host()],
            ..ResolverOptions::default()
        }),
        metrics: metrics.clone(),
        ..Dependencies::default()
    }
}

fn pool(image: &str, extra: Value) -> BootcNodePool {
    let mut spec = json!({
        "image": {"ref": image, "resolveIntervalSeconds": 30},
        "rollout": {"maxUnavailable": 1},
        "history": {"limit": 3},
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    workers_pool_spec(spec)
}

async fn cluster(
    emulator: &Emulator,
    catalog: &Arc<Catalog>,
    nodes: &[&str],
    image: &str,
) -> SimCluster {
    let cluster = SimCluster::start(emulator.config(), Arc::clone(catalog))
        .await
        .unwrap();
    let options = SimOptions {
        node_labels: [("role".to_owned(), "worker".to_owned())].into(),
        ..SimOptions::default()
    };
    for n in nodes {
        cluster.add_node(n, image, &options).await.unwrap();
    }
    cluster
}

/// Pushes `tag` to the real registry and tells the simulated hosts' catalog about it.
fn push(registry: &Registry, catalog: &Catalog, tag: &str, version: &str, kernel: &str) -> String {
    let digest = registry
        .push(
            "os",
            tag,
            &[
                ("org.opencontainers.image.version", version),
                ("dev.bootc-pool.sim.kernel", kernel),
            ],
        )
        .unwrap();
    catalog.push(
        &format!("{}/os", registry.host()),
        tag,
        &digest,
        Some(kernel),
    );
    digest
}

fn all_on(p: &BootcNodePool, digest: &str, nodes: i32) -> bool {
    let s = p.status.as_ref();
    s.is_some_and(|s| {
        s.target_digest.as_deref() == Some(digest)
            && s.updated_count == nodes
            && s.node_count == nodes
    }) && condition(p, "UpToDate").is_some_and(|c| c.1 == "AllUpdated")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_following_a_tag_rolls_out_each_push_and_keeps_its_history() {
    let registry = Registry::start().unwrap();
    let catalog = Catalog::new();
    let v1 = push(&registry, &catalog, "stable", "1.0", "k1");
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let nodes = ["n1", "n2", "n3"];
    let v1_pin = format!("{}/os@{v1}", registry.host());
    let cluster = cluster(&emulator, &catalog, &nodes, &v1_pin).await;
    let metrics = Metrics::new();
    let controller = start(&emulator, options(&registry, &metrics));
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        metrics.clone(),
        Health::new(),
    )
    .await
    .unwrap();
    let metrics_addr = server.local_addr().unwrap();
    let (server_stop, server_stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(server.run(async move {
        let _ = server_stopped.await;
    }));

    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let tag = format!("{}/os:stable", registry.host());
    pools
        .create(&PostParams::default(), &pool(&tag, json!({})))
        .await
        .unwrap();
    let p = wait_pool(&client, "workers", "the tag resolved and all on v1", |p| {
        all_on(p, &v1, 3)
    })
    .await;
    let s = p.status.unwrap();
    assert_eq!(s.target_image.as_deref(), Some(v1_pin.as_str()));
    assert_eq!(s.target_version.as_deref(), Some("1.0"));
    assert!(s.last_resolved_time.is_some() && s.next_resolve_time.is_some());
    assert_eq!(s.deploy_history.len(), 1);
    assert_eq!(s.deploy_history[0].digest, v1);
    assert_eq!(s.deploy_history[0].node_count, 3);

    // A new image on the same tag: picked up within one interval, rolled out.
    let invariants = Invariants::follow(emulator.handle(), 1, BTreeSet::new());
    let v2 = push(&registry, &catalog, "stable", "2.0", "k2");
    let pushed = Instant::now();
    let scrapes = tokio::spawn(async move {
        // Scrape /metrics through the rollout: the nodes move between states.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline && !seen.contains("UpToDate=3 after Rebooting") {
            let body = tokio::task::spawn_blocking(move || {
                test_registry::http(&metrics_addr.to_string(), "GET", "/metrics", &[], None)
            })
            .await
            .unwrap()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .unwrap_or_default();
            for line in body.lines().filter(|l| l.starts_with("bootc_pool_nodes{")) {
                if let Some((labels, value)) = line.rsplit_once(' ')
                    && value != "0"
                    && let Some(state) = labels
                        .split("state=\"")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                {
                    if state == "UpToDate" && value == "3" && seen.contains("Rebooting") {
                        seen.insert("UpToDate=3 after Rebooting".into());
                    }
                    seen.insert(state.to_owned());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        seen
    });
    let p = wait_pool(&client, "workers", "v2 resolved and rolled out", |p| {
        all_on(p, &v2, 3)
    })
    .await;
    let moved_after = pushed.elapsed();
    assert!(
        moved_after < Duration::from_secs(30 + 30),
        "the target moved {moved_after:?} after the push, more than one interval plus the rollout"
    );
    let s = p.status.unwrap();
    assert_eq!(s.target_version.as_deref(), Some("2.0"));
    let history: Vec<(String, i32)> = s
        .deploy_history
        .iter()
        .map(|e| (e.digest.clone(), e.node_count))
        .collect();
    assert_eq!(history, vec![(v2.clone(), 3), (v1.clone(), 3)]);
    let report = invariants.settled(Duration::from_secs(10)).await;
    assert!(report.is_clean_rollout(), "{report:?}");
    let seen = scrapes.await.unwrap();
    assert!(
        seen.contains("Rebooting") && seen.contains("UpToDate=3 after Rebooting"),
        "states seen on /metrics: {seen:?}"
    );
    let body = tokio::task::spawn_blocking(move || {
        test_registry::http(&metrics_addr.to_string(), "GET", "/metrics", &[], None).unwrap()
    })
    .await
    .unwrap();
    let body = String::from_utf8_lossy(&body.body).into_owned();
    assert!(body.contains("bootc_pool_reboots_approved_total"), "{body}");
    assert!(
        body.contains(&format!("digest=\"{v2}\"")),
        "target info: {body}"
    );

    // A controller restart (and the watches replayed) leave deployHistory as it was.
    controller.stop().await;
    let before = s.deploy_history.clone();
    let controller = start(&emulator, options(&registry, &metrics));
    let pools_api: Api<BootcNodePool> = Api::all(client.clone());
    never_over_reconciles(
        &client,
        &metrics,
        ("workers", 3),
        "deployHistory changed after the restart",
        async || {
            let now = pools_api.get("workers").await.ok()?.status?.deploy_history;
            (now != before).then(|| format!("{now:?}"))
        },
    )
    .await;
    controller.stop().await;
    let _ = server_stop.send(());
    let _ = server.await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_list_is_the_target_and_per_arch_reports_count_as_on_it() {
    let registry = Registry::start().unwrap();
    let catalog = Catalog::new();
    let v1 = push(&registry, &catalog, "v1", "1.0", "k1");
    let index = registry
        .push_index(
            "os",
            "multi",
            &[("org.opencontainers.image.version", "3.0")],
        )
        .unwrap();
    let arch = if test_registry::host_architecture() == "arm64" {
        &index.arm64
    } else {
        &index.amd64
    };
    catalog.push_list(
        &format!("{}/os", registry.host()),
        "multi",
        &index.index,
        arch,
        Some("k3"),
    );
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let cluster = cluster(
        &emulator,
        &catalog,
        &["n1", "n2"],
        &format!("{}/os@{v1}", registry.host()),
    )
    .await;
    let controller = start(&emulator, options(&registry, &Metrics::new()));
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .create(
            &PostParams::default(),
            &pool(&format!("{}/os:multi", registry.host()), json!({})),
        )
        .await
        .unwrap();
    let p = wait_pool(&client, "workers", "all on the list", |p| {
        all_on(p, &index.index, 2)
    })
    .await;
    // The nodes report the per-architecture digest and count as on the list digest.
    let bootc: Api<BootcNode> = Api::all(client.clone());
    let n1 = bootc.get("n1").await.unwrap();
    let booted = n1.status.unwrap().booted.unwrap();
    assert_eq!(&booted.image.image_digest, arch);
    assert_ne!(booted.image.image_digest, index.index);
    let s = p.status.unwrap();
    assert_eq!(s.target_version.as_deref(), Some("3.0"));
    // One entry for the list, keyed by the index digest, with both nodes (v1's entry
    // may share its second, so the order between the two is not asserted).
    let entry = s
        .deploy_history
        .iter()
        .find(|e| e.digest == index.index)
        .unwrap_or_else(|| panic!("no entry for the index: {:#?}", s.deploy_history));
    assert_eq!(entry.node_count, 2);
    assert!(
        s.deploy_history.iter().all(|e| e.digest != *arch),
        "{:#?}",
        s.deploy_history
    );
    controller.stop().await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_secrets_resolve_private_tags_and_failures_keep_the_last_target() {
    let mut registry = Registry::start_with_auth("puller", "s3cret").unwrap();
    let catalog = Catalog::new();
    let v1 = push(&registry, &catalog, "stable", "1.0", "k1");
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let cluster = cluster(
        &emulator,
        &catalog,
        &["n1"],
        &format!("{}/os@{v1}", registry.host()),
    )
    .await;
    ensure_namespace(&client, INSTALL_NAMESPACE).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), INSTALL_NAMESPACE);
    secrets
        .create(
            &PostParams::default(),
            &pull_secret("pull", registry.auth_json()),
        )
        .await
        .unwrap();
    let controller = start(&emulator, options(&registry, &Metrics::new()));
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let tag = format!("{}/os:stable", registry.host());
    pools
        .create(
            &PostParams::default(),
            &pool(
                &tag,
                json!({"pullSecretRef": {"name": "pull", "namespace": INSTALL_NAMESPACE}}),
            ),
        )
        .await
        .unwrap();
    wait_pool(&client, "workers", "resolved with the pull secret", |p| {
        all_on(p, &v1, 1)
    })
    .await;
    let bootc: Api<BootcNode> = Api::all(client.clone());
    let n1 = bootc.get("n1").await.unwrap();
    let hash = n1.spec.pull_secret_hash.clone().unwrap();
    assert!(hash.starts_with("sha256:"), "{hash}");

    // A wrong password: a clear condition, the target kept, the new hash propagated.
    let wrong = registry.auth_json().replace(
        &test_registry::base64(b"puller:s3cret"),
        &test_registry::base64(b"puller:wrong"),
    );
    assert_ne!(wrong, registry.auth_json());
    secrets
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", wrong.as_str()),
        )
        .await
        .unwrap();
    // The Secret's change alone triggers the pool (the controller watches Secrets'
    // metadata and reads the referenced one's content).
    let p = wait_pool(&client, "workers", "Unauthorized reported", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "TagResolutionError")
    })
    .await;
    let message = condition(&p, "Degraded").unwrap().2;
    assert!(message.contains("bootc-system/pull"), "{message}");
    assert!(
        !message.contains("wrong") && !message.contains("s3cret"),
        "{message}"
    );
    assert_eq!(
        p.status.unwrap().target_digest.as_deref(),
        Some(v1.as_str())
    );
    let n1 = bootc.get("n1").await.unwrap();
    assert_ne!(
        n1.spec.pull_secret_hash.unwrap(),
        hash,
        "the new content's hash"
    );

    // The good password back; then a missing tag: NotFound, the target kept.
    secrets
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", registry.auth_json()),
        )
        .await
        .unwrap();
    patch_pool(
        &client,
        "workers",
        json!({"spec": {"image": {"ref": format!("{}/os:nope", registry.host())}}}),
    )
    .await;
    let p = wait_pool(&client, "workers", "NotFound reported", |p| {
        condition(p, "Degraded").is_some_and(|c| c.2.contains("not found"))
    })
    .await;
    assert_eq!(
        p.status.unwrap().target_digest.as_deref(),
        Some(v1.as_str())
    );

    // Back to the good tag, then the registry stops: once the interval has passed, the
    // target is kept and the condition says the registry cannot be reached.
    patch_pool(&client, "workers", json!({"spec": {"image": {"ref": tag}}})).await;
    wait_pool(&client, "workers", "healthy again", |p| {
        condition(p, "Degraded").is_some_and(|c| c.1 == "Healthy")
    })
    .await;
    registry.stop();
    let p = wait_pool(&client, "workers", "the stopped registry reported", |p| {
        condition(p, "Degraded").is_some_and(|c| c.2.contains("cannot reach registry"))
    })
    .await;
    assert_eq!(
        p.status.unwrap().target_digest.as_deref(),
        Some(v1.as_str())
    );
    controller.stop().await;
    cluster.stop().await;
}

/// Where the shipped controller keeps its Lease (its Role for Leases is there).
const LEASE_NAMESPACE: &str = "bootc-system";
/// The replicas' User-Agents: the controller's, told apart by a suffix.
const REPLICA_A: &str = concat!(
    "bootc-pool-controller/",
    env!("CARGO_PKG_VERSION"),
    " replica-a"
);
const REPLICA_B: &str = concat!(
    "bootc-pool-controller/",
    env!("CARGO_PKG_VERSION"),
    " replica-b"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_and_hand_over_when_it_dies() {
    let catalog = Catalog::new();
    let digest = |c: char| format!("sha256:{}", c.to_string().repeat(64));
    let v1 = catalog.push("registry.test/os", "v1", &digest('1'), Some("k1"));
    let v2 = catalog.push("registry.test/os", "v2", &digest('2'), Some("k2"));
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let nodes = ["n1", "n2", "n3", "n4"];
    let cluster = cluster(&emulator, &catalog, &nodes, &v1).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let lease = |identity: &str| LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::new("bootc-pool-controller", LEASE_NAMESPACE, identity)
    };
    let a = start_elected(&emulator, REPLICA_A, lease("replica-a"));
    let b = start_elected(&emulator, REPLICA_B, lease("replica-b"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let holder = async || -> Option<String> {
        leases
            .get_opt("bootc-pool-controller")
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    };
    let first = wait_for("a leader", holder).await;
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools
        .create(&PostParams::default(), &pool(&v2, json!({})))
        .await
        .unwrap();
    // Wait for the rollout to be under way, then check who wrote what.
    wait_pool(&client, "workers", "one node updated", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count >= 1)
    })
    .await;
    let handle = emulator.handle();
    let writes_by = |agent: &str| {
        handle
            .requests()
            .iter()
            .filter(|r| r.user_agent.ends_with(agent) && r.resource != "leases")
            .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete"))
            .count()
    };
    let (leader, standby, standby_task, leader_task) = if first == "replica-a" {
        ("replica-a", "replica-b", b, a)
    } else {
        ("replica-b", "replica-a", a, b)
    };
    assert!(writes_by(leader) > 0, "the leader writes");
    assert_eq!(
        writes_by(standby),
        0,
        "the standby writes nothing but the Lease"
    );

    // The leader dies without releasing the Lease: the standby takes over within the
    // lease duration (plus a retry period) and the rollout finishes.
    leader_task.abort();
    let died = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if holder().await.as_deref() == Some(standby) {
            break;
        }
        assert!(Instant::now() < deadline, "no handover");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let handover = died.elapsed();
    // Not released, so the Lease must expire first: no sooner than a lease duration
    // after the last renewal, which came at most a retry period before the crash. (How
    // soon after is bounded only by the generous deadline above: a loaded machine may
    // delay the standby's next try.)
    assert!(
        handover >= Duration::from_millis(1000 - 200),
        "handover took {handover:?}"
    );
    println!("leader handover after a crash: {handover:?}");
    wait_pool(&client, "workers", "all updated after the handover", |p| {
        all_on(p, &digest('2'), 4)
    })
    .await;
    assert!(writes_by(standby) > 0, "the new leader carried on");
    standby_task.abort();
    cluster.stop().await;
}
