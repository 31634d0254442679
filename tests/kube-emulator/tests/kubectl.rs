//! The `kube-emulator` binary held to kubectl, a real client nobody here wrote: apply of
//! the project's CRDs and samples, printer columns, explain, merge patches, cordon,
//! drain against a PodDisruptionBudget, and `get -w`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The lines a child process prints, as they come.
fn lines_of(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The arguments of `kubectl patch RESOURCE NAME --type merge -p PATCH`.
fn merge_patch<'a>(resource: &'a str, name: &'a str, patch: &'a str) -> [&'a str; 7] {
    ["patch", resource, name, "--type", "merge", "-p", patch]
}

/// A `kube-emulator` process, stopped (by its PID) when dropped.
struct Server {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_kube-emulator"))
            .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let url = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = lines
                .recv_timeout(left)
                .expect("kube-emulator prints its address");
            if let Some(url) = line.strip_prefix("listening on ") {
                break url.to_string();
            }
        };
        Server { child, url, dir }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = kube_emulator::kubectl::command(self.dir.path(), &self.kubeconfig());
        c.args(args);
        c
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .expect("kubectl is on the PATH (.ci/run installs it where it is missing)")
    }

    fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        kube_emulator::kubectl::succeeded(args, &self.kubectl(args))
    }

    fn apply(&self, yaml: &str) {
        let out = self.kubectl_stdin(&["apply", "-f", "-"], yaml);
        assert!(
            out.status.success(),
            "apply failed: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn client(&self) -> kube::Client {
        kube::Client::try_from(kube::Config::new(self.url.parse().unwrap())).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn crds_dir() -> String {
    repo_root().join("crds").to_string_lossy().into_owned()
}

#[test]
fn apply_get_explain_patch_and_watch() {
    let server = Server::start();
    // The project's CRDs (the directory holds the two generated files) and every sample.
    let out = server.ok(&["apply", "-f", &crds_dir()]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/bootcnodepools.node.bootc.dev created"
        ),
        "{out}"
    );
    let samples = repo_root().join("crds/samples");
    let out = server.ok(&["apply", "-f", &samples.to_string_lossy()]);
    for name in ["workers", "databases", "edge", "workers-classic", "apps"] {
        assert!(
            out.contains(&format!("bootcnodepool.node.bootc.dev/{name} created")),
            "{out}"
        );
    }
    assert!(
        out.contains("bootcnode.node.bootc.dev/worker-1 created"),
        "{out}"
    );
    // A second apply changes nothing.
    let out = server.ok(&["apply", "-f", &samples.to_string_lossy()]);
    assert!(
        out.contains("bootcnodepool.node.bootc.dev/workers unchanged"),
        "{out}"
    );

    // Printer columns.
    let out = server.ok(&["get", "bootcnodepools"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "TARGET", "NODES", "UPDATED", "UPDATING", "STAGING", "DEGRADED", "UPTODATE",
            "AGE"
        ],
        "{out}"
    );
    assert_eq!(out.lines().count(), 6, "{out}");
    let out = server.ok(&["get", "bn"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "BOOTED", "VERSION", "STATE", "PROGRESS", "DEGRADED", "AGE"
        ],
        "{out}"
    );
    // The full references only under -o wide.
    let out = server.ok(&["get", "bn", "-o", "wide"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "BOOTED", "VERSION", "STATE", "PROGRESS", "DEGRADED", "AGE", "STAGED",
            "DESIRED", "IMAGE", "BOOTED", "IMAGE"
        ],
        "{out}"
    );
    assert!(out.contains("@sha256:"), "{out}");
    let out = server.ok(&["get", "bootc"]);
    assert!(
        out.contains("bootcnodepool.node.bootc.dev/edge")
            && out.contains("bootcnode.node.bootc.dev/worker-1"),
        "{out}"
    );

    // explain reads the CRD schema through OpenAPI v3.
    let out = server.ok(&["explain", "bootcnodepool.spec.rollout"]);
    for field in [
        "maxUnavailable",
        "maintenanceWindows",
        "haltAfterUnhealthy",
        "Most nodes cordoned",
    ] {
        assert!(out.contains(field), "explain lacks {field}:\n{out}");
    }

    // A merge patch.
    server.ok(&merge_patch(
        "bootcnodepool",
        "workers",
        r#"{"spec":{"rollout":{"paused":true}}}"#,
    ));
    let out = server.ok(&[
        "get",
        "bnp",
        "workers",
        "-o",
        "jsonpath={.spec.rollout.paused} {.metadata.generation}",
    ]);
    assert_eq!(out, "true 2");
    // A patch the schema refuses is refused with the field named.
    let out = server.kubectl(&merge_patch(
        "bnp",
        "workers",
        r#"{"spec":{"rollout":{"maxUnavailable":"0%"}}}"#,
    ));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("spec.rollout.maxUnavailable"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // get -w streams a change.
    let mut watch = server
        .command(&[
            "get",
            "bnp",
            "workers",
            "-w",
            "-o",
            "jsonpath={.spec.rollout.maxUnavailable}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(watch.stdout.take().unwrap());
    let first = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the watch prints the object");
    assert_eq!(first, "1");
    server.ok(&merge_patch(
        "bnp",
        "workers",
        r#"{"spec":{"rollout":{"maxUnavailable":"30%"}}}"#,
    ));
    let next = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the watch prints the change");
    assert_eq!(next, "30%");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn cordon_and_drain_honour_disruption_budgets() {
    let server = Server::start();
    server.apply(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    pool: workers\nstatus:\n  conditions:\n  - type: Ready\n    status: \"True\"\n",
    );
    server.ok(&["cordon", "n1"]);
    assert_eq!(
        server.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]),
        "true"
    );
    server.ok(&["uncordon", "n1"]);
    assert_eq!(
        server.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]),
        ""
    );

    // Two web pods under a budget that allows no disruption, and a DaemonSet pod.
    server.apply("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: agent\n  template:\n    metadata:\n      labels:\n        app: agent\n    spec:\n      containers:\n      - name: a\n        image: x\n");
    server.apply("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: x\n");
    let ds_uid = server.ok(&["get", "ds", "agent", "-o", "jsonpath={.metadata.uid}"]);
    let rs_uid = server.ok(&["get", "rs", "web", "-o", "jsonpath={.metadata.uid}"]);
    let pods = [
        ("web-1", "web", "ReplicaSet", "web", &rs_uid),
        ("web-2", "web", "ReplicaSet", "web", &rs_uid),
        ("agent-n1", "agent", "DaemonSet", "agent", &ds_uid),
    ];
    for (name, app, kind, owner_name, uid) in pods {
        let owner = format!(
            "  ownerReferences:\n  - apiVersion: apps/v1\n    kind: {kind}\n    name: {owner_name}\n    uid: {uid}\n    controller: true\n"
        );
        server.apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels:\n    app: {app}\n{owner}spec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: x\n"
        ));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        for name in ["web-1", "web-2", "agent-n1"] {
            pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})))
                .await
                .unwrap();
        }
    });
    server.apply("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n  namespace: default\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels:\n      app: web\n");

    // Refused while the budget allows nothing: the node is cordoned, no pod is evicted.
    let out = server.kubectl(&[
        "drain",
        "n1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=7s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drain must fail: {stderr}");
    assert!(stderr.contains("disruption budget"), "{stderr}");
    assert_eq!(
        server.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]),
        "true"
    );
    assert_eq!(server.ok(&["get", "pods", "-o", "name"]).lines().count(), 3);

    // With the budget loosened, drain evicts the web pods and leaves the DaemonSet pod.
    server.ok(&merge_patch("pdb", "web", r#"{"spec":{"minAvailable":0}}"#));
    let out = server.ok(&[
        "drain",
        "n1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=30s",
    ]);
    assert!(out.contains("evicted") || out.contains("drained"), "{out}");
    assert_eq!(
        server.ok(&["get", "pods", "-o", "name"]).trim(),
        "pod/agent-n1"
    );
    let requests = server.ok(&["get", "--raw", "/api/v1/nodes/n1"]);
    assert!(requests.contains("\"unschedulable\":true"), "{requests}");
}

#[test]
fn secrets_keep_string_data_as_data_and_never_show_it() {
    let server = Server::start();
    server.apply(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\n\
         data: {username: b2xk, token: a2VwdA==}\nstringData: {username: alice, password: s3cret}\n",
    );
    let get =
        |path: &str| server.ok(&["get", "secret", "creds", "-o", &format!("jsonpath={path}")]);
    // Each string encoded over the value of the same key; other data kept.
    assert_eq!(get("{.data.username}"), "YWxpY2U=");
    assert_eq!(get("{.data.password}"), "czNjcmV0");
    assert_eq!(get("{.data.token}"), "a2VwdA==");
    let json = server.ok(&["get", "secret", "creds", "-o", "json"]);
    let object: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(object.get("stringData").is_none(), "{json}");
    // A later apply merges its strings the same way.
    server.apply(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\n\
         stringData: {username: bob}\n",
    );
    assert_eq!(get("{.data.username}"), "Ym9i");
    // A value that is not a string is refused.
    let out = server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: bad, namespace: default}\nstringData: {n: [1]}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stringData"), "{err}");
}

