//! The pool's pull secret on the host: read the Secret the BootcNode names, check it is
//! a `.dockerconfigjson` (with the parser the controller reads it with), and write it
//! where bootc reads registry credentials — when it changed, once at start, and again
//! after a failure's backoff.

use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use bootc_pool_common::pull_secret::{SecretError, parse_pull_secret};
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
        check_docker_config(&what, &bytes.0)?;
        Ok(bytes.0.clone())
    }
}

/// Refuses a `.dockerconfigjson` that is not a JSON object with an `auths` object. An
/// entry the controller's parser cannot use is only warned about: the host's container
/// tools read more kinds of entries (identity tokens, …), so the document is written as
/// it is.
fn check_docker_config(what: &str, data: &[u8]) -> Result<(), String> {
    match parse_pull_secret(data) {
        Ok(_) => Ok(()),
        Err(SecretError::NotJson(_) | SecretError::NoAuths) => Err(format!(
            "the {what}'s .dockerconfigjson is not a JSON object with \"auths\""
        )),
        Err(e) => {
            warn!(secret = %what, error = %e, "an entry of the pull Secret may not be usable; writing it as it is");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_documents_shape_is_refused() {
        let check = |json: &str| check_docker_config("pull Secret ns/pull", json.as_bytes());
        assert_eq!(
            check(r#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}"#),
            Ok(())
        );
        assert_eq!(check(r#"{"auths":{}}"#), Ok(()));
        // Entries the controller cannot use still go to the host.
        assert_eq!(
            check(r#"{"auths":{"registry.test":{"auth":"c2VjcmV0MQ=="}}}"#),
            Ok(())
        );
        assert_eq!(
            check(r#"{"auths":{"registry.test":{"identitytoken":"t"}}}"#),
            Ok(())
        );
        for bad in [
            "",
            "not json",
            "[]",
            r#"{"auths":[]}"#,
            r#"{"credHelpers":{}}"#,
        ] {
            assert_eq!(
                check(bad),
                Err(
                    "the pull Secret ns/pull's .dockerconfigjson is not a JSON object with \"auths\""
                        .to_owned()
                ),
                "{bad}"
            );
        }
    }
}
