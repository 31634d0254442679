use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use super::*;

fn options(kubeconfig: Option<&Path>) -> ClientOptions<'_> {
    ClientOptions {
        kubeconfig,
        user_agent: "test/0",
        retry_transient: false,
        max_in_flight: None,
    }
}

fn kubeconfig(dir: &Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test]
async fn a_missing_kubeconfig_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent");
    let Err(err) = client(options(Some(&path))).await else {
        panic!("a client from a missing file");
    };
    assert!(err.starts_with("cannot read kubeconfig "), "{err}");
    assert!(err.contains("absent"), "{err}");
}

#[tokio::test]
async fn a_kubeconfig_file_gives_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), "http://127.0.0.1:9");
    assert!(client(options(Some(&path))).await.is_ok());
}

/// What the server has seen: requests read and not yet answered, and the most at once.
#[derive(Default)]
struct Unanswered {
    now: usize,
    most: usize,
    arrivals: usize,
}

/// An HTTP/1.1 server on loopback that answers a request only when the test releases
/// it: each request read is counted, then its release handle is sent to the test.
async fn held_server(
    seen: Arc<Mutex<Unanswered>>,
) -> (String, mpsc::UnboundedReceiver<oneshot::Sender<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (held_tx, held_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (seen, held) = (Arc::clone(&seen), held_tx.clone());
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                loop {
                    // The request's head, up to its blank line (a GET has no body).
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    {
                        let mut s = seen.lock().unwrap();
                        s.now += 1;
                        s.arrivals += 1;
                        s.most = s.most.max(s.now);
                    }
                    let (go, released) = oneshot::channel();
                    if held.send(go).is_err() || released.await.is_err() {
                        return;
                    }
                    seen.lock().unwrap().now -= 1;
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if write.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, held_rx)
}

/// Sends `requests` GETs at once through a client bounded to `limit` and answers them
/// one at a time, each only once `limit` (or all that remain) are waiting; the most the
/// server ever held unanswered.
async fn most_held_at_once(limit: Option<usize>, requests: usize) -> usize {
    let seen = Arc::new(Mutex::new(Unanswered::default()));
    let (url, mut held) = held_server(Arc::clone(&seen)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &url);
    let client = client(ClientOptions {
        max_in_flight: limit.and_then(NonZeroUsize::new),
        ..options(Some(&path))
    })
    .await
    .unwrap();
    let sent: Vec<_> = (0..requests)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let request = http::Request::get(format!("/api/v1/namespaces/n/pods/p{i}"))
                    .body(Vec::new())
                    .unwrap();
                client.request_text(request).await
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for answered in 0..requests {
        let waiting = limit.unwrap_or(requests).min(requests - answered);
        // Wait until the server holds as many requests as may be sent now.
        loop {
            let now = seen.lock().unwrap().now;
            if now >= waiting {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server holds {now} requests, expected {waiting}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let go = tokio::time::timeout_at(deadline, held.recv())
            .await
            .expect("a held request")
            .expect("the server runs");
        go.send(()).unwrap();
    }
    for s in sent {
        assert_eq!(s.await.unwrap().unwrap(), "{}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.arrivals, requests);
    seen.most
}

#[tokio::test]
async fn a_bounded_client_sends_no_more_requests_at_once_than_its_bound() {
    assert_eq!(most_held_at_once(Some(4), 40).await, 4);
}

#[tokio::test]
async fn an_unbounded_client_sends_every_request_at_once() {
    // The other side of the test above: without the bound, the burst reaches the
    // server whole, so the bound is what holds it.
    assert_eq!(most_held_at_once(None, 40).await, 40);
}
