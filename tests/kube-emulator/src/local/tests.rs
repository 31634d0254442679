use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::{Emulator, FaultConfig};

const DEADLINE: Duration = Duration::from_secs(10);

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"k": value},
    }))
    .unwrap_or_default()
}

fn value(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("k").map(String::as_str)
}

#[tokio::test]
async fn a_local_client_creates_gets_lists_and_patches() {
    let emulator = Emulator::start().await.expect("emulator");
    let client = emulator.local_client("local-test/1.0").expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    let created = api
        .create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("create");
    assert_eq!(value(&created), Some("1"));
    assert!(created.metadata.resource_version.is_some());

    let got = api.get("a").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);

    api.create(&PostParams::default(), &config_map("b", "2"))
        .await
        .expect("create b");
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names, ["a", "b"]);

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "3"}})),
        )
        .await
        .expect("patch");
    assert_eq!(value(&patched), Some("3"));
    let stored = emulator
        .handle()
        .get("", "configmaps", "default", "a")
        .expect("stored");
    assert_eq!(stored["data"]["k"], "3");

    let missing = api.get("nope").await.expect_err("a missing object");
    assert!(
        matches!(&missing, kube::Error::Api(e) if e.code == 404),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_watch_through_a_local_client_receives_events() {
    let emulator = Emulator::start().await.expect("emulator");
    let watcher = emulator.local_client("watcher").expect("client");
    let writer = emulator.local_client("writer").expect("client");
    let watched: Api<ConfigMap> = Api::namespaced(watcher, "default");
    let written: Api<ConfigMap> = Api::namespaced(writer, "default");

    let params = WatchParams::default().fields("metadata.name=w");
    let mut stream = watched.watch(&params, "0").await.expect("watch").boxed();
    written
        .create(&PostParams::default(), &config_map("other", "x"))
        .await
        .expect("create other");
    written
        .create(&PostParams::default(), &config_map("w", "1"))
        .await
        .expect("create w");
    let event = tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .expect("an event in time")
        .expect("a watch event")
        .expect("the stream is open");
    match event {
        WatchEvent::Added(cm) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("w"));
            assert_eq!(value(&cm), Some("1"));
        }
        other => panic!("expected ADDED of w, got {other:?}"),
    }

    // Stopping the emulator ends the watch, as it closes watches over HTTP.
    emulator.handle().cut_watches();
    let end = tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .expect("the stream ends in time");
    assert!(matches!(end, Ok(None)), "{end:?}");
}

#[tokio::test]
async fn the_request_log_records_the_given_user_agent() {
    let emulator = Emulator::start().await.expect("emulator");
    let handle = emulator.handle();
    let api: Api<ConfigMap> = Api::namespaced(
        handle.local_client("agent-x/0.1").expect("client"),
        "default",
    );
    api.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("create");
    api.get("a").await.expect("get");
    let counts = handle.counters();
    assert_eq!(
        counts.by_user_agent.get("agent-x/0.1"),
        Some(&2),
        "{counts:?}"
    );
    let verbs: Vec<String> = handle.requests().into_iter().map(|r| r.verb).collect();
    assert_eq!(verbs, ["create", "get"]);
}

#[tokio::test]
async fn injected_faults_hit_local_clients_by_user_agent() {
    let emulator = Emulator::start().await.expect("emulator");
    let handle = emulator.handle();
    handle.set_faults(FaultConfig {
        error_rate: 1.0,
        error_codes: vec![500],
        user_agent: Some("faulty".to_owned()),
        ..FaultConfig::default()
    });
    let faulty: Api<ConfigMap> =
        Api::namespaced(handle.local_client("faulty").expect("client"), "default");
    let fine: Api<ConfigMap> =
        Api::namespaced(handle.local_client("fine").expect("client"), "default");
    let err = faulty
        .create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect_err("an injected fault");
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 500),
        "{err:?}"
    );
    fine.create(&PostParams::default(), &config_map("a", "1"))
        .await
        .expect("the other client is served");
    assert_eq!(handle.counters().injected, 1);
}

#[tokio::test]
async fn a_stopped_emulator_refuses_local_requests() {
    let emulator = Emulator::start().await.expect("emulator");
    let handle = emulator.handle();
    let api: Api<ConfigMap> =
        Api::namespaced(handle.local_client("late").expect("client"), "default");
    api.list(&ListParams::default())
        .await
        .expect("served while up");
    emulator.stop().await;
    let err = api
        .list(&ListParams::default())
        .await
        .expect_err("refused once stopped");
    assert!(err.to_string().contains("stopped"), "{err}");
}

#[test]
fn a_user_agent_that_is_no_header_value_is_an_error() {
    let app = std::sync::Arc::new(crate::server::App::new(
        "127.0.0.1:1".to_owned(),
        10,
        16,
        Duration::from_secs(5),
    ));
    assert!(super::client(app, "bad\nagent").is_err());
}
