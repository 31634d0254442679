//! What ships, rendered and checked: `deploy/install.yaml` from the manifests in
//! `deploy/manifests/` and the CRDs in `crds/`, a multi-document YAML reader, and a small
//! RBAC authorizer (ClusterRoles, Roles and their bindings, matched as kube-apiserver's
//! RBAC authorizer matches them) for the tests that hold the roles to the API calls the
//! components make.

use std::collections::BTreeMap;

use serde_json::Value;

/// The one command that builds the shipped binaries: the `Containerfile`'s builder stage
/// runs exactly this, and the project's test script builds that file before the tests, so
/// CI proves it works.
pub const RELEASE_BUILD: &str =
    "cargo build --release --locked -p bootc-pool-controller -p bootc-node-agent";

/// The namespace the manifests install into.
pub const NAMESPACE: &str = "bootc-system";

/// The container image the manifests run (one image, both binaries), tagged with the
/// workspace version.
pub const IMAGE: &str = concat!("ghcr.io/bootc-pool/bootc-pool:", env!("CARGO_PKG_VERSION"));

/// The controller's service account (in [`NAMESPACE`]).
pub const CONTROLLER_SA: &str = "bootc-pool-controller";

/// The agent's service account (in [`NAMESPACE`]).
pub const AGENT_SA: &str = "bootc-node-agent";

/// The service account whose role a request with `user_agent` is held to: the
/// controller's and the agent's requests name their component and version
/// (`bootc-pool-controller/0.1.0`, `bootc-node-agent/0.1.0`, possibly with more after
/// a space); anything else is not ours.
pub fn subject_of(user_agent: &str) -> Option<&'static str> {
    let product = user_agent.split_whitespace().next().unwrap_or_default();
    match product.split_once('/') {
        Some(("bootc-pool-controller", _)) => Some(CONTROLLER_SA),
        Some(("bootc-node-agent", _)) => Some(AGENT_SA),
        _ => None,
    }
}

/// Requests of the project's components held to the roles: what each service account
/// asked for (with counts) and what the roles did not allow.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// Per service account, every distinct request and how often it was made.
    pub checked: BTreeMap<&'static str, BTreeMap<Request, u64>>,
    /// `(service account, request, count)` of every distinct request the roles refuse.
    pub denied: Vec<(&'static str, Request, u64)>,
    /// Requests of other clients, not checked.
    pub others: u64,
}

impl Audit {
    /// Holds `requests` (`(User-Agent, request, count)`) to `authorizer`'s roles.
    /// Discovery is open to every authenticated identity (`system:discovery`) and is not
    /// checked.
    pub fn of<'a>(
        authorizer: &Authorizer,
        requests: impl IntoIterator<Item = (&'a str, Request, u64)>,
    ) -> Audit {
        let mut audit = Audit::default();
        let mut merged: BTreeMap<(&'static str, Request), u64> = BTreeMap::new();
        for (user_agent, request, count) in requests {
            match subject_of(user_agent) {
                Some(_) if request.verb == "discovery" => {}
                Some(subject) => *merged.entry((subject, request)).or_default() += count,
                None => audit.others += count,
            }
        }
        for ((subject, request), count) in merged {
            if !authorizer.allows(NAMESPACE, subject, &request) {
                audit.denied.push((subject, request.clone(), count));
            }
            *audit
                .checked
                .entry(subject)
                .or_default()
                .entry(request)
                .or_default() += count;
        }
        audit
    }

    /// How many requests of `subject` were checked.
    pub fn total(&self, subject: &str) -> u64 {
        self.checked
            .get(subject)
            .map_or(0, |requests| requests.values().sum())
    }

    /// `verb group/resource` of every grant of `subject` no checked request used.
    pub fn unused_grants(&self, authorizer: &Authorizer, subject: &str) -> Vec<String> {
        let empty = BTreeMap::new();
        let requests = self.checked.get(subject).unwrap_or(&empty);
        let mut unused = Vec::new();
        for grant in authorizer.grants(NAMESPACE, subject) {
            for group in &grant.rule.api_groups {
                for resource in &grant.rule.resources {
                    for verb in &grant.rule.verbs {
                        let used = requests.keys().any(|r| {
                            r.verb == *verb && r.group == *group && r.full_resource() == *resource
                        });
                        let key = format!("{verb} {group}/{resource}");
                        if !used && !unused.contains(&key) {
                            unused.push(key);
                        }
                    }
                }
            }
        }
        unused
    }
}

pub use xtask::install::{
    CRDS, INSTALL, MANIFESTS, documents, install_sources, manifest_files, render, repo_root,
};

/// The object of `kind` named `name` among `docs`.
pub fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// One API request, as an authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group, `""` for core.
    pub group: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource or `""`.
    pub subresource: String,
    /// Namespace or `""` (cluster-scoped, or all namespaces).
    pub namespace: String,
    /// Object name or `""`.
    pub name: String,
}

