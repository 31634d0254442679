//! The manifests: `install.yaml` is what the project renders; every manifest parses and
//! applies to the API emulator with kubectl; the pods run the binaries with flags they
//! accept, with the privileges the architecture allows and no more.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use clap::Parser;
use common::ok;
use deploy_check::{IMAGE, NAMESPACE, documents, find, repo_root};
use kube_emulator::Emulator;
use serde_json::Value;

fn read(file: &str) -> String {
    std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn install() -> Vec<Value> {
    documents(&read(deploy_check::INSTALL)).unwrap()
}

#[test]
fn install_yaml_equals_what_the_project_renders() {
    let rendered = deploy_check::render(&repo_root()).unwrap();
    assert!(
        read(deploy_check::INSTALL) == rendered,
        "{} differs from its sources: run `cargo xtask gen` and commit the result",
        deploy_check::INSTALL
    );
}

#[test]
fn every_manifest_parses_and_names_its_objects() {
    let root = repo_root();
    let mut files = deploy_check::manifest_files(&root).unwrap();
    files.push(deploy_check::INSTALL.to_string());
    let namespaced = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "DaemonSet",
        "PodDisruptionBudget",
    ];
    for file in &files {
        let docs = documents(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!docs.is_empty(), "{file}: no objects");
        for d in &docs {
            let kind = d["kind"].as_str().unwrap_or_else(|| panic!("{file}: {d}"));
            assert!(
                d["apiVersion"].is_string(),
                "{file}: {kind} without apiVersion"
            );
            assert!(
                d["metadata"]["name"].is_string(),
                "{file}: {kind} without a name"
            );
            if namespaced.contains(&kind) {
                assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{file}: {kind}");
            } else {
                assert!(d["metadata"]["namespace"].is_null(), "{file}: {kind}");
            }
        }
    }
    // install.yaml holds every object of the manifests and the CRDs, once.
    let all = install();
    let mut names: Vec<String> = all
        .iter()
        .map(|d| format!("{}/{}", d["kind"], d["metadata"]["name"]))
        .collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "an object appears twice: {names:?}");
    for kind in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "DaemonSet",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(all.iter().any(|d| d["kind"] == kind), "no {kind}");
    }
}

