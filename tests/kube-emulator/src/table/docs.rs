//! Column descriptions: the API field documentation kube-apiserver's printers use (SwaggerDoc), taken from k8s-openapi.

use std::sync::OnceLock;

use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::Value;

#[derive(Debug, Default)]
pub(super) struct Docs {
    pub(super) name: String,
    pub(super) creation_timestamp: String,
    pub(super) kubelet_version: String,
    pub(super) os_image: String,
    pub(super) kernel_version: String,
    pub(super) container_runtime: String,
    pub(super) addresses: String,
    pub(super) pod_ip: String,
    pub(super) node_name: String,
    pub(super) nominated_node_name: String,
    pub(super) readiness_gates: String,
    pub(super) holder_identity: String,
    pub(super) config_map_data: String,
    pub(super) secret_type: String,
    pub(super) secret_data: String,
    pub(super) service_account_secrets: String,
    pub(super) event_last_timestamp: String,
    pub(super) event_first_timestamp: String,
    pub(super) event_type: String,
    pub(super) event_reason: String,
    pub(super) event_involved_object: String,
    pub(super) event_field_path: String,
    pub(super) event_source: String,
    pub(super) event_message: String,
    pub(super) event_count: String,
}

fn field_doc<T: JsonSchema>(field: &str) -> String {
    let mut generator = SchemaGenerator::default();
    let schema = T::json_schema(&mut generator);
    schema
        .as_value()
        .pointer(&format!("/properties/{field}/description"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub(super) fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::api::core::v1::{
            ConfigMap, Event, NodeStatus, NodeSystemInfo, ObjectReference, PodSpec, PodStatus,
            Secret, ServiceAccount,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        Docs {
            name: field_doc::<ObjectMeta>("name"),
            creation_timestamp: field_doc::<ObjectMeta>("creationTimestamp"),
            kubelet_version: field_doc::<NodeSystemInfo>("kubeletVersion"),
            os_image: field_doc::<NodeSystemInfo>("osImage"),
            kernel_version: field_doc::<NodeSystemInfo>("kernelVersion"),
            container_runtime: field_doc::<NodeSystemInfo>("containerRuntimeVersion"),
            addresses: field_doc::<NodeStatus>("addresses"),
            pod_ip: field_doc::<PodStatus>("podIP"),
            node_name: field_doc::<PodSpec>("nodeName"),
            nominated_node_name: field_doc::<PodStatus>("nominatedNodeName"),
            readiness_gates: field_doc::<PodSpec>("readinessGates"),
            holder_identity: field_doc::<LeaseSpec>("holderIdentity"),
            config_map_data: field_doc::<ConfigMap>("data"),
            secret_type: field_doc::<Secret>("type"),
            secret_data: field_doc::<Secret>("data"),
            service_account_secrets: field_doc::<ServiceAccount>("secrets"),
            event_last_timestamp: field_doc::<Event>("lastTimestamp"),
            event_first_timestamp: field_doc::<Event>("firstTimestamp"),
            event_type: field_doc::<Event>("type"),
            event_reason: field_doc::<Event>("reason"),
            event_involved_object: field_doc::<Event>("involvedObject"),
            event_field_path: field_doc::<ObjectReference>("fieldPath"),
            event_source: field_doc::<Event>("source"),
            event_message: field_doc::<Event>("message"),
            event_count: field_doc::<Event>("count"),
        }
    })
}
