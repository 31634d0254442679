//! Every known difference between the emulator and kube-apiserver, pinned: each test
//! states what the emulator does where the real server would do otherwise (the list is in
//! docs/testing.md). When one of these tests fails, the emulator changed; update the docs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use axum::http::{Request, header};
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use kube_emulator::Emulator;
use serde_json::{Value, json};

async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    let mut request = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let response = client
        .send(request.body(body.into()).unwrap())
        .await
        .unwrap();
    let code = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    (code, headers, bytes.to_vec())
}

fn cm(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

/// Server-side apply merges what is applied into the object, without field ownership: a
/// field the same manager stops applying stays (kube-apiserver removes it), and two
/// managers never conflict (kube-apiserver answers 409 without force).
#[tokio::test]
async fn apply_has_no_field_ownership() {
    let emulator = Emulator::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(emulator.client().unwrap(), "default");
    let one = PatchParams::apply("one");
    let object = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data});
    api.patch(
        "a",
        &one,
        &Patch::Apply(object(json!({"x": "1", "y": "1"}))),
    )
    .await
    .unwrap();
    let after = api
        .patch("a", &one, &Patch::Apply(object(json!({"x": "2"}))))
        .await
        .unwrap();
    assert_eq!(
        after.data.unwrap(),
        BTreeMap::from([("x".into(), "2".into()), ("y".into(), "1".into())])
    );
    let two = PatchParams::apply("two");
    let after = api
        .patch("a", &two, &Patch::Apply(object(json!({"x": "3"}))))
        .await
        .unwrap();
    assert_eq!(
        after.data.unwrap()["x"],
        "3",
        "no conflict between managers"
    );
    assert!(
        after.metadata.managed_fields.is_none(),
        "no managedFields are kept"
    );
}

/// Objects without finalizers are removed the moment they are deleted: pods get no grace
/// period (there is no kubelet), and empty namespaces skip the Terminating phase.
#[tokio::test]
async fn deletion_is_immediate() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap())
        .await
        .unwrap();
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    refused(pods.get("p").await, 404);
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "empty"}})).unwrap(),
        )
        .await
        .unwrap();
    namespaces
        .delete("empty", &DeleteParams::default())
        .await
        .unwrap();
    refused(namespaces.get("empty").await, 404);
}

/// Garbage collection runs inside the deleting request, and Foreground propagation is
/// treated as Background: the owner is gone at once and so are its dependents.
#[tokio::test]
async fn garbage_collection_is_synchronous_and_background() {
    let emulator = Emulator::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(emulator.client().unwrap(), "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let mut dependent = cm("dependent", json!({}));
    dependent.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    refused(api.get("owner").await, 404);
    refused(api.get("dependent").await, 404);
}

/// A continue token resumes after its last name in the current state, not in a snapshot:
/// objects created between pages show up. A list's resourceVersion parameters are ignored
/// (every list is the latest state).
#[tokio::test]
async fn lists_are_always_current() {
    let emulator = Emulator::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(emulator.client().unwrap(), "default");
    for n in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(n, json!({})))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    api.create(&PostParams::default(), &cm("bb", json!({})))
        .await
        .unwrap();
    let rest = api
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(first.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let names: Vec<String> = rest.items.iter().map(|o| o.name_any()).collect();
    assert_eq!(names, ["bb", "c"]);
    let old = api
        .list(
            &ListParams::default()
                .at("2")
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(
        old.items.len(),
        4,
        "an exact old version still lists the current state"
    );
}

/// There is no authentication, authorization or admission: any token is accepted and
/// ValidatingAdmissionPolicies are stored but never evaluated.
#[tokio::test]
async fn no_authentication_authorization_or_admission() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (code, _, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("authorization", "Bearer not-a-token")],
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "deny-all"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "validations": [{"expression": "false", "message": "denied"}]}
    });
    let (code, _, _) = raw(
        &client,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        &[("content-type", "application/json")],
        policy,
    )
    .await;
    assert_eq!(code, 201);
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "deny-all"}, "spec": {"policyName": "deny-all", "validationActions": ["Deny"]}
    });
    let (code, _, _) = raw(
        &client,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        &[("content-type", "application/json")],
        binding,
    )
    .await;
    assert_eq!(code, 201);
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("allowed", json!({})))
        .await
        .expect("admission policies are not enforced");
}

/// Built-in kinds are stored without validation of their specs or of metadata syntax
/// beyond the object name, and strict field validation applies to custom resources only.
#[tokio::test]
async fn builtin_kinds_are_not_validated() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "no-containers"}, "spec": {}}))
            .unwrap(),
    )
    .await
    .expect("a pod without containers is stored");
    let mut labelled = cm("labels", json!({}));
    labelled.metadata.labels = Some(BTreeMap::from([("bad key".into(), "-bad value-".into())]));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &labelled)
        .await
        .expect("label syntax is not checked");
    let (code, _, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        &[("content-type", "application/json")],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unknown-field"}, "notAField": 1}),
    )
    .await;
    assert_eq!(
        code, 201,
        "unknown fields of built-in kinds are kept, even with Strict"
    );
    let (code, _, _) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}),
    )
    .await;
    assert_eq!(
        code, 422,
        "object names are checked (as DNS-1123 subdomains for every kind)"
    );
}

