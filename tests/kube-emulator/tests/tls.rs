//! The emulator over HTTPS, held to kubectl and kube-rs: both talk to it through the
//! kubeconfig it issues (trusting the authority it made at start), and a client that does
//! not trust that authority is refused in the handshake. Plain HTTP stays the default.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use kube_emulator::{Emulator, EmulatorOptions};
use serde_json::json;

async fn tls_emulator() -> Emulator {
    Emulator::start_with(EmulatorOptions {
        tls: true,
        ..EmulatorOptions::default()
    })
    .await
    .unwrap()
}

/// kubectl with its own HOME and cache and the given kubeconfig.
async fn kubectl(dir: &Path, kubeconfig: &str, args: &[&str]) -> Output {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let mut command = kube_emulator::kubectl::command(dir, &path);
    command.args(["--request-timeout", "20s"]).args(args);
    kube_emulator::kubectl::output(command).await
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn plain_http_stays_the_default() {
    assert!(!EmulatorOptions::default().tls);
}

#[tokio::test]
async fn kubectl_talks_to_it_over_tls_with_the_issued_kubeconfig() {
    let emulator = tls_emulator().await;
    assert!(emulator.url().starts_with("https://127.0.0.1:"));
    let kubeconfig = emulator.kubeconfig();
    assert!(kubeconfig.contains("certificate-authority-data: "));
    let dir = tempfile::tempdir().unwrap();
    // (`kubectl create namespace` would send protobuf, which the emulator does not read.)
    let manifest = dir.path().join("ns.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: over-tls\n",
    )
    .unwrap();
    let out = kubectl(
        dir.path(),
        &kubeconfig,
        &["apply", "-f", manifest.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let out = kubectl(
        dir.path(),
        &kubeconfig,
        &[
            "get",
            "namespace",
            "over-tls",
            "-o",
            "jsonpath={.metadata.name}",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "over-tls");
    assert!(
        emulator
            .handle()
            .get("", "namespaces", "", "over-tls")
            .is_some(),
        "kubectl's write reached the emulator"
    );
}

#[tokio::test]
async fn kubectl_refuses_it_without_the_authority() {
    let emulator = tls_emulator().await;
    // The issued kubeconfig (with its token) minus the authority.
    let untrusting: String = emulator
        .kubeconfig()
        .lines()
        .filter(|l| !l.contains("certificate-authority-data"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(untrusting, emulator.kubeconfig());
    let dir = tempfile::tempdir().unwrap();
    let out = kubectl(dir.path(), &untrusting, &["get", "namespaces"]).await;
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("certificate signed by unknown authority"),
        "{}",
        text(&out)
    );
    // A CA of another emulator is no better.
    let other = tls_emulator().await;
    let wrong =
        kube_emulator::tls_kubeconfig(&emulator.url(), other.ca_pem().unwrap(), "emulator-admin");
    let out = kubectl(dir.path(), &wrong, &["get", "namespaces"]).await;
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("certificate signed by unknown authority"),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn kube_rs_talks_to_it_over_tls() {
    let emulator = tls_emulator().await;
    let client = emulator.client().unwrap();
    let api: Api<Namespace> = Api::all(client);
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "rs-tls"}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"rs-tls".to_string()), "{names:?}");
    // The client from the issued kubeconfig file works the same.
    let file = kube::config::Kubeconfig::from_yaml(&emulator.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .unwrap();
    let api: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert_eq!(
        api.get("rs-tls").await.unwrap().metadata.name.as_deref(),
        Some("rs-tls")
    );
}

#[tokio::test]
async fn kube_rs_refuses_it_without_the_authority() {
    let emulator = tls_emulator().await;
    let mut config = emulator.config();
    config.root_cert = None;
    let api: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    let err = api.list(&ListParams::default()).await.unwrap_err();
    let chain = error_chain(&err);
    assert!(
        chain.to_lowercase().contains("certificate"),
        "refused for its certificate: {chain}"
    );
    let other = tls_emulator().await;
    let mut config = emulator.config();
    config.root_cert = other.config().root_cert;
    let api: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        error_chain(&err).to_lowercase().contains("certificate"),
        "{}",
        error_chain(&err)
    );
    assert!(
        emulator.handle().requests().is_empty(),
        "no request got past the handshake: {:?}",
        emulator.handle().requests()
    );
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}
