//! The kustomize install: every overlay in `deploy/overlays/` renders with the real
//! `kubectl kustomize` (kubectl's built-in kustomize, no other tool), names its objects as
//! `install.yaml` does, and applies to the API emulator with `kubectl apply -k`; the
//! default overlay is exactly `install.yaml`, the others are it with or without their
//! parts; the base's generated files are current.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::ok;
use deploy_check::{NAMESPACE, documents, find, repo_root};
use kube_emulator::Emulator;
use serde_json::{Value, json};
use xtask::kustomize::{OVERLAYS, PROMETHEUS_RULE, PROMETHEUS_RULE_NAME, RULES};

/// The overlays an admin is told about; every directory of `deploy/overlays/` is checked.
const WANTED: [&str; 3] = ["default", "monitoring", "no-admission-policy"];

fn read(file: &str) -> String {
    std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn install() -> Vec<Value> {
    documents(&read(deploy_check::INSTALL)).unwrap()
}

/// Every overlay directory's name, sorted.
fn overlays() -> Vec<String> {
    let dir = repo_root().join(OVERLAYS);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("kustomization.yaml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `kubectl kustomize deploy/overlays/NAME`, parsed.
async fn render(name: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{OVERLAYS}/{name}");
    let text = ok(dir.path(), &["kustomize", &path]).await;
    documents(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `Kind namespace/name` of an object.
fn key(d: &Value) -> String {
    format!(
        "{} {}/{}",
        d["kind"].as_str().unwrap_or_default(),
        d["metadata"]["namespace"].as_str().unwrap_or_default(),
        d["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The objects sorted by [`key`], for comparing sets of objects.
fn sorted(mut docs: Vec<Value>) -> Vec<Value> {
    docs.sort_by_key(key);
    docs
}

fn keys(docs: &[Value]) -> Vec<String> {
    docs.iter().map(key).collect()
}

#[test]
fn the_bases_generated_files_are_current() {
    let root = repo_root();
    for (file, text) in xtask::kustomize::render_all(&root).unwrap() {
        assert!(
            read(&file) == text,
            "{file} differs from its sources: run `cargo xtask gen` and commit the result"
        );
    }
}

#[tokio::test]
async fn every_overlay_renders_and_names_its_objects() {
    let names = overlays();
    for want in WANTED {
        assert!(
            names.iter().any(|n| n == want),
            "no overlay {want}: {names:?}"
        );
    }
    let cluster_scoped = [
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ];
    for name in &names {
        let docs = render(name).await;
        assert!(!docs.is_empty(), "{name}: no objects");
        for d in &docs {
            let kind = d["kind"].as_str().unwrap_or_else(|| panic!("{name}: {d}"));
            assert!(
                d["apiVersion"].is_string(),
                "{name}: {kind} without apiVersion"
            );
            assert!(
                d["metadata"]["name"].is_string(),
                "{name}: {kind} without a name"
            );
            if cluster_scoped.contains(&kind) {
                assert!(d["metadata"]["namespace"].is_null(), "{name}: {kind}");
            } else {
                assert_eq!(d["metadata"]["namespace"], NAMESPACE, "{name}: {kind}");
            }
        }
        let mut all = keys(&docs);
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count, "{name}: an object appears twice: {all:?}");
        // The namespace and the CRDs come first, whatever order kustomize keeps.
        assert_eq!(docs[0]["kind"], "Namespace", "{name}");
        assert!(
            docs.iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition")
                .count()
                == 2,
            "{name}: the CRDs are part of every install"
        );
    }
}

#[tokio::test]
async fn the_default_overlay_is_install_yaml() {
    let rendered = sorted(render("default").await);
    let install = sorted(install());
    assert_eq!(keys(&rendered), keys(&install));
    for (got, want) in rendered.iter().zip(&install) {
        assert_eq!(got, want, "{}", key(want));
    }
}

#[tokio::test]
async fn no_admission_policy_is_the_default_without_the_policy() {
    let policy = documents(&read("deploy/manifests/30-admission-policy.yaml")).unwrap();
    assert!(!policy.is_empty());
    let want: Vec<Value> = install()
        .into_iter()
        .filter(|d| !policy.iter().any(|p| key(p) == key(d)))
        .collect();
    assert_eq!(want.len() + policy.len(), install().len());
    let got = render("no-admission-policy").await;
    assert!(
        !got.iter().any(|d| d["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"))),
        "{:?}",
        keys(&got)
    );
    assert_eq!(sorted(got), sorted(want));
}

#[tokio::test]
async fn monitoring_is_the_default_plus_scraping_and_the_alerts() {
    let got = render("monitoring").await;
    let mut own = Vec::new();
    for file in ["service.yaml", "servicemonitor.yaml", "prometheusrule.yaml"] {
        own.extend(documents(&read(&format!("{OVERLAYS}/monitoring/{file}"))).unwrap());
    }
    let want: Vec<Value> = install().into_iter().chain(own).collect();
    assert_eq!(sorted(got.clone()), sorted(want));

    // The rule carries exactly the groups of the rules file.
    let rule = find(&got, "PrometheusRule", PROMETHEUS_RULE_NAME).unwrap();
    let groups = xtask::kustomize::rule_groups(&read(RULES)).unwrap();
    assert_eq!(
        rule["spec"]["groups"], groups,
        "{PROMETHEUS_RULE} vs {RULES}"
    );

    // The Service selects the controller's pods on their metrics port, and the
    // ServiceMonitor selects the Service and scrapes that port; its job, the Service's
    // name, is the one the alerts name.
    let deployment = find(&got, "Deployment", "bootc-pool-controller").unwrap();
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let service = find(&got, "Service", "bootc-pool-controller").unwrap();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service's selector {k}");
    }
    let container_port = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    let port = &service["spec"]["ports"][0];
    assert_eq!(port["targetPort"], container_port["name"]);
    assert_eq!(port["port"], container_port["containerPort"]);
    let monitor = find(&got, "ServiceMonitor", "bootc-pool-controller").unwrap();
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "the ServiceMonitor's selector {k}"
        );
    }
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], port["name"]);
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert!(
        monitor["spec"]["jobLabel"].is_null(),
        "the job is the Service's name"
    );
    let job = format!(
        "up{{job=\"{}\"}}",
        service["metadata"]["name"].as_str().unwrap()
    );
    assert!(read(RULES).contains(&job), "{RULES} does not select {job}");
}

/// Minimal CRDs for the Prometheus Operator's two kinds, so that the monitoring overlay
/// can be applied to the emulator.
fn operator_crds() -> String {
    let crd = |kind: &str, plural: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
            "spec": {
                "group": "monitoring.coreos.com",
                "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                          "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        })
        .to_string()
    };
    format!(
        "{}\n---\n{}\n",
        crd("ServiceMonitor", "servicemonitors"),
        crd("PrometheusRule", "prometheusrules")
    )
}

