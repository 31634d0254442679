//! A cluster started on local clients: the agents and kubelets reach the emulator
//! without sockets and are still served, logged and watched as over HTTP.

use std::time::Duration;

use bootc_crds::node::BootcNode;
use bootc_node_agent::run;
use kube::api::{Api, PostParams};
use kube_emulator::Emulator;
use tokio::time::Instant;

use super::{SimCluster, SimOptions, USER_AGENT};
use crate::fixtures::{bootc_node, idle_reason};
use crate::memory::Catalog;

const REPO: &str = "registry.test/os";
const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn local_agents_stage_through_their_watch_and_are_logged_by_user_agent() {
    let emulator = Emulator::start().await.expect("emulator");
    let handle = emulator.handle();
    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions(REPO, [Some("k1"), Some("k2")]);
    let cluster = SimCluster::start_local(&handle, catalog)
        .await
        .expect("cluster");
    // A poll interval no test waits out: only the watch can bring the BootcNode.
    let options = SimOptions {
        poll_interval: Duration::from_secs(3600),
        ..SimOptions::default()
    };
    cluster.add_node("n1", &v1, &options).await.expect("add n1");

    // The test plays the controller over HTTP; the agent must see its BootcNode through
    // its watch.
    let api: Api<BootcNode> = Api::all(emulator.client().expect("client"));
    let started = Instant::now();
    api.create(&PostParams::default(), &bootc_node("n1", &v2))
        .await
        .expect("create BootcNode");
    loop {
        let node = api.get("n1").await.expect("get BootcNode");
        if idle_reason(&node) == Some("Staged") {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "n1 never reported Staged: {:?}",
            node.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let requests = handle.requests();
    let by = |ua: &str, verb: &str, resource: &str| {
        requests
            .iter()
            .filter(|r| r.user_agent == ua && r.verb == verb && r.resource == resource)
            .count()
    };
    assert_eq!(by(USER_AGENT, "create", "nodes"), 1, "{requests:#?}");
    assert_eq!(by(USER_AGENT, "create", "customresourcedefinitions"), 2);
    assert!(
        by(run::USER_AGENT, "watch", "bootcnodes") >= 1,
        "{requests:#?}"
    );
    let agent_writes = requests
        .iter()
        .filter(|r| r.user_agent == run::USER_AGENT && r.is_write())
        .count();
    assert!(agent_writes >= 1, "{requests:#?}");
    cluster.stop().await;
}
