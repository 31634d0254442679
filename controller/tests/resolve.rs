//! The tag resolver against a real registry (Debian's docker-registry, through
//! `test-registry`), plus a counting proxy and small fake registries for what a real one
//! will not do on demand (429, no HEAD, silence).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bootc_crds::image_ref::ImageRef;
use bootc_pool_controller::resolve::{
    Credentials, ResolveError, Resolved, Resolver, ResolverOptions, parse_pull_secret,
};
use test_registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DEADLINE: Duration = Duration::from_secs(60);

fn resolver_for(insecure: &[&str]) -> Resolver {
    Resolver::new(ResolverOptions {
        insecure_registries: insecure.iter().map(|s| (*s).to_owned()).collect(),
        timeout: Duration::from_secs(10),
    })
}

fn image(host: &str, repo: &str, tag: &str) -> ImageRef {
    ImageRef::parse(&format!("{host}/{repo}:{tag}")).unwrap()
}

/// Runs a blocking test-registry call (umoci, skopeo) off the runtime's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn start_registry(auth: Option<(&'static str, &'static str)>) -> Registry {
    blocking(move || match auth {
        Some((u, p)) => Registry::start_with_auth(u, p),
        None => Registry::start(),
    })
    .await
    .unwrap()
}

async fn push(reg: &Arc<Registry>, repo: &str, tag: &str, labels: &[(&str, &str)]) -> String {
    let reg = reg.clone();
    let (repo, tag) = (repo.to_owned(), tag.to_owned());
    let labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    blocking(move || {
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        reg.push(&repo, &tag, &labels)
    })
    .await
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// A counting TCP proxy and a fake registry.
// ---------------------------------------------------------------------------------------

/// Request lines (`METHOD PATH`) seen, shared with the server task.
#[derive(Debug, Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn count(&self, pred: impl Fn(&str) -> bool) -> usize {
        self.all().iter().filter(|l| pred(l)).count()
    }
}

/// Pulls every complete request head out of `buf` (the resolver never sends bodies) and
/// records its request line.
fn record_heads(buf: &mut Vec<u8>, seen: &Seen) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let line = head.lines().next().unwrap_or_default();
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        );
        seen.push(format!("{method} {path}"));
        out.push((method, path));
    }
    out
}

/// A loopback TCP proxy in front of `upstream` that counts HTTP requests.
struct CountingProxy {
    addr: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    async fn start(upstream: String) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Seen::default();
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let seen = seen2.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let down = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    });
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    loop {
                        match cr.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                buf.extend_from_slice(&chunk[..n]);
                                record_heads(&mut buf, &seen);
                                if sw.write_all(&chunk[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    let _ = sw.shutdown().await;
                    let _ = down.await;
                });
            }
        });
        CountingProxy { addr, seen, task }
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A response of the fake registry.
struct FakeResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

type Handler = Arc<dyn Fn(&str, &str) -> Option<FakeResponse> + Send + Sync>;

