//! Pods bound to the cluster's nodes (for drain tests), with their owners and
//! namespaces created when missing.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{PodOwner, SimCluster, is_status, kube_error};
use crate::error::{Result, SimError};

impl SimCluster {
    /// Binds a pod `namespace/name` with `labels` to node `node` (`spec.nodeName`),
    /// `Running` and `Ready`, owned by `owner` (created when missing). The namespace is
    /// created when missing. Evicted pods are not recreated.
    pub async fn add_pod(
        &self,
        node: &str,
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        owner: PodOwner,
    ) -> Result<Pod> {
        self.ensure_namespace(namespace).await?;
        let owner_reference = match &owner {
            PodOwner::ReplicaSet(owner) => {
                let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), namespace);
                Some(ensure_owner(&api, namespace, owner, &labels).await?)
            }
            PodOwner::DaemonSet(owner) => {
                let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), namespace);
                Some(ensure_owner(&api, namespace, owner, &labels).await?)
            }
            PodOwner::None => None,
        };
        let mut metadata = json!({"name": name, "namespace": namespace, "labels": labels});
        if let Some(reference) = owner_reference {
            metadata["ownerReferences"] = json!([reference]);
        }
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "nodeName": node,
                "containers": [{"name": "app", "image": "registry.test/app:1"}],
            },
        }))
        .map_err(|e| SimError::InvalidOptions(format!("Pod object: {e}")))?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), &pod)
            .await
            .map_err(kube_error("create Pod"))?;
        let status = json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(kube_error("patch Pod status"))
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        if api
            .get_opt(namespace)
            .await
            .map_err(kube_error("get Namespace"))?
            .is_some()
        {
            return Ok(());
        }
        let object: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        }))
        .map_err(|e| SimError::InvalidOptions(format!("Namespace object: {e}")))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(source) => Err(SimError::Kube {
                call: "create Namespace",
                source,
            }),
        }
    }
}

/// The owner reference to the workload `name` of kind `K` in `namespace`, created (one
/// replica, selecting `labels`) when missing.
async fn ensure_owner<K>(
    api: &Api<K>,
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Value>
where
    K: Resource<DynamicType = ()>
        + Clone
        + fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let existing = api.get_opt(name).await.map_err(kube_error("get owner"))?;
    let object = match existing {
        Some(object) => object,
        None => {
            let object: K = serde_json::from_value(json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "registry.test/app:1"}]},
                    },
                },
            }))
            .map_err(|e| SimError::InvalidOptions(format!("{} object: {e}", K::kind(&()))))?;
            match api.create(&PostParams::default(), &object).await {
                Ok(object) => object,
                Err(e) if is_status(&e, 409) => {
                    api.get(name).await.map_err(kube_error("get owner"))?
                }
                Err(source) => {
                    return Err(SimError::Kube {
                        call: "create owner",
                        source,
                    });
                }
            }
        }
    };
    Ok(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": name,
        "uid": object.meta().uid.clone().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }))
}
