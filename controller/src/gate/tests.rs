#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::*;

/// What the fake source answers on one path: status, body, delay.
#[derive(Clone)]
struct Route {
    status: u16,
    body: Vec<u8>,
    delay: Duration,
    /// A `Location` header to send.
    location: Option<String>,
}

#[derive(Default)]
struct Fake {
    routes: Mutex<HashMap<String, Route>>,
    /// The `Authorization` header every request must carry (401 otherwise).
    authorization: Mutex<Option<String>>,
    /// Every request, as path and query.
    hits: Mutex<Vec<String>>,
}

/// A loopback HTTP server answering as told; stopped on drop.
struct Server {
    addr: SocketAddr,
    fake: Arc<Fake>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(fake): State<Arc<Fake>>, headers: HeaderMap, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    fake.hits
        .lock()
        .unwrap()
        .push(uri.path_and_query().map_or(path.clone(), |p| p.to_string()));
    let required = fake.authorization.lock().unwrap().clone();
    if let Some(required) = required {
        let given = headers.get(http::header::AUTHORIZATION);
        if given.and_then(|v| v.to_str().ok()) != Some(required.as_str()) {
            return (StatusCode::UNAUTHORIZED, "unauthorized").into_response();
        }
    }
    let route = fake.routes.lock().unwrap().get(&path).cloned();
    let Some(route) = route else {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    };
    tokio::time::sleep(route.delay).await;
    let status = StatusCode::from_u16(route.status).unwrap();
    let mut response = (
        status,
        [(http::header::CONTENT_TYPE, "application/json")],
        route.body,
    )
        .into_response();
    if let Some(location) = route.location {
        response
            .headers_mut()
            .insert(http::header::LOCATION, location.parse().unwrap());
    }
    response
}

impl Server {
    async fn start() -> Server {
        let fake = Arc::new(Fake::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(Arc::clone(&fake));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { addr, fake, task }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn answer(&self, path: &str, status: u16, body: impl Into<Vec<u8>>) {
        self.answer_after(path, status, body, Duration::ZERO);
    }

    fn answer_after(&self, path: &str, status: u16, body: impl Into<Vec<u8>>, delay: Duration) {
        let route = Route {
            status,
            body: body.into(),
            delay,
            location: None,
        };
        self.fake
            .routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), route);
    }

    fn redirect(&self, path: &str, status: u16, location: &str) {
        let route = Route {
            status,
            body: Vec::new(),
            delay: Duration::ZERO,
            location: Some(location.to_owned()),
        };
        self.fake
            .routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), route);
    }

    fn forget(&self, path: &str) {
        self.fake.routes.lock().unwrap().remove(path);
    }

    fn hits(&self) -> Vec<String> {
        self.fake.hits.lock().unwrap().clone()
    }
}

fn spec(url: &str, matchers: &[&str]) -> AlertGateSpec {
    serde_json::from_value(json!({"url": url, "matchers": matchers})).unwrap()
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-05-01T10:00:00Z")
        .unwrap()
        .to_utc()
}

fn am_alert(name: &str, severity: &str, state: &str) -> Value {
    json!({
        "labels": {"alertname": name, "severity": severity, "instance": "n1:9100"},
        "status": {"state": state, "silencedBy": [], "inhibitedBy": []},
        "annotations": {"summary": "something"},
        "fingerprint": "abc",
    })
}

fn prom_alert(name: &str, severity: &str, state: &str) -> Value {
    json!({
        "labels": {"alertname": name, "severity": severity},
        "annotations": {},
        "state": state,
        "activeAt": "2026-05-01T09:59:00Z",
        "value": "1e+00",
    })
}

fn prom_answer(alerts: &[Value]) -> Vec<u8> {
    json!({"status": "success", "data": {"alerts": alerts}})
        .to_string()
        .into_bytes()
}

/// The error of an Unreachable view; panics on any other.
fn error_of(view: GateView) -> String {
    match view {
        GateView::Unreachable { error, checked } => {
            assert_eq!(checked, now());
            error
        }
        other => panic!("not Unreachable: {other:?}"),
    }
}

