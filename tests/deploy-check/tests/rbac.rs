//! The roles in deploy/ hold every API call the components make, and grant nothing they
//! do not use.
//!
//! A representative rollout runs against the API emulator: two controller replicas
//! electing a leader on a Lease in bootc-system (in-process, with the binary's
//! User-Agent), three simulated nodes with the real agent run loop (host-sim), pods to
//! drain, a digest-pinned pool whose pull Secret the controller and the agents read, and
//! a node leaving the pool afterwards. Then every request in the emulator's log is held
//! to the manifests' RBAC: the controller's requests to the controller's service
//! account, the agents' to the agent's.
//!
//! Telling requests apart: the controller's carry `reconcile::USER_AGENT`. The simulated
//! cluster's agents and kubelets share one client (User-Agent `host-sim`); the agent's
//! code constructs API handles for BootcNodes and Secrets only (checked below on its
//! source), and the kubelet part and the test set-up touch neither, so host-sim requests
//! on those two are the agents'. Every other host-sim request must be on a resource the
//! kubelet part or the set-up uses, so nothing goes unchecked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::MANAGED_LABEL;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::leader::LeaseConfig;
use bootc_pool_controller::reconcile::{self, Options};
use deploy_check::{Authorizer, NAMESPACE, Request, documents, repo_root};
use host_sim::cluster::{PodOwner, SimCluster, SimOptions};
use host_sim::memory::Catalog;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_emulator::{Emulator, RequestRecord};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const SIM_AGENT: &str = "host-sim";
const SETUP_AGENT: &str = "deploy-check-setup";
const DEADLINE: Duration = Duration::from_secs(90);
const CONTROLLER_SA: &str = "bootc-pool-controller";
const AGENT_SA: &str = "bootc-node-agent";

fn client_as(emulator: &Emulator, user_agent: &'static str, retry: bool) -> Client {
    let mut config = emulator.config();
    config.default_retry = retry;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(user_agent),
    ));
    Client::try_from(config).unwrap()
}

