//! A registry that answers a tag with a manifest that never ends cannot push the
//! controller past its memory limit: the controller binary, run as its own process
//! against the API emulator, asks such a registry for a pool's tag while its peak
//! resident size (`VmHWM`) is read from `/proc`; the pool is `Degraded` with a message
//! that says what the registry did, and the peak stays under the memory limit the
//! install declares for the controller's container.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bootc_crds::pool::BootcNodePool;
use common::*;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// `VmHWM` of the controller's process, in bytes.
fn peak_of(controller: &ControllerProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", controller.0.id())).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in kB");
    kib * 1024
}

/// What the registry did: endless answers begun, and bytes sent in them.
#[derive(Default)]
struct Sent {
    answers: AtomicUsize,
    bytes: AtomicUsize,
}

/// One connection: every request for the tag's manifest gets an endless chunked body of
/// JSON; HEAD is not allowed (so the digest must come from a GET); anything else is 404.
async fn serve(mut conn: TcpStream, sent: Arc<Sent>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        head.clear();
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let mut line = text.split_whitespace();
        let (method, path) = (line.next().unwrap_or(""), line.next().unwrap_or(""));
        if method == "GET" && path.ends_with("/manifests/v1") {
            sent.answers.fetch_add(1, Ordering::SeqCst);
            let start = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if conn.write_all(start.as_bytes()).await.is_err() {
                return;
            }
            let filler = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
            let mut first = format!("{:x}\r\n{{\"a\":\"\r\n", 6).into_bytes();
            first.extend_from_slice(filler.as_bytes());
            let mut chunk = first;
            while conn.write_all(&chunk).await.is_ok() {
                sent.bytes.fetch_add(chunk.len(), Ordering::SeqCst);
                chunk = filler.clone().into_bytes();
            }
            return;
        }
        let status = if method == "HEAD" {
            "405 Method Not Allowed"
        } else {
            "404 Not Found"
        };
        let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
        if conn.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The memory limit of the controller's container in the install, in bytes.
fn declared_limit() -> u64 {
    let path = repo_root().join("deploy/manifests/40-controller.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let deployment: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("the Deployment's containers");
    let limit = containers[0]["resources"]["limits"]["memory"]
        .as_str()
        .expect("a memory limit on the controller's container");
    let mib: u64 = limit
        .strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a limit in Mi, not {limit:?}"));
    mib << 20
}

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_manifest_leaves_the_controller_within_its_memory_limit() {
    let limit = declared_limit();
    let sent = Arc::new(Sent::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let registry = listener.local_addr().unwrap().to_string();
    let accepting = {
        let sent = Arc::clone(&sent);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, Arc::clone(&sent)));
            }
        })
    };

    // No nodes: the tag is resolved all the same.
    let dir = tempfile::tempdir().unwrap();
    let api = api_for_a_process(dir.path()).await;
    let (client, kubeconfig) = (api.client.clone(), api.kubeconfig.clone());
    let controller = ControllerProcess(
        Command::new(env!("CARGO_BIN_EXE_bootc-pool-controller"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--insecure-registry", &registry])
            .args(["--log-format", "text"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the controller"),
    );

    let pool = workers_pool(&format!("{registry}/app:v1"), json!({}));
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    pools.create(&PostParams::default(), &pool).await.unwrap();

    // The endless answer is cut at the cap and the pool says so; the peak is read all
    // along (and the kernel keeps the highest mark between readings).
    let mut peak = 0;
    let deadline = Instant::now() + DEADLINE;
    let p = loop {
        peak = peak.max(peak_of(&controller));
        let p = pools.get("workers").await.unwrap();
        let said =
            condition(&p, "Degraded").is_some_and(|c| c.0 == "True" && c.2.contains("larger than"));
        if said {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no Degraded naming the manifest; {} answers begun; status {:#?}",
            sent.answers.load(Ordering::SeqCst),
            p.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    peak = peak.max(peak_of(&controller));
    let (_, reason, message) = condition(&p, "Degraded").unwrap();
    let bytes = sent.bytes.load(Ordering::SeqCst);
    eprintln!(
        "the registry began {} endless answers and sent {:.1} MiB in all; the controller's peak \
         resident size was {:.1} MiB (limit {} MiB); Degraded/{reason}: {message}",
        sent.answers.load(Ordering::SeqCst),
        bytes as f64 / f64::from(1 << 20),
        peak as f64 / f64::from(1 << 20),
        limit >> 20
    );
    // The fault happened: more was offered than the cap.
    assert!(sent.answers.load(Ordering::SeqCst) >= 1);
    assert!(bytes > 4 << 20, "{bytes} bytes sent");
    assert!(peak < limit, "peak {peak} bytes, limit {limit}");
    assert!(
        message.contains(&format!("{registry}/app:v1"))
            && message.contains("a manifest larger than 4 MiB"),
        "{message}"
    );
    drop(controller);
    accepting.abort();
}
