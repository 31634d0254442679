//! Shared helpers of the emulator's integration tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube_emulator::Emulator;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed CRDs of the project.
pub fn committed_crds() -> Vec<CustomResourceDefinition> {
    [
        "node.bootc.dev_bootcnodepools.yaml",
        "node.bootc.dev_bootcnodes.yaml",
    ]
    .iter()
    .map(|f| {
        let text = std::fs::read_to_string(repo_root().join("crds").join(f)).unwrap();
        serde_yaml_ng::from_str(&text).unwrap()
    })
    .collect()
}

/// An emulator with the project's CRDs installed, and a client for it.
pub async fn with_crds() -> (Emulator, kube::Client) {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in committed_crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    (emulator, client)
}

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The HTTP status of a kube-rs error (0 when it is not an API answer).
pub fn code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    }
}

/// The message of a kube-rs API error.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// The error of a kube-rs call that must fail, checked to carry HTTP status `want`.
#[track_caller]
pub fn refused<T: Debug>(result: Result<T, kube::Error>, want: u16) -> kube::Error {
    let err = result.expect_err("the call should have been refused");
    assert_eq!(code(&err), want, "{err}");
    err
}

/// Checks that a kube-rs call failed with HTTP status `want` and a message containing `text`.
#[track_caller]
pub fn assert_refused<T: Debug>(result: Result<T, kube::Error>, want: u16, text: &str) {
    let err = refused(result, want);
    assert!(message(&err).contains(text), "{err}");
}
