//! Small pieces the harness's tests share: a BootcNode asking for an image, digests made
//! up for the in-process catalog, reads of a BootcNode's conditions and of bootc's status,
//! the approval a controller would give, and polling with a deadline.
//!
//! They are the tests' own steps: an error fails the test that called them.

#![allow(clippy::expect_used)]

use std::time::Duration;

use bootc_crds::node::{BootcNode, BootcNodeSpec, UnitHealth};
use bootc_crds::pool::SignaturePolicy;
use bootc_crds::{ImageRef, REBOOT_SLOT_ANNOTATION};
use bootc_node_agent::bootc_status::BootcHost;
use bootc_node_agent::host::Host;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::time::Instant;

use crate::Node;

/// How long [`wait_for`] waits for an in-process cluster.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A made-up manifest digest: `sha256:` and 64 times `c`.
pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// A BootcNode spec asking for `image` staged; the rest as the CRD defaults it (the
/// default reboot and signature policies, no pull secret, no health units).
pub fn staged_spec(image: &str) -> BootcNodeSpec {
    let spec = serde_json::json!({"desiredImage": image, "desiredImageState": "Staged"});
    serde_json::from_value(spec).expect("a BootcNode spec")
}

/// BootcNode `name` asking for `image` staged ([`staged_spec`]).
pub fn bootc_node(name: &str, image: &str) -> BootcNode {
    BootcNode::new(name, staged_spec(image))
}

/// The reason of the BootcNode's `Idle` condition.
pub fn idle_reason(node: &BootcNode) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Idle")
        .map(|c| c.reason.as_str())
}

/// Approves the staged image of BootcNode `name` as the controller does: the reboot slot
/// of pool `pool` and `desiredImageState: Booted`.
pub async fn approve(api: &Api<BootcNode>, name: &str, pool: &str) {
    let patch = serde_json::json!({
        "metadata": {"annotations": {REBOOT_SLOT_ANNOTATION: pool}},
        "spec": {"desiredImageState": "Booted"},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("approving the staged image");
}

/// Polls `check` every 20 ms until it gives a value; panics after [`DEADLINE`].
pub async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_within(what, DEADLINE, check).await
}

/// Polls `check` every 20 ms until it gives a value; panics after `within`.
pub async fn wait_within<T>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates namespace `name`.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("creating the namespace");
}

/// The booted deployment's image digest in bootc's status; empty when there is none.
pub fn booted_digest(status: &BootcHost) -> String {
    status
        .status
        .booted
        .as_ref()
        .and_then(|b| b.image.as_ref())
        .map(|i| i.image_digest.to_string())
        .unwrap_or_default()
}

/// The staged deployment's image digest (empty when it has no image) and `downloadOnly`
/// in bootc's status.
pub fn staged(status: &BootcHost) -> Option<(String, Option<bool>)> {
    status.status.staged.as_ref().map(|s| {
        (
            s.image
                .as_ref()
                .map(|i| i.image_digest.to_string())
                .unwrap_or_default(),
            s.download_only,
        )
    })
}

/// Runs `program ARGS` inside `node` as an admin on it would (all of its namespaces,
/// through `nsenter`), without the variables `env_remove` of this process; asserts
/// success and returns its standard output.
pub fn run_in_node(node: &Node, program: &str, args: &[&str], env_remove: &[&str]) -> String {
    let init = node.init_pid().expect("the node is running").to_string();
    let mut command = std::process::Command::new("nsenter");
    command
        .args([
            "--target", &init, "--mount", "--uts", "--ipc", "--net", "--pid",
        ])
        .args(["--root", "--wd", "--", program])
        .args(args);
    for name in env_remove {
        command.env_remove(name);
    }
    let out = command.output().expect("running nsenter");
    assert!(
        out.status.success(),
        "{program} {args:?} on the node: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pull secret `name` (`kubernetes.io/dockerconfigjson`) with `dockerconfigjson` as its
/// `.dockerconfigjson`.
pub fn pull_secret(name: &str, dockerconfigjson: impl Into<Vec<u8>>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(
            [(
                ".dockerconfigjson".to_owned(),
                ByteString(dockerconfigjson.into()),
            )]
            .into(),
        ),
        ..Secret::default()
    }
}

/// Each unit's name, active and sub state, as `status.health` reports them.
pub fn unit_states(units: &[UnitHealth]) -> Vec<(&str, &str, &str)> {
    units
        .iter()
        .map(|u| {
            (
                u.name.as_str(),
                u.active_state.as_str(),
                u.sub_state.as_str(),
            )
        })
        .collect()
}

/// The rollback deployment's image digest in bootc's status.
pub fn rollback_digest(status: &BootcHost) -> Option<String> {
    let image = status.status.rollback.as_ref()?.image.as_ref()?;
    Some(image.image_digest.to_string())
}

/// The digest of a pinned reference (`HOST/REPO@sha256:…`).
pub fn digest_of(pin: &str) -> &str {
    pin.rsplit_once('@').expect("a pinned reference").1
}

/// `s` parsed as an image reference.
pub fn pin(s: &str) -> ImageRef {
    ImageRef::parse(s).expect("a valid image reference")
}

/// A condition of the BootcNode: (status, reason, message).
pub fn condition(node: &BootcNode, type_: &str) -> Option<(String, String, String)> {
    node.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The image bootc's spec asks for.
pub fn spec_image(status: &BootcHost) -> Option<&str> {
    status.spec.image.as_ref().map(|i| i.image.as_str())
}

/// Stages `pinned` on `host` with the default signature policy and asserts that bootc
/// then shows it staged and locked (download-only); bootc's status after.
pub async fn stage_locked(host: &impl Host, pinned: &str) -> BootcHost {
    host.stage(&pin(pinned), SignaturePolicy::Default)
        .await
        .expect("staging");
    let status = host.status().await.expect("bootc's status");
    assert_eq!(
        staged(&status),
        Some((digest_of(pinned).to_owned(), Some(true))),
        "{pinned} staged locked: {status:#?}"
    );
    status
}

/// Creates BootcNode `node`, as the controller would.
pub async fn create_node(api: &Api<BootcNode>, node: &BootcNode) {
    api.create(&PostParams::default(), node)
        .await
        .expect("creating the BootcNode");
}
