use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// `GET path` over a fresh connection: status code, headers and body, as text.
async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("no answer within 10 s");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

async fn start(router: Router) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let server = HttpServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), router)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    assert_ne!(addr.port(), 0);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

#[tokio::test]
async fn health_endpoints_follow_readiness() {
    let health = Health::new();
    let (addr, _stop) = start(router(health.clone(), None)).await;

    let (status, _, body) = get(addr, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("caches not synced"), "{body}");

    health.set_ready(true);
    assert!(health.is_ready());
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));

    health.set_not_ready("lost the API server");
    let (status, _, body) = get(addr, "/readyz").await;
    assert_eq!(
        (status, body.as_str()),
        (503, "not ready: lost the API server")
    );

    // No metrics hook, no /metrics.
    let (status, _, _) = get(addr, "/metrics").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn metrics_are_rendered_for_every_request() {
    let count = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = count.clone();
    let metrics = MetricsEndpoint::new("text/plain; version=0.0.4", move || {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("requests {n}\n")
    });
    let (addr, _stop) = start(router(Health::new(), Some(metrics))).await;
    for n in 1..=2 {
        let (status, head, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
        assert_eq!(body, format!("requests {n}\n"));
    }
}
