//! The harness plays the kubelet: the Node object appears Ready when the node is up,
//! turns NotReady when it goes down for good, and is Ready again after a reboot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Api;

async fn ready(api: &Api<KubeNode>, name: &str) -> Option<(String, String)> {
    let node = api.get_opt(name).await.unwrap()?;
    let conditions = node.status?.conditions?;
    let c = conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((c.status, c.reason.unwrap_or_default()))
}

async fn wait_ready(api: &Api<KubeNode>, name: &str, want: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = ready(api, name).await;
        if got.as_ref().is_some_and(|(s, _)| s == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Node {name} Ready={want} not seen within {timeout:?}; last {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_object_follows_the_container() {
    let emulator = kube_emulator::Emulator::start().await.unwrap();
    let api: Api<KubeNode> = Api::all(emulator.client().unwrap());
    let dir = common::test_dir("kubelet");
    let mut options = common::options("sim-kubelet", dir.path());
    options.kube = Some(emulator.client().unwrap());
    common::seed_plain(&options.state_dir);
    let node = host_sim::Node::start(options).await.unwrap();

    wait_ready(&api, "sim-kubelet", "True", Duration::from_secs(10)).await;
    let object = api.get("sim-kubelet").await.unwrap();
    assert_eq!(
        object.metadata.labels.unwrap()["kubernetes.io/hostname"],
        "sim-kubelet"
    );
    let boot_id = object.status.unwrap().node_info.unwrap().boot_id;
    assert_eq!(
        boot_id.replace('-', ""),
        node.status().boot_id.unwrap(),
        "nodeInfo.bootID is the node's boot ID"
    );

    // A reboot: NotReady while down (the watch shows it), Ready again after.
    let mut events = emulator.handle().events();
    let boots = node.status().boots;
    node.reboot(false).await.unwrap();
    node.wait_booted(boots, common::BOOT).await.unwrap();
    wait_ready(&api, "sim-kubelet", "True", Duration::from_secs(10)).await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.object["metadata"]["name"] == "sim-kubelet"
            && let Some(conditions) = event.object["status"]["conditions"].as_array()
        {
            for c in conditions.iter().filter(|c| c["type"] == "Ready") {
                seen.push(c["status"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    assert_eq!(seen, ["False", "True"], "Ready went False then True");

    // Never coming back: NotReady for good.
    node.never_come_back();
    node.reboot(false).await.unwrap();
    node.wait_stopped(common::BOOT).await.unwrap();
    wait_ready(&api, "sim-kubelet", "False", Duration::from_secs(10)).await;
    assert_eq!(ready(&api, "sim-kubelet").await.unwrap().1, "NodeNotReady");
}
