//! Secrets are read only where the install says: no ClusterRole grants them, the agent's
//! token reads Secrets in the install's own namespace only (the controller's copies of
//! the pools' pull Secrets), and the controller's token reads and writes Secrets there
//! only (further namespaces are the admin's to allow, with a Role of their own).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use deploy_check::{
    AGENT_SA, Authorizer, CONTROLLER_SA, NAMESPACE, Request, cluster_roles_granting, documents,
    repo_root,
};
use serde_json::Value;

fn install() -> Vec<Value> {
    let text = std::fs::read_to_string(repo_root().join(deploy_check::INSTALL)).unwrap();
    documents(&text).unwrap()
}

fn secrets(verb: &str, namespace: &str, name: &str) -> Request {
    Request {
        verb: verb.into(),
        group: String::new(),
        resource: "secrets".into(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[test]
fn no_cluster_role_grants_secrets() {
    let found = cluster_roles_granting(&install(), "", "secrets");
    assert!(
        found.is_empty(),
        "ClusterRoles granting Secrets (a node's token could read any Secret): {found:?}"
    );
}

#[test]
fn what_each_token_can_read() {
    let authorizer = Authorizer::new(&install());
    for subject in [AGENT_SA, CONTROLLER_SA] {
        println!("{subject} can read:");
        for line in authorizer.reads(NAMESPACE, subject) {
            println!("  {line}");
        }
    }
    let secret_reads = |subject: &str| -> Vec<String> {
        authorizer
            .reads(NAMESPACE, subject)
            .into_iter()
            .filter(|l| l.starts_with("core/secrets ") || l.starts_with("core/* "))
            .collect()
    };
    assert_eq!(
        secret_reads(AGENT_SA),
        [format!("core/secrets in {NAMESPACE}: get")]
    );
    assert_eq!(
        secret_reads(CONTROLLER_SA),
        [format!("core/secrets in {NAMESPACE}: get, list, watch")]
    );

    let may = |subject: &str, r: Request| authorizer.allows(NAMESPACE, subject, &r);
    for other in ["default", "kube-system", "apps"] {
        for subject in [AGENT_SA, CONTROLLER_SA] {
            for verb in ["get", "list", "watch"] {
                assert!(
                    !may(subject, secrets(verb, other, "pull")),
                    "{subject} may {verb} Secrets in {other}"
                );
            }
        }
    }
    // Not across namespaces either.
    for subject in [AGENT_SA, CONTROLLER_SA] {
        assert!(!may(subject, secrets("list", "", "")), "{subject}");
    }
    // The agent reads the copies; it never lists, watches or writes Secrets.
    assert!(may(
        AGENT_SA,
        secrets("get", NAMESPACE, "bootc-pull-workers")
    ));
    for verb in ["list", "watch", "create", "update", "patch", "delete"] {
        assert!(!may(AGENT_SA, secrets(verb, NAMESPACE, "x")), "{verb}");
    }
    // The controller writes its copies there (server-side apply) and deletes them.
    for verb in ["patch", "delete"] {
        assert!(
            may(
                CONTROLLER_SA,
                secrets(verb, NAMESPACE, "bootc-pull-workers")
            ),
            "{verb}"
        );
        assert!(!may(CONTROLLER_SA, secrets(verb, "default", "x")), "{verb}");
    }
}