struct Replica {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// A controller replica as the binary runs it: leader election on the Lease in the
/// controller's namespace, a client without 429 retries, the controller's User-Agent.
fn replica(emulator: &Emulator, identity: &str) -> Replica {
    let client = client_as(emulator, reconcile::USER_AGENT, false);
    let lease = LeaseConfig::new("bootc-pool-controller", NAMESPACE, identity);
    let options = Options {
        instance: identity.to_owned(),
        ..Options::default()
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        reconcile::run_elected(client, options, lease, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Replica {
        stop: Some(stop),
        task,
    }
}

impl Replica {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), &mut self.task).await;
        self.task.abort();
    }
}

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn request_of(r: &RequestRecord) -> Request {
    Request {
        verb: r.verb.clone(),
        group: r.group.clone(),
        resource: r.resource.clone(),
        subresource: r.subresource.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// The API handles the agent's code constructs: `Api<T>` types named in agent/src.
#[test]
fn the_agent_code_touches_only_bootcnodes_and_secrets() {
    let mut types = BTreeSet::new();
    let mut stack = vec![repo_root().join("agent/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for part in text.split("Api<").skip(1) {
                    types.insert(part.split('>').next().unwrap().trim().to_string());
                }
                for part in text.split("Api::<").skip(1) {
                    types.insert(part.split('>').next().unwrap().trim().to_string());
                }
                assert!(
                    !text.contains("Recorder::new") && !text.contains(".request::<"),
                    "{}: the agent makes API calls this test does not classify",
                    path.display()
                );
            }
        }
    }
    assert_eq!(
        types,
        BTreeSet::from(["BootcNode".to_string(), "Secret".to_string()]),
        "the agent's API handles changed: update the classification in this test"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_a_rollout_is_allowed_by_the_roles() {
    let install = std::fs::read_to_string(repo_root().join(deploy_check::INSTALL)).unwrap();
    let authorizer = Authorizer::new(&documents(&install).unwrap());

    let emulator = Emulator::start().await.unwrap();
    let setup = client_as(&emulator, SETUP_AGENT, true);
    let namespaces: Api<Namespace> = Api::all(setup.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(setup.clone(), NAMESPACE);
    let auth = br#"{"auths":{"registry.test":{"auth":"dXNlcjpwYXNz"}}}"#.to_vec();
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some("pull".into()),
                    namespace: Some(NAMESPACE.into()),
                    ..Default::default()
                },
                type_: Some("kubernetes.io/dockerconfigjson".into()),
                data: Some(BTreeMap::from([(
                    ".dockerconfigjson".to_string(),
                    ByteString(auth),
                )])),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let catalog = Catalog::new();
    let v1 = catalog.push(
        "registry.test/os",
        "v1",
        &format!("sha256:{}", "1".repeat(64)),
        Some("k1"),
    );
    let v2 = catalog.push(
        "registry.test/os",
        "v2",
        &format!("sha256:{}", "2".repeat(64)),
        Some("k2"),
    );
    let cluster = SimCluster::start(client_as(&emulator, SIM_AGENT, true), Arc::clone(&catalog))
        .await
        .unwrap();
    let options = SimOptions {
        node_labels: BTreeMap::from([("role".to_owned(), "worker".to_owned())]),
        ..SimOptions::default()
    };
    let names = ["n1", "n2", "n3"];
    for (i, n) in names.iter().enumerate() {
        cluster.add_node(n, &v1, &options).await.unwrap();
        cluster
            .add_pod(
                n,
                "apps",
                &format!("web-{i}"),
                BTreeMap::from([("app".to_owned(), "web".to_owned())]),
                PodOwner::ReplicaSet("web".into()),
            )
            .await
            .unwrap();
    }

    let a = replica(&emulator, "bootc-pool-controller-a");
    let b = replica(&emulator, "bootc-pool-controller-b");
    let pools: Api<BootcNodePool> = Api::all(setup.clone());
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "workers"},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": v2},
            "rollout": {"maxUnavailable": 1},
            "pullSecretRef": {"name": "pull", "namespace": NAMESPACE},
        }
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    wait_for("every node on the new image", async || {
        let p = pools.get("workers").await.ok()?;
        let s = p.status?;
        let done = s.updated_count == 3
            && s.conditions
                .iter()
                .any(|c| c.type_ == "UpToDate" && c.reason == "AllUpdated");
        done.then_some(())
    })
    .await;
    for n in names {
        assert_eq!(cluster.host(n).unwrap().counters().reboots, 1, "{n}");
    }

    // A node leaves the pool: its BootcNode is deleted and the managed label removed.
    let nodes: Api<Node> = Api::all(setup.clone());
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": null}}})),
        )
        .await
        .unwrap();
    let bootc: Api<BootcNode> = Api::all(setup.clone());
    wait_for("n3 let go", async || {
        let gone = bootc.get_opt("n3").await.ok()?.is_none();
        let node = nodes.get("n3").await.ok()?;
        let unlabelled = !node
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(MANAGED_LABEL);
        (gone && unlabelled).then_some(())
    })
    .await;

    a.stop().await;
    b.stop().await;
    cluster.stop().await;

    // Every request, held to the roles.
    let log = emulator.handle().requests();
    let kubelet_and_setup: BTreeSet<&str> = [
        "nodes",
        "nodes/status",
        "pods",
        "pods/status",
        "namespaces",
        "replicasets",
        "daemonsets",
        "customresourcedefinitions",
    ]
    .into();
    let mut denied = Vec::new();
    let mut checked: BTreeMap<&str, Vec<Request>> = BTreeMap::new();
    let mut unclassified = Vec::new();
    for r in &log {
        let request = request_of(r);
        let subject = if r.user_agent == reconcile::USER_AGENT {
            CONTROLLER_SA
        } else if r.user_agent == SIM_AGENT {
            let agents =
                r.group == "node.bootc.dev" || (r.group.is_empty() && r.resource == "secrets");
            if !agents {
                if !kubelet_and_setup.contains(request.full_resource().as_str()) {
                    unclassified.push(format!("{request} ({})", r.path));
                }
                continue;
            }
            AGENT_SA
        } else {
            continue;
        };
        if r.verb == "discovery" {
            // Discovery is open to every authenticated identity (system:discovery).
            continue;
        }
        if !authorizer.allows(NAMESPACE, subject, &request) {
            denied.push(format!("{subject}: {request} ({})", r.path));
        }
        checked.entry(subject).or_default().push(request);
    }
    assert!(
        unclassified.is_empty(),
        "host-sim requests neither the agents' nor the kubelet's: {unclassified:#?}"
    );
    assert!(denied.is_empty(), "requests outside the roles: {denied:#?}");
    let controller = checked.get(CONTROLLER_SA).cloned().unwrap_or_default();
    let agent = checked.get(AGENT_SA).cloned().unwrap_or_default();
    println!(
        "checked {} controller requests and {} agent requests against the roles; none denied",
        controller.len(),
        agent.len()
    );
    for (subject, requests) in [(CONTROLLER_SA, &controller), (AGENT_SA, &agent)] {
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for r in requests.iter() {
            let key = format!("{} {}/{}", r.verb, r.group, r.full_resource());
            *by_kind.entry(key).or_default() += 1;
        }
        println!("{subject}: {by_kind:?}");
    }
    assert!(
        controller.len() > 50,
        "the controller made {}",
        controller.len()
    );
    assert!(agent.len() >= 6, "the agents made {}", agent.len());

    // The other way round: every verb a role grants was used, but for those with a
    // reason here.
    let unexercised_ok: BTreeMap<&str, &str> = [
        (
            "update node.bootc.dev/bootcnodepools/finalizers",
            "checked by an admission plugin when a BootcNode is created with blockOwnerDeletion, not an API call",
        ),
        (
            "patch events.k8s.io/events",
            "only a repeated event is patched (a series); a short rollout may repeat none",
        ),
    ]
    .into();
    for (subject, requests) in [(CONTROLLER_SA, &controller), (AGENT_SA, &agent)] {
        for grant in authorizer.grants(NAMESPACE, subject) {
            for group in &grant.rule.api_groups {
                for resource in &grant.rule.resources {
                    for verb in &grant.rule.verbs {
                        let used = requests.iter().any(|r| {
                            r.verb == *verb && r.group == *group && r.full_resource() == *resource
                        });
                        let key = format!("{verb} {group}/{resource}");
                        assert!(
                            used || unexercised_ok.contains_key(key.as_str()),
                            "{subject} is granted `{key}` by {} but never used it",
                            grant.role
                        );
                    }
                }
            }
        }
    }
}
