//! The eviction request (`POST pods/<name>/eviction`, policy/v1) and how API errors read.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

/// An API error with the details a person needs (a budget's refusal names the budget in
/// its causes).
pub(super) fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = status.message.clone();
            for cause in status.details.iter().flat_map(|d| &d.causes) {
                if !cause.message.is_empty() {
                    text.push(' ');
                    text.push_str(&cause.message);
                }
            }
            format!("{text} ({} {})", status.code, status.reason)
        }
        other => other.to_string(),
    }
}

pub(super) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 404)
}

/// `POST pods/<name>/eviction`. kube's `Api::evict` sends its delete options under a
/// snake_case key the API server ignores, so the Eviction is built here.
pub(super) async fn evict(
    client: &Client,
    namespace: &str,
    name: &str,
    grace_period_seconds: Option<i64>,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create_subresource::<_, serde_json::Value>(
        "eviction",
        name,
        &PostParams::default(),
        &eviction(namespace, name, grace_period_seconds),
    )
    .await
    .map(drop)
}

/// The policy/v1 Eviction of a pod.
pub(super) fn eviction(namespace: &str, name: &str, grace_period_seconds: Option<i64>) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        delete_options: grace_period_seconds.map(|g| DeleteOptions {
            grace_period_seconds: Some(g),
            ..DeleteOptions::default()
        }),
    }
}