impl From<&kube_emulator::RequestRecord> for Request {
    fn from(r: &kube_emulator::RequestRecord) -> Self {
        Request {
            verb: r.verb.clone(),
            group: r.group.clone(),
            resource: r.resource.clone(),
            subresource: r.subresource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }
}

impl Request {
    /// `resource` or `resource/subresource`.
    pub fn full_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.full_resource())?;
        if !self.namespace.is_empty() {
            write!(f, " in {}", self.namespace)?;
        }
        if !self.name.is_empty() {
            write!(f, " named {}", self.name)?;
        }
        Ok(())
    }
}

/// One policy rule of a Role or ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`, subresources as `resource/subresource`.
    pub resources: Vec<String>,
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `resourceNames` (empty: any).
    pub resource_names: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    fn from_value(v: &Value) -> Rule {
        Rule {
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            verbs: strings(&v["verbs"]),
            resource_names: strings(&v["resourceNames"]),
        }
    }

    /// Whether this rule allows `request` (RBAC's `RuleAllows` for resource requests).
    pub fn allows(&self, request: &Request) -> bool {
        let group = self
            .api_groups
            .iter()
            .any(|g| g == "*" || *g == request.group);
        let verb = self.verbs.iter().any(|v| v == "*" || *v == request.verb);
        let full = request.full_resource();
        let resource = self.resources.iter().any(|r| {
            r == "*"
                || *r == full
                // "*/status" matches every resource's status subresource.
                || (!request.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(request.subresource.as_str()))
                // "pods/*" matches every subresource of pods (not pods itself).
                || (!request.subresource.is_empty()
                    && r.strip_suffix("/*") == Some(request.resource.as_str()))
        });
        // With resourceNames, only requests naming one of them are allowed (a create,
        // or a list without a metadata.name field selector, names nothing).
        let name = self.resource_names.is_empty()
            || (!request.name.is_empty() && self.resource_names.contains(&request.name));
        group && verb && resource && name
    }
}

/// Where a set of rules applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// A ClusterRole bound by a ClusterRoleBinding: every namespace and cluster-scoped
    /// resources.
    Cluster,
    /// A Role or ClusterRole bound by a RoleBinding in this namespace: requests in it only.
    Namespace(String),
}

/// One rule a subject holds, with where it applies and where it came from.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The rule.
    pub rule: Rule,
    /// Where it applies.
    pub scope: Scope,
    /// `Kind/name` of the role, for messages.
    pub role: String,
}

impl Grant {
    /// Whether this grant allows `request`.
    pub fn allows(&self, request: &Request) -> bool {
        let in_scope = match &self.scope {
            Scope::Cluster => true,
            Scope::Namespace(ns) => *ns == request.namespace,
        };
        in_scope && self.rule.allows(request)
    }
}

/// The RBAC objects among a set of manifests.
#[derive(Debug, Clone)]
pub struct Authorizer {
    docs: Vec<Value>,
}

impl Authorizer {
    /// From parsed manifests (other kinds are ignored).
    pub fn new(docs: &[Value]) -> Authorizer {
        Authorizer {
            docs: docs
                .iter()
                .filter(|d| d["apiVersion"] == "rbac.authorization.k8s.io/v1")
                .cloned()
                .collect(),
        }
    }