#[tokio::test]
async fn alertmanager_alerts_are_matched() {
    let server = Server::start().await;
    let alerts = json!([
        am_alert("NodeTrouble", "critical", "active"),
        am_alert("DiskFull", "warning", "active"),
        am_alert("Silenced", "critical", "suppressed"),
    ]);
    server.answer("/api/v2/alerts", 200, alerts.to_string());
    let gate = AlertGate::default();
    let cases: &[(&[&str], GateView)] = &[
        (
            &[],
            GateView::Firing {
                alerts: vec![
                    r#"DiskFull{instance="n1:9100",severity="warning"}"#.into(),
                    r#"NodeTrouble{instance="n1:9100",severity="critical"}"#.into(),
                ],
                count: 2,
                checked: now(),
            },
        ),
        (
            &[r#"severity="critical""#],
            GateView::Firing {
                alerts: vec![r#"NodeTrouble{instance="n1:9100",severity="critical"}"#.into()],
                count: 1,
                checked: now(),
            },
        ),
        (&[r#"severity="page""#], GateView::Open { checked: now() }),
        (
            &[r#"alertname=~"Node.*""#, r#"severity!="critical""#],
            GateView::Open { checked: now() },
        ),
    ];
    for (matchers, expected) in cases {
        let view = gate
            .check(&spec(&server.url(), matchers), None, now())
            .await;
        assert_eq!(&view, expected, "{matchers:?}");
    }
    assert_eq!(
        server.hits(),
        ["/api/v2/alerts?active=true&silenced=false&inhibited=false"],
        "one request for all four, with the filters"
    );
}

fn credentials(pairs: &[(&str, &str)]) -> Credentials {
    let data = pairs
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                k8s_openapi::ByteString(v.as_bytes().to_vec()),
            )
        })
        .collect();
    Credentials::from_data(&data).unwrap()
}

#[tokio::test]
async fn credentials_are_sent_and_answers_are_kept_apart_per_credentials() {
    let server = Server::start().await;
    // alice:s3cret, as basic authentication encodes it.
    *server.fake.authorization.lock().unwrap() = Some("Basic YWxpY2U6czNjcmV0".to_owned());
    let alerts = json!([am_alert("NodeTrouble", "critical", "active")]);
    server.answer("/api/v2/alerts", 200, alerts.to_string());
    let gate = AlertGate::default();
    let spec = spec(&server.url(), &[]);
    let right = credentials(&[("username", "alice"), ("password", "s3cret")]);
    let wrong = credentials(&[("username", "alice"), ("password", "guess")]);
    let firing = gate.check(&spec, Some(&right), now()).await;
    assert!(
        matches!(firing, GateView::Firing { count: 1, .. }),
        "{firing:?}"
    );
    // Within the interval, without or with other credentials: asked anew, and refused.
    for other in [None, Some(&wrong)] {
        let error = error_of(gate.check(&spec, other, now()).await);
        assert!(error.contains("401"), "{error}");
        for secret in ["alice", "s3cret", "guess", "YWxpY2U6czNjcmV0"] {
            assert!(!error.contains(secret), "{secret:?} shows in {error:?}");
        }
    }
    assert_eq!(server.hits().len(), 3);
    // The right ones again: the kept answer.
    assert_eq!(gate.check(&spec, Some(&right), now()).await, firing);
    assert_eq!(server.hits().len(), 3);
    // A bearer token.
    *server.fake.authorization.lock().unwrap() = Some("Bearer t0ken".to_owned());
    let bearer = credentials(&[("token", "t0ken")]);
    let view = gate.check(&spec, Some(&bearer), now()).await;
    assert!(
        matches!(view, GateView::Firing { count: 1, .. }),
        "{view:?}"
    );
}

#[tokio::test]
async fn prometheus_is_asked_when_v2_is_not_found_and_the_choice_is_kept() {
    let server = Server::start().await;
    let alerts = [
        prom_alert("NodeTrouble", "critical", "firing"),
        prom_alert("Pending", "critical", "pending"),
        prom_alert("Old", "critical", "inactive"),
    ];
    server.answer("/api/v1/alerts", 200, prom_answer(&alerts));
    let gate = AlertGate::default();
    // A trailing slash in the URL changes nothing.
    let url = format!("{}/", server.url());
    let view = gate.check(&spec(&url, &[]), None, now()).await;
    let expected = GateView::Firing {
        alerts: vec![r#"NodeTrouble{severity="critical"}"#.into()],
        count: 1,
        checked: now(),
    };
    assert_eq!(view, expected);
    assert_eq!(
        server.hits(),
        [
            "/api/v2/alerts?active=true&silenced=false&inhibited=false",
            "/api/v1/alerts"
        ]
    );
    // Asked again past its interval: straight to the v1 API.
    let answer = gate.answer(&url, None, Duration::ZERO, now()).await;
    assert_eq!(answer.alerts.unwrap().len(), 1);
    assert_eq!(server.hits().len(), 3);
    assert_eq!(server.hits()[2], "/api/v1/alerts");
}

#[tokio::test]
async fn a_prometheus_envelope_on_v2_means_prometheus() {
    let server = Server::start().await;
    server.answer(
        "/api/v2/alerts",
        200,
        json!({"status": "error", "errorType": "bad_data", "error": "unknown"}).to_string(),
    );
    server.answer("/api/v1/alerts", 200, prom_answer(&[]));
    let view = AlertGate::default()
        .check(&spec(&server.url(), &[]), None, now())
        .await;
    assert_eq!(view, GateView::Open { checked: now() });
}

#[tokio::test]
async fn a_url_that_changes_kind_is_found_out_again() {
    let server = Server::start().await;
    server.answer("/api/v1/alerts", 200, prom_answer(&[]));
    let gate = AlertGate::default();
    let url = server.url();
    assert!(
        gate.answer(&url, None, Duration::ZERO, now())
            .await
            .alerts
            .is_ok()
    );
    server.forget("/api/v1/alerts");
    let alerts = json!([am_alert("NodeTrouble", "critical", "active")]);
    server.answer("/api/v2/alerts", 200, alerts.to_string());
    let answer = gate.answer(&url, None, Duration::ZERO, now()).await;
    assert_eq!(answer.alerts.unwrap().len(), 1);
    // Now known as an Alertmanager: v1 is not asked any more.
    let before = server.hits().len();
    assert!(
        gate.answer(&url, None, Duration::ZERO, now())
            .await
            .alerts
            .is_ok()
    );
    assert_eq!(
        server.hits()[before..],
        ["/api/v2/alerts?active=true&silenced=false&inhibited=false"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pools_on_one_url_make_one_request_per_interval() {
    let server = Server::start().await;
    let alerts = json!([am_alert("NodeTrouble", "critical", "active")]);
    // Slow enough that the callers overlap the request.
    server.answer_after(
        "/api/v2/alerts",
        200,
        alerts.to_string(),
        Duration::from_millis(300),
    );
    let gate = AlertGate::default();
    let url = server.url();
    let specs: Vec<AlertGateSpec> = (0..20)
        .map(|i| {
            let matchers: &[&str] = if i % 2 == 0 {
                &[r#"severity="critical""#]
            } else {
                &[r#"severity="page""#]
            };
            spec(&url, matchers)
        })
        .collect();
    let views =
        futures::future::join_all(specs.iter().map(|s| gate.clone().check_owned(s.clone()))).await;
    assert_eq!(server.hits().len(), 1, "{:?}", server.hits());
    for (i, view) in views.iter().enumerate() {
        let firing = matches!(view, GateView::Firing { count: 1, .. });
        assert_eq!(firing, i % 2 == 0, "{i}: {view:?}");
    }
    // Later calls within the interval are answered from the cache.
    for s in &specs {
        gate.check(s, None, now()).await;
    }
    assert_eq!(server.hits().len(), 1);
    // Another URL is asked on its own.
    let other = format!("{url}/other");
    server.answer("/other/api/v2/alerts", 200, "[]");
    assert_eq!(
        gate.check(&spec(&other, &[]), None, now()).await,
        GateView::Open { checked: now() }
    );
    assert_eq!(server.hits().len(), 2);
    // Once the interval is over, the URL is asked again.
    gate.answer(&url, None, Duration::ZERO, now()).await;
    assert_eq!(server.hits().len(), 3);
}

impl AlertGate {
    /// `check` of an owned spec, for joining many.
    async fn check_owned(self, spec: AlertGateSpec) -> GateView {
        self.check(&spec, None, now()).await
    }
}

/// A path, the status and body it answers, a path no longer answered, and the start of
/// the error expected.
type ErrorCase<'a> = (&'a str, u16, Vec<u8>, Option<&'a str>, String);

#[tokio::test]
async fn errors_name_the_url_and_the_cause() {
    let server = Server::start().await;
    let url = server.url();
    let gate = AlertGate::new(AlertGateOptions {
        timeout: Duration::from_millis(300),
    });
    let v2 = format!("{url}/api/v2/alerts");
    let v1 = format!("{url}/api/v1/alerts");
    let cases: Vec<ErrorCase<'_>> = vec![
        (
            "/api/v2/alerts",
            500,
            b"boom".to_vec(),
            None,
            format!("{v2} answered 500 Internal Server Error"),
        ),
        (
            "/api/v2/alerts",
            403,
            b"no".to_vec(),
            None,
            format!("{v2} answered 403 Forbidden"),
        ),
        (
            "/api/v2/alerts",
            200,
            b"<html>".to_vec(),
            None,
            format!("{v2} answered what is not Alertmanager's list of alerts"),
        ),
        (
            "/api/v2/alerts",
            200,
            br#"[{"labels":{"a":1}}]"#.to_vec(),
            None,
            format!("{v2} answered what is not Alertmanager's list"),
        ),
        (
            "/api/v2/alerts",
            200,
            b"null".to_vec(),
            None,
            format!("{v2} answered what is not"),
        ),
        (
            "/api/v2/alerts",
            200,
            vec![0xff, 0xfe, b'['],
            None,
            format!("{v2} answered what is not"),
        ),
        (
            "/api/v1/alerts",
            200,
            br#"{"status":"error","error":"rule manager down"}"#.to_vec(),
            Some("/api/v2/alerts"),
            format!(r#"{v1} answered status "error": rule manager down"#),
        ),
        (
            "/api/v1/alerts",
            200,
            br#"{"status":"success","data":{"alerts":null}}"#.to_vec(),
            Some("/api/v2/alerts"),
            format!("{v1} answered what is not Prometheus's answer"),
        ),
        (
            "/api/v1/alerts",
            200,
            br#"{"status":"success"}"#.to_vec(),
            Some("/api/v2/alerts"),
            format!("{v1} answered no data"),
        ),
        (
            "/api/v1/alerts",
            502,
            b"".to_vec(),
            Some("/api/v2/alerts"),
            format!("{v1} answered 502 Bad Gateway"),
        ),
        (
            "/nothing",
            200,
            b"".to_vec(),
            Some("/api/v2/alerts"),
            format!(
                "{url} is neither an Alertmanager nor a Prometheus: both /api/v2/alerts and /api/v1/alerts answered 404 Not Found"
            ),
        ),
    ];
    for (path, status, body, forget, expected) in cases {
        server.forget("/api/v1/alerts");
        if let Some(f) = forget {
            server.forget(f);
        }
        server.answer(path, status, body);
        let fresh = AlertGate::new(AlertGateOptions {
            timeout: Duration::from_millis(300),
        });
        let error = error_of(fresh.check(&spec(&url, &[]), None, now()).await);
        assert!(
            error.starts_with(&expected),
            "{error:?} does not start with {expected:?}"
        );
    }
    // No answer in time.
    server.forget("/api/v1/alerts");
    server.answer_after("/api/v2/alerts", 200, "[]", Duration::from_secs(5));
    let error = error_of(gate.check(&spec(&url, &[]), None, now()).await);
    assert_eq!(error, format!("{v2} did not answer within 300ms"));
    // Nobody listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let error = error_of(
        gate.check(&spec(&format!("http://{closed}"), &[]), None, now())
            .await,
    );
    let expected = format!("cannot connect to http://{closed}/api/v2/alerts: ");
    assert!(error.starts_with(&expected), "{error}");
    assert!(error.to_lowercase().contains("refused"), "{error}");
}

#[tokio::test]
async fn an_answer_too_large_is_refused() {
    let server = Server::start().await;
    let mut body = b"[".to_vec();
    body.resize(MAX_BODY + 10, b' ');
    body.push(b']');
    server.answer("/api/v2/alerts", 200, body);
    let error = error_of(
        AlertGate::default()
            .check(&spec(&server.url(), &[]), None, now())
            .await,
    );
    assert_eq!(
        error,
        format!("{}/api/v2/alerts answered more than 16 MiB", server.url())
    );
}

#[tokio::test]
async fn failures_are_kept_for_the_interval_too() {
    let server = Server::start().await;
    server.answer("/api/v2/alerts", 500, "down");
    let gate = AlertGate::default();
    for _ in 0..3 {
        error_of(gate.check(&spec(&server.url(), &[]), None, now()).await);
    }
    assert_eq!(server.hits().len(), 1);
}

#[tokio::test]
async fn user_and_password_are_not_shown() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let url = format!("http://alice:s3cret@{closed}");
    let error = error_of(
        AlertGate::default()
            .check(&spec(&url, &[]), None, now())
            .await,
    );
    assert!(
        !error.contains("s3cret") && !error.contains("alice"),
        "{error}"
    );
    assert!(error.contains(&closed.to_string()), "{error}");
}

#[tokio::test]
async fn user_password_and_query_are_not_shown_when_the_source_fails() {
    let server = Server::start().await;
    server.answer("/api/v2/alerts", 500, "down");
    let base = format!("http://alice:s3cret@{}", server.addr);
    for url in [base.clone(), format!("{base}/?token=t0ken")] {
        let error = error_of(
            AlertGate::default()
                .check(&spec(&url, &[]), None, now())
                .await,
        );
        for secret in ["alice", "s3cret", "t0ken"] {
            assert!(!error.contains(secret), "{secret:?} shows in {error:?}");
        }
        assert!(
            error.starts_with(&format!("http://{}", server.addr)),
            "{error}"
        );
    }
}

#[test]
fn urls_are_shown_without_user_password_query_or_fragment() {
    let cases = [
        ("http://am:9093", "http://am:9093"),
        ("http://am:9093/", "http://am:9093/"),
        ("https://u:p@am:9093/prefix", "https://am:9093/prefix"),
        ("https://u@am", "https://am"),
        ("http://u:p@w@am/x?token=t#f", "http://am/x"),
        ("http://am/?token=t", "http://am/"),
        ("http://am#frag", "http://am"),
        // Not a URL a parser takes (bad port), still without its password.
        ("http://u:p@am:99999999/x?t=1", "http://am:99999999/x"),
    ];
    for (url, expected) in cases {
        assert_eq!(shown(url), expected, "{url}");
    }
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let target = Server::start().await;
    target.answer("/api/v2/alerts", 200, "[]");
    target.answer("/api/v1/alerts", 200, prom_answer(&[]));
    let server = Server::start().await;
    let location = format!("http://bob:pw@{}/api/v2/alerts?token=t0ken", target.addr);
    server.redirect("/api/v2/alerts", 302, &location);
    let view = AlertGate::default()
        .check(&spec(&server.url(), &[]), None, now())
        .await;
    assert!(!matches!(view, GateView::Open { .. }), "{view:?}");
    let error = error_of(view);
    assert_eq!(
        error,
        format!(
            "{}/api/v2/alerts answered 302 Found, a redirect to http://{}/api/v2/alerts; \
             redirects are not followed: set spec.health.alerts.url to where it leads",
            server.url(),
            target.addr
        )
    );
    assert!(target.hits().is_empty(), "{:?}", target.hits());
}

#[tokio::test]
async fn bad_matchers_are_reported_not_asked() {
    let server = Server::start().await;
    let error = error_of(
        AlertGate::default()
            .check(&spec(&server.url(), &["bad matcher"]), None, now())
            .await,
    );
    assert!(error.contains("matcher 0"), "{error}");
    assert!(server.hits().is_empty());
}

#[tokio::test]
async fn firing_names_five_alerts_and_counts_all() {
    let server = Server::start().await;
    let alerts: Vec<Value> = (0..8)
        .map(|i| am_alert(&format!("A{i}"), "critical", "active"))
        .collect();
    server.answer("/api/v2/alerts", 200, Value::from(alerts).to_string());
    let view = AlertGate::default()
        .check(&spec(&server.url(), &[]), None, now())
        .await;
    let GateView::Firing { alerts, count, .. } = view else {
        panic!("{view:?}");
    };
    assert_eq!(count, 8);
    let names: Vec<&str> = alerts
        .iter()
        .map(|a| a.split('{').next().unwrap())
        .collect();
    assert_eq!(names, ["A0", "A1", "A2", "A3", "A4"]);
}

#[test]
fn alerts_are_described_by_name_and_labels() {
    let labels = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let cases = [
        (
            labels(&[("alertname", "NodeTrouble"), ("severity", "critical")]),
            r#"NodeTrouble{severity="critical"}"#.to_owned(),
        ),
        (labels(&[("alertname", "X")]), "X{}".to_owned()),
        (
            labels(&[("b", "2"), ("a", "1")]),
            r#"{a="1",b="2"}"#.to_owned(),
        ),
        (
            labels(&[("alertname", "Q"), ("m", "say \"hi\"\\\n")]),
            r#"Q{m="say \"hi\"\\\n"}"#.to_owned(),
        ),
    ];
    for (l, expected) in cases {
        assert_eq!(describe(&l), expected);
    }
    let long = describe(&labels(&[("alertname", "L"), ("v", &"x".repeat(1000))]));
    assert_eq!(long.chars().count(), ALERT_TEXT_MAX);
    assert!(long.ends_with('…'));
}