fn stored(emulator: &Emulator, docs: &[Value]) {
    let handle = emulator.handle();
    for d in docs {
        let kind = d["kind"].as_str().unwrap();
        let (group, plural) = match kind {
            "Namespace" => ("", "namespaces"),
            "CustomResourceDefinition" => ("apiextensions.k8s.io", "customresourcedefinitions"),
            "ServiceAccount" => ("", "serviceaccounts"),
            "ClusterRole" => ("rbac.authorization.k8s.io", "clusterroles"),
            "ClusterRoleBinding" => ("rbac.authorization.k8s.io", "clusterrolebindings"),
            "Role" => ("rbac.authorization.k8s.io", "roles"),
            "RoleBinding" => ("rbac.authorization.k8s.io", "rolebindings"),
            "Deployment" => ("apps", "deployments"),
            "DaemonSet" => ("apps", "daemonsets"),
            "PodDisruptionBudget" => ("policy", "poddisruptionbudgets"),
            "ValidatingAdmissionPolicy" => (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies",
            ),
            "ValidatingAdmissionPolicyBinding" => (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicybindings",
            ),
            other => panic!("no resource known for kind {other}"),
        };
        let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = d["metadata"]["name"].as_str().unwrap();
        let got = handle
            .get(group, plural, ns, name)
            .unwrap_or_else(|| panic!("{kind} {ns}/{name} was not stored"));
        if let Some(spec) = d.get("spec") {
            // What was applied is what is stored (the emulator adds no defaults to
            // built-in kinds, and the CRDs' specs are stored as written).
            assert_eq!(&got["spec"], spec, "{kind} {name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_yaml_and_each_manifest_apply_with_kubectl() {
    let emulator = Emulator::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    emulator
        .write_kubeconfig(&dir.path().join("kubeconfig"))
        .unwrap();

    // One command installs everything.
    let out = ok(dir.path(), &["apply", "-f", deploy_check::INSTALL]).await;
    let docs = install();
    assert_eq!(
        out.lines().count(),
        docs.len(),
        "one line per object:\n{out}"
    );
    stored(&emulator, &docs);

    // Applying again changes nothing. kubectl always sends a PodDisruptionBudget's
    // selector (its patch strategy is `replace`) and so says "configured"; what is stored
    // stays as it was, generation included.
    let pdb = || {
        emulator.handle().get(
            "policy",
            "poddisruptionbudgets",
            NAMESPACE,
            "bootc-pool-controller",
        )
    };
    let before = pdb().expect("the controller's disruption budget");
    let again = ok(dir.path(), &["apply", "-f", deploy_check::INSTALL]).await;
    for line in again.lines() {
        let resent = line == "poddisruptionbudget.policy/bootc-pool-controller configured";
        assert!(line.ends_with(" unchanged") || resent, "{line}\n{again}");
    }
    let after = pdb().unwrap();
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(
        after["metadata"]["generation"],
        before["metadata"]["generation"]
    );
    stored(&emulator, &docs);

    // The sources, file by file, on a fresh server (CRDs first, as install.yaml orders them).
    drop(emulator);
    let emulator = Emulator::start().await.unwrap();
    emulator
        .write_kubeconfig(&dir.path().join("kubeconfig"))
        .unwrap();
    let mut all = Vec::new();
    for file in deploy_check::install_sources(&repo_root()).unwrap() {
        ok(dir.path(), &["apply", "-f", &file]).await;
        all.extend(documents(&read(&file)).unwrap());
    }
    stored(&emulator, &all);

    // kubectl reads them back: the workloads and the policy.
    let got = ok(
        dir.path(),
        &[
            "get",
            "-n",
            NAMESPACE,
            "deployments,daemonsets,serviceaccounts",
            "-o",
            "name",
        ],
    )
    .await;
    for want in [
        "deployment.apps/bootc-pool-controller",
        "daemonset.apps/bootc-node-agent",
        "serviceaccount/bootc-pool-controller",
        "serviceaccount/bootc-node-agent",
    ] {
        assert!(got.lines().any(|l| l == want), "{want}:\n{got}");
    }
    let got = ok(
        dir.path(),
        &["get", "validatingadmissionpolicies", "-o", "name"],
    )
    .await;
    assert!(got.contains("bootc-node-agent-own-node"), "{got}");
}

fn pod_spec<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    &find(docs, kind, name).unwrap_or_else(|| panic!("{kind}/{name}"))["spec"]["template"]["spec"]
}

fn args_of(container: &Value) -> Vec<String> {
    container["command"]
        .as_array()
        .into_iter()
        .chain(container["args"].as_array())
        .flatten()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// `$(VAR)` references expanded from the container's env, as the kubelet does, with
/// downward-API values given by `fields`.
fn expand(args: &[String], container: &Value, fields: &[(&str, &str)]) -> Vec<String> {
    let mut vars = Vec::new();
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap();
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some(path) => fields
                .iter()
                .find(|(p, _)| *p == path)
                .unwrap_or_else(|| panic!("no value for field {path}"))
                .1
                .to_string(),
            None => e["value"].as_str().unwrap_or_default().to_string(),
        };
        vars.push((format!("$({name})"), value));
    }
    args.iter()
        .map(|a| {
            let mut a = a.clone();
            for (k, v) in &vars {
                a = a.replace(k, v);
            }
            assert!(!a.contains("$("), "{a}: an undefined variable");
            a
        })
        .collect()
}

#[test]
fn the_agent_daemonset_runs_as_the_architecture_says() {
    let docs = install();
    let spec = pod_spec(&docs, "DaemonSet", "bootc-node-agent");
    assert_eq!(spec["serviceAccountName"], "bootc-node-agent");
    assert_eq!(spec["priorityClassName"], "system-node-critical");
    assert_eq!(
        spec["nodeSelector"],
        serde_json::json!({ bootc_crds::MANAGED_LABEL: "" })
    );
    assert_ne!(spec["hostPID"], true);
    assert_ne!(spec["hostNetwork"], true);
    assert_ne!(spec["hostIPC"], true);
    assert_eq!(spec["securityContext"]["runAsUser"], 0);
    assert_eq!(spec["securityContext"]["seLinuxOptions"]["type"], "spc_t");
    let tolerates = |key: &str, effect: &str| {
        spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == key && t["operator"] == "Exists" && t["effect"] == effect)
    };
    assert!(tolerates("node.kubernetes.io/unschedulable", "NoSchedule"));
    assert!(tolerates("node.kubernetes.io/not-ready", "NoExecute"));
    assert!(tolerates("node.kubernetes.io/unreachable", "NoExecute"));

    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], IMAGE);
    assert_eq!(c["securityContext"]["privileged"], false);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        c["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    // None added: systemd and logind grant its calls to root on the bus (see agent_pod's
    // capability experiment).
    assert!(
        c["securityContext"]["capabilities"]["add"].is_null(),
        "{}",
        c["securityContext"]
    );
    assert!(c["resources"]["requests"].is_object() && c["resources"]["limits"].is_object());
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"),
        "{env:?}"
    );

    // The agent accepts its command line, and it names the mounted paths.
    let argv = expand(&args_of(c), c, &[("spec.nodeName", "worker-1")]);
    assert_eq!(argv[0], "/usr/bin/bootc-node-agent");
    let args = bootc_node_agent::config::Args::try_parse_from(
        argv.iter()
            .map(String::as_str)
            .chain(["--node-name", "worker-1"]),
    )
    .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let config = bootc_node_agent::config::Config::try_from(args).unwrap();
    let socket = config
        .system_bus_address
        .strip_prefix("unix:path=")
        .unwrap()
        .to_string();
    let work = config.host_work_dir.to_str().unwrap().to_string();
    assert_eq!(
        config.host_root,
        Path::new("/"),
        "host paths at their own paths"
    );

    // Exactly three host paths, each mounted at the path the host has it at.
    let volumes = spec["volumes"].as_array().unwrap();
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert_eq!(volumes.len(), 3, "{volumes:?}");
    let mut host_paths = Vec::new();
    for m in mounts {
        let v = volumes
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap_or_else(|| panic!("no volume for {m}"));
        let path = v["hostPath"]["path"].as_str().expect("a hostPath volume");
        assert_eq!(m["mountPath"], path, "{m}");
        assert_ne!(m["readOnly"], true, "{m}");
        host_paths.push(path.to_string());
    }
    host_paths.sort();
    let mut want = vec![socket, work, "/run/ostree".to_string()];
    want.sort();
    assert_eq!(host_paths, want);
}

