//! The alert gate's credentials come from a Secret (`credentialsSecretRef`) and go
//! nowhere else: with an Alertmanager on loopback that answers only to them and fires an
//! alert, the rollout is held (`alertGate: Firing`), and neither the pool (status,
//! conditions), nor any Event, nor the metrics, nor the controller's logs carry the user
//! name, the password or their encoding. A Secret that is missing, or in a namespace the
//! controller may not read, closes the gate with a message naming it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bootc_crds::pool::{AlertGateState, BootcNodePool};
use bootc_pool_controller::metrics::Metrics;
use bootc_pool_controller::reconcile::Dependencies;
use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_emulator::Emulator;
use serde_json::json;

const USER: &str = "alice-ops";
const PASSWORD: &str = "s3cret-pa55";
/// `alice-ops:s3cret-pa55` in base64, as basic authentication sends it.
const ENCODED: &str = "YWxpY2Utb3BzOnMzY3JldC1wYTU1";
const INSTALL: &str = "bootc-system";

/// Everything the controller logs, at every level.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn install() -> Logs {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        logs
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// An Alertmanager that answers only to `alice-ops`: requests with and without the
/// credentials are counted.
#[derive(Default)]
struct Am {
    authorized: AtomicUsize,
    refused: AtomicUsize,
}

async fn alerts(State(am): State<Arc<Am>>, headers: HeaderMap) -> Response {
    let auth = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth != Some(&format!("Basic {ENCODED}")) {
        am.refused.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::UNAUTHORIZED, "unauthorized").into_response();
    }
    am.authorized.fetch_add(1, Ordering::SeqCst);
    let body = json!([{
        "labels": {"alertname": "NodeTrouble", "severity": "critical"},
        "status": {"state": "active"},
    }]);
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn secret(namespace: &str, name: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"username": USER, "password": PASSWORD},
    }))
    .unwrap()
}

async fn wait_gate(client: &kube::Client, state: AlertGateState, part: &str) -> BootcNodePool {
    let what = format!("the gate {state:?} saying {part:?}");
    wait_pool(client, "workers", &what, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.alert_gate.as_ref())
            .is_some_and(|g| g.state == state && g.message.as_deref().unwrap_or("").contains(part))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_from_a_secret_are_used_and_shown_nowhere() {
    let logs = Logs::install();
    let am = Arc::new(Am::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/api/v2/alerts", axum::routing::get(alerts))
        .with_state(Arc::clone(&am));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (_cluster, v1, v2) = workers_cluster(&emulator, &["n1", "n2"], Default::default()).await;
    ensure_namespace(&client, INSTALL).await;
    ensure_namespace(&client, "apps").await;
    let pp = PostParams::default();
    for ns in [INSTALL, "apps"] {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        api.create(&pp, &secret(ns, "am-auth")).await.unwrap();
    }
    let metrics = Metrics::new();
    let deps = Dependencies {
        metrics: metrics.clone(),
        ..Dependencies::default()
    };
    let controller = start(&emulator, deps);

    let mut pool = workers_pool(&v1, json!({"maxUnavailable": 1}));
    pool.spec.health = Some(
        serde_json::from_value(json!({"alerts": {
            "url": url,
            "credentialsSecretRef": {"name": "am-auth", "namespace": INSTALL},
        }}))
        .unwrap(),
    );
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools.create(&pp, &pool).await.unwrap();
    let patch = |p| Patch::Merge(p);
    pools
        .patch(
            "workers",
            &PatchParams::default(),
            &patch(json!({"spec": {"image": {"ref": v2}}})),
        )
        .await
        .unwrap();
    // Firing, as only the credentials could have made it: the rollout is held.
    let held = wait_gate(&client, AlertGateState::Firing, "NodeTrouble").await;
    assert!(am.authorized.load(Ordering::SeqCst) >= 1);
    assert_eq!(am.refused.load(Ordering::SeqCst), 0);
    let up = condition(&held, "UpToDate").unwrap();
    assert_eq!(up.1, "AlertGateClosed", "{up:?}");
    assert_eq!(held.status.as_ref().unwrap().updated_count, 0);

    // Nowhere to be read: the pool, every Event, the metrics, the logs.
    let mut seen = vec![
        ("the pool", serde_json::to_string(&held).unwrap()),
        ("the metrics", metrics.encode()),
    ];
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let listed = (
        core.list(&Default::default()).await.unwrap(),
        events.list(&Default::default()).await.unwrap(),
    );
    assert!(
        !listed.1.items.is_empty(),
        "the rollout recorded Events to look through"
    );
    seen.push(("the Events", serde_json::to_string(&listed).unwrap()));

    // The same Secret in a namespace the controller may not read, then one that is not
    // there: the gate closes with a message that names the Secret.
    for (ns, name, part) in [
        ("apps", "am-auth", "--pull-secret-namespaces"),
        (INSTALL, "missing", "bootc-system/missing is not found"),
    ] {
        let r = json!({"name": name, "namespace": ns});
        let p = json!({"spec": {"health": {"alerts": {"credentialsSecretRef": r}}}});
        pools
            .patch("workers", &PatchParams::default(), &patch(p))
            .await
            .unwrap();
        let closed = wait_gate(&client, AlertGateState::Unreachable, part).await;
        let degraded = condition(&closed, "Degraded").unwrap();
        assert_eq!(degraded.1, "AlertGateUnreachable", "{degraded:?}");
        seen.push(("the pool", serde_json::to_string(&closed).unwrap()));
    }
    controller.stop().await;
    server.abort();
    seen.push(("the logs", logs.text()));
    assert!(
        seen[seen.len() - 1].1.contains("workers"),
        "the logs were captured"
    );
    for (place, text) in &seen {
        for secret in [USER, PASSWORD, ENCODED] {
            assert!(!text.contains(secret), "{secret:?} shows in {place}");
        }
    }
}
