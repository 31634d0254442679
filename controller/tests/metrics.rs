#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The metrics registry and the `/metrics`, `/healthz`, `/readyz` server, on loopback.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bootc_pool_controller::metrics::{DrainResult, Metrics, PoolHealth, TagResult};
use bootc_pool_controller::server::{Health, OPENMETRICS_CONTENT_TYPE, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// A response: status code, headers (lower-case names), body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

/// One HTTP/1.1 GET over a fresh connection, with a deadline.
async fn get(addr: SocketAddr, path: &str) -> Response {
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect::<BTreeMap<_, _>>();
        // The answers are small: axum sends them with a content-length, not chunked.
        assert!(
            headers.contains_key("content-length"),
            "unexpected framing: {headers:?}"
        );
        Response {
            status,
            headers,
            body: body.to_owned(),
        }
    })
    .await
    .expect("no answer within 10 s")
}

/// Starts the server on 127.0.0.1:0; dropping the sender stops it.
async fn start(metrics: Metrics, health: Health) -> (SocketAddr, oneshot::Sender<()>) {
    let server = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), metrics, health)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    assert_ne!(addr.port(), 0);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// The sample lines of a family (not `# HELP`/`# TYPE`), sorted.
fn samples(text: &str, family: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn health_endpoints() {
    let health = Health::new();
    let (addr, _stop) = start(Metrics::new(), health.clone()).await;

    let r = get(addr, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("caches not synced"), "{}", r.body);

    health.set_ready(true);
    let r = get(addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    health.set_not_ready("lost the API server");
    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("lost the API server"), "{}", r.body);
    // Liveness does not follow readiness.
    assert_eq!(get(addr, "/healthz").await.status, 200);

    assert_eq!(get(addr, "/nope").await.status, 404);
}

#[tokio::test]
async fn metrics_endpoint_has_every_family() {
    let metrics = Metrics::new();
    let (addr, stop) = start(metrics.clone(), Health::new()).await;

    metrics.observe_reconcile("web", Duration::from_millis(30));
    metrics.record_reconcile_error("web", "kube");
    metrics.record_reconcile("web", "ok");
    metrics.record_reconcile("web", "api");
    metrics.observe_action("web", "cordon", "ok", Duration::from_millis(3));
    metrics.observe_action("web", "update", "conflict", Duration::from_millis(7));
    metrics.set_nodes("web", &BTreeMap::from([("Staged", 2), ("UpToDate", 1)]));
    metrics.set_target(
        "web",
        "quay.io/example/os:stable",
        "sha256:0123",
        Some("42.1"),
    );
    metrics.record_tag_resolution(TagResult::Success);
    metrics.record_tag_resolution(TagResult::RateLimited);
    metrics.observe_drain("web", DrainResult::TimedOut, Duration::from_secs(90));
    metrics.record_reboot_approved("web");
    metrics.set_leader(true);
    metrics.set_pool_health(
        "web",
        &PoolHealth {
            conditions: vec![
                ("Progressing".to_owned(), "Stalled".to_owned(), false),
                ("Degraded".to_owned(), "RolloutHalted".to_owned(), true),
            ],
            unreported: 2,
            oldest: [90, 1800],
            drifted: 1,
        },
    );

    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some(OPENMETRICS_CONTENT_TYPE)
    );
    let text = r.body;
    assert!(text.ends_with("# EOF\n"), "{text}");
    for (family, kind) in [
        ("bootc_pool_reconcile_duration_seconds", "histogram"),
        ("bootc_pool_reconcile_errors", "counter"),
        ("bootc_pool_reconciles", "counter"),
        ("bootc_pool_actions", "counter"),
        ("bootc_pool_action_duration_seconds", "histogram"),
        ("bootc_pool_nodes", "gauge"),
        ("bootc_pool_target_info", "gauge"),
        ("bootc_pool_tag_resolutions", "counter"),
        ("bootc_pool_drain_duration_seconds", "histogram"),
        ("bootc_pool_reboots_approved", "counter"),
        ("bootc_pool_leader", "gauge"),
        ("bootc_pool_condition", "gauge"),
        ("bootc_pool_nodes_unreported", "gauge"),
        ("bootc_pool_nodes_drifted", "gauge"),
        ("bootc_pool_oldest_in_state_seconds", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} {kind}\n")),
            "no {family} {kind} in\n{text}"
        );
    }
    for sample in [
        "bootc_pool_reconcile_duration_seconds_count{pool=\"web\"} 1",
        "bootc_pool_reconcile_errors_total{pool=\"web\",reason=\"kube\"} 1",
        "bootc_pool_reconciles_total{pool=\"web\",outcome=\"ok\"} 1",
        "bootc_pool_reconciles_total{pool=\"web\",outcome=\"api\"} 1",
        "bootc_pool_actions_total{pool=\"web\",action=\"cordon\",outcome=\"ok\"} 1",
        "bootc_pool_actions_total{pool=\"web\",action=\"update\",outcome=\"conflict\"} 1",
        "bootc_pool_action_duration_seconds_count{action=\"update\"} 1",
        "bootc_pool_nodes{pool=\"web\",state=\"Staged\"} 2",
        "bootc_pool_nodes{pool=\"web\",state=\"UpToDate\"} 1",
        "bootc_pool_target_info{pool=\"web\",image=\"quay.io/example/os:stable\",digest=\"sha256:0123\",version=\"42.1\"} 1",
        "bootc_pool_tag_resolutions_total{result=\"success\"} 1",
        "bootc_pool_tag_resolutions_total{result=\"rate_limited\"} 1",
        "bootc_pool_drain_duration_seconds_count{pool=\"web\",outcome=\"timed_out\"} 1",
        "bootc_pool_drain_duration_seconds_bucket{le=\"60.0\",pool=\"web\",outcome=\"timed_out\"} 0",
        "bootc_pool_drain_duration_seconds_bucket{le=\"120.0\",pool=\"web\",outcome=\"timed_out\"} 1",
        "bootc_pool_reboots_approved_total{pool=\"web\"} 1",
        "bootc_pool_nodes_drifted{pool=\"web\"} 1",
        "bootc_pool_leader 1",
        "bootc_pool_condition{pool=\"web\",type=\"Progressing\",reason=\"Stalled\"} 0",
        "bootc_pool_condition{pool=\"web\",type=\"Degraded\",reason=\"RolloutHalted\"} 1",
        "bootc_pool_nodes_unreported{pool=\"web\"} 2",
        "bootc_pool_oldest_in_state_seconds{pool=\"web\",state=\"Staging\"} 90",
        "bootc_pool_oldest_in_state_seconds{pool=\"web\",state=\"Rebooting\"} 1800",
    ] {
        assert!(
            text.lines().any(|l| l == sample),
            "no line {sample:?} in\n{text}"
        );
    }

    // The server stops when asked.
    drop(stop);
    tokio::time::timeout(Duration::from_secs(10), async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the server still accepts connections after shutdown");
}

