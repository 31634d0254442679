//! The discovery documents: `/api`, `/apis`, `/apis/GROUP` and the resource lists of each group/version.

use serde_json::{Value, json};

use super::ResourceRegistry;

impl ResourceRegistry {
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
}
