//! The ValidatingAdmissionPolicy `bootc-node-agent-own-node` (from
//! `deploy/manifests/30-admission-policy.yaml`, as `deploy/install.yaml` ships it),
//! evaluated with a CEL interpreter
//! (the `cel` crate with kube-cel's Kubernetes libraries) on admission requests as
//! kube-apiserver builds them: an agent writes only the BootcNode of the node its token
//! is bound to; other identities are not matched. The same holds when an admin's overlay
//! puts the install in another namespace (rendered with `kubectl kustomize`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Component, Path};

use common::ok;
use deploy_check::{AGENT_SA, Authorizer, NAMESPACE, Request, documents, find, repo_root};
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};
use xtask::kustomize::OVERLAYS;

const AGENT: &str = "system:serviceaccount:bootc-system:bootc-node-agent";
const CONTROLLER: &str = "system:serviceaccount:bootc-system:bootc-pool-controller";
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
const POLICY: &str = "bootc-node-agent-own-node";
/// The namespace of an admin's overlay that installs elsewhere.
const OTHER: &str = "node-updates";

fn policy() -> Value {
    let text = std::fs::read_to_string(repo_root().join(deploy_check::INSTALL)).unwrap();
    let docs = documents(&text).unwrap();
    find(&docs, "ValidatingAdmissionPolicy", POLICY)
        .unwrap()
        .clone()
}

/// The relative path from directory `from` to `to` (kustomize takes no absolute path to
/// a base).
fn relative(from: &Path, to: &Path) -> String {
    let from = from.canonicalize().unwrap();
    let to = to.canonicalize().unwrap();
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let up = from.components().skip(common).map(|_| "..".to_string());
    let down = to.components().skip(common).map(|c| match c {
        Component::Normal(part) => part.to_string_lossy().into_owned(),
        other => panic!("{}: {other:?}", to.display()),
    });
    up.chain(down).collect::<Vec<_>>().join("/")
}

/// What an admin's overlay of the default install with `namespace: <namespace>` renders
/// with `kubectl kustomize` (the overlay is written to a temporary directory).
async fn render_in_namespace(namespace: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("overlay");
    std::fs::create_dir(&overlay).unwrap();
    let base = relative(&overlay, &repo_root().join(OVERLAYS).join("default"));
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\n\
             kind: Kustomization\n\
             namespace: {namespace}\n\
             resources:\n  - {base}\n"
        ),
    )
    .unwrap();
    let text = ok(dir.path(), &["kustomize", overlay.to_str().unwrap()]).await;
    let docs = documents(&text).unwrap();
    assert!(
        find(&docs, "Namespace", namespace).is_some(),
        "the overlay renders no namespace {namespace}"
    );
    docs
}

/// An AdmissionRequest for a write to BootcNode `name`'s `subresource` by `username`
/// with these `extra` values (`None`: no extra at all, as the JSON form omits it).
fn request(
    operation: &str,
    subresource: &str,
    name: &str,
    username: &str,
    node: Option<&str>,
) -> Value {
    // A service account's groups name its namespace.
    let groups = match username
        .strip_prefix("system:serviceaccount:")
        .and_then(|sa| sa.split_once(':'))
    {
        Some((namespace, _)) => json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated"
        ]),
        None => json!(["system:authenticated"]),
    };
    let mut user = json!({
        "username": username,
        "uid": "0b0e9e2c-0000-4000-8000-000000000001",
        "groups": groups,
    });
    if let Some(node) = node {
        user["extra"] = json!({
            NODE_NAME_KEY: [node],
            "authentication.kubernetes.io/pod-name": ["bootc-node-agent-x7k2p"],
        });
    }
    json!({
        "uid": "3f1c2d7e-0000-4000-8000-000000000002",
        "kind": {"group": "node.bootc.dev", "version": "v1alpha1", "kind": "BootcNode"},
        "resource": {"group": "node.bootc.dev", "version": "v1alpha1", "resource": "bootcnodes"},
        "subResource": subresource,
        "name": name,
        "operation": operation,
        "userInfo": user,
        "dryRun": false,
    })
}

fn object(name: &str) -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": name},
        "spec": {"desiredImage": format!("registry.test/os@sha256:{}", "2".repeat(64))},
        "status": {},
    })
}

fn context(request: &Value, object: &Value) -> Context<'static> {
    let mut ctx = Context::default().with_all();
    ctx.add_variable_from_value("request", kube_cel::cel::to_value(request).unwrap());
    ctx.add_variable_from_value("object", kube_cel::cel::to_value(object).unwrap());
    ctx.add_variable_from_value("oldObject", kube_cel::cel::to_value(object).unwrap());
    ctx
}

