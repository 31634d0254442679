//! The OpenAPI v3 documents kube-apiserver publishes (`/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/G/V`), as `kubectl explain` and `kubectl apply` read them.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

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
        schema["properties"]["apiVersion"] =
            json!({"description": API_VERSION_DOC, "type": "string"});
        schema["properties"]["kind"] = json!({"description": KIND_DOC, "type": "string"});
        schema["properties"]["metadata"] = json!({
            "allOf": [{"$ref": format!("{SCHEMA_REF}{OBJECT_META}")}],
            "description": METADATA_DOC,
        });
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(name.clone(), schema);
        schemas.insert(
            list_name.clone(),
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
            }),
        );
        add_paths(&mut paths, group, version, kind, &name, &list_name, &gvk);
    }

    // The meta.k8s.io schemas kube-apiserver always publishes, and everything referenced, transitively.
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

/// `NodeBootcDevV1alpha1` for node.bootc.dev/v1alpha1, `CoreV1` for v1, `AppsV1`, `CoordinationV1` (k8s.io groups
/// lose their suffix), as in kube-apiserver's operation ids.
fn operation_infix(group: &str, version: &str) -> String {
    let group = match group {
        "" => "core",
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    let mut out = String::new();
    for part in group.split(['.', '-']).chain(std::iter::once(version)) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

fn query_param(name: &str, type_: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": type_, "uniqueItems": true},
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn pretty() -> Value {
    query_param(
        "pretty",
        "string",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
    )
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
        ),
        query_param(
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
        ),
        query_param(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
        ),
    ];
    if patch {
        params.push(query_param(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        ));
    }
    params
}

fn list_params() -> Vec<Value> {
    vec![
        query_param(
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
        ),
        query_param(
            "continue",
            "string",
            "The continue option should be set when retrieving more results from the server.",
        ),
        query_param(
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
        ),
        query_param(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        ),
        query_param(
            "limit",
            "integer",
            "limit is a maximum number of responses to return for a list call.",
        ),
        query_param(
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        query_param(
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
        ),
        query_param(
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`: the watch stream begins with synthetic events for the current state of the collection.",
        ),
        query_param(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call.",
        ),
        query_param(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
        ),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query_param(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query_param(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            "boolean",
            "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.",
        ),
        query_param(
            "orphanDependents",
            "boolean",
            "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.",
        ),
        query_param(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
        ),
    ]
}

fn content(schema: &str) -> Value {
    let reference = json!({"schema": {"$ref": format!("{SCHEMA_REF}{schema}")}});
    json!({"application/json": reference, "application/yaml": reference})
}

fn responses(codes: &[&str], schema: &str) -> Value {
    let mut out = Map::new();
    for code in codes {
        let description = match *code {
            "201" => "Created",
            "202" => "Accepted",
            _ => "OK",
        };
        out.insert(
            code.to_string(),
            json!({"description": description, "content": content(schema)}),
        );
    }
    out.insert("401".to_string(), json!({"description": "Unauthorized"}));
    Value::Object(out)
}

#[allow(clippy::too_many_arguments)]
fn operation(
    action: &str,
    operation_id: String,
    description: String,
    tag: &str,
    parameters: Vec<Value>,
    request_body: Option<Value>,
    responses: Value,
    gvk: &Value,
) -> Value {
    let mut op = json!({
        "tags": [tag],
        "description": description,
        "operationId": operation_id,
        "responses": responses,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    });
    if !parameters.is_empty() {
        op["parameters"] = Value::Array(parameters);
    }
    if let Some(body) = request_body {
        op["requestBody"] = body;
    }
    op
}

fn add_paths(
    paths: &mut Map<String, Value>,
    group: &str,
    version: &str,
    kind: &KindDoc,
    name: &str,
    list_name: &str,
    gvk: &Value,
) {
    let root = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let infix = operation_infix(group, version);
    let tag = {
        let mut t = infix.clone();
        if let Some(first) = t.get(..1).map(str::to_lowercase) {
            t.replace_range(..1, &first);
        }
        let split = t.len() - version.len();
        format!("{}_{}", &t[..split], version)
    };
    let k = &kind.kind;
    let (collection, scope, mut scope_params) = if kind.namespaced {
        (
            format!("{root}/namespaces/{{namespace}}/{}", kind.plural),
            "Namespaced",
            vec![path_param(
                "namespace",
                "object name and auth scope, such as for teams and projects",
            )],
        )
    } else {
        (format!("{root}/{}", kind.plural), "", Vec::new())
    };
    scope_params.push(pretty());
    let body = |schema: &str| json!({"content": content(schema), "required": true});

    let mut delete_collection_params = delete_params();
    delete_collection_params.extend(list_params());
    let collection_ops = json!({
        "get": operation("list", format!("list{infix}{scope}{k}"), format!("list or watch objects of kind {k}"), &tag,
            list_params(), None, responses(&["200"], list_name), gvk),
        "post": operation("post", format!("create{infix}{scope}{k}"), format!("create a {k}"), &tag,
            write_params(false), Some(body(name)), responses(&["200", "201", "202"], name), gvk),
        "delete": operation("deletecollection", format!("deletecollection{infix}{scope}{k}"), format!("delete collection of {k}"), &tag,
            delete_collection_params, Some(json!({"content": content(DELETE_OPTIONS)})), responses(&["200"], STATUS), gvk),
        "parameters": scope_params.clone(),
    });
    paths.insert(collection.clone(), collection_ops);

    let mut item_params = vec![path_param("name", &format!("name of the {k}"))];
    item_params.extend(scope_params);
    let patch_body = json!({
        "content": {
            "application/apply-patch+yaml": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
            "application/json-patch+json": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
            "application/merge-patch+json": {"schema": {"$ref": format!("{SCHEMA_REF}{PATCH}")}},
        },
        "required": true,
    });
    let item_ops = json!({
        "get": operation("get", format!("read{infix}{scope}{k}"), format!("read the specified {k}"), &tag,
            Vec::new(), None, responses(&["200"], name), gvk),
        "put": operation("put", format!("replace{infix}{scope}{k}"), format!("replace the specified {k}"), &tag,
            write_params(false), Some(body(name)), responses(&["200", "201"], name), gvk),
        "patch": operation("patch", format!("patch{infix}{scope}{k}"), format!("partially update the specified {k}"), &tag,
            write_params(true), Some(patch_body), responses(&["200", "201"], name), gvk),
        "delete": operation("delete", format!("delete{infix}{scope}{k}"), format!("delete a {k}"), &tag,
            delete_params(), Some(json!({"content": content(DELETE_OPTIONS)})), responses(&["200", "202"], STATUS), gvk),
        "parameters": item_params,
    });
    paths.insert(format!("{collection}/{{name}}"), item_ops);

    if kind.namespaced {
        let all = json!({
            "get": operation("list", format!("list{infix}{k}ForAllNamespaces"), format!("list or watch objects of kind {k}"), &tag,
                list_params(), None, responses(&["200"], list_name), gvk),
            "parameters": [pretty()],
        });
        paths.insert(format!("{root}/{}", kind.plural), all);
    }
}

/// `Content-Type` to serve [`v2_document`] with (kubectl asks for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
/// but cannot parse that media type in a response, and reads the body as protobuf whatever the type).
pub const V2_CONTENT_TYPE: &str = "application/octet-stream";

/// `GET /openapi/v2`: a minimal OpenAPI v2 document in the protobuf encoding kubectl requires (gnostic's `Document`
/// with only `swagger: "2.0"` and `info`). kubectl finds no schema in it, so it skips client-side validation, computes
/// strategic merge patches from its compiled-in types, and `kubectl explain --output=plaintext-openapiv2` reports the
/// resource as not found; everything else uses OpenAPI v3.
pub fn v2_document() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        // Lengths here are below 128, so a one-byte varint.
        out.push(u8::try_from(bytes.len()).unwrap_or(0));
        out.extend_from_slice(bytes);
        out
    }
    let mut info = field(1, b"Kubernetes");
    info.extend(field(2, b"v1.33.0"));
    let mut doc = field(1, b"2.0");
    doc.extend(field(2, &info));
    doc
}

// ---------------------------------------------------------------------------------------------------------------------
// Schemas of built-in kinds and meta.k8s.io types, generated once from k8s-openapi.

#[derive(Debug)]
struct Registry {
    /// (group, version, kind, schema name)
    kinds: Vec<(&'static str, &'static str, &'static str, String)>,
    definitions: Map<String, Value>,
}

impl Registry {
    fn builtin_name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
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

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
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
        Registry { kinds, definitions }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOLS_CRD: &str = include_str!("../../../crds/node.bootc.dev_bootcnodepools.yaml");
    const NODES_CRD: &str = include_str!("../../../crds/node.bootc.dev_bootcnodes.yaml");

    fn crd_kind(yaml: &str) -> KindDoc {
        let crd: Value = serde_yaml_ng::from_str(yaml).unwrap();
        KindDoc {
            kind: crd["spec"]["names"]["kind"].as_str().unwrap().to_string(),
            plural: crd["spec"]["names"]["plural"].as_str().unwrap().to_string(),
            namespaced: crd["spec"]["scope"] == "Namespaced",
            schema: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone(),
        }
    }

    /// Every `$ref` of the document resolves inside it.
    fn assert_refs_resolve(doc: &Value) {
        let mut refs = Vec::new();
        collect_refs(doc, &mut refs);
        for name in refs {
            assert!(
                doc["components"]["schemas"].get(&name).is_some(),
                "dangling $ref {name}"
            );
        }
    }

    #[test]
    fn root_lists_group_versions() {
        let root = v3_root(&[
            (String::new(), "v1".to_string()),
            ("node.bootc.dev".to_string(), "v1alpha1".to_string()),
        ]);
        let paths = root["paths"].as_object().unwrap();
        assert_eq!(paths.len(), 2);
        let url = paths["apis/node.bootc.dev/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(
            url.starts_with("/openapi/v3/apis/node.bootc.dev/v1alpha1?hash="),
            "{url}"
        );
        assert!(
            paths["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        let hashed = v3_root_hashed(&[(String::new(), "v1".to_string(), "ABC".to_string())]);
        assert_eq!(
            hashed["paths"]["api/v1"]["serverRelativeURL"],
            "/openapi/v3/api/v1?hash=ABC"
        );
        assert_ne!(
            document_hash(&json!({"a": 1})),
            document_hash(&json!({"a": 2}))
        );
        assert_eq!(document_hash(&json!({"a": 1})).len(), 32);
    }

    #[test]
    fn schema_names() {
        let cases = [
            (
                ("node.bootc.dev", "v1alpha1", "BootcNodePool"),
                "dev.bootc.node.v1alpha1.BootcNodePool",
            ),
            (("stable", "v1", "Thing"), "stable.v1.Thing"),
            (("", "v1", "Pod"), "io.k8s.api.core.v1.Pod"),
            (
                ("policy", "v1", "PodDisruptionBudget"),
                "io.k8s.api.policy.v1.PodDisruptionBudget",
            ),
            (
                ("coordination.k8s.io", "v1", "Lease"),
                "io.k8s.api.coordination.v1.Lease",
            ),
        ];
        for ((g, v, k), want) in cases {
            assert_eq!(schema_name(g, v, k), want);
        }
        assert_eq!(
            operation_infix("node.bootc.dev", "v1alpha1"),
            "NodeBootcDevV1alpha1"
        );
        assert_eq!(operation_infix("", "v1"), "CoreV1");
        assert_eq!(
            operation_infix("coordination.k8s.io", "v1"),
            "CoordinationV1"
        );
        assert!(builtin_schema("", "v1", "Node").is_some());
        assert!(builtin_schema("node.bootc.dev", "v1alpha1", "BootcNodePool").is_none());
    }

    #[test]
    fn crd_document() {
        let pools = crd_kind(POOLS_CRD);
        let nodes = crd_kind(NODES_CRD);
        let doc = v3_group_version("node.bootc.dev", "v1alpha1", &[pools.clone(), nodes]);
        assert_eq!(doc["openapi"], "3.0.0");
        let schemas = &doc["components"]["schemas"];
        let pool = &schemas["dev.bootc.node.v1alpha1.BootcNodePool"];
        assert_eq!(
            pool["x-kubernetes-group-version-kind"],
            json!([{"group": "node.bootc.dev", "version": "v1alpha1", "kind": "BootcNodePool"}])
        );
        // The CRD schema is there, untouched below the root.
        assert_eq!(
            pool["properties"]["spec"],
            pools.schema["properties"]["spec"]
        );
        assert_eq!(pool["description"], pools.schema["description"]);
        assert!(pool["properties"]["spec"]["properties"]["rollout"].is_object());
        assert_eq!(pool["properties"]["apiVersion"]["type"], "string");
        assert_eq!(pool["properties"]["kind"]["description"], KIND_DOC);
        assert_eq!(
            pool["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(schemas["dev.bootc.node.v1alpha1.BootcNode"].is_object());
        let list = &schemas["dev.bootc.node.v1alpha1.BootcNodePoolList"];
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["kind"],
            "BootcNodePoolList"
        );
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/dev.bootc.node.v1alpha1.BootcNodePool"
        );
        for name in [
            OBJECT_META,
            LIST_META,
            DELETE_OPTIONS,
            STATUS,
            PATCH,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
            "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
        ] {
            assert!(schemas[name].is_object(), "{name}");
        }
        assert_refs_resolve(&doc);

        // Paths kubectl explain searches, and the PATCH operation whose fieldValidation parameter kubectl looks for.
        let paths = &doc["paths"];
        let list_path = &paths["/apis/node.bootc.dev/v1alpha1/bootcnodepools"];
        assert_eq!(
            list_path["get"]["x-kubernetes-group-version-kind"]["kind"],
            "BootcNodePool"
        );
        assert_eq!(list_path["get"]["x-kubernetes-action"], "list");
        let patch = &paths["/apis/node.bootc.dev/v1alpha1/bootcnodepools/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "BootcNodePool"
        );
        let params: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            params,
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        assert!(
            patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        assert!(
            patch["requestBody"]["content"]
                .get("application/merge-patch+json")
                .is_some()
        );
        for path in paths.as_object().unwrap().keys() {
            assert!(path.starts_with('/'), "{path}");
        }
    }

    #[test]
    fn v2_document_is_protobuf() {
        let doc = v2_document();
        // gnostic Document: swagger (1) = "2.0", info (2) = {title (1), version (2)}.
        assert_eq!(&doc[..5], b"\x0a\x032.0");
        assert_eq!(doc[5], 0x12);
        assert_eq!(usize::from(doc[6]), doc.len() - 7);
        assert_eq!(&doc[7..19], b"\x0a\x0aKubernetes");
        assert_eq!(&doc[19..], b"\x12\x07v1.33.0");
        assert_eq!(V2_CONTENT_TYPE, "application/octet-stream");
    }

    #[test]
    fn builtin_document() {
        let minimal = |kind: &str, plural: &str, namespaced: bool| KindDoc {
            kind: kind.to_string(),
            plural: plural.to_string(),
            namespaced,
            schema: json!({}),
        };
        let doc = v3_group_version(
            "",
            "v1",
            &[
                minimal("Pod", "pods", true),
                minimal("Widget", "widgets", false),
            ],
        );
        let schemas = &doc["components"]["schemas"];
        let pod = &schemas["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        assert!(
            pod["properties"]["spec"].is_object(),
            "a known built-in gets its full schema"
        );
        assert!(schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"].is_object());
        let widget = &schemas["v1.Widget"];
        assert_eq!(widget["type"], "object");
        assert!(widget["properties"]["metadata"].is_object());
        let paths = &doc["paths"];
        assert!(paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object());
        assert_eq!(
            paths["/api/v1/pods"]["get"]["operationId"],
            "listCoreV1PodForAllNamespaces"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods"]["get"]["operationId"],
            "listCoreV1NamespacedPod"
        );
        assert_eq!(
            paths["/api/v1/widgets"]["post"]["operationId"],
            "createCoreV1Widget"
        );
        assert_eq!(paths["/api/v1/widgets"]["get"]["tags"][0], "core_v1");
        assert_refs_resolve(&doc);
    }
}
