//! The pool's pull secret on the host: read the Secret the BootcNode names, check it is
//! a `.dockerconfigjson`, and write it where bootc reads registry credentials — when it
//! changed, once at start, and again after a failure's backoff.

use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use chrono::Utc;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tracing::{info, warn};

use super::Agent;
use crate::host::Host;

impl<H: Host + 'static> Agent<H> {
    /// Writes the pull secret to the host when it changed (and once at start).
    pub(super) async fn sync_credentials(&mut self, node: &BootcNode) {
        let secret = node.spec.pull_secret_ref.as_ref();
        let want = (
            secret.map(|s| format!("{}/{}", s.namespace, s.name)),
            node.spec.pull_secret_hash.clone(),
        );
        let now = Utc::now();
        if self.credentials.as_ref() == Some(&want) || self.credentials_retry.wait(now).is_some() {
            return;
        }
        let content = match secret {
            None => Ok(None),
            Some(r) => self.read_pull_secret(&r.namespace, &r.name).await.map(Some),
        };
        let result = match content {
            Ok(content) => self
                .host
                .write_credentials(content.as_deref())
                .await
                .map_err(|e| error_chain(&e)),
            Err(message) => Err(message),
        };
        match result {
            Ok(()) => {
                info!(secret = ?want.0, "registry credentials written to the host");
                self.credentials = Some(want);
                self.credentials_retry.clear();
            }
            Err(message) => {
                warn!(error = %message, "registry credentials not written; will retry");
                self.credentials_retry.fail(message, now);
            }
        }
    }

    /// The `.dockerconfigjson` of Secret `namespace/name`, checked; else why not.
    async fn read_pull_secret(&self, namespace: &str, name: &str) -> Result<Vec<u8>, String> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let what = format!("pull Secret {namespace}/{name}");
        let secret = secrets
            .get(name)
            .await
            .map_err(|e| format!("cannot read the {what}: {}", error_chain(&e)))?;
        let Some(bytes) = secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
        else {
            return Err(format!(
                "the {what} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
            ));
        };
        match serde_json::from_slice::<serde_json::Value>(&bytes.0) {
            Ok(v) if v.get("auths").is_some_and(|a| a.is_object()) => Ok(bytes.0.clone()),
            _ => Err(format!(
                "the {what}'s .dockerconfigjson is not a JSON object with \"auths\""
            )),
        }
    }
}
