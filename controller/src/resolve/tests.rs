#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bootc_crds::image_ref::ImageRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::cache::backoff;
use super::registry::{MAX_MANIFEST, version_label};
use super::session::{MAX_TOKEN, challenge_params};
use super::*;

#[test]
fn backoff_grows_and_is_capped_by_the_interval() {
    let hour = Duration::from_secs(3600);
    assert_eq!(backoff(hour, 1), Duration::from_secs(30));
    assert_eq!(backoff(hour, 2), Duration::from_secs(60));
    assert_eq!(backoff(hour, 3), Duration::from_secs(120));
    assert_eq!(backoff(hour, 40), hour);
    assert_eq!(
        backoff(Duration::from_secs(300), 5),
        Duration::from_secs(300)
    );
    assert_eq!(
        backoff(Duration::from_millis(10), 1),
        Duration::from_secs(1)
    );
    // The doubling stops at 30 s · 2^16, however long the interval.
    let year = Duration::from_secs(365 * 86400);
    assert_eq!(backoff(year, 17), Duration::from_secs(30 << 16));
    assert_eq!(backoff(year, 40), Duration::from_secs(30 << 16));
}

#[test]
fn unauthorized_messages() {
    let e = ResolveError::Unauthorized {
        registry: "quay.io".into(),
        repository: "quay.io/a/b".into(),
        with_credentials: true,
        secret: Some("ns/pull".into()),
    };
    assert_eq!(
        e.to_string(),
        "registry quay.io refused the credentials of pull secret ns/pull for quay.io/a/b"
    );
    let e = ResolveError::Unauthorized {
        registry: "quay.io".into(),
        repository: "quay.io/a/b".into(),
        with_credentials: false,
        secret: None,
    };
    assert!(e.to_string().contains("set spec.pullSecretRef"));
}

