//! The OpenAPI v3 documents kube-apiserver publishes (`/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/G/V`), as `kubectl explain` and `kubectl apply` read them.
//!
//! Map: the documents and the kinds' schemas are built here; `paths` holds the REST paths and operations of a kind,
//! `schemas` the schemas of built-in kinds generated from k8s-openapi, and `v2` the minimal OpenAPI v2 document
//! kubectl asks for.

mod paths;
mod schemas;
#[cfg(test)]
mod tests;
mod v2;

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use paths::KindPaths;
use schemas::{SchemaRegistry, registry};
pub use v2::{V2_CONTENT_TYPE, v2_document};

/// Prefix of a reference to a schema of the document's `components.schemas`.
const SCHEMA_REF: &str = "#/components/schemas/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// One kind served in a group version, as its OpenAPI document describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct KindDoc {
    /// Kind, e.g. `BootcNodePool`.
    pub kind: String,
    /// Resource (plural) name, e.g. `bootcnodepools`.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// The kind's schema: a CRD version's `openAPIV3Schema`; for a built-in kind anything, and an empty object (or
    /// one without `properties`) gets the full schema of [`builtin_schema`] when the kind is known there.
    pub schema: Value,
}

/// The path of a group version in the OpenAPI v3 discovery document: `api/v1` for the core group, `apis/G/V` else.
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: the discovery document listing each group version's document, whose `serverRelativeURL`
/// carries a hash of the group and version (stable for the server's lifetime; serve those documents without
/// freshness headers, or use [`v3_root_hashed`] with [`document_hash`] so that a changed document gets a new URL).
pub fn v3_root(group_versions: &[(String, String)]) -> Value {
    let hashed: Vec<(String, String, String)> = group_versions
        .iter()
        .map(|(g, v)| (g.clone(), v.clone(), hash_text(&format!("{g}/{v}"))))
        .collect();
    v3_root_hashed(&hashed)
}

/// `GET /openapi/v3` with a caller-chosen hash per group version (`(group, version, hash)`), e.g. the
/// [`document_hash`] of the document served for it, as kube-apiserver does.
pub fn v3_root_hashed(group_versions: &[(String, String, String)]) -> Value {
    let mut paths = Map::new();
    for (group, version, hash) in group_versions {
        let path = gv_path(group, version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// A hash of a document for its `serverRelativeURL` (kube-apiserver uses a SHA-512; any stable digest does).
pub fn document_hash(doc: &Value) -> String {
    hash_text(&doc.to_string())
}

fn hash_text(text: &str) -> String {
    // Two FNV-1a 64-bit hashes with different offsets: 128 bits, uppercase hex like kube-apiserver's.
    let fnv = |offset: u64| {
        text.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "{:016X}{:016X}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    )
}

/// The name of a kind's schema in `components.schemas`: the k8s-openapi name for known built-in kinds
/// (`io.k8s.api.core.v1.Pod`), else the REST-friendly name kube-apiserver gives a CRD: the group reversed, then
/// version and kind (`dev.bootc.node.v1alpha1.BootcNodePool`).
pub fn schema_name(group: &str, version: &str, kind: &str) -> String {
    if let Some(name) = registry().builtin_name(group, version, kind) {
        return name.to_string();
    }
    let reversed: Vec<&str> = group.rsplit('.').collect();
    let prefix = reversed.join(".");
    if prefix.is_empty() {
        format!("{version}.{kind}")
    } else {
        format!("{prefix}.{version}.{kind}")
    }
}

/// The full schema k8s-openapi (v1.33) has for a known built-in kind, with `$ref`s into `components.schemas` that
/// [`v3_group_version`] resolves; `None` for other kinds.
///
/// Known: core/v1 Node, Pod, Namespace, ConfigMap, Secret, Event, ServiceAccount, Service, Endpoints; policy/v1
/// PodDisruptionBudget, Eviction; coordination.k8s.io/v1 Lease; apps/v1 DaemonSet, Deployment, ReplicaSet,
/// StatefulSet; apiextensions.k8s.io/v1 CustomResourceDefinition.
pub fn builtin_schema(group: &str, version: &str, kind: &str) -> Option<Value> {
    let reg = registry();
    let name = reg.builtin_name(group, version, kind)?;
    reg.definitions.get(name).cloned()
}

/// `GET /openapi/v3/apis/G/V` (or `/openapi/v3/api/v1`): an OpenAPI 3.0 document with, for each kind, its schema
/// (with `apiVersion`, `kind` and `metadata` as kube-apiserver publishes them, and `x-kubernetes-group-version-kind`),
/// its list schema, the meta.k8s.io schemas they refer to, and the REST paths of the kind (collection and object,
/// each operation tagged with its group-version-kind; create, update and patch declare the `fieldValidation`, `dryRun`
/// and `fieldManager` parameters, which is how kubectl detects server-side field validation).
///
/// Patch operations offer JSON patch, merge patch and apply patch, never strategic merge patch: kubectl then computes
/// strategic merge patches for built-in kinds from its compiled-in types, as the schemas here lack the patch
/// strategy extensions it would otherwise need.
pub fn v3_group_version(group: &str, version: &str, kinds: &[KindDoc]) -> Value {
    let reg = registry();
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for kind in kinds {
        let name = schema_name(group, version, &kind.kind);
        let list_name = format!("{name}List");
        let gvk = json!({"group": group, "version": version, "kind": kind.kind});
        let list_gvk =
            json!({"group": group, "version": version, "kind": format!("{}List", kind.kind)});
        let mut schema = kind_schema(reg, group, version, kind);
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(name.clone(), schema);
        schemas.insert(list_name.clone(), list_schema(kind, &name, list_gvk));
        let kind_paths = KindPaths::new((group, version), kind, &name, &list_name, &gvk);
        kind_paths.add_to(&mut paths);
    }
    add_referenced(reg, &mut schemas);

    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                },
            },
        },
    })
}