#[test]
fn set_nodes_zeroes_absent_states() {
    let metrics = Metrics::new();
    metrics.set_nodes(
        "web",
        &BTreeMap::from([("Rebooting", 1), ("Staged", 3), ("Degraded", 1)]),
    );
    metrics.set_nodes("web", &BTreeMap::from([("UpToDate", 5)]));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "bootc_pool_nodes"),
        [
            "bootc_pool_nodes{pool=\"web\",state=\"Degraded\"} 0",
            "bootc_pool_nodes{pool=\"web\",state=\"Pending\"} 0",
            "bootc_pool_nodes{pool=\"web\",state=\"Rebooting\"} 0",
            "bootc_pool_nodes{pool=\"web\",state=\"Staged\"} 0",
            "bootc_pool_nodes{pool=\"web\",state=\"Staging\"} 0",
            "bootc_pool_nodes{pool=\"web\",state=\"UpToDate\"} 5",
        ]
    );

    // Unknown state names are ignored; forgetting the pool removes its series.
    metrics.set_nodes("db", &BTreeMap::from([("Sleeping".to_owned(), 1)]));
    assert!(!metrics.encode().contains("Sleeping"));
    metrics.record_reconcile("web", "ok");
    metrics.observe_action("web", "cordon", "api", Duration::from_millis(1));
    metrics.forget_pool("web");
    let text = metrics.encode();
    assert!(
        samples(&text, "bootc_pool_reconciles_total").is_empty(),
        "{text}"
    );
    assert!(
        samples(&text, "bootc_pool_actions_total").is_empty(),
        "{text}"
    );
    let left = samples(&text, "bootc_pool_nodes");
    assert_eq!(left.len(), 6, "{left:?}");
    assert!(
        left.iter()
            .all(|l| l.contains("pool=\"db\"") && l.ends_with(" 0"))
    );
}