#[test]
fn version_label_from_config() {
    let cfg = r#"{"architecture":"amd64","config":{"Labels":{"org.opencontainers.image.version":"42.1"}}}"#;
    assert_eq!(version_label(cfg).as_deref(), Some("42.1"));
    assert_eq!(version_label(r#"{"config":{}}"#), None);
}

#[test]
fn pull_secrets_name_docker_hub_as_image_references_do() {
    assert_eq!(
        bootc_pool_common::pull_secret::DOCKER_HUB,
        bootc_crds::image_ref::DEFAULT_REGISTRY
    );
    let json = br#"{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}"#;
    let creds = parse_pull_secret(json).unwrap();
    assert!(
        creds
            .for_registry(bootc_crds::image_ref::DEFAULT_REGISTRY)
            .is_some()
    );
    assert!(secret_hash(json).starts_with("sha256:"));
}

#[test]
fn challenges_are_read_with_quotes_escapes_and_commas() {
    let p = challenge_params(
        r#"realm="https://auth.example/token",service=registry.example, scope="repository:a/b:pull,push",x="say \"hi\"""#,
    );
    assert_eq!(p["realm"], "https://auth.example/token");
    assert_eq!(p["service"], "registry.example");
    assert_eq!(p["scope"], "repository:a/b:pull,push");
    assert_eq!(p["x"], r#"say "hi""#);
    assert!(challenge_params("").is_empty());
}

// ---------------------------------------------------------------------------------------
// A hostile registry: answers that never end.
// ---------------------------------------------------------------------------------------

/// What a hostile registry stops sending after, so that a client reading without a cap
/// cannot take the test machine's memory: far more than any cap.
const SAFETY_STOP: usize = 256 << 20;
/// What may be under way between the server's writes and the client's reads when the
/// client gives up: the largest socket buffers the kernel grows a connection's to on
/// each side (the third field of `net.ipv4.tcp_rmem` and `tcp_wmem`; under load, a
/// loopback connection's receive buffer grew past 16 MiB on a machine whose maximum is
/// 32 MiB), and a MiB for the HTTP stack's buffer and the piece being written. Still far
/// below [`SAFETY_STOP`], which a client reading without a cap would reach.
fn in_flight() -> usize {
    let most = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.split_whitespace().nth(2)?.parse::<usize>().ok())
    };
    let kernel = most("/proc/sys/net/ipv4/tcp_rmem").unwrap_or(6 << 20)
        + most("/proc/sys/net/ipv4/tcp_wmem").unwrap_or(4 << 20);
    let in_flight = kernel + (1 << 20);
    assert!(
        in_flight * 2 < SAFETY_STOP,
        "socket buffers of {in_flight} bytes leave the test nothing to tell apart"
    );
    in_flight
}

/// How the hostile registry answers a request.
enum Reply {
    /// Status, headers, body (sent with its length, none for HEAD).
    Fixed(u16, Vec<(String, String)>, Vec<u8>),
    /// Status and headers, then a chunked body without end.
    Endless(u16, Vec<(String, String)>),
}

type Handler = Arc<dyn Fn(&str, &str) -> Reply + Send + Sync>;

/// A plain-HTTP server on loopback answering with `handler(method, path)`, counting the
/// body bytes it managed to send without end.
struct Hostile {
    addr: String,
    sent: Arc<AtomicUsize>,
    /// Set once an endless body stopped because the client went away.
    given_up: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    async fn start(handler: Handler) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicUsize::new(0));
        let given_up = Arc::new(AtomicBool::new(false));
        let (sent2, given_up2) = (Arc::clone(&sent), Arc::clone(&given_up));
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (handler, sent, given_up) =
                    (handler.clone(), Arc::clone(&sent2), Arc::clone(&given_up2));
                tokio::spawn(serve(conn, handler, sent, given_up));
            }
        });
        Hostile {
            addr,
            sent,
            given_up,
            task,
        }
    }

    /// Waits until an endless body stopped because the client went away.
    async fn wait_given_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.given_up.load(Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the client still reads after {} bytes",
                self.sent.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut conn: TcpStream,
    handler: Handler,
    sent: Arc<AtomicUsize>,
    given_up: Arc<AtomicBool>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let mut line = head.lines().next().unwrap_or_default().split_whitespace();
        let method = line.next().unwrap_or_default().to_owned();
        let target = line.next().unwrap_or_default();
        let path = target.split('?').next().unwrap_or_default().to_owned();
        let header = |status: u16, headers: &[(String, String)], length: Option<usize>| {
            let mut out = format!("HTTP/1.1 {status} X\r\n");
            match length {
                Some(n) => out.push_str(&format!("Content-Length: {n}\r\n")),
                None => out.push_str("Transfer-Encoding: chunked\r\n"),
            }
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.into_bytes()
        };
        match handler(&method, &path) {
            Reply::Fixed(status, headers, body) => {
                let mut out = header(status, &headers, Some(body.len()));
                if method != "HEAD" {
                    out.extend_from_slice(&body);
                }
                if conn.write_all(&out).await.is_err() {
                    return;
                }
            }
            Reply::Endless(status, headers) => {
                if conn
                    .write_all(&header(status, &headers, None))
                    .await
                    .is_err()
                {
                    return;
                }
                let piece = [b' '; 64 << 10];
                let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                framed.extend_from_slice(&piece);
                framed.extend_from_slice(b"\r\n");
                while sent.load(Ordering::SeqCst) < SAFETY_STOP {
                    if conn.write_all(&framed).await.is_err() {
                        given_up.store(true, Ordering::SeqCst);
                        return;
                    }
                    sent.fetch_add(piece.len(), Ordering::SeqCst);
                }
                return;
            }
        }
    }
}

fn fixed(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    Reply::Fixed(
        status,
        headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body.to_vec(),
    )
}

fn hostile_resolver(addr: &str) -> Resolver {
    Resolver::new(ResolverOptions {
        insecure_registries: vec![addr.to_owned()],
        timeout: Duration::from_secs(20),
    })
}