#[test]
fn events_written_through_either_api_are_read_through_both() {
    let server = Server::start();
    server.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1, namespace: default}\n");
    let uid = server.ok(&["get", "configmap", "cm1", "-o", "jsonpath={.metadata.uid}"]);
    // Written as the controller writes its Events: events.k8s.io/v1.
    server.apply(&format!(
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {{name: cm1.1, namespace: default}}\n\
         eventTime: \"2026-11-27T10:00:00.000000Z\"\nreportingController: example.com/test\n\
         reportingInstance: test-1\naction: Update\nreason: Rebooted\ntype: Normal\n\
         note: node n1 runs v2\nregarding: {{apiVersion: v1, kind: ConfigMap, name: cm1, namespace: default, uid: \"{uid}\"}}\n"
    ));
    let listed = server.ok(&["get", "events", "-n", "default"]);
    assert!(listed.contains("node n1 runs v2"), "{listed}");
    let described = server.ok(&["describe", "configmap", "cm1"]);
    assert!(
        described.contains("Rebooted") && described.contains("node n1 runs v2"),
        "{described}"
    );
    // Written through core/v1, read through events.k8s.io.
    server.apply(
        "apiVersion: v1\nkind: Event\nmetadata: {name: cm1.2, namespace: default}\n\
         message: the old API\nreason: Legacy\ntype: Warning\ncount: 2\n\
         involvedObject: {kind: ConfigMap, name: cm1, namespace: default}\n",
    );
    let note = server.ok(&[
        "get",
        "events.events.k8s.io",
        "cm1.2",
        "-n",
        "default",
        "-o",
        "jsonpath={.note}/{.deprecatedCount}",
    ]);
    assert_eq!(note, "the old API/2");
    // Deleted through one, gone from both.
    server.ok(&["delete", "events.events.k8s.io", "cm1.1", "-n", "default"]);
    let out = server.kubectl(&["get", "event", "cm1.1", "-n", "default"]);
    assert!(!out.status.success());
}