/// CEL rules are compiled when a custom resource is written, not when its CRD is created,
/// and no cost budget applies: kube-apiserver would refuse such a CRD.
#[tokio::test]
async fn cel_rules_are_checked_late() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object",
                    "x-kubernetes-validations": [{"rule": "self.nope(("}],
                    "properties": {"items": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y || x != y))"}]}}}}}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("the CRD is accepted");
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"items": ["a"]}})).unwrap();
    assert_refused(
        api.create(&PostParams::default(), &widget).await,
        422,
        "spec",
    );
}

/// Custom resources are served in every served version of their CRD as stored, with only
/// apiVersion rewritten: there is no conversion.
#[tokio::test]
async fn no_version_conversion() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}, {"name": "v2", "served": true, "storage": false, "schema": schema}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let at = |v: &str| ApiResource {
        group: "example.com".into(),
        version: v.into(),
        api_version: format!("example.com/{v}"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let v1: Api<DynamicObject> = Api::all_with(client.clone(), &at("v1"));
    let v2: Api<DynamicObject> = Api::all_with(client, &at("v2"));
    v1.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"old": 1}})).unwrap())
        .await
        .unwrap();
    let seen = v2.get("g").await.unwrap();
    assert_eq!(seen.types.unwrap().api_version, "example.com/v2");
    assert_eq!(seen.data["spec"], json!({"old": 1}));
}

/// Only JSON is served (kube-apiserver also speaks protobuf), OpenAPI v2 is a minimal
/// protobuf document without schemas, and Tables of built-in kinds other than Node, Pod,
/// Namespace, PodDisruptionBudget, Lease, ConfigMap, Secret, ServiceAccount and Event have
/// only Name and Age columns.
#[tokio::test]
async fn serialization_and_printing() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let (code, headers, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces",
        &[("accept", "application/vnd.kubernetes.protobuf")],
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        headers
            .get(header::CONTENT_TYPE.as_str())
            .map(String::as_str),
        Some("application/json")
    );
    let (code, headers, body) = raw(&client, "GET", "/openapi/v2", &[], Value::Null).await;
    assert_eq!(code, 200);
    assert_eq!(
        headers
            .get(header::CONTENT_TYPE.as_str())
            .map(String::as_str),
        Some("application/octet-stream")
    );
    assert!(body.len() < 200, "{} bytes", body.len());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let (_, _, body) = raw(
        &client,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments",
        &[("accept", table_accept)],
        Value::Null,
    )
    .await;
    let table: Value = serde_json::from_slice(&body).unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Age"]);
}

/// Events are stored like any object: no aggregation, no time-to-live.
#[tokio::test]
async fn events_are_plain_objects() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reason": "Test", "action": "Testing", "reportingController": "x", "reportingInstance": "y", "type": "Normal", "regarding": {"kind": "Node", "name": "n"}});
    for name in ["e1", "e2"] {
        let mut e = event.clone();
        e["metadata"]["name"] = json!(name);
        let (code, _, _) = raw(
            &client,
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &[("content-type", "application/json")],
            e,
        )
        .await;
        assert_eq!(code, 201);
    }
    let (_, _, body) = raw(
        &client,
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &[],
        Value::Null,
    )
    .await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        2,
        "identical events are not aggregated"
    );
}

/// Not a difference: an events.k8s.io Event's note is at most 1024 bytes, as
/// kube-apiserver validates it (422 `note: Too long`); a note of exactly 1024 is taken.
#[tokio::test]
async fn an_event_note_over_a_kilobyte_is_refused() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let event = |name: &str, note: String| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Test", "action": "Testing",
            "reportingController": "x", "reportingInstance": "y", "type": "Normal",
            "regarding": {"kind": "Node", "name": "n"}, "note": note})
    };
    let post = |e: Value| {
        let client = client.clone();
        async move {
            raw(
                &client,
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                &[("content-type", "application/json")],
                e,
            )
            .await
        }
    };
    let (code, _, _) = post(event("fits", "é".repeat(512))).await;
    assert_eq!(code, 201);
    let (code, _, body) = post(event("long", format!("x{}", "é".repeat(512)))).await;
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("note"));
}

/// Not a difference, but what leader election relies on: two writers racing on one Lease
/// with the same resourceVersion, exactly one wins.
#[tokio::test]
async fn lease_updates_race_safely() {
    let emulator = Emulator::start().await.unwrap();
    let api: Api<Lease> = Api::namespaced(emulator.client().unwrap(), "default");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut by_b = created.clone();
    by_b.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let mut by_c = created.clone();
    by_c.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let pp = PostParams::default();
    let (b, c) = tokio::join!(
        api.replace("leader", &pp, &by_b),
        api.replace("leader", &pp, &by_c)
    );
    let outcome = |r: &Result<Lease, kube::Error>| r.as_ref().map_or_else(code, |_| 200);
    let outcomes = [outcome(&b), outcome(&c)];
    let mut sorted = outcomes;
    sorted.sort_unstable();
    assert_eq!(sorted, [200, 409], "{outcomes:?}");
    let holder = api
        .get("leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap();
    assert_eq!(holder, if outcomes[0] == 200 { "b" } else { "c" });
}