fn reference(addr: &str) -> ImageRef {
    ImageRef::parse(&format!("{addr}/app:v1")).unwrap()
}

#[tokio::test]
async fn an_endless_manifest_fails_at_the_cap() {
    let registry = Hostile::start(Arc::new(|method: &str, path: &str| {
        match (method, path) {
            ("GET", "/v2/app/manifests/v1") => Reply::Endless(
                200,
                vec![(
                    "Content-Type".into(),
                    "application/vnd.oci.image.manifest.v1+json".into(),
                )],
            ),
            // No HEAD: the digest is the hash of what a GET brings.
            ("HEAD", _) => fixed(405, &[], b""),
            _ => fixed(404, &[], b""),
        }
    }))
    .await;
    let resolver = hostile_resolver(&registry.addr);
    let started = Instant::now();
    let e = resolver
        .resolve(&reference(&registry.addr), None, Duration::from_secs(300))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "resolving {}/app:v1 failed: the registry answered a manifest larger than 4 MiB, more than is read",
            registry.addr
        )
    );
    assert_eq!(e.kind(), "other");
    registry.wait_given_up().await;
    eprintln!("the registry sent {} bytes", registry.sent());
    assert!(
        registry.sent() <= MAX_MANIFEST + in_flight(),
        "{} bytes sent",
        registry.sent()
    );
}

#[tokio::test]
async fn an_endless_token_fails_at_the_cap() {
    let challenge = Arc::new(std::sync::OnceLock::<String>::new());
    let realm = Arc::clone(&challenge);
    let registry = Hostile::start(Arc::new(move |_: &str, path: &str| match path {
        "/token" => Reply::Endless(
            200,
            vec![("Content-Type".into(), "application/json".into())],
        ),
        _ => fixed(
            401,
            &[("WWW-Authenticate", realm.get().unwrap().as_str())],
            br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
        ),
    }))
    .await;
    challenge
        .set(format!(
            r#"Bearer realm="http://{}/token",service="hostile""#,
            registry.addr
        ))
        .unwrap();
    let resolver = hostile_resolver(&registry.addr);
    let started = Instant::now();
    let e = resolver
        .resolve(&reference(&registry.addr), None, Duration::from_secs(300))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{e}");
    assert!(
        e.to_string()
            .ends_with("the registry answered a token larger than 1 MiB, more than is read"),
        "{e}"
    );
    registry.wait_given_up().await;
    eprintln!("the registry sent {} bytes", registry.sent());
    assert!(
        registry.sent() <= MAX_TOKEN + in_flight(),
        "{} bytes sent",
        registry.sent()
    );
}

#[tokio::test]
async fn an_endless_manifest_behind_the_digest_costs_only_the_version() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let by_digest = format!("/v2/app/manifests/{digest}");
    let header = digest.clone();
    let registry = Hostile::start(Arc::new(move |method: &str, path: &str| {
        match (method, path) {
            ("HEAD", "/v2/app/manifests/v1") => {
                fixed(200, &[("Docker-Content-Digest", header.as_str())], b"")
            }
            ("GET", p) if p == by_digest => Reply::Endless(
                200,
                vec![(
                    "Content-Type".into(),
                    "application/vnd.oci.image.index.v1+json".into(),
                )],
            ),
            _ => fixed(404, &[], b""),
        }
    }))
    .await;
    let resolver = hostile_resolver(&registry.addr);
    let started = Instant::now();
    let resolved = resolver
        .resolve(&reference(&registry.addr), None, Duration::from_secs(300))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(resolved.digest.to_string(), digest);
    assert_eq!(resolved.version, None);
    registry.wait_given_up().await;
    eprintln!("the registry sent {} bytes", registry.sent());
    assert!(
        registry.sent() <= MAX_MANIFEST + in_flight(),
        "{} bytes sent",
        registry.sent()
    );
}
