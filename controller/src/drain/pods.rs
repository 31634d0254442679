//! Pod selection: which pods of a node a drain leaves alone, refuses to evict, or evicts
//! (see the [drain documentation](super)).

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

use super::DrainOptions;

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A pod's `(namespace, name)`.
pub(super) type PodKey = (String, String);

/// How a pod on the node is treated.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PodVerdict {
    Skip(&'static str),
    Evict,
    Refuse { unmanaged: bool, empty_dir: bool },
}

pub(super) fn classify(
    pod: &Pod,
    options: &DrainOptions,
    selector: Option<&Selector>,
) -> PodVerdict {
    if pod.annotations().contains_key(MIRROR_ANNOTATION) {
        return PodVerdict::Skip("mirror pod");
    }
    let controller = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    if controller.is_some_and(|o| o.kind == "DaemonSet") {
        return PodVerdict::Skip("DaemonSet pod");
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return PodVerdict::Skip("terminated pod");
    }
    if selector.is_some_and(|s| !s.matches(pod.labels())) {
        return PodVerdict::Skip("not selected by podSelector");
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodVerdict::Evict;
    }
    let unmanaged = controller.is_none() && !options.force;
    let empty_dir = !options.delete_empty_dir_data
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some()));
    if unmanaged || empty_dir {
        PodVerdict::Refuse {
            unmanaged,
            empty_dir,
        }
    } else {
        PodVerdict::Evict
    }
}

pub(super) fn key_of(pod: &Pod) -> PodKey {
    (pod.namespace().unwrap_or_default(), pod.name_any())
}

pub(super) fn show((ns, name): &PodKey) -> String {
    format!("{ns}/{name}")
}

/// The pods of one round sorted by verdict (skipped pods are only logged).
#[derive(Debug, Default)]
pub(super) struct Sorted {
    /// The pods to evict, with their uids.
    pub(super) evict: Vec<(PodKey, String)>,
    /// `namespace/name` of refused pods that no controller manages.
    pub(super) unmanaged: Vec<String>,
    /// `namespace/name` of refused pods with `emptyDir` volumes.
    pub(super) empty_dir: Vec<String>,
    /// Every refused pod.
    pub(super) refused: Vec<PodKey>,
}

/// Sorts the node's pods (see [`classify`]).
pub(super) fn sort(
    node: &str,
    pods: &[Pod],
    options: &DrainOptions,
    selector: Option<&Selector>,
) -> Sorted {
    let mut sorted = Sorted::default();
    for pod in pods {
        let key = key_of(pod);
        match classify(pod, options, selector) {
            PodVerdict::Skip(why) => {
                tracing::debug!(node, pod = %show(&key), why, "leaving pod");
            }
            PodVerdict::Evict => sorted.evict.push((key, pod.uid().unwrap_or_default())),
            PodVerdict::Refuse {
                unmanaged,
                empty_dir,
            } => {
                if unmanaged {
                    sorted.unmanaged.push(show(&key));
                }
                if empty_dir {
                    sorted.empty_dir.push(show(&key));
                }
                sorted.refused.push(key);
            }
        }
    }
    sorted
}

/// The refusal message for the pods that block a drain.
pub(super) fn refusal(node: &str, unmanaged: &[String], empty_dir: &[String]) -> String {
    let mut parts = Vec::new();
    if !unmanaged.is_empty() {
        parts.push(format!(
            "pods not managed by a controller (set disruption.drain.force to evict them): {}",
            unmanaged.join(", ")
        ));
    }
    if !empty_dir.is_empty() {
        parts.push(format!(
            "pods with emptyDir volumes (set disruption.drain.deleteEmptyDirData to evict them and lose that data): {}",
            empty_dir.join(", ")
        ));
    }
    format!("cannot drain node {node}: {}", parts.join("; "))
}
