//! Under `--alert-gate`: a tiny Alertmanager on loopback for the pool's alert gate. It
//! answers `GET /api/v2/alerts` with one active alert labelled `severity="critical"`
//! for the first `--alert-firing-s` seconds after it started (just before the pool is
//! applied) and with `[]` afterwards, and 404 on any other path; it notes every answer,
//! so that the report can hold the rollout to it: no reboot slot before the gate was
//! first answered open.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The matcher the pool's gate gets; the firing alert matches it.
pub(super) const MATCHER: &str = "severity=\"critical\"";
/// The longest request head read.
const HEAD_MAX: usize = 16 * 1024;
/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What the server answered.
#[derive(Debug, Clone, Default)]
pub(super) struct Answers {
    /// Requests for the alerts answered with the firing alert.
    pub(super) firing: u64,
    /// Requests for the alerts answered with `[]`.
    pub(super) open: u64,
    /// Other requests (answered 404 or 400).
    pub(super) other: u64,
    /// When the alerts were first answered with `[]`.
    pub(super) first_open: Option<Instant>,
}

/// The server, answering until dropped or stopped.
pub(super) struct AlertServer {
    /// `http://127.0.0.1:PORT`.
    pub(super) url: String,
    answers: Arc<Mutex<Answers>>,
    task: JoinHandle<()>,
}

impl AlertServer {
    /// Listens on a free loopback port; the alert fires for `firing` from now.
    pub(super) async fn start(firing: Duration) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("the alert gate's server: cannot listen on loopback: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("the alert gate's server: {e}"))?
            .port();
        let firing_until = Instant::now() + firing;
        let answers = Arc::new(Mutex::new(Answers::default()));
        let shared = answers.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let answers = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, firing_until, &answers).await;
                });
            }
        });
        Ok(AlertServer {
            url: format!("http://127.0.0.1:{port}"),
            answers,
            task,
        })
    }

    /// [`AlertServer::start`] when `firing` is set (under `--alert-gate`).
    pub(super) async fn start_if(firing: Option<Duration>) -> Result<Option<Self>, String> {
        match firing {
            Some(firing) => Self::start(firing).await.map(Some),
            None => Ok(None),
        }
    }

    /// What it answered so far.
    pub(super) fn answers(&self) -> Answers {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops listening.
    pub(super) fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for AlertServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request head and answers it; the connection is closed after.
async fn serve(
    mut stream: TcpStream,
    firing_until: Instant,
    answers: &Mutex<Answers>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_MAX {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| std::io::Error::other("the request took too long"))??;
    let text = String::from_utf8_lossy(&head);
    let (status, body) = answer(request_target(&text), firing_until, answers);
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The path of a `GET` request (without its query), `None` for anything else.
pub(super) fn request_target(head: &str) -> Option<&str> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    (method == "GET").then(|| target.split('?').next().unwrap_or(target))
}

/// The status line's code and reason, and the body, for a request for `path`.
fn answer(
    path: Option<&str>,
    firing_until: Instant,
    answers: &Mutex<Answers>,
) -> (&'static str, String) {
    let mut noted = answers.lock().unwrap_or_else(PoisonError::into_inner);
    match path {
        Some("/api/v2/alerts") => {
            let now = Instant::now();
            if now < firing_until {
                noted.firing += 1;
                ("200 OK", firing_alerts().to_string())
            } else {
                noted.open += 1;
                noted.first_open.get_or_insert(now);
                ("200 OK", "[]".to_owned())
            }
        }
        Some(_) => {
            noted.other += 1;
            ("404 Not Found", json!({"message": "not found"}).to_string())
        }
        None => {
            noted.other += 1;
            (
                "400 Bad Request",
                json!({"message": "GET only"}).to_string(),
            )
        }
    }
}

/// Alertmanager's v2 answer with one active, unsilenced alert.
pub(super) fn firing_alerts() -> serde_json::Value {
    json!([{
        "labels": {"alertname": "BenchCritical", "severity": "critical"},
        "annotations": {"summary": "fired by bootc-sim bench --alert-firing-s"},
        "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
        "startsAt": "2026-01-01T00:00:00Z",
        "endsAt": "2099-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
        "fingerprint": "b0075117e0000001",
        "receivers": [{"name": "null"}],
    }])
}
