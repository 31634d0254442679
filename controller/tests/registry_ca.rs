//! A registry whose certificate a private authority signed, as `docs/install.md` tells an
//! admin to set it up: the controller binary, run as its own process, trusts the
//! authority through `SSL_CERT_FILE` (a PEM bundle, as a ConfigMap would mount it) and
//! resolves the pool's tag; without it the same registry is refused in the handshake and
//! the pool says why.
//!
//! The registry is Debian's docker-registry on loopback behind a TLS front end of the
//! test's, with a certificate for `127.0.0.1` signed by an authority made for the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use common::*;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_emulator::Emulator;
use kube_emulator::tls::Certificates;
use serde_json::json;
use test_registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// The controller against `kubeconfig`, with `SSL_CERT_FILE` set to `bundle` or unset.
fn controller(kubeconfig: &Path, bundle: Option<&Path>) -> ControllerProcess {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bootc-pool-controller"));
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .args(["--log-format", "text"])
        .env("RUST_LOG", "warn")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(bundle) = bundle {
        command.env("SSL_CERT_FILE", bundle);
    }
    ControllerProcess(command.spawn().expect("start the controller"))
}

/// TLS on `listener` in front of the plain registry at `upstream`; counts handshakes
/// that completed.
async fn front(listener: TcpListener, certs: &Certificates, upstream: String) -> Arc<AtomicUsize> {
    // HTTP/1.1 only: the registry behind speaks nothing else.
    let mut config = (*certs.server_config()).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (acceptor, upstream, counted) =
                (acceptor.clone(), upstream.clone(), Arc::clone(&counted));
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(conn).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                if let Ok(mut plain) = TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    handshakes
}

/// Waits until the pool named `name` satisfies `done`, for at most a minute.
async fn wait_pool(
    pools: &Api<BootcNodePool>,
    name: &str,
    what: &str,
    done: impl Fn(&BootcNodePool) -> bool,
) -> BootcNodePool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = pools.get(name).await.unwrap();
        if done(&p) {
            return p;
        }
        assert!(Instant::now() < deadline, "{what}: {:#?}", p.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_signed_by_a_private_authority_is_trusted_through_ssl_cert_file() {
    let (_registry, digest) = tokio::task::spawn_blocking(|| {
        let registry = Registry::start().unwrap();
        let digest = registry.push("app", "v1", &[]).unwrap();
        (registry, digest)
    })
    .await
    .unwrap();
    let upstream = _registry.host();
    let certs = Certificates::generate().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let handshakes = front(listener, &certs, upstream).await;

    let dir = tempfile::tempdir().unwrap();
    let api = api_for_a_process(dir.path()).await;
    let (client, kubeconfig) = (api.client.clone(), api.kubeconfig.clone());
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, certs.ca_pem()).unwrap();
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let image = format!("{host}/app:v1");

    // Trusted through the bundle: the tag resolves to the pushed digest, over TLS.
    let trusting = controller(&kubeconfig, Some(&bundle));
    pools
        .create(&PostParams::default(), &workers_pool(&image, json!({})))
        .await
        .unwrap();
    let resolved = wait_pool(&pools, "workers", "the tag resolved", |p| {
        p.status.as_ref().and_then(|s| s.target_digest.as_deref()) == Some(digest.as_str())
    })
    .await;
    assert!(handshakes.load(Ordering::SeqCst) >= 1, "it came over TLS");
    eprintln!(
        "with SSL_CERT_FILE: target {:?}",
        resolved.status.as_ref().unwrap().target_digest
    );
    // Deleted while its controller runs (the finalizer is the controller's to remove).
    pools
        .delete("workers", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&pools, "workers").await;
    drop(trusting);

    // Without it: the same registry is refused, and the pool says why.
    let _refusing = controller(&kubeconfig, None);
    pools
        .create(&PostParams::default(), &workers_pool(&image, json!({})))
        .await
        .unwrap();
    let refused = wait_pool(&pools, "workers", "a certificate error", |p| {
        condition(p, "Degraded").is_some_and(|c| c.0 == "True" && c.2.contains(&host))
    })
    .await;
    let (_, reason, message) = condition(&refused, "Degraded").unwrap();
    eprintln!("without SSL_CERT_FILE: Degraded/{reason}: {message}");
    assert!(
        message.to_lowercase().contains("certificate"),
        "the message names the certificate: {message}"
    );
    assert_eq!(
        refused
            .status
            .as_ref()
            .and_then(|s| s.target_digest.as_deref()),
        None,
        "nothing resolved"
    );
}

/// Waits until the pool is gone (its finalizer done), for at most a minute.
async fn wait_gone(pools: &Api<BootcNodePool>, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while pools.get_opt(name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "pool {name} still there");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_over_plain_http_needs_no_system_certificates() {
    use k8s_openapi::api::coordination::v1::Lease;
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    ensure_namespace(&client, "bootc-system").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emulator.write_kubeconfig(&kubeconfig).unwrap();
    // A host without a CA bundle: the bundle the client would load is empty.
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let mut running = controller(&kubeconfig, Some(&empty));
    let leases: Api<Lease> = Api::namespaced(client, "bootc-system");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            panic!("the controller exited ({status}) instead of reaching the API");
        }
        let held = leases
            .get_opt("bootc-pool-controller")
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity);
        if held.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "no Lease taken within a minute");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
