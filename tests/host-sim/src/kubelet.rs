//! The kubelet's part of a simulated node: the Node object and its `Ready` condition.
//!
//! When a node comes up the harness creates its Node object if missing and sets `Ready`
//! to `True`; when it goes down (reboot, soft reboot, stop) it sets `Ready` to `False`
//! (reason `NodeNotReady`), as the node lifecycle controller would once the kubelet stops
//! posting. It writes only on a change of readiness and retries failed writes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::error::{Result, SimError};
use crate::node::{NodePhase, NodeStatus};

/// How long to wait before retrying a failed write.
const RETRY: Duration = Duration::from_millis(500);

/// Keeps the Node named `name` in step with `status` until the status channel closes.
pub async fn run(client: kube::Client, name: String, mut status: watch::Receiver<NodeStatus>) {
    let api: Api<KubeNode> = Api::all(client);
    let mut written: Option<bool> = None;
    loop {
        let (ready, boot_id) = {
            let s = status.borrow_and_update();
            (s.phase == NodePhase::Up, s.boot_id.clone())
        };
        if written != Some(ready) {
            match set_ready(&api, &name, ready, boot_id.as_deref()).await {
                Ok(()) => written = Some(ready),
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "host-sim kubelet: cannot write the Node");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        }
        if status.changed().await.is_err() {
            // The node is gone: NotReady, once more if needed.
            if written != Some(false) {
                let _ = set_ready(&api, &name, false, None).await;
            }
            return;
        }
    }
}

/// Creates the Node if missing and sets its `Ready` condition.
pub async fn set_ready(
    api: &Api<KubeNode>,
    name: &str,
    ready: bool,
    boot_id: Option<&str>,
) -> Result<()> {
    let node = get_or_create(api, name).await?;
    let status = node_status(&node, ready, boot_id);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map_err(|source| SimError::Kube {
        call: "patch Node status",
        source,
    })?;
    Ok(())
}

/// The Node `name`, created (with the kubelet's labels) when missing.
async fn get_or_create(api: &Api<KubeNode>, name: &str) -> Result<KubeNode> {
    let existing = api.get_opt(name).await.map_err(|source| SimError::Kube {
        call: "get Node",
        source,
    })?;
    if let Some(node) = existing {
        return Ok(node);
    }
    let node: KubeNode = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
            },
        },
    }))
    .map_err(|e| SimError::InvalidOptions(format!("Node object: {e}")))?;
    match api.create(&PostParams::default(), &node).await {
        Ok(node) => Ok(node),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            api.get(name).await.map_err(|source| SimError::Kube {
                call: "get Node",
                source,
            })
        }
        Err(source) => Err(SimError::Kube {
            call: "create Node",
            source,
        }),
    }
}

/// A Node's `status.nodeInfo` as the simulator fills it in: what it knows (the
/// architecture, `os_image`, the boot ID) and the other fields the schema requires.
pub(crate) fn node_info(os_image: &str, boot_id: &str) -> Value {
    json!({
        "architecture": std::env::consts::ARCH,
        "operatingSystem": "linux",
        "osImage": os_image,
        "kernelVersion": "",
        "containerRuntimeVersion": "",
        "kubeletVersion": "host-sim",
        "kubeProxyVersion": "",
        "machineID": "",
        "systemUUID": "",
        "bootID": boot_id_with_dashes(boot_id),
    })
}

/// The `Ready` condition as the kubelet (`True`) or the node lifecycle controller
/// (`False`) writes it.
pub(crate) fn ready_condition(ready: bool) -> Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if ready {
        json!({
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        })
    } else {
        json!({
            "type": "Ready",
            "status": "False",
            "reason": "NodeNotReady",
            "message": "the simulated node is down",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        })
    }
}

/// The Node's new status: its other conditions kept, `Ready` replaced, and the boot ID
/// when given.
fn node_status(node: &KubeNode, ready: bool, boot_id: Option<&str>) -> Value {
    // A merge patch replaces the whole list: keep the other conditions.
    let mut conditions: Vec<Value> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "Ready")
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    conditions.push(ready_condition(ready));
    let mut status = json!({ "conditions": conditions });
    if let Some(boot_id) = boot_id {
        // As the kubelet reports it; the other nodeInfo fields are required by the
        // schema, so they are filled in with what the simulator knows.
        let mut info = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.clone())
            .and_then(|i| serde_json::to_value(i).ok())
            .unwrap_or_else(|| node_info("Debian GNU/Linux (host-sim node)", boot_id));
        info["bootID"] = json!(boot_id_with_dashes(boot_id));
        status["nodeInfo"] = info;
    }
    status
}

/// `0123…` (32 hex digits) as the kernel prints a boot ID (`01234567-89ab-…`), the form
/// the kubelet reports in `status.nodeInfo.bootID`.
pub fn boot_id_with_dashes(id: &str) -> String {
    if id.len() != 32 || !id.is_ascii() {
        return id.to_owned();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &id[0..8],
        &id[8..12],
        &id[12..16],
        &id[16..20],
        &id[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashes() {
        assert_eq!(
            boot_id_with_dashes("0123456789abcdef0123456789abcdef"),
            "01234567-89ab-cdef-0123-456789abcdef"
        );
        assert_eq!(boot_id_with_dashes("short"), "short");
    }
}
