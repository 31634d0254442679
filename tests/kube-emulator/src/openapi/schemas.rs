//! The schemas of built-in kinds and meta.k8s.io types, generated once from k8s-openapi.

use std::sync::OnceLock;

use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

/// The built-in kinds k8s-openapi has schemas for, and every schema generated (by name).
#[derive(Debug)]
pub(super) struct SchemaRegistry {
    /// (group, version, kind, schema name)
    kinds: Vec<(&'static str, &'static str, &'static str, String)>,
    pub(super) definitions: Map<String, Value>,
}

impl SchemaRegistry {
    pub(super) fn builtin_name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|(g, v, k, _)| *g == group && *v == version && *k == kind)
            .map(|(_, _, _, name)| name.as_str())
    }
}

fn add<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    kinds: &mut Vec<(&'static str, &'static str, &'static str, String)>,
    gvk: (&'static str, &'static str, &'static str),
) {
    generator.subschema_for::<T>();
    kinds.push((gvk.0, gvk.1, gvk.2, T::schema_name().into_owned()));
}

pub(super) fn registry() -> &'static SchemaRegistry {
    static REGISTRY: OnceLock<SchemaRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        use k8s_openapi::api::apps::v1 as apps;
        use k8s_openapi::api::coordination::v1 as coordination;
        use k8s_openapi::api::core::v1 as core;
        use k8s_openapi::api::policy::v1 as policy;
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

        let mut generator = SchemaSettings::openapi3().into_generator();
        let mut kinds = Vec::new();
        let g = &mut generator;
        let k = &mut kinds;
        add::<core::Node>(g, k, ("", "v1", "Node"));
        add::<core::Pod>(g, k, ("", "v1", "Pod"));
        add::<core::Namespace>(g, k, ("", "v1", "Namespace"));
        add::<core::ConfigMap>(g, k, ("", "v1", "ConfigMap"));
        add::<core::Secret>(g, k, ("", "v1", "Secret"));
        add::<core::Event>(g, k, ("", "v1", "Event"));
        add::<core::ServiceAccount>(g, k, ("", "v1", "ServiceAccount"));
        add::<core::Service>(g, k, ("", "v1", "Service"));
        add::<core::Endpoints>(g, k, ("", "v1", "Endpoints"));
        add::<policy::PodDisruptionBudget>(g, k, ("policy", "v1", "PodDisruptionBudget"));
        add::<policy::Eviction>(g, k, ("policy", "v1", "Eviction"));
        add::<coordination::Lease>(g, k, ("coordination.k8s.io", "v1", "Lease"));
        add::<apps::DaemonSet>(g, k, ("apps", "v1", "DaemonSet"));
        add::<apps::Deployment>(g, k, ("apps", "v1", "Deployment"));
        add::<apps::ReplicaSet>(g, k, ("apps", "v1", "ReplicaSet"));
        add::<apps::StatefulSet>(g, k, ("apps", "v1", "StatefulSet"));
        add::<apiextensions::CustomResourceDefinition>(
            g,
            k,
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        );
        g.subschema_for::<meta::ObjectMeta>();
        g.subschema_for::<meta::ListMeta>();
        g.subschema_for::<meta::DeleteOptions>();
        g.subschema_for::<meta::Status>();
        g.subschema_for::<meta::Patch>();
        let definitions = generator.take_definitions(true);
        SchemaRegistry { kinds, definitions }
    })
}
