//! Pull Secrets reach nodes only through the controller's copy: a pool's pull Secret is
//! copied into the install's namespace under a name of the pool's, the BootcNodes name the
//! copy, the agents write its credentials to the hosts, a rotation of the source updates
//! the copy and the hash, the copy goes when the pool stops naming a Secret and when the
//! pool is deleted, and a pool naming a Secret in a namespace the controller may not read
//! is Degraded and gets no copy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_pool_common::pull_secret::secret_hash;
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use host_sim::fixtures::pull_secret;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::json;

/// The install's namespace (the controller's own).
const INSTALL: &str = INSTALL_NAMESPACE;
/// The copy of pool `workers`' pull Secret.
const COPY: &str = "bootc-pull-workers";

fn docker_config(user_pass: &str) -> Vec<u8> {
    let auth = test_registry::base64(user_pass.as_bytes());
    format!(r#"{{"auths":{{"registry.test":{{"auth":"{auth}"}}}}}}"#).into_bytes()
}

fn content(s: &Secret) -> Option<Vec<u8>> {
    s.data
        .as_ref()?
        .get(".dockerconfigjson")
        .map(|b| b.0.clone())
}

/// Waits until the copy holds `want`, every BootcNode names it with `want`'s hash and
/// every host has `want` written.
async fn wait_everywhere(
    client: &Client,
    cluster: &host_sim::cluster::SimCluster,
    nodes: &[&str],
    want: &[u8],
) {
    let copies: Api<Secret> = Api::namespaced(client.clone(), INSTALL);
    let bootc: Api<BootcNode> = Api::all(client.clone());
    let hash = secret_hash(want);
    wait_for("the copy, the BootcNodes and the hosts", async || {
        let copy = copies.get_opt(COPY).await.ok()??;
        if content(&copy).as_deref() != Some(want) {
            return None;
        }
        for n in nodes {
            let b = bootc.get_opt(n).await.ok()??;
            let r = b.spec.pull_secret_ref.as_ref()?;
            let named = r.name == COPY && r.namespace == INSTALL;
            if !named || b.spec.pull_secret_hash.as_deref() != Some(hash.as_str()) {
                return None;
            }
            if cluster.host(n)?.credentials().as_deref() != Some(want) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_pull_secret_reaches_its_nodes_only_through_the_controllers_copy() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    ensure_namespace(&client, INSTALL).await;
    ensure_namespace(&client, "apps").await;
    let sources: Api<Secret> = Api::namespaced(client.clone(), INSTALL);
    let first = docker_config("puller:first");
    sources
        .create(&PostParams::default(), &pull_secret("pull", first.clone()))
        .await
        .unwrap();
    let nodes = ["n1", "n2"];
    let (cluster, _v1, v2) =
        workers_cluster(&emulator, &nodes, host_sim::memory::Behaviour::default()).await;
    let controller = start(&emulator, Dependencies::default());
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let mut pool = workers_pool(&v2, json!({"maxUnavailable": 1}));
    pool.spec.pull_secret_ref = Some(bootc_crds::pool::SecretRef {
        name: "pull".into(),
        namespace: INSTALL.into(),
    });
    let pool = pools.create(&PostParams::default(), &pool).await.unwrap();

    // The copy: the source's content and type, owned by the pool, labelled as ours.
    wait_everywhere(&client, &cluster, &nodes, &first).await;
    let copy = sources.get(COPY).await.unwrap();
    assert_eq!(
        copy.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    let owners = copy.metadata.owner_references.clone().unwrap_or_default();
    assert!(
        owners.iter().any(|o| o.kind == "BootcNodePool"
            && o.name == "workers"
            && Some(&o.uid) == pool.metadata.uid.as_ref()),
        "{owners:?}"
    );
    assert_eq!(
        copy.labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("bootc-pool-controller")
    );
    wait_pool(&client, "workers", "the rollout with the copy", |p| {
        all_updated(p, 2)
    })
    .await;

    // Rotation of the source: the copy, the hash and the hosts follow.
    let second = docker_config("puller:second");
    sources
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", second.clone()),
        )
        .await
        .unwrap();
    wait_everywhere(&client, &cluster, &nodes, &second).await;

    // The pool stops naming a Secret: the copy goes and the BootcNodes name none.
    let bootc: Api<BootcNode> = Api::all(client.clone());
    patch_pool(&client, "workers", json!({"spec": {"pullSecretRef": null}})).await;
    wait_for(
        "the copy removed and the BootcNodes naming none",
        async || {
            let gone = sources.get_opt(COPY).await.ok()?.is_none();
            for n in nodes {
                let b = bootc.get_opt(n).await.ok()??;
                if b.spec.pull_secret_ref.is_some() || b.spec.pull_secret_hash.is_some() {
                    return None;
                }
            }
            gone.then_some(())
        },
    )
    .await;
    patch_pool(
        &client,
        "workers",
        json!({"spec": {"pullSecretRef": {"name": "pull", "namespace": INSTALL}}}),
    )
    .await;
    wait_everywhere(&client, &cluster, &nodes, &second).await;

    // A Secret in a namespace the controller was not allowed to read: Degraded with a
    // reason of its own that says how to allow it, and nothing copied.
    let theirs: Api<Secret> = Api::namespaced(client.clone(), "apps");
    theirs
        .create(
            &PostParams::default(),
            &pull_secret("theirs", first.clone()),
        )
        .await
        .unwrap();
    let others: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": "others"},
        "spec": {
            "nodeSelector": {"matchLabels": {"role": "other"}},
            "image": {"ref": v2},
            "pullSecretRef": {"name": "theirs", "namespace": "apps"},
        }
    }))
    .unwrap();
    pools.create(&PostParams::default(), &others).await.unwrap();
    let p = wait_pool(&client, "others", "PullSecretNotAllowed", |p| {
        condition(p, "Degraded").is_some_and(|c| c.0 == "True" && c.1 == "PullSecretNotAllowed")
    })
    .await;
    let message = condition(&p, "Degraded").unwrap().2;
    for part in ["apps/theirs", "--pull-secret-namespaces", "Role"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(
        sources
            .get_opt("bootc-pull-others")
            .await
            .unwrap()
            .is_none()
    );
    assert!(theirs.get_opt("bootc-pull-others").await.unwrap().is_none());

    // Deleting the pool removes its copy.
    pools
        .delete("workers", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the copy removed with the pool", async || {
        let copy_gone = sources.get_opt(COPY).await.ok()?.is_none();
        let pool_gone = pools.get_opt("workers").await.ok()?.is_none();
        (copy_gone && pool_gone).then_some(())
    })
    .await;
    assert!(
        sources.get_opt("pull").await.unwrap().is_some(),
        "the source stays"
    );

    controller.stop().await;
    cluster.stop().await;
}