/// A kind's schema (the full built-in one when the given schema has no properties), with `apiVersion`, `kind` and
/// `metadata` as kube-apiserver publishes them.
fn kind_schema(reg: &SchemaRegistry, group: &str, version: &str, kind: &KindDoc) -> Value {
    let has_properties = kind
        .schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    let mut schema = match reg.builtin_name(group, version, &kind.kind) {
        Some(builtin) if !has_properties => reg
            .definitions
            .get(builtin)
            .cloned()
            .unwrap_or_else(|| kind.schema.clone()),
        _ => kind.schema.clone(),
    };
    if !schema.is_object() {
        schema = json!({});
    }
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema["properties"] = json!({});
    }
    schema["properties"]["apiVersion"] = json!({"description": API_VERSION_DOC, "type": "string"});
    schema["properties"]["kind"] = json!({"description": KIND_DOC, "type": "string"});
    schema["properties"]["metadata"] = json!({
        "allOf": [{"$ref": format!("{SCHEMA_REF}{OBJECT_META}")}],
        "description": METADATA_DOC,
    });
    schema
}

/// The schema of a kind's list, whose items refer to the kind's schema `name`.
fn list_schema(kind: &KindDoc, name: &str, list_gvk: Value) -> Value {
    json!({
        "description": format!("{}List is a list of {}", kind.kind, kind.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DOC, "type": "string"},
            "kind": {"description": KIND_DOC, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", kind.plural),
                "type": "array",
                "items": {"$ref": format!("{SCHEMA_REF}{name}")},
            },
            "metadata": {
                "allOf": [{"$ref": format!("{SCHEMA_REF}{LIST_META}")}],
                "description": LIST_METADATA_DOC,
            },
        },
        "x-kubernetes-group-version-kind": [list_gvk],
    })
}

/// Adds the meta.k8s.io schemas kube-apiserver always publishes, and everything referenced, transitively.
fn add_referenced(reg: &SchemaRegistry, schemas: &mut Map<String, Value>) {
    let mut pending: Vec<String> = [OBJECT_META, LIST_META, DELETE_OPTIONS, STATUS, PATCH]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut seen: BTreeSet<String> = schemas.keys().cloned().collect();
    for schema in schemas.values() {
        collect_refs(schema, &mut pending);
    }
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(def) = reg.definitions.get(&name) {
            collect_refs(def, &mut pending);
            schemas.insert(name, def.clone());
        }
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(SCHEMA_REF)) {
                        out.push(name.to_string());
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
