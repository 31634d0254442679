//! Asking the outside world for one plan: the pool's pull Secret (read when the pool is
//! reconciled, in a namespace the admin allowed; Secrets are watched by metadata only),
//! copied for the pool's nodes (see [`super::copies`]) and, for a tag, the registry.
//! Nothing here decides what to do with the answers: the planner does.

use bootc_crds::pool::BootcNodePool;
use chrono::{DateTime, Utc};

use super::{Context, ReconcileError};
use crate::gate::Credentials;
use crate::metrics::TagResult;
use crate::plan::target::{Target, resolve_interval, spec_problems};
use crate::plan::{GateView, Lookup, PullSecretView};
use bootc_pool_common::pull_secret::{
    RegistryCredentials, parse_pull_secret, read_docker_config, secret_hash,
};

use crate::resolve::Resolved;

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
    /// What the pool's alert gate says, asked with the credentials in its Secret; a
    /// Secret that cannot be read or used is the gate's error (which the pool's
    /// `failClosed` decides about), naming the Secret and never its content.
    pub(super) async fn alert_gate(&self, pool: &BootcNodePool) -> GateView {
        let Some(alerts) = pool.spec.health.as_ref().and_then(|h| h.alerts.as_ref()) else {
            return GateView::NotConfigured;
        };
        let now = (self.deps.clock)();
        let credentials = match &alerts.credentials_secret_ref {
            Some(r) => match self.alert_credentials(&r.namespace, &r.name).await {
                Ok(c) => Some(c),
                Err(error) => {
                    return GateView::Unreachable {
                        error,
                        checked: now,
                    };
                }
            },
            None => None,
        };
        self.deps
            .alert_gate
            .check(alerts, credentials.as_ref(), now)
            .await
    }

    /// The alert gate's credentials in Secret `ns/name`, read now.
    async fn alert_credentials(&self, ns: &str, name: &str) -> Result<Credentials, String> {
        let allowed = &self.deps.secrets;
        if !allowed.allows(ns) {
            return Err(allowed.not_allowed("alert gate Secret", ns, name));
        }
        let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), ns);
        let secret = match api.get_opt(name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => return Err(format!("the alert gate Secret {ns}/{name} is not found")),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(format!(
                    "the controller may not read the alert gate Secret {ns}/{name}: {}",
                    s.message
                ));
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the alert gate Secret {ns}/{name}: {e}"
                ));
            }
        };
        let data = secret.data.unwrap_or_default();
        Credentials::from_data(&data).map_err(|e| format!("the alert gate Secret {ns}/{name} {e}"))
    }

    /// The pull Secret's hash and problem, and its credentials when usable; its copy
    /// made, updated or removed to match.
    async fn pull_secret(
        &self,
        pool: &BootcNodePool,
    ) -> Result<(PullSecretView, Option<RegistryCredentials>), ReconcileError> {
        let mut view = PullSecretView::default();
        let Some(r) = pool.spec.pull_secret_ref.as_ref() else {
            self.drop_copy(pool).await?;
            return Ok((view, None));
        };
        let allowed = &self.deps.secrets;
        if !allowed.allows(&r.namespace) {
            // Nothing of it is read, copied or named.
            self.drop_copy(pool).await?;
            view.not_allowed = Some(allowed.not_allowed("pull Secret", &r.namespace, &r.name));
            return Ok((view, None));
        }
        // An unreadable source keeps the copy as it was: the nodes keep what they have.
        view.copy = Some(self.copy_ref(pool));
        let bytes = match read_docker_config(&self.client, &r.namespace, &r.name).await {
            Ok(bytes) => bytes,
            Err(message) => {
                view.problem = Some(message);
                return Ok((view, None));
            }
        };
        let hash = secret_hash(&bytes);
        self.ensure_copy(pool, r, &bytes, &hash).await?;
        view.hash = Some(hash);
        let (ns, name) = (r.namespace.as_str(), r.name.as_str());
        match parse_pull_secret(&bytes) {
            Ok(creds) => Ok((view, Some(creds.with_source(ns, name)))),
            Err(e) => {
                view.problem = Some(format!("pull Secret {ns}/{name}: {e}"));
                Ok((view, None))
            }
        }
    }

    /// What the registry says of the pool's tag (nothing is asked for a digest reference
    /// or an invalid spec), and the pull Secret. A pool being deleted loses its copy.
    pub(super) async fn look_up(
        &self,
        pool: &BootcNodePool,
    ) -> Result<(Lookup, PullSecretView), ReconcileError> {
        if pool.metadata.deletion_timestamp.is_some() {
            self.drop_copy(pool).await?;
            return Ok((Lookup::NotAsked, PullSecretView::default()));
        }
        if spec_problems(&pool.spec).is_some() {
            return Ok((Lookup::NotAsked, PullSecretView::default()));
        }
        let (secret, credentials) = self.pull_secret(pool).await?;
        let Ok(reference) = bootc_crds::ImageRef::parse(&pool.spec.image.r#ref) else {
            return Ok((Lookup::NotAsked, secret));
        };
        if Target::from_ref(&pool.spec.image.r#ref).is_some() {
            return Ok((Lookup::NotAsked, secret));
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
        Ok((lookup, secret))
    }
}