    fn role_rules(&self, kind: &str, name: &str, namespace: Option<&str>) -> Vec<Rule> {
        self.docs
            .iter()
            .filter(|d| {
                d["kind"] == kind
                    && d["metadata"]["name"] == name
                    && namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns)
            })
            .flat_map(|d| {
                d["rules"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(Rule::from_value)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every rule service account `namespace/name` holds through the bindings.
    pub fn grants(&self, namespace: &str, name: &str) -> Vec<Grant> {
        let mut grants = Vec::new();
        for binding in &self.docs {
            let kind = binding["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
                continue;
            }
            let bound = binding["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["name"] == name
                        && s["namespace"] == namespace
                })
            });
            if !bound || binding["roleRef"]["apiGroup"] != "rbac.authorization.k8s.io" {
                continue;
            }
            let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
            let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
            let binding_ns = binding["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let (scope, rules) = match (kind, role_kind) {
                ("ClusterRoleBinding", "ClusterRole") => (
                    Scope::Cluster,
                    self.role_rules("ClusterRole", role_name, None),
                ),
                ("RoleBinding", "ClusterRole") => (
                    Scope::Namespace(binding_ns.to_string()),
                    self.role_rules("ClusterRole", role_name, None),
                ),
                ("RoleBinding", "Role") => (
                    Scope::Namespace(binding_ns.to_string()),
                    self.role_rules("Role", role_name, Some(binding_ns)),
                ),
                // A ClusterRoleBinding cannot refer to a Role.
                _ => continue,
            };
            for rule in rules {
                grants.push(Grant {
                    rule,
                    scope: scope.clone(),
                    role: format!("{role_kind}/{role_name}"),
                });
            }
        }
        grants
    }

    /// Whether service account `namespace/name` may make `request`.
    pub fn allows(&self, namespace: &str, name: &str, request: &Request) -> bool {
        self.grants(namespace, name)
            .iter()
            .any(|g| g.allows(request))
    }
}

/// `ClusterRole/name` of every ClusterRole among `docs` with a rule granting `resource` of
/// API group `group`, by name or through a wildcard.
pub fn cluster_roles_granting(docs: &[Value], group: &str, resource: &str) -> Vec<String> {
    let mut found = Vec::new();
    for role in docs
        .iter()
        .filter(|d| d["apiVersion"] == "rbac.authorization.k8s.io/v1" && d["kind"] == "ClusterRole")
    {
        let rules = role["rules"].as_array().cloned().unwrap_or_default();
        let grants = rules.iter().map(Rule::from_value).any(|r| {
            r.api_groups.iter().any(|g| g == "*" || g == group)
                && r.resources.iter().any(|x| x == "*" || x == resource)
        });
        if grants {
            found.push(format!(
                "ClusterRole/{}",
                role["metadata"]["name"].as_str().unwrap_or_default()
            ));
        }
    }
    found
}

