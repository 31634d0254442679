//! What the commands read: pools, BootcNodes and Nodes as the API returns them (each
//! kept raw as well as typed, so that fields newer than these types, such as a
//! BootcNode's `status.progress`, can still be shown), and the questions every command
//! asks of them.

use std::collections::BTreeMap;

use bootc_crds::conditions::from_time;
use bootc_crds::node::BootcNode;
use bootc_crds::pool::BootcNodePool;
use bootc_crds::{HOLD_LABEL, REBOOT_SLOT_ANNOTATION};
use bootc_pool_common::node::owner_pool;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{CliError, Result};

/// An object as the API returned it, and read into its type.
#[derive(Debug, Clone, PartialEq)]
pub struct Object<K> {
    /// The typed object.
    pub typed: K,
    /// The JSON the API returned, with every field.
    pub raw: Value,
}

impl<K: DeserializeOwned> Object<K> {
    /// Reads `raw` into `K`; the error names the object. A `status.progress` these types
    /// cannot read (an agent of another version) is left to the raw object, which is
    /// where it is shown from, rather than fail the whole read.
    pub fn from_raw(kind: &str, raw: Value) -> Result<Self> {
        let name = raw["metadata"]["name"].as_str().unwrap_or("?").to_owned();
        let typed = serde_json::from_value(raw.clone()).or_else(|e| {
            let mut without = raw.clone();
            let removed = without
                .get_mut("status")
                .and_then(Value::as_object_mut)
                .and_then(|status| status.remove("progress"));
            match removed {
                Some(_) => serde_json::from_value(without).map_err(|_| e),
                None => Err(e),
            }
        });
        let typed =
            typed.map_err(|e| CliError::msg(format!("cannot read {kind} {name:?}: {e}")))?;
        Ok(Object { typed, raw })
    }
}

/// Everything one command looks at, and the time it looked.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Every pool, by name.
    pub pools: Vec<Object<BootcNodePool>>,
    /// Every BootcNode, by name.
    pub bootc_nodes: Vec<Object<BootcNode>>,
    /// Every Node, by name.
    pub nodes: Vec<Node>,
    /// When it was read.
    pub now: DateTime<Utc>,
    /// The lists' resourceVersions, for a watch to start from.
    pub versions: Versions,
}

/// The resourceVersions of the three lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions {
    /// Of the pools' list.
    pub pools: String,
    /// Of the BootcNodes' list.
    pub bootc_nodes: String,
    /// Of the Nodes' list.
    pub nodes: String,
}

impl Cluster {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&Object<BootcNodePool>> {
        self.pools.iter().find(|p| p.typed.name_any() == name)
    }

    /// The BootcNode named `name`.
    pub fn bootc_node(&self, name: &str) -> Option<&Object<BootcNode>> {
        self.bootc_nodes.iter().find(|b| b.typed.name_any() == name)
    }

    /// The Node named `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name_any() == name)
    }

    /// The BootcNodes pool `pool` owns, by name.
    pub fn members(&self, pool: &str) -> Vec<&Object<BootcNode>> {
        self.bootc_nodes
            .iter()
            .filter(|b| owner_pool(&b.typed).as_deref() == Some(pool))
            .collect()
    }

    /// The pool a node belongs to: the owner of its BootcNode, else the pools whose
    /// selector matches the Node's labels (several when they conflict).
    pub fn pools_of_node(&self, name: &str) -> Vec<String> {
        if let Some(owner) = self.bootc_node(name).and_then(|b| owner_pool(&b.typed)) {
            return vec![owner];
        }
        let Some(node) = self.node(name) else {
            return Vec::new();
        };
        let labels = node.labels();
        self.pools
            .iter()
            .filter(|p| bootc_crds::selector::matches(&p.typed.spec.node_selector, labels))
            .map(|p| p.typed.name_any())
            .collect()
    }
}

/// Reads the cluster: every pool, BootcNode and Node.
pub async fn read(client: &Client) -> Result<Cluster> {
    let (pools, pools_version) = list::<BootcNodePool>(client, "BootcNodePool").await?;
    let (bootc_nodes, bootc_version) = list::<BootcNode>(client, "BootcNode").await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::api("list nodes", e))?;
    let mut nodes = list.items;
    nodes.sort_by_key(|n| n.name_any());
    Ok(Cluster {
        pools,
        bootc_nodes,
        nodes,
        now: Utc::now(),
        versions: Versions {
            pools: pools_version,
            bootc_nodes: bootc_version,
            nodes: list.metadata.resource_version.unwrap_or_default(),
        },
    })
}

/// Every object of a cluster-scoped custom kind, raw and typed, by name, and the list's
/// resourceVersion.
async fn list<K>(client: &Client, kind: &str) -> Result<(Vec<Object<K>>, String)>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::api(&format!("list {}", resource.plural), e))?;
    let version = list.metadata.resource_version.clone().unwrap_or_default();
    let mut out = Vec::new();
    for item in list.items {
        let mut raw = serde_json::to_value(&item)
            .map_err(|e| CliError::msg(format!("cannot read a {kind}: {e}")))?;
        // A list's items carry no type; the typed read and `-o json` want it.
        raw["apiVersion"] = Value::String(resource.api_version.clone());
        raw["kind"] = Value::String(resource.kind.clone());
        out.push(Object::from_raw(kind, raw)?);
    }
    out.sort_by(|a, b| {
        a.raw["metadata"]["name"]
            .as_str()
            .cmp(&b.raw["metadata"]["name"].as_str())
    });
    Ok((out, version))
}

/// A condition of `conditions` by type.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// When a condition last changed.
pub fn transition(c: &Condition) -> Option<DateTime<Utc>> {
    from_time(&c.last_transition_time)
}

/// The Node carries the hold label with the value `true`.
pub fn held(node: &Node) -> bool {
    hold_value(node.labels()) == Some("true")
}

/// The hold label's value, when the Node has one.
pub fn hold_value(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels.get(HOLD_LABEL).map(String::as_str)
}

/// The BootcNode holds a reboot slot.
pub fn holds_slot(bootc: &BootcNode) -> bool {
    bootc.annotations().contains_key(REBOOT_SLOT_ANNOTATION)
}