#[test]
fn target_info_keeps_one_series_per_pool() {
    let metrics = Metrics::new();
    metrics.set_target("web", "quay.io/os:stable", "sha256:aaa", Some("1"));
    metrics.set_target("db", "quay.io/os:stable", "sha256:aaa", Some("1"));
    metrics.set_target("web", "quay.io/os:stable", "sha256:bbb", Some("2"));
    // Setting the same target again changes nothing.
    metrics.set_target("web", "quay.io/os:stable", "sha256:bbb", Some("2"));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "bootc_pool_target_info"),
        [
            "bootc_pool_target_info{pool=\"db\",image=\"quay.io/os:stable\",digest=\"sha256:aaa\",version=\"1\"} 1",
            "bootc_pool_target_info{pool=\"web\",image=\"quay.io/os:stable\",digest=\"sha256:bbb\",version=\"2\"} 1",
        ]
    );

    // A version-less target has an empty version label; clearing removes the series.
    metrics.set_target("web", "quay.io/os:next", "sha256:ccc", None);
    metrics.clear_target("db");
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "bootc_pool_target_info"),
        [
            "bootc_pool_target_info{pool=\"web\",image=\"quay.io/os:next\",digest=\"sha256:ccc\",version=\"\"} 1"
        ]
    );
}

#[test]
fn pool_health_gauges_follow_the_latest_plan_and_go_with_the_pool() {
    let metrics = Metrics::new();
    let stalled = PoolHealth {
        conditions: vec![
            ("Progressing".to_owned(), "Stalled".to_owned(), false),
            ("UpToDate".to_owned(), "RolloutInProgress".to_owned(), false),
        ],
        unreported: 1,
        oldest: [600, 0],
        drifted: 2,
    };
    metrics.set_pool_health("web", &stalled);
    metrics.set_pool_health("db", &PoolHealth::default());
    // The next plan: the rollout moves again and is complete; the old reasons go.
    let done = PoolHealth {
        conditions: vec![
            ("Progressing".to_owned(), "Complete".to_owned(), true),
            ("UpToDate".to_owned(), "AllUpdated".to_owned(), true),
        ],
        unreported: 0,
        oldest: [0, 0],
        drifted: 0,
    };
    metrics.set_pool_health("web", &done);
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "bootc_pool_condition"),
        [
            "bootc_pool_condition{pool=\"web\",type=\"Progressing\",reason=\"Complete\"} 1",
            "bootc_pool_condition{pool=\"web\",type=\"UpToDate\",reason=\"AllUpdated\"} 1",
        ]
    );
    assert_eq!(
        samples(&text, "bootc_pool_nodes_unreported"),
        [
            "bootc_pool_nodes_unreported{pool=\"db\"} 0",
            "bootc_pool_nodes_unreported{pool=\"web\"} 0",
        ]
    );
    assert_eq!(
        samples(&text, "bootc_pool_nodes_drifted"),
        [
            "bootc_pool_nodes_drifted{pool=\"db\"} 0",
            "bootc_pool_nodes_drifted{pool=\"web\"} 0",
        ]
    );
    assert_eq!(
        samples(&text, "bootc_pool_oldest_in_state_seconds").len(),
        4
    );

    metrics.forget_pool("web");
    let text = metrics.encode();
    assert!(samples(&text, "bootc_pool_condition").is_empty(), "{text}");
    for family in [
        "bootc_pool_nodes_unreported",
        "bootc_pool_nodes_drifted",
        "bootc_pool_oldest_in_state_seconds",
    ] {
        let left = samples(&text, family);
        assert!(
            !left.is_empty() && left.iter().all(|l| l.contains("pool=\"db\"")),
            "{left:?}"
        );
    }
}