impl Authorizer {
    /// What service account `namespace/name` may read (get, list, watch), one line per
    /// resource and scope, e.g. `core/secrets in bootc-system: get`.
    pub fn reads(&self, namespace: &str, name: &str) -> Vec<String> {
        let mut lines: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for grant in self.grants(namespace, name) {
            let scope = match &grant.scope {
                Scope::Cluster => "cluster-wide".to_owned(),
                Scope::Namespace(ns) => format!("in {ns}"),
            };
            for group in &grant.rule.api_groups {
                let group = if group.is_empty() { "core" } else { group };
                for resource in &grant.rule.resources {
                    let verbs = lines
                        .entry(format!("{group}/{resource} {scope}"))
                        .or_default();
                    for verb in &grant.rule.verbs {
                        let read = ["get", "list", "watch", "*"].contains(&verb.as_str());
                        if read && !verbs.contains(verb) {
                            verbs.push(verb.clone());
                        }
                    }
                }
            }
        }
        lines
            .into_iter()
            .filter(|(_, verbs)| !verbs.is_empty())
            .map(|(what, verbs)| format!("{what}: {}", verbs.join(", ")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Request {
        Request {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn docs() -> Vec<Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "c"},
            "rules": [
                {"apiGroups": ["g"], "resources": ["things"], "verbs": ["list"]},
                {"apiGroups": ["g"], "resources": ["things/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["s1"]},
                {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["*"]},
            ]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "c"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "c"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "r", "namespace": "ns"},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "r", "namespace": "ns"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
        ]
    }

    #[test]
    fn rules_match_groups_resources_subresources_verbs_and_names() {
        let a = Authorizer::new(&docs());
        let ok = |r: Request| a.allows("ns", "sa", &r);
        assert!(ok(req("list", "g", "things", "", "", "")));
        assert!(!ok(req("watch", "g", "things", "", "", "")));
        assert!(!ok(req("list", "h", "things", "", "", "")));
        // A subresource is a resource of its own.
        assert!(!ok(req("patch", "g", "things", "", "", "a")));
        assert!(ok(req("patch", "g", "things", "status", "", "a")));
        assert!(!ok(req("list", "g", "things", "status", "", "")));
        // resourceNames.
        assert!(ok(req("get", "", "secrets", "", "x", "s1")));
        assert!(!ok(req("get", "", "secrets", "", "x", "s2")));
        assert!(!ok(req("get", "", "secrets", "", "x", "")));
        // Wildcards.
        assert!(ok(req("update", "apps", "deployments", "scale", "x", "d")));
        assert!(!ok(req("update", "apps", "deployments", "", "x", "d")));
        // A Role applies in its namespace only.
        assert!(ok(req(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "ns",
            "l"
        )));
        assert!(!ok(req(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "other",
            "l"
        )));
        assert!(!ok(req("get", "coordination.k8s.io", "leases", "", "", "")));
        // Another subject holds nothing.
        assert!(!a.allows("ns", "other", &req("list", "g", "things", "", "", "")));
        assert!(!a.allows("other", "sa", &req("list", "g", "things", "", "", "")));
    }

    #[test]
    fn install_sources_put_the_namespace_and_the_crds_first() {
        let sources = install_sources(&repo_root()).unwrap();
        assert!(sources[0].ends_with("00-namespace.yaml"), "{sources:?}");
        assert_eq!(sources[1..3], CRDS);
    }

    #[test]
    fn requests_are_held_to_the_role_of_the_component_their_user_agent_names() {
        assert_eq!(
            subject_of("bootc-pool-controller/0.1.0"),
            Some(CONTROLLER_SA)
        );
        assert_eq!(
            subject_of("bootc-pool-controller/0.1.0 replica-a"),
            Some(CONTROLLER_SA)
        );
        assert_eq!(subject_of("bootc-node-agent/0.1.0"), Some(AGENT_SA));
        assert_eq!(subject_of("bootc-node-agent"), None);
        assert_eq!(subject_of("bootc-node-agent-x/1"), None);
        assert_eq!(subject_of("kubectl/v1.32.0 (linux/amd64)"), None);
        assert_eq!(subject_of(""), None);

        let docs = vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "agent"},
                "rules": [{"apiGroups": ["g"], "resources": ["things", "things/status"], "verbs": ["get", "patch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "agent"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agent"},
                "subjects": [{"kind": "ServiceAccount", "name": AGENT_SA, "namespace": NAMESPACE}]}),
        ];
        let authorizer = Authorizer::new(&docs);
        let agent = "bootc-node-agent/0.1.0";
        let audit = Audit::of(
            &authorizer,
            [
                (agent, req("get", "g", "things", "", "", "n1"), 2),
                (agent, req("get", "g", "things", "", "", "n1"), 1),
                (agent, req("patch", "g", "things", "status", "", "n1"), 4),
                (agent, req("delete", "g", "things", "", "", "n2"), 1),
                (agent, req("discovery", "", "", "", "", ""), 3),
                (
                    "kubectl/v1.32.0",
                    req("delete", "g", "things", "", "", "n1"),
                    5,
                ),
            ],
        );
        assert_eq!(audit.total(AGENT_SA), 8);
        assert_eq!(audit.total(CONTROLLER_SA), 0);
        assert_eq!(audit.others, 5);
        assert_eq!(
            audit.denied,
            vec![(AGENT_SA, req("delete", "g", "things", "", "", "n2"), 1)]
        );
        assert_eq!(
            audit.unused_grants(&authorizer, AGENT_SA),
            vec![
                "patch g/things".to_string(),
                "get g/things/status".to_string()
            ]
        );
    }
}
