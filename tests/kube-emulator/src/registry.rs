//! The kinds the emulator serves: built-in kinds and those registered by CRDs, and the discovery documents that describe them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

/// Which part of an object `metadata.generation` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Not tracked (`metadata.generation` stays unset).
    None,
    /// Bumped when anything but `metadata` and `status` changes.
    Spec,
}

/// One served resource (a plural name in one group/version).
#[derive(Debug, Clone)]
pub struct ResourceType {
    /// API group, `""` for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories for kubectl (`kubectl get all`, …).
    pub categories: Vec<String>,
    /// Whether `/status` is a subresource (then the main resource never changes status).
    pub status_subresource: bool,
    /// How `metadata.generation` moves.
    pub generation: Generation,
    /// The CRD version document (`spec.versions[i]`) for custom resources: schema and
    /// printer columns.
    pub crd_version: Option<Arc<Value>>,
    /// The name of the CRD that registered this type.
    pub crd_name: Option<String>,
}

impl ResourceType {
    /// `apiVersion` of objects of this type.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or `plural` for core), as kube-apiserver names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Kind.group` (or `Kind`), as kube-apiserver names a kind in validation messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The storage key: versions of one resource share their objects.
    pub fn key(&self) -> ResourceKey {
        ResourceKey::new(&self.group, &self.plural)
    }

    /// The structural schema of a custom resource.
    pub fn schema(&self) -> Option<&Value> {
        self.crd_version
            .as_deref()
            .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
    }
}

/// Identifies stored objects of one resource across its versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// API group.
    pub group: String,
    /// Plural name.
    pub plural: String,
}

impl ResourceKey {
    /// The key of `plural` in `group` (`""` for core).
    pub fn new(group: &str, plural: &str) -> Self {
        ResourceKey {
            group: group.into(),
            plural: plural.into(),
        }
    }
}

/// A built-in kind: `(group, version, kind, plural, namespaced, short names, status subresource, generation)`.
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
    Generation,
);

const BUILTINS: &[Builtin] = &[
    (
        "",
        "v1",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        true,
        Generation::None,
    ),
    (
        "",
        "v1",
        "Node",
        "nodes",
        false,
        &["no"],
        true,
        Generation::None,
    ),
    (
        "",
        "v1",
        "Pod",
        "pods",
        true,
        &["po"],
        true,
        Generation::None,
    ),
    (
        "",
        "v1",
        "Secret",
        "secrets",
        true,
        &[],
        false,
        Generation::None,
    ),
    (
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        false,
        Generation::None,
    ),
    (
        "",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
        Generation::None,
    ),
    (
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
        Generation::None,
    ),
    (
        "",
        "v1",
        "Service",
        "services",
        true,
        &["svc"],
        true,
        Generation::None,
    ),
    (
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
        &["ev"],
        false,
        Generation::None,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        false,
        Generation::None,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        true,
        Generation::Spec,
    ),
    (
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        true,
        &["ds"],
        true,
        Generation::Spec,
    ),
    (
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
        Generation::Spec,
    ),
    (
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
        Generation::Spec,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
        Generation::None,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
        Generation::None,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        false,
        Generation::None,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
        Generation::None,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        &[],
        true,
        Generation::Spec,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        &[],
        false,
        Generation::Spec,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
        Generation::Spec,
    ),
];

/// The served kinds.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        let types = BUILTINS
            .iter()
            .map(
                |&(group, version, kind, plural, namespaced, short, status, generation)| {
                    Arc::new(ResourceType {
                        group: group.into(),
                        version: version.into(),
                        kind: kind.into(),
                        plural: plural.into(),
                        singular: kind.to_lowercase(),
                        namespaced,
                        short_names: short.iter().map(|s| s.to_string()).collect(),
                        categories: if matches!(
                            plural,
                            "pods" | "services" | "daemonsets" | "deployments" | "replicasets"
                        ) {
                            vec!["all".into()]
                        } else {
                            Vec::new()
                        },
                        status_subresource: status,
                        generation,
                        crd_version: None,
                        crd_name: None,
                    })
                },
            )
            .collect();
        Registry { types }
    }
}

