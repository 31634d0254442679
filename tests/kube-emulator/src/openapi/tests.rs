use super::paths::operation_infix;
use super::*;
use crate::test_support::names_in;

const POOLS_CRD: &str = include_str!("../../../../crds/node.bootc.dev_bootcnodepools.yaml");
const NODES_CRD: &str = include_str!("../../../../crds/node.bootc.dev_bootcnodes.yaml");

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
    let params = names_in(&patch["parameters"]);
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