/// The API group and plural of a kind (the regular English plural every one of ours has).
fn resource(d: &Value) -> (String, String) {
    let api_version = d["apiVersion"].as_str().unwrap();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = d["kind"].as_str().unwrap().to_lowercase();
    let plural = match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{kind}s"),
    };
    (group.to_string(), plural)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_applies_with_kubectl() {
    for name in overlays() {
        let emulator = Emulator::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        emulator
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        let docs = render(&name).await;
        if docs
            .iter()
            .any(|d| d["apiVersion"] == "monitoring.coreos.com/v1")
        {
            let crds = dir.path().join("operator-crds.yaml");
            std::fs::write(&crds, operator_crds()).unwrap();
            ok(dir.path(), &["apply", "-f", crds.to_str().unwrap()]).await;
        }
        let path = format!("{OVERLAYS}/{name}");
        let out = ok(dir.path(), &["apply", "-k", &path]).await;
        assert_eq!(
            out.lines().count(),
            docs.len(),
            "{name}: one line per object:\n{out}"
        );
        let handle = emulator.handle();
        for d in &docs {
            let (group, plural) = resource(d);
            let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
            let object = d["metadata"]["name"].as_str().unwrap();
            let stored = handle
                .get(&group, &plural, ns, object)
                .unwrap_or_else(|| panic!("{name}: {} was not stored", key(d)));
            if let Some(spec) = d.get("spec") {
                assert_eq!(&stored["spec"], spec, "{name}: {}", key(d));
            }
        }
        // Applying again changes nothing. kubectl always sends a PodDisruptionBudget's
        // selector (its patch strategy is `replace`) and so says "configured" for it;
        // every stored object stays as it was, generation included.
        let before: Vec<_> = docs.iter().map(|d| stored_of(&handle, d)).collect();
        let again = ok(dir.path(), &["apply", "-k", &path]).await;
        for line in again.lines() {
            let resent =
                line.starts_with("poddisruptionbudget.policy/") && line.ends_with(" configured");
            assert!(
                line.ends_with(" unchanged") || resent,
                "{name}: {line}\n{again}"
            );
        }
        for (d, was) in docs.iter().zip(&before) {
            let now = stored_of(&handle, d);
            assert_eq!(now["spec"], was["spec"], "{name}: {}", key(d));
            assert_eq!(
                now["metadata"]["generation"],
                was["metadata"]["generation"],
                "{name}: {}",
                key(d)
            );
        }
    }
}

/// What the emulator stores for `d`.
fn stored_of(handle: &kube_emulator::Handle, d: &Value) -> Value {
    let (group, plural) = resource(d);
    let ns = d["metadata"]["namespace"].as_str().unwrap_or_default();
    let object = d["metadata"]["name"].as_str().unwrap();
    handle
        .get(&group, &plural, ns, object)
        .unwrap_or_else(|| panic!("{} was not stored", key(d)))
}
