//! The kinds the emulator serves: built-in kinds and those registered by CRDs, and the discovery documents that describe them.
//!
//! The table of built-in kinds is in `builtins`, the discovery documents (`/api`,
//! `/apis`, resource lists) in `discovery`.

mod builtins;
mod discovery;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

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
    /// Some CEL rule of its schema may read `oldSelf`: only then does admitting an
    /// update prepare the stored object for the rules (the same answer either way).
    pub reads_old_self: bool,
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

/// The served kinds.
#[derive(Debug, Clone)]
pub struct ResourceRegistry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for ResourceRegistry {
    fn default() -> Self {
        ResourceRegistry {
            types: builtins::types(),
        }
    }
}

impl ResourceRegistry {
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
                reads_old_self: v
                    .pointer("/schema/openAPIV3Schema")
                    .is_some_and(apischema::reads_old_self),
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

    /// Kind → resource for every served type (kubectl's REST mapping, for tests).
    pub fn kinds(&self) -> BTreeMap<String, String> {
        self.types
            .iter()
            .map(|t| (format!("{}/{}", t.api_version(), t.kind), t.plural.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests;
