//! Nodes, BootcNodes and Pods decoded as the controller keeps them.
//!
//! Most of a Node is what no plan reads: the images it holds, its addresses, capacity
//! and system facts, and the `managedFields` of every client that wrote it. A kubelet's
//! Node is often tens of kilobytes of JSON, and every change to it (a status post, a
//! label, a cordon) is a watch event. Decoded in full, each event allocated all of that
//! only for the cache to drop it.
//!
//! [`Lean`] decodes the object straight into what is kept: what is not kept is read past
//! without being allocated. A lean Node is the full one with only its metadata (but
//! annotations and `managedFields`), `spec.unschedulable`, `spec.taints` and
//! `spec.externalID`, its `Ready` condition, its boot ID and its phase (a property test
//! holds it equal to a full decode with the rest taken off); a lean BootcNode is the full
//! one without its `managedFields`. The watches and the responses to the controller's own
//! writes are decoded this way.
//!
//! A Pod's spec and status are mostly its containers, which neither a drain nor the
//! blocking pods read. A lean Pod keeps its metadata (but `managedFields`), the node it
//! runs on, its volumes' names and `emptyDir` sources, and its phase; the drains' and the
//! blocking pods' lists are decoded this way.
//!
//! A value of the wrong type in a part that is kept is an error, as in a full decode; in
//! a part that is skipped it is not looked at.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bootc_crds::node::{BootcNode, BootcNodeSpec, BootcNodeStatus};
use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Pod, PodSpec,
    PodStatus, Taint, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::runtime::watcher::Event;
use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};

/// An object of kind `K` as its lean decoding keeps it. The API, the watches and the
/// caches see it as a `K`: same kind, same path, same metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Lean<K>(pub K);

impl<K: Resource> Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// Sent as the object itself: a BootcNode's create and replace send the lean object whole
/// (all of it but `managedFields`, which a write leaves to the server).
impl<K: Serialize> Serialize for Lean<K> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// A watch event of lean objects as one of the objects themselves.
pub fn unwrap_event<K>(event: Event<Lean<K>>) -> Event<K> {
    match event {
        Event::Apply(Lean(k)) => Event::Apply(k),
        Event::Delete(Lean(k)) => Event::Delete(k),
        Event::InitApply(Lean(k)) => Event::InitApply(k),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// A part read past, never allocated.
#[derive(Default)]
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Skipped)
    }
}

/// The annotations as kept: all of them, or none.
trait Annotations {
    fn kept(self) -> Option<BTreeMap<String, String>>;
}

impl Annotations for Skipped {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        None
    }
}

impl Annotations for Option<BTreeMap<String, String>> {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        self
    }
}

/// `metadata` without `managedFields`, with its annotations kept as `A` says.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<A> {
    #[serde(default)]
    annotations: A,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl<A: Annotations> Meta<A> {
    fn kept(self) -> ObjectMeta {
        ObjectMeta {
            annotations: self.annotations.kept(),
            creation_timestamp: self.creation_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: self.deletion_timestamp,
            finalizers: self.finalizers,
            generate_name: self.generate_name,
            generation: self.generation,
            labels: self.labels,
            managed_fields: None,
            name: self.name,
            namespace: self.namespace,
            owner_references: self.owner_references,
            resource_version: self.resource_version,
            self_link: self.self_link,
            uid: self.uid,
        }
    }
}

/// The parts of a Node plans read: its labels (and the rest of its metadata but
/// annotations), whether it is unschedulable, its `Ready` condition and its boot ID.
#[derive(Deserialize)]
struct WireNode {
    metadata: Option<Meta<Skipped>>,
    spec: Option<WireNodeSpec>,
    status: Option<WireNodeStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeSpec {
    #[serde(rename = "externalID")]
    external_id: Option<String>,
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeStatus {
    conditions: Option<Vec<NodeCondition>>,
    node_info: Option<WireNodeInfo>,
    phase: Option<String>,
}

#[derive(Deserialize)]
struct WireNodeInfo {
    #[serde(rename = "bootID")]
    boot_id: Option<String>,
}

impl<'de> Deserialize<'de> for Lean<Node> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(d)?;
        let spec = wire.spec.map(|s| NodeSpec {
            external_id: s.external_id,
            taints: s.taints,
            unschedulable: s.unschedulable,
            ..NodeSpec::default()
        });
        let status = wire.status.map(|s| NodeStatus {
            conditions: s.conditions.map(|mut c| {
                c.retain(|c| c.type_ == "Ready");
                c
            }),
            node_info: s.node_info.map(|i| NodeSystemInfo {
                boot_id: i.boot_id.unwrap_or_default(),
                ..NodeSystemInfo::default()
            }),
            phase: s.phase,
            ..NodeStatus::default()
        });
        Ok(Lean(Node {
            metadata: wire.metadata.map(Meta::kept).unwrap_or_default(),
            spec,
            status,
        }))
    }
}

/// A BootcNode but for its `managedFields`.
#[derive(Deserialize)]
struct WireBootcNode {
    metadata: Option<Meta<Option<BTreeMap<String, String>>>>,
    spec: BootcNodeSpec,
    status: Option<BootcNodeStatus>,
}

impl<'de> Deserialize<'de> for Lean<BootcNode> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WireBootcNode::deserialize(d)?;
        Ok(Lean(BootcNode {
            metadata: wire.metadata.map(Meta::kept).unwrap_or_default(),
            spec: wire.spec,
            status: wire.status,
        }))
    }
}

/// The parts of a Pod a drain and the blocking pods read: its metadata (but
/// `managedFields`), the node it runs on, its volumes' names and which are `emptyDir`,
/// and its phase.
#[derive(Deserialize)]
struct WirePod {
    metadata: Option<Meta<Option<BTreeMap<String, String>>>>,
    spec: Option<WirePodSpec>,
    status: Option<WirePodStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePodSpec {
    node_name: Option<String>,
    volumes: Option<Vec<WireVolume>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    name: Option<String>,
    empty_dir: Option<EmptyDirVolumeSource>,
}

#[derive(Deserialize)]
struct WirePodStatus {
    phase: Option<String>,
}

impl<'de> Deserialize<'de> for Lean<Pod> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(d)?;
        let spec = wire.spec.map(|s| PodSpec {
            node_name: s.node_name,
            volumes: s.volumes.map(|vs| {
                vs.into_iter()
                    .map(|v| Volume {
                        name: v.name.unwrap_or_default(),
                        empty_dir: v.empty_dir,
                        ..Volume::default()
                    })
                    .collect()
            }),
            ..PodSpec::default()
        });
        Ok(Lean(Pod {
            metadata: wire.metadata.map(Meta::kept).unwrap_or_default(),
            spec,
            status: wire.status.map(|s| PodStatus {
                phase: s.phase,
                ..PodStatus::default()
            }),
        }))
    }
}

#[cfg(test)]
mod tests;