fn eval(expression: &str, ctx: &Context) -> CelValue {
    let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e:?}"));
    program
        .execute(ctx)
        .unwrap_or_else(|e| panic!("{expression}: {e:?}"))
}

fn eval_bool(expression: &str, ctx: &Context) -> bool {
    match eval(expression, ctx) {
        CelValue::Bool(b) => b,
        other => panic!("{expression} gave {other:?}, not a bool"),
    }
}

/// What the policy decides: `Ok(())` admitted (not matched, or every validation held),
/// `Err(message)` denied.
fn admit(policy: &Value, request: &Value, object: &Value) -> Result<(), String> {
    let spec = &policy["spec"];
    // matchConstraints: the write's resource and operation.
    let resource = match request["subResource"].as_str().unwrap_or_default() {
        "" => request["resource"]["resource"]
            .as_str()
            .unwrap()
            .to_string(),
        sub => format!(
            "{}/{sub}",
            request["resource"]["resource"].as_str().unwrap()
        ),
    };
    let matched = spec["matchConstraints"]["resourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|rule| {
            let has = |key: &str, want: &str| {
                rule[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == want || v == "*")
            };
            has("apiGroups", request["resource"]["group"].as_str().unwrap())
                && has("resources", &resource)
                && has("operations", request["operation"].as_str().unwrap())
        });
    if !matched {
        return Ok(());
    }
    let ctx = context(request, object);
    // matchConditions: all must hold for the policy to apply.
    for condition in spec["matchConditions"].as_array().into_iter().flatten() {
        if !eval_bool(condition["expression"].as_str().unwrap(), &ctx) {
            return Ok(());
        }
    }
    for validation in spec["validations"].as_array().unwrap() {
        if !eval_bool(validation["expression"].as_str().unwrap(), &ctx) {
            let message = match validation["messageExpression"].as_str() {
                Some(m) => match eval(m, &ctx) {
                    CelValue::String(s) => s.to_string(),
                    other => panic!("messageExpression gave {other:?}"),
                },
                None => validation["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            };
            return Err(message);
        }
    }
    Ok(())
}

#[test]
fn the_agent_of_node_a_writes_the_status_of_a() {
    let p = policy();
    for op in ["UPDATE", "CREATE", "DELETE"] {
        let r = request(op, "status", "node-a", AGENT, Some("node-a"));
        assert_eq!(admit(&p, &r, &object("node-a")), Ok(()), "{op}");
    }
}

#[test]
fn the_agent_of_node_a_is_refused_the_status_of_b() {
    let p = policy();
    let r = request("UPDATE", "status", "node-b", AGENT, Some("node-a"));
    let message = admit(&p, &r, &object("node-b")).unwrap_err();
    assert!(message.contains("node-b"), "{message}");
    // Nor the main resource, nor a delete (RBAC refuses those too).
    for (op, sub) in [("UPDATE", ""), ("DELETE", ""), ("CREATE", "")] {
        let r = request(op, sub, "node-b", AGENT, Some("node-a"));
        assert!(admit(&p, &r, &object("node-b")).is_err(), "{op} {sub}");
    }
}

#[test]
fn an_agent_token_bound_to_no_node_is_refused() {
    // A token that is not bound to a pod or a Node (a long-lived Secret token, or a
    // cluster older than 1.30) carries no node name: nothing may be written with it.
    let p = policy();
    let r = request("UPDATE", "status", "node-a", AGENT, None);
    assert!(admit(&p, &r, &object("node-a")).is_err());
    let mut r = request("UPDATE", "status", "node-a", AGENT, Some("node-a"));
    r["userInfo"]["extra"] = json!({"authentication.kubernetes.io/pod-name": ["p"]});
    assert!(admit(&p, &r, &object("node-a")).is_err());
}

#[test]
fn the_controller_and_admins_are_not_matched() {
    let p = policy();
    // The controller writes every BootcNode (spec, annotations) and deletes them; its
    // pod's token carries the node it runs on, which is never the point.
    for (op, sub, name) in [
        ("CREATE", "", "node-b"),
        ("UPDATE", "", "node-b"),
        ("DELETE", "", "node-b"),
        ("UPDATE", "status", "node-b"),
    ] {
        let r = request(op, sub, name, CONTROLLER, Some("node-a"));
        assert_eq!(admit(&p, &r, &object(name)), Ok(()), "{op} {sub}");
    }
    let r = request("UPDATE", "", "node-b", "kubernetes-admin", None);
    assert_eq!(admit(&p, &r, &object("node-b")), Ok(()));
    // Nor are identities whose name merely contains the agent's.
    for username in [
        "system:serviceaccount:bootc-system:bootc-node-agent-2",
        "system:serviceaccount:bootc-system:my-bootc-node-agent",
        "system:serviceaccount:bootc-node-agent:default",
        "bootc-node-agent",
        "system:node:bootc-node-agent",
    ] {
        let r = request("UPDATE", "status", "node-b", username, Some("node-a"));
        assert_eq!(admit(&p, &r, &object("node-b")), Ok(()), "{username}");
    }
}

#[test]
fn the_agents_service_account_is_held_in_every_namespace() {
    // The agent is matched by its service account's name, wherever it is installed: a
    // `bootc-node-agent` of another namespace is held to its own node too.
    let p = policy();
    for namespace in ["default", "kube-system", OTHER] {
        let agent = format!("system:serviceaccount:{namespace}:bootc-node-agent");
        let r = request("UPDATE", "status", "node-a", &agent, Some("node-a"));
        assert_eq!(admit(&p, &r, &object("node-a")), Ok(()), "{agent}");
        let r = request("UPDATE", "status", "node-b", &agent, Some("node-a"));
        assert!(admit(&p, &r, &object("node-b")).is_err(), "{agent}");
    }
}

#[tokio::test]
async fn in_another_namespace_the_agent_still_writes_only_its_own_node() {
    let docs = render_in_namespace(OTHER).await;
    // The agent's identity in that install, from what the overlay renders: its pods'
    // service account in the DaemonSet's namespace.
    let daemonset = find(&docs, "DaemonSet", "bootc-node-agent").unwrap();
    let namespace = daemonset["metadata"]["namespace"].as_str().unwrap();
    let sa = daemonset["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    assert_eq!((namespace, sa), (OTHER, AGENT_SA));
    let agent = format!("system:serviceaccount:{namespace}:{sa}");
    // It is the identity RBAC lets write BootcNodes' status, the write the policy holds.
    let patch_status = Request {
        verb: "patch".into(),
        group: "node.bootc.dev".into(),
        resource: "bootcnodes".into(),
        subresource: "status".into(),
        namespace: String::new(),
        name: "node-b".into(),
    };
    assert!(Authorizer::new(&docs).allows(namespace, sa, &patch_status));

    // The policy and its binding are installed as they are by default.
    let p = find(&docs, "ValidatingAdmissionPolicy", POLICY)
        .unwrap()
        .clone();
    let binding = find(&docs, "ValidatingAdmissionPolicyBinding", POLICY).unwrap();
    assert_eq!(binding["spec"]["policyName"], POLICY);
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert!(binding["spec"]["matchResources"].is_null(), "{binding}");

    for op in ["UPDATE", "CREATE", "DELETE"] {
        let r = request(op, "status", "node-a", &agent, Some("node-a"));
        assert_eq!(admit(&p, &r, &object("node-a")), Ok(()), "{op}");
    }
    for (op, sub) in [("UPDATE", "status"), ("UPDATE", ""), ("DELETE", "")] {
        let r = request(op, sub, "node-b", &agent, Some("node-a"));
        let message = admit(&p, &r, &object("node-b"))
            .err()
            .unwrap_or_else(|| panic!("{agent} may {op} {sub:?} another node's BootcNode"));
        assert!(message.contains("node-b"), "{message}");
    }
    let r = request("UPDATE", "status", "node-a", &agent, None);
    assert!(admit(&p, &r, &object("node-a")).is_err());

    // That install's controller is not matched.
    let controller = format!("system:serviceaccount:{namespace}:bootc-pool-controller");
    let r = request("UPDATE", "", "node-b", &controller, Some("node-a"));
    assert_eq!(admit(&p, &r, &object("node-b")), Ok(()));
}

#[tokio::test]
async fn an_install_in_another_namespace_names_no_other_namespace() {
    // kustomize rewrites objects' namespaces and bindings' subjects, not strings: a
    // namespace named in a CEL expression, an argument or an environment value would
    // still name the default one.
    for d in render_in_namespace(OTHER).await {
        let text = serde_json::to_string(&d).unwrap();
        assert!(
            !text.contains(NAMESPACE),
            "{} {} still names {NAMESPACE}: {text}",
            d["kind"],
            d["metadata"]["name"]
        );
    }
}

#[test]
fn other_resources_are_not_matched() {
    let p = policy();
    let mut r = request("UPDATE", "status", "node-b", AGENT, Some("node-a"));
    r["resource"]["resource"] = json!("bootcnodepools");
    assert_eq!(admit(&p, &r, &object("node-b")), Ok(()));
}