/// The controller's flags, as declared in its configuration (the binary keeps its
/// `Args` private): every `--flag` the Deployment passes is a field of `Args`.
fn controller_flags() -> Vec<String> {
    let source = read("controller/src/config.rs");
    let args = source
        .split("pub struct Args {")
        .nth(1)
        .and_then(|s| s.split("\n}\n").next())
        .expect("controller/src/config.rs declares `pub struct Args`");
    args.lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split(':').next())
        .map(|field| format!("--{}", field.replace('_', "-")))
        .collect()
}

#[test]
fn the_controller_deployment_runs_as_the_architecture_says() {
    let docs = install();
    let deployment = find(&docs, "Deployment", "bootc-pool-controller").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let spec = pod_spec(&docs, "Deployment", "bootc-pool-controller");
    assert_eq!(spec["serviceAccountName"], "bootc-pool-controller");
    let c = &spec["containers"][0];
    assert_eq!(c["image"], IMAGE);

    // Leader election from the downward API, and flags the controller has.
    let argv = expand(
        &args_of(c),
        c,
        &[
            ("metadata.namespace", NAMESPACE),
            ("metadata.name", "bootc-pool-controller-abc"),
        ],
    );
    assert_eq!(argv[0], "/usr/bin/bootc-pool-controller");
    assert!(
        argv.contains(&format!("--lease-namespace={NAMESPACE}")),
        "{argv:?}"
    );
    assert!(
        argv.contains(&"--identity=bootc-pool-controller-abc".to_string()),
        "{argv:?}"
    );
    let flags = controller_flags();
    assert!(
        flags.contains(&"--lease-namespace".to_string()),
        "{flags:?}"
    );
    for a in &argv[1..] {
        let flag = a.split('=').next().unwrap();
        assert!(
            flags.iter().any(|f| f == flag),
            "{flag} is not a controller flag: {flags:?}"
        );
    }

    // Probes and metrics on the port the controller serves.
    let metrics_addr = argv
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-addr="))
        .unwrap_or("0.0.0.0:8080");
    let port: u16 = metrics_addr.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(c["ports"][0]["containerPort"], port);
    assert_eq!(c["ports"][0]["name"], "metrics");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());

    // Pod Security "restricted": non-root, no escalation, no capabilities, seccomp.
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(
        c["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    assert!(spec["volumes"].is_null() && spec["hostNetwork"].is_null());
}

#[test]
fn the_namespace_admits_the_agent_and_says_why() {
    let docs = install();
    let ns = find(&docs, "Namespace", NAMESPACE).unwrap();
    // hostPath volumes and the spc_t SELinux type are refused by "baseline".
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let source = read("deploy/manifests/00-namespace.yaml");
    assert!(source.contains("hostPath") || source.contains("host paths"));
}

#[test]
fn the_admission_policy_names_the_agents_service_account() {
    let docs = install();
    let policy = find(
        &docs,
        "ValidatingAdmissionPolicy",
        "bootc-node-agent-own-node",
    )
    .unwrap();
    let binding = find(
        &docs,
        "ValidatingAdmissionPolicyBinding",
        "bootc-node-agent-own-node",
    )
    .unwrap();
    assert_eq!(binding["spec"]["policyName"], "bootc-node-agent-own-node");
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    assert_eq!(policy["spec"]["failurePolicy"], "Fail");
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    let sa = pod_spec(&docs, "DaemonSet", "bootc-node-agent")["serviceAccountName"]
        .as_str()
        .unwrap();
    // The service account by name, in any namespace: an overlay that installs elsewhere
    // does not rewrite the expression (tests/admission.rs evaluates it).
    assert!(
        condition.contains("'system:serviceaccount:'") && condition.contains(&format!("':{sa}'")),
        "{condition}"
    );
    assert!(!condition.contains(NAMESPACE), "{condition}");
}