impl Registry {
    /// The type served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Any served version of a resource (for storage-level work such as garbage collection).
    pub fn find_key(&self, key: &ResourceKey) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == key.group && t.plural == key.plural)
            .cloned()
    }

    /// Every served type.
    pub fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// Registers (or replaces) the types a CRD serves; returns the error kube-apiserver
    /// would give for a CRD it cannot serve.
    pub fn register_crd(&mut self, crd: &Value) -> Result<(), String> {
        let spec = crd.get("spec").ok_or("spec: Required value")?;
        let group = spec["group"].as_str().ok_or("spec.group: Required value")?;
        let names = &spec["names"];
        let plural = names["plural"]
            .as_str()
            .ok_or("spec.names.plural: Required value")?;
        let kind = names["kind"]
            .as_str()
            .ok_or("spec.names.kind: Required value")?;
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name != format!("{plural}.{group}") {
            return Err(format!(
                "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
            ));
        }
        let namespaced = match spec["scope"].as_str() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            other => {
                return Err(format!(
                    "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ));
            }
        };
        let versions = spec["versions"].as_array().filter(|v| !v.is_empty()).ok_or("spec.versions: Invalid value: must have exactly one version marked as storage version")?;
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut new_types = Vec::new();
        for v in versions {
            if v["served"].as_bool() != Some(true) {
                continue;
            }
            let version = v["name"]
                .as_str()
                .ok_or("spec.versions[].name: Required value")?;
            if v.pointer("/schema/openAPIV3Schema").is_none() {
                return Err(format!(
                    "spec.versions[{version}].schema.openAPIV3Schema: Required value: schemas are required"
                ));
            }
            new_types.push(Arc::new(ResourceType {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                plural: plural.into(),
                singular: names["singular"]
                    .as_str()
                    .map_or_else(|| kind.to_lowercase(), str::to_string),
                namespaced,
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                status_subresource: v.pointer("/subresources/status").is_some(),
                generation: Generation::Spec,
                crd_version: Some(Arc::new(v.clone())),
                crd_name: Some(name.to_string()),
            }));
        }
        self.types
            .retain(|t| !(t.group == group && t.plural == plural));
        self.types.extend(new_types);
        Ok(())
    }

    /// Forgets the types a CRD registered.
    pub fn unregister_crd(&mut self, crd_name: &str) {
        self.types
            .retain(|t| t.crd_name.as_deref() != Some(crd_name));
    }

    /// Group → versions served, core first, then groups in registration order.
    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in &self.types {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) if !versions.contains(&t.version) => {
                    versions.push(t.version.clone())
                }
                Some(_) => {}
                None => groups.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        groups
    }

    /// Group/versions served (for OpenAPI v3 discovery).
    pub fn group_versions(&self) -> Vec<(String, String)> {
        self.groups()
            .into_iter()
            .flat_map(|(g, vs)| vs.into_iter().map(move |v| (g.clone(), v)))
            .collect()
    }

    /// `GET /api`.
    pub fn api_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn group_document(group: &str, versions: &[String]) -> Value {
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({
            "name": group,
            "versions": versions,
            "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
        })
    }

    /// `GET /apis`.
    pub fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .filter(|(g, _)| !g.is_empty())
            .map(|(g, vs)| Self::group_document(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /apis/GROUP`.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        let groups = self.groups();
        let (_, versions) = groups.iter().find(|(g, _)| g == group && !g.is_empty())?;
        let mut doc = Self::group_document(group, versions);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        Some(doc)
    }

    /// `GET /api/v1` or `/apis/GROUP/VERSION`.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources = Vec::new();
        for t in self
            .types
            .iter()
            .filter(|t| t.group == group && t.version == version)
        {
            let verbs = [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ];
            let mut entry = json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": verbs,
            });
            if !t.short_names.is_empty() {
                entry["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                entry["categories"] = json!(t.categories);
            }
            resources.push(entry);
            if t.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", t.plural),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if t.plural == "pods" && t.group.is_empty() {
                resources.push(json!({
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": true,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }));
            }
        }
        if resources.is_empty() {
            return None;
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }))
    }

    /// Kind → resource for every served type (kubectl's REST mapping, for tests).
    pub fn kinds(&self) -> BTreeMap<String, String> {
        self.types
            .iter()
            .map(|t| (format!("{}/{}", t.api_version(), t.kind), t.plural.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_discoverable() {
        let r = Registry::default();
        let core = r.api_resource_list("", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        for want in [
            "nodes",
            "nodes/status",
            "pods",
            "pods/status",
            "pods/eviction",
            "namespaces",
            "secrets",
        ] {
            assert!(names.contains(&want), "{want}: {names:?}");
        }
        let groups = r.api_group_list();
        let gs: Vec<&str> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(gs.contains(&"coordination.k8s.io") && gs.contains(&"policy") && !gs.contains(&""));
        assert!(
            r.find("policy", "v1", "poddisruptionbudgets")
                .unwrap()
                .status_subresource
        );
    }

    #[test]
    fn crds_register_and_unregister() {
        let mut r = Registry::default();
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                    "subresources": {"status": {}}}]}
        });
        r.register_crd(&crd).unwrap();
        let t = r.find("example.com", "v1", "widgets").unwrap();
        assert!(!t.namespaced && t.status_subresource && t.schema().is_some());
        assert_eq!(t.qualified(), "widgets.example.com");
        assert!(r.api_group("example.com").is_some());
        r.unregister_crd("widgets.example.com");
        assert!(r.find("example.com", "v1", "widgets").is_none());
        let mut bad = crd.clone();
        bad["metadata"]["name"] = json!("wrong");
        assert!(
            r.register_crd(&bad)
                .unwrap_err()
                .starts_with("metadata.name")
        );
    }
}
