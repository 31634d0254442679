//! The ValidatingAdmissionPolicy `bootc-node-agent-own-node` (from
//! `deploy/manifests/30-admission-policy.yaml`, as `deploy/install.yaml` ships it),
//! evaluated with a CEL interpreter
//! (the `cel` crate with kube-cel's Kubernetes libraries) on admission requests as
//! kube-apiserver builds them: an agent writes only the BootcNode of the node its token
//! is bound to; other identities are not matched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use deploy_check::{documents, find, repo_root};
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

const AGENT: &str = "system:serviceaccount:bootc-system:bootc-node-agent";
const CONTROLLER: &str = "system:serviceaccount:bootc-system:bootc-pool-controller";
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";

fn policy() -> Value {
    let text = std::fs::read_to_string(repo_root().join(deploy_check::INSTALL)).unwrap();
    let docs = documents(&text).unwrap();
    find(
        &docs,
        "ValidatingAdmissionPolicy",
        "bootc-node-agent-own-node",
    )
    .unwrap()
    .clone()
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
    let mut user = json!({
        "username": username,
        "uid": "0b0e9e2c-0000-4000-8000-000000000001",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:bootc-system", "system:authenticated"],
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
    // The agent's identity in another namespace is another identity.
    let r = request(
        "UPDATE",
        "status",
        "node-b",
        "system:serviceaccount:default:bootc-node-agent",
        Some("node-a"),
    );
    assert_eq!(admit(&p, &r, &object("node-b")), Ok(()));
}

#[test]
fn other_resources_are_not_matched() {
    let p = policy();
    let mut r = request("UPDATE", "status", "node-b", AGENT, Some("node-a"));
    r["resource"]["resource"] = json!("bootcnodepools");
    assert_eq!(admit(&p, &r, &object("node-b")), Ok(()));
}
