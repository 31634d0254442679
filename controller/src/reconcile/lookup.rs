//! Asking the outside world for one plan: the pool's pull Secret (read when the pool is
//! reconciled; Secrets are watched by metadata only) and, for a tag, the registry.
//! Nothing here decides what to do with the answers: the planner does.

use bootc_crds::pool::BootcNodePool;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::Context;
use crate::metrics::TagResult;
use crate::plan::target::{Target, resolve_interval, spec_problems};
use crate::plan::{Lookup, PullSecretView};
use crate::resolve::{RegistryCredentials, Resolved, parse_pull_secret, secret_hash};

fn tag_result(kind: &str) -> TagResult {
    match kind {
        "unauthorized" => TagResult::Unauthorized,
        "not_found" => TagResult::NotFound,
        "rate_limited" => TagResult::RateLimited,
        "timeout" => TagResult::Timeout,
        "connection" => TagResult::Connection,
        _ => TagResult::Other,
    }
}

/// A time as the status keeps it: whole seconds.
fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    bootc_crds::conditions::to_time(t)
        .as_ref()
        .and_then(bootc_crds::conditions::from_time)
        .unwrap_or(t)
}

impl Context {
    /// Reads the pool's pull Secret: its `.dockerconfigjson` bytes, or why not. The
    /// message names the Secret and never its content.
    async fn pull_secret_bytes(&self, pool: &BootcNodePool) -> Option<Result<Vec<u8>, String>> {
        let r = pool.spec.pull_secret_ref.as_ref()?;
        let what = format!("pull Secret {}/{}", r.namespace, r.name);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &r.namespace);
        Some(match api.get_opt(&r.name).await {
            Err(e) => Err(format!("cannot read the {what}: {e}")),
            Ok(None) => Err(format!("the {what} does not exist")),
            Ok(Some(secret)) => match secret
                .data
                .as_ref()
                .and_then(|d| d.get(".dockerconfigjson"))
            {
                Some(bytes) => Ok(bytes.0.clone()),
                None => Err(format!(
                    "the {what} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                )),
            },
        })
    }

    /// The pull Secret's hash and problem, and its credentials when usable.
    async fn pull_secret(
        &self,
        pool: &BootcNodePool,
    ) -> (PullSecretView, Option<RegistryCredentials>) {
        let mut view = PullSecretView::default();
        let Some(read) = self.pull_secret_bytes(pool).await else {
            return (view, None);
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(message) => {
                view.problem = Some(message);
                return (view, None);
            }
        };
        view.hash = Some(secret_hash(&bytes));
        let (ns, name) = pool
            .spec
            .pull_secret_ref
            .as_ref()
            .map(|r| (r.namespace.as_str(), r.name.as_str()))
            .unwrap_or_default();
        match parse_pull_secret(&bytes) {
            Ok(creds) => (view, Some(creds.with_source(ns, name))),
            Err(e) => {
                view.problem = Some(format!("pull Secret {ns}/{name}: {e}"));
                (view, None)
            }
        }
    }

    /// What the registry says of the pool's tag (nothing is asked for a digest reference
    /// or an invalid spec), and the pull Secret.
    pub(super) async fn look_up(&self, pool: &BootcNodePool) -> (Lookup, PullSecretView) {
        if spec_problems(&pool.spec).is_some() {
            return (Lookup::NotAsked, PullSecretView::default());
        }
        let (secret, credentials) = self.pull_secret(pool).await;
        let Ok(reference) = bootc_crds::ImageRef::parse(&pool.spec.image.r#ref) else {
            return (Lookup::NotAsked, secret);
        };
        if Target::from_ref(&pool.spec.image.r#ref).is_some() {
            return (Lookup::NotAsked, secret);
        }
        let creds = credentials
            .as_ref()
            .and_then(|c| c.for_registry(reference.registry()));
        let interval = resolve_interval(&pool.spec);
        let answer = self
            .deps
            .resolver
            .resolve(&reference, creds.as_ref(), interval)
            .await;
        let metrics = &self.deps.metrics;
        let lookup = match answer {
            Ok(Resolved {
                image,
                digest,
                version,
                resolved_at,
            }) => {
                let at = whole_seconds(resolved_at);
                let previous = pool
                    .status
                    .as_ref()
                    .and_then(|s| s.last_resolved_time.as_ref())
                    .and_then(bootc_crds::conditions::from_time);
                if previous != Some(at) {
                    metrics.record_tag_resolution(TagResult::Success);
                }
                Lookup::Resolved {
                    target: Target { image, digest },
                    version,
                    at,
                }
            }
            Err(e) => {
                metrics.record_tag_resolution(tag_result(e.kind()));
                Lookup::Failed {
                    message: e.to_string(),
                    retry_after: e.retry_after().unwrap_or(interval),
                }
            }
        };
        (lookup, secret)
    }
}
