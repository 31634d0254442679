//! The roles in deploy/ hold every API call the components make, and grant nothing they
//! do not use.
//!
//! A representative rollout runs against the API emulator: two controller replicas
//! electing a leader on a Lease in bootc-system (in-process, with the binary's
//! User-Agent), three simulated nodes with the real agent run loop (host-sim, whose
//! agents carry the agent binary's User-Agent), pods to drain, a digest-pinned pool whose
//! pull Secret the controller reads and copies (the agents read the copy), a node leaving
//! the pool afterwards, and the pool naming no Secret at the end (the copy removed). Then every request in the emulator's log is held to the manifests' RBAC:
//! the controller's requests to the controller's service account, the agents' to the
//! agent's; and every granted verb must have been used.
//!
//! The whole test suite is held to the same roles by `rbac-audit` after it ran (see
//! `scripts/test`); this test is the one that also asks for every grant to be used.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::MANAGED_LABEL;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_controller::leader::LeaseConfig;
use bootc_pool_controller::reconcile::{self, Dependencies};
use deploy_check::{
    AGENT_SA, Audit, Authorizer, CONTROLLER_SA, NAMESPACE, Request, documents, repo_root,
};
use host_sim::cluster::{PodOwner, SimCluster, SimOptions};
use host_sim::fixtures::{create_namespace, pull_secret, wait_within};
use host_sim::memory::Catalog;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SETUP_AGENT: &str = "deploy-check-setup";
const DEADLINE: Duration = Duration::from_secs(90);

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
    let deps = Dependencies {
        instance: identity.to_owned(),
        ..Dependencies::default()
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        reconcile::run_elected(client, deps, lease, async move {
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

async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_within(what, DEADLINE, check).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_a_rollout_is_allowed_by_the_roles() {
    let install = std::fs::read_to_string(repo_root().join(deploy_check::INSTALL)).unwrap();
    let authorizer = Authorizer::new(&documents(&install).unwrap());

    let emulator = Emulator::start().await.unwrap();
    let setup = client_as(&emulator, SETUP_AGENT, true);
    create_namespace(&setup, NAMESPACE).await;
    let secrets: Api<Secret> = Api::namespaced(setup.clone(), NAMESPACE);
    let auth = r#"{"auths":{"registry.test":{"auth":"dXNlcjpwYXNz"}}}"#.to_owned();
    secrets
        .create(&PostParams::default(), &pull_secret("pull", auth))
        .await
        .unwrap();

    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions("registry.test/os", [Some("k1"), Some("k2")]);
    let cluster = SimCluster::start(emulator.config(), Arc::clone(&catalog))
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

    // The controller's copy was what the agents read; once the pool names no Secret, it
    // goes.
    let copy = "bootc-pull-workers";
    let agent_gets = |log: &[kube_emulator::RequestRecord]| {
        log.iter().any(|r| {
            deploy_check::subject_of(&r.user_agent) == Some(AGENT_SA)
                && r.resource == "secrets"
                && r.name == copy
        })
    };
    assert!(
        agent_gets(&emulator.handle().requests()),
        "no agent read the copy"
    );
    pools
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"pullSecretRef": null}})),
        )
        .await
        .unwrap();
    wait_for("the copy removed", async || {
        secrets.get_opt(copy).await.ok()?.is_none().then_some(())
    })
    .await;

    a.stop().await;
    b.stop().await;
    cluster.stop().await;

    // Every request, held to the roles.
    let log = emulator.handle().requests();
    let audit = Audit::of(
        &authorizer,
        log.iter()
            .map(|r| (r.user_agent.as_str(), Request::from(r), 1)),
    );
    let denied: Vec<String> = audit
        .denied
        .iter()
        .map(|(subject, request, n)| format!("{subject}: {request} ({n}×)"))
        .collect();
    assert!(denied.is_empty(), "requests outside the roles: {denied:#?}");
    let controller = audit.total(CONTROLLER_SA);
    let agent = audit.total(AGENT_SA);
    println!(
        "checked {controller} controller requests and {agent} agent requests against the roles; none denied"
    );
    for subject in [CONTROLLER_SA, AGENT_SA] {
        println!("{subject}: {:?}", audit.checked.get(subject));
    }
    assert!(controller > 50, "the controller made {controller}");
    assert!(agent >= 6, "the agents made {agent}");

    // The other way round: every verb a role grants was used, but for those with a
    // reason here.
    let unexercised_ok: BTreeMap<&str, &str> = [
        (
            "update node.bootc.dev/bootcnodepools/finalizers",
            "checked by an admission plugin when a BootcNode is created with blockOwnerDeletion, not an API call",
        ),
        (
            "patch node.bootc.dev/bootcnodes/status",
            "written only when a drain is held up (`status.drainBlocked`), which this rollout has no disruption budget to cause; the held-up drain tests use it under the suite-wide audit",
        ),
        (
            "patch events.k8s.io/events",
            "only a repeated event is patched (a series); a short rollout may repeat none",
        ),
    ]
    .into();
    for subject in [CONTROLLER_SA, AGENT_SA] {
        for key in audit.unused_grants(&authorizer, subject) {
            assert!(
                unexercised_ok.contains_key(key.as_str()),
                "{subject} is granted `{key}` but never used it"
            );
        }
    }
}
