//! List semantics: how the elements of a list field combine under strategic merge patch and
//! apply, from a static table for built-in kinds and from the structural schema for custom
//! resources.

use serde_json::Value;

/// How the elements of a list field combine when a patch or an apply touches the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// The list is replaced as a whole.
    Atomic,
    /// A set of scalars: union.
    Set,
    /// An associative list: elements are identified by these keys and merged.
    Map(Vec<String>),
}

/// Tells the patch engine how a list field merges.
pub trait ListSemantics {
    /// The kind of the list at `path`: object field names from the root, list indices omitted,
    /// e.g. `["status", "conditions"]` or `["spec", "containers", "ports"]`.
    fn list_kind(&self, path: &[&str]) -> ListKind;
}

fn by(key: &str) -> ListKind {
    ListKind::Map(vec![key.to_string()])
}

/// The lists of `metadata` (ObjectMeta) every kind shares.
fn metadata_list(field: &str) -> Option<ListKind> {
    match field {
        "finalizers" => Some(ListKind::Set),
        "ownerReferences" => Some(by("uid")),
        "managedFields" => Some(ListKind::Atomic),
        _ => None,
    }
}

/// `[..., "metadata", field]` where field is one of ObjectMeta's lists.
fn object_meta_list(path: &[&str]) -> Option<ListKind> {
    match path {
        [.., "metadata", field] => metadata_list(field),
        _ => None,
    }
}

/// List semantics read from a CRD's `openAPIV3Schema`: walks `properties`, `items` and
/// `additionalProperties` and reads `x-kubernetes-list-type` (`atomic`, `set`, `map`) and
/// `x-kubernetes-list-map-keys`. Lists the schema does not describe are atomic, except the
/// ObjectMeta lists under `metadata` (`finalizers` set, `ownerReferences` by `uid`,
/// `managedFields` atomic), which CRD schemas do not spell out.
#[derive(Debug, Clone, Copy)]
pub struct SchemaLists<'a>(pub &'a Value);

impl ListSemantics for SchemaLists<'_> {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        if let [.., "metadata", _] = path
            && let Some(kind) = object_meta_list(path)
        {
            return kind;
        }
        let mut node = self.0;
        for seg in path {
            while let Some(items) = node.get("items").filter(|i| i.is_object()) {
                node = items;
            }
            if let Some(child) = node.get("properties").and_then(|p| p.get(*seg)) {
                node = child;
            } else if let Some(ap) = node.get("additionalProperties").filter(|a| a.is_object()) {
                node = ap;
            } else {
                return ListKind::Atomic;
            }
        }
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<String> = node
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|ks| {
                        ks.iter()
                            .filter_map(|k| k.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }
}

/// List semantics of built-in kinds: a static table of the `patchMergeKey`/`patchStrategy`
/// kube-apiserver uses for the fields the emulator's clients touch. Everything else is atomic.
///
/// | Kind | Path | Kind of list |
/// |---|---|---|
/// | every kind (also pod templates' `metadata`) | `metadata.finalizers` | set |
/// | every kind | `metadata.ownerReferences` | map by `uid` |
/// | every kind | `metadata.managedFields` | atomic |
/// | Node, Pod, PodDisruptionBudget, Deployment, DaemonSet, ReplicaSet, StatefulSet, ReplicationController, Job, Namespace, CustomResourceDefinition, Service, PersistentVolumeClaim | `status.conditions` | map by `type` |
/// | Node | `spec.taints` | **atomic** (kube-apiserver has no merge key for taints: a strategic merge patch replaces them all) |
/// | Node | `spec.podCIDRs` | set |
/// | Node | `status.addresses` | map by `type` |
/// | Pod | `status.podIPs`, `status.hostIPs` | map by `ip` |
/// | Service | `spec.ports` | map by `port` |
/// | pod specs¹ | `containers`, `initContainers`, `ephemeralContainers` | map by `name` |
/// | pod specs¹ | `<containers>[].ports` | map by `containerPort` |
/// | pod specs¹ | `<containers>[].env` | map by `name` |
/// | pod specs¹ | `<containers>[].volumeMounts` | map by `mountPath` |
/// | pod specs¹ | `<containers>[].volumeDevices` | map by `devicePath` |
/// | pod specs¹ | `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` | map by `name` |
/// | pod specs¹ | `hostAliases` | map by `ip` |
/// | pod specs¹ | `topologySpreadConstraints` | map by `topologyKey` |
/// | pod specs¹ | `tolerations`, `readinessGates`, `<containers>[].args/command/envFrom/resizePolicy` | atomic |
/// | Role, ClusterRole, RoleBinding, ClusterRoleBinding | `rules`, `subjects` | atomic |
///
/// ¹ `spec` of a Pod, `template.spec` of a PodTemplate, `spec.template.spec` of a Deployment,
/// ReplicaSet, DaemonSet, StatefulSet, Job or ReplicationController, and
/// `spec.jobTemplate.spec.template.spec` of a CronJob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinLists {
    kind: String,
}

/// Kinds whose `status.conditions` merge by `type`.
const CONDITION_KINDS: &[&str] = &[
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "Deployment",
    "DaemonSet",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Job",
    "Namespace",
    "CustomResourceDefinition",
    "Service",
    "PersistentVolumeClaim",
];

fn pod_spec_prefix(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Pod" => Some(&["spec"]),
        "PodTemplate" => Some(&["template", "spec"]),
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => Some(&["spec", "template", "spec"]),
        "CronJob" => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

fn pod_spec_list(rest: &[&str]) -> ListKind {
    const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
    match rest {
        [c] if CONTAINERS.contains(c) => by("name"),
        [c, "ports"] if CONTAINERS.contains(c) => by("containerPort"),
        [c, "env"] if CONTAINERS.contains(c) => by("name"),
        [c, "volumeMounts"] if CONTAINERS.contains(c) => by("mountPath"),
        [c, "volumeDevices"] if CONTAINERS.contains(c) => by("devicePath"),
        ["volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims"] => by("name"),
        ["hostAliases"] => by("ip"),
        ["topologySpreadConstraints"] => by("topologyKey"),
        _ => ListKind::Atomic,
    }
}

impl BuiltinLists {
    /// The list semantics of the built-in kind `kind` (e.g. `"Node"`, `"Pod"`, `"Deployment"`).
    /// Unknown kinds only get the `metadata` rules.
    pub fn new(kind: &str) -> Self {
        BuiltinLists {
            kind: kind.to_string(),
        }
    }
}

impl ListSemantics for BuiltinLists {
    fn list_kind(&self, path: &[&str]) -> ListKind {
        let kind = self.kind.as_str();
        if let Some(prefix) = pod_spec_prefix(kind)
            && let Some(rest) = path.strip_prefix(prefix)
        {
            return pod_spec_list(rest);
        }
        if let Some(k) = object_meta_list(path) {
            return k;
        }
        match (kind, path) {
            (k, ["status", "conditions"]) if CONDITION_KINDS.contains(&k) => by("type"),
            ("Node", ["spec", "podCIDRs"]) => ListKind::Set,
            ("Node", ["status", "addresses"]) => by("type"),
            ("Pod", ["status", "podIPs" | "hostIPs"]) => by("ip"),
            ("Service", ["spec", "ports"]) => by("port"),
            _ => ListKind::Atomic,
        }
    }
}