/// A plain-HTTP server on loopback answering with `handler(method, path)`; `None` means
/// "never answer" (the connection is held open).
struct FakeRegistry {
    addr: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl FakeRegistry {
    async fn start(handler: Handler) -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Seen::default();
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen2.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    loop {
                        let n = match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        buf.extend_from_slice(&chunk[..n]);
                        for (method, path) in record_heads(&mut buf, &seen) {
                            let Some(resp) = handler(&method, &path) else {
                                // Hold the connection open without answering.
                                let _ = conn.read(&mut chunk).await;
                                std::future::pending::<()>().await;
                                return;
                            };
                            let mut out = format!(
                                "HTTP/1.1 {} X\r\nContent-Length: {}\r\n",
                                resp.status,
                                resp.body.len()
                            );
                            for (k, v) in &resp.headers {
                                out.push_str(&format!("{k}: {v}\r\n"));
                            }
                            out.push_str("\r\n");
                            let mut bytes = out.into_bytes();
                            if method != "HEAD" {
                                bytes.extend_from_slice(&resp.body);
                            }
                            if conn.write_all(&bytes).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        FakeRegistry { addr, seen, task }
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Polls `resolve` until `done` accepts the answer, or fails at the deadline.
async fn resolve_until(
    resolver: &Resolver,
    reference: &ImageRef,
    credentials: Option<&Credentials>,
    interval: Duration,
    done: impl Fn(&Result<Resolved, ResolveError>) -> bool,
) -> Result<Resolved, ResolveError> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let r = resolver.resolve(reference, credentials, interval).await;
        if done(&r) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "deadline passed; last answer {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Tests against the real registry.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_resolves_to_the_pushed_digest_with_its_version() {
    let reg = Arc::new(start_registry(None).await);
    let host = reg.host();
    let pushed = push(
        &reg,
        "app",
        "stable",
        &[("org.opencontainers.image.version", "41.2")],
    )
    .await;
    let resolver = resolver_for(&[&host]);

    let r = resolver
        .resolve(
            &image(&host, "app", "stable"),
            None,
            Duration::from_secs(300),
        )
        .await
        .unwrap();
    assert_eq!(r.digest.to_string(), pushed);
    assert_eq!(r.image, format!("{host}/app@{pushed}"));
    assert_eq!(r.version.as_deref(), Some("41.2"));

    // An image without the label resolves with no version.
    let plain = push(&reg, "app", "plain", &[]).await;
    let r = resolver
        .resolve(
            &image(&host, "app", "plain"),
            None,
            Duration::from_secs(300),
        )
        .await
        .unwrap();
    assert_eq!(r.digest.to_string(), plain);
    assert_eq!(r.version, None);
}

#[tokio::test]
async fn a_digest_reference_makes_no_request() {
    // Port 1 on loopback: any request would fail, so success proves none was made.
    let digest = format!("sha256:{}", "ab".repeat(32));
    let resolver = resolver_for(&[]);
    for s in [
        format!("127.0.0.1:1/app@{digest}"),
        format!("127.0.0.1:1/app:v1@{digest}"),
    ] {
        let r = resolver
            .resolve(
                &ImageRef::parse(&s).unwrap(),
                None,
                Duration::from_secs(300),
            )
            .await
            .unwrap();
        assert_eq!(r.image, format!("127.0.0.1:1/app@{digest}"));
        assert_eq!(r.digest.to_string(), digest);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_tag_is_seen_only_after_the_interval() {
    let reg = Arc::new(start_registry(None).await);
    let host = reg.host();
    let resolver = resolver_for(&[&host]);
    let r = image(&host, "app", "latest");
    let d1 = push(
        &reg,
        "app",
        "latest",
        &[("org.opencontainers.image.version", "1")],
    )
    .await;
    let first = resolver
        .resolve(&r, None, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(first.digest.to_string(), d1);

    let d2 = push(
        &reg,
        "app",
        "latest",
        &[("org.opencontainers.image.version", "2")],
    )
    .await;
    assert_ne!(d1, d2);

    // Within the interval (an hour here, whatever the push took) the cached answer stands.
    let cached = resolver
        .resolve(&r, None, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(cached, first);

    // With a one-second interval the answer moves once the cached one is a second old.
    let moved = resolve_until(&resolver, &r, None, Duration::from_secs(1), |a| {
        a.as_ref().is_ok_and(|x| x.digest.to_string() == d2)
    })
    .await
    .unwrap();
    assert_eq!(moved.version.as_deref(), Some("2"));
    assert!(moved.resolved_at - first.resolved_at >= chrono::Duration::seconds(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_list_resolves_to_its_index_digest() {
    let reg = Arc::new(start_registry(None).await);
    let host = reg.host();
    let reg2 = reg.clone();
    let pushed = blocking(move || {
        reg2.push_index(
            "multi",
            "v3",
            &[("org.opencontainers.image.version", "3.0")],
        )
    })
    .await
    .unwrap();
    let resolver = resolver_for(&[&host]);
    let r = resolver
        .resolve(&image(&host, "multi", "v3"), None, Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(r.digest.to_string(), pushed.index);
    assert_ne!(r.digest.to_string(), pushed.amd64);
    assert_eq!(r.image, format!("{host}/multi@{}", pushed.index));
    assert_eq!(r.version.as_deref(), Some("3.0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_through_a_pull_secret() {
    let reg = Arc::new(start_registry(Some(("alice", "s3cret-pw"))).await);
    let host = reg.host();
    let pushed = push(&reg, "private", "v1", &[]).await;
    let resolver = resolver_for(&[&host]);
    let r = image(&host, "private", "v1");
    let interval = Duration::from_secs(300);

    let good = parse_pull_secret(reg.auth_json().as_bytes())
        .unwrap()
        .with_source("infra", "registry-creds")
        .for_registry(&host)
        .unwrap();
    let ok = resolver.resolve(&r, Some(&good), interval).await.unwrap();
    assert_eq!(ok.digest.to_string(), pushed);

    // Same resolver, no credentials: the good ones must not be reused.
    let e = resolver.resolve(&r, None, interval).await.unwrap_err();
    assert!(
        matches!(
            e,
            ResolveError::Unauthorized {
                with_credentials: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("registry {host} requires credentials for {host}/private: set spec.pullSecretRef")
    );

    // A wrong password.
    let wrong_json =
        format!(r#"{{"auths":{{"{host}":{{"username":"alice","password":"WRONG-pw"}}}}}}"#);
    let wrong = parse_pull_secret(wrong_json.as_bytes())
        .unwrap()
        .with_source("infra", "stale-creds")
        .for_registry(&host)
        .unwrap();
    let e = resolver
        .resolve(&r, Some(&wrong), interval)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ResolveError::Unauthorized {
                with_credentials: true,
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert_eq!(
        msg,
        format!(
            "registry {host} refused the credentials of pull secret infra/stale-creds for {host}/private"
        )
    );
    assert!(!msg.contains("WRONG-pw") && !format!("{e:?}").contains("WRONG-pw"));

    // The good credentials still work (their cached answer, and a fresh request too).
    let again = resolver
        .resolve(&r, Some(&good), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again.digest.to_string(), pushed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_tag_is_not_found() {
    let reg = Arc::new(start_registry(None).await);
    let host = reg.host();
    push(&reg, "app", "v1", &[]).await;
    let resolver = resolver_for(&[&host]);
    let e = resolver
        .resolve(&image(&host, "app", "nope"), None, Duration::from_secs(300))
        .await
        .unwrap_err();
    assert!(matches!(e, ResolveError::NotFound { .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("tag nope not found in {host}/app"));

    let e = resolver
        .resolve(
            &image(&host, "no-such-repo", "v1"),
            None,
            Duration::from_secs(300),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ResolveError::NotFound { .. }), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_registry_gives_a_connection_error_cached_until_the_backoff() {
    let reg = start_registry(None).await;
    let host = reg.host();
    let reg = Arc::new(Mutex::new(reg));
    {
        let reg = reg.clone();
        blocking(move || reg.lock().unwrap().push("app", "v1", &[]))
            .await
            .unwrap();
    }
    reg.lock().unwrap().stop();
    let resolver = resolver_for(&[&host]);
    let r = image(&host, "app", "v1");
    // Backoff after a first failure: min(interval, 30 s) = 8 s, long enough for the
    // registry to restart inside it even on a loaded machine (it takes about 0.1 s).
    let interval = Duration::from_secs(8);

    let t0 = Instant::now();
    let e = resolver.resolve(&r, None, interval).await.unwrap_err();
    eprintln!("stopped registry: {e}");
    assert!(matches!(e, ResolveError::Connection { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with(&format!("cannot reach registry {host}: ")),
        "{e}"
    );

    {
        let reg = reg.clone();
        blocking(move || reg.lock().unwrap().restart())
            .await
            .unwrap();
    }
    // The registry is back, but within the backoff the cached error is returned.
    let cached = resolver.resolve(&r, None, interval).await;
    let asked_after = t0.elapsed();
    assert!(
        asked_after < interval,
        "asked again only after {asked_after:?}, past the backoff: nothing was checked"
    );
    assert_eq!(cached.unwrap_err(), e);
    // After the backoff, a new attempt succeeds.
    let ok = resolve_until(&resolver, &r, None, interval, Result::is_ok).await;
    assert!(ok.is_ok());
    assert!(t0.elapsed() >= interval, "retried before the backoff");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_registry_must_be_listed_as_insecure() {
    let reg = Arc::new(start_registry(None).await);
    let host = reg.host();
    push(&reg, "app", "v1", &[]).await;
    let resolver = resolver_for(&[]);
    let e = resolver
        .resolve(&image(&host, "app", "v1"), None, Duration::from_secs(300))
        .await
        .unwrap_err();
    eprintln!("plain HTTP: {e:?}");
    assert!(matches!(e, ResolveError::Insecure { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("registry {host} speaks plain HTTP; list it in --insecure-registry")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_resolves_make_one_manifest_request() {
    let reg = Arc::new(start_registry(None).await);
    let pushed = push(
        &reg,
        "app",
        "v1",
        &[("org.opencontainers.image.version", "7")],
    )
    .await;
    let proxy = CountingProxy::start(reg.host()).await;
    let resolver = resolver_for(&[&proxy.addr]);
    let r = image(&proxy.addr, "app", "v1");
    let interval = Duration::from_secs(1);

    let round = |resolver: Resolver, r: ImageRef| async move {
        let barrier = Arc::new(tokio::sync::Barrier::new(20));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (resolver, r, barrier) = (resolver.clone(), r.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    resolver.resolve(&r, None, interval).await
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap().unwrap());
        }
        out
    };

    let answers = round(resolver.clone(), r.clone()).await;
    assert!(answers.iter().all(|a| a.digest.to_string() == pushed));
    assert!(answers.iter().all(|a| a.version.as_deref() == Some("7")));
    let tag_path = "/v2/app/manifests/v1";
    let by_digest = format!("/v2/app/manifests/{pushed}");
    let seen = proxy.seen.all();
    eprintln!("round 1 requests: {seen:#?}");
    assert_eq!(proxy.seen.count(|l| l.ends_with(tag_path)), 1, "{seen:#?}");
    assert_eq!(proxy.seen.count(|l| l == format!("HEAD {tag_path}")), 1);
    // The version label: the manifest by digest and the config blob, once.
    assert_eq!(
        proxy.seen.count(|l| l.ends_with(&by_digest)),
        1,
        "{seen:#?}"
    );
    assert_eq!(proxy.seen.count(|l| l.contains("/blobs/")), 1, "{seen:#?}");
    let round1 = seen.len();

    // Once the answer is older than the interval: one more HEAD, nothing else per digest.
    let first = answers[0].resolved_at;
    let deadline = Instant::now() + DEADLINE;
    while chrono::Utc::now() - first < chrono::Duration::from_std(interval).unwrap() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answers = round(resolver.clone(), r.clone()).await;
    assert!(answers.iter().all(|a| a.digest.to_string() == pushed));
    let seen = proxy.seen.all();
    eprintln!("round 2 requests: {:#?}", &seen[round1..]);
    assert_eq!(proxy.seen.count(|l| l.ends_with(tag_path)), 2, "{seen:#?}");
    assert_eq!(
        proxy.seen.count(|l| l.ends_with(&by_digest)),
        1,
        "{seen:#?}"
    );
    assert_eq!(proxy.seen.count(|l| l.contains("/blobs/")), 1, "{seen:#?}");
}

// ---------------------------------------------------------------------------------------
// Fake registries: HEAD-less, rate limiting, silent.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_registry_without_head_is_resolved_with_get() {
    let config = br#"{"architecture":"amd64","os":"linux","config":{"Labels":{"org.opencontainers.image.version":"9"}},"rootfs":{"type":"layers","diff_ids":[]}}"#.to_vec();
    let config_digest = format!("sha256:{}", sha256_hex(&config));
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{}}},"layers":[]}}"#,
        config.len()
    )
    .into_bytes();
    let manifest_digest = format!("sha256:{}", sha256_hex(&manifest));
    let (m2, c2, cd2, md2) = (
        manifest.clone(),
        config.clone(),
        config_digest.clone(),
        manifest_digest.clone(),
    );
    let fake = FakeRegistry::start(Arc::new(move |method: &str, path: &str| {
        let ok = |body: Vec<u8>, ct: &str| FakeResponse {
            status: 200,
            headers: vec![("Content-Type".into(), ct.into())],
            body,
        };
        Some(match (method, path) {
            ("GET", "/v2/") => ok(b"{}".to_vec(), "application/json"),
            ("HEAD", _) => FakeResponse {
                status: 405,
                headers: vec![],
                body: Vec::new(),
            },
            ("GET", p)
                if p == "/v2/app/manifests/v1" || p == format!("/v2/app/manifests/{md2}") =>
            {
                ok(m2.clone(), "application/vnd.oci.image.manifest.v1+json")
            }
            ("GET", p) if p == format!("/v2/app/blobs/{cd2}") => {
                ok(c2.clone(), "application/octet-stream")
            }
            _ => FakeResponse {
                status: 404,
                headers: vec![],
                body: Vec::new(),
            },
        })
    }))
    .await;
    let resolver = resolver_for(&[&fake.addr]);
    let r = resolver
        .resolve(
            &image(&fake.addr, "app", "v1"),
            None,
            Duration::from_secs(300),
        )
        .await
        .unwrap();
    assert_eq!(r.digest.to_string(), manifest_digest);
    assert_eq!(r.version.as_deref(), Some("9"));
    assert_eq!(fake.seen.count(|l| l == "HEAD /v2/app/manifests/v1"), 1);
    assert_eq!(fake.seen.count(|l| l == "GET /v2/app/manifests/v1"), 1);
}

#[tokio::test]
async fn rate_limiting_is_reported_and_backed_off() {
    let fake = FakeRegistry::start(Arc::new(|method: &str, path: &str| {
        Some(match (method, path) {
            ("GET", "/v2/") => FakeResponse {
                status: 200,
                headers: vec![],
                body: b"{}".to_vec(),
            },
            _ => FakeResponse {
                status: 429,
                headers: vec![("Retry-After".into(), "120".into())],
                body: br#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#.to_vec(),
            },
        })
    }))
    .await;
    let resolver = resolver_for(&[&fake.addr]);
    let r = image(&fake.addr, "app", "v1");
    let interval = Duration::from_secs(300);
    let e = resolver.resolve(&r, None, interval).await.unwrap_err();
    assert!(matches!(e, ResolveError::RateLimited { .. }), "{e:?}");
    assert!(e.to_string().contains("rate limiting"), "{e}");
    let wait = e.retry_after().unwrap();
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(120),
        "{wait:?}"
    );
    let requests = fake.seen.all().len();

    // Asked again at once: the cached error, with less time left, and no request.
    let again = resolver.resolve(&r, None, interval).await.unwrap_err();
    assert!(matches!(again, ResolveError::RateLimited { .. }));
    assert!(again.retry_after().unwrap() <= wait);
    assert_eq!(fake.seen.all().len(), requests);
}

#[tokio::test]
async fn a_silent_registry_times_out() {
    let fake = FakeRegistry::start(Arc::new(|_: &str, _: &str| None)).await;
    let resolver = Resolver::new(ResolverOptions {
        insecure_registries: vec![fake.addr.clone()],
        timeout: Duration::from_millis(500),
    });
    let t0 = Instant::now();
    let e = resolver
        .resolve(
            &image(&fake.addr, "app", "v1"),
            None,
            Duration::from_secs(300),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ResolveError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("did not answer within 0.5s"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10));
}
