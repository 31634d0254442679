//! `kubectl bootc` run by the real kubectl against the API emulator: kubectl finds the
//! plugin on the PATH, and each command reads or changes what it says (checked through
//! the API afterwards).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::HOLD_LABEL;
use common::*;
use kube::ResourceExt;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_the_plugin_and_runs_its_help() {
    let cluster = Cluster::start().await;
    let out = cluster.kubectl(&["plugin", "list"]).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    let me = plugin_dir().join("kubectl-bootc");
    assert!(
        listed.lines().any(|l| l.trim() == me.to_str().unwrap()),
        "kubectl plugin list does not list {}:\n{listed}{}",
        me.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let help = cluster.ok(&["bootc", "-h"]).await;
    for command in [
        "status", "history", "pause", "resume", "rollback", "hold", "release", "why",
    ] {
        assert!(help.contains(command), "{command} missing from:\n{help}");
    }
    assert!(help.contains("-n/--namespace is accepted"), "{help}");
    let usage = cluster.fails(&["bootc", "frobnicate"]).await;
    assert!(usage.starts_with("error: "), "{usage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_prints_the_pools_and_their_nodes() {
    let cluster = rolling_workers().await;
    let text = cluster.ok(&["bootc", "status"]).await;
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "NAME      TARGET         VERSION   NODES   UPDATED   UPDATING   DEGRADED   SLOTS   STATE"
    );
    assert_eq!(
        lines[1],
        "workers   222222222222   v2        3       1         1          0          1/1     RollingOut"
    );
    assert_eq!(lines[2], "");
    assert_eq!(
        lines[3],
        "NAME   POOL      STATE       BOOTED         STAGED         TARGET         SINCE   PROGRESS"
    );
    let w1: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(
        w1[..6],
        ["w1", "workers", "Idle", "222222222222", "-", "222222222222"]
    );
    assert!(w1[6].starts_with("5m"), "since {}", w1[6]);
    assert_eq!(w1[7], "-");
    assert!(
        lines[5].starts_with("w2     workers   Rebooting   111111111111   222222222222"),
        "{text}"
    );
    assert!(lines[6].starts_with("w3     workers   Staged "), "{text}");

    // -n is accepted and ignored; the pool argument narrows; -o json and yaml give the objects.
    // The two runs may be a second apart, so the ages (and the column widths) may differ.
    assert_eq!(
        ages_masked(&cluster.ok(&["bootc", "status", "-n", "kube-system"]).await),
        ages_masked(&text)
    );
    let json: Value = serde_json::from_str(
        &cluster
            .ok(&["bootc", "status", "workers", "-o", "json"])
            .await,
    )
    .unwrap();
    let kinds: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["BootcNodePool", "BootcNode", "BootcNode", "BootcNode"]
    );
    assert_eq!(json["items"][0]["status"]["targetDigest"], digest('2'));
    let yaml: Value =
        serde_yaml_ng::from_str(&cluster.ok(&["bootc", "status", "-o", "yaml"]).await).unwrap();
    assert_eq!(yaml["items"][3]["metadata"]["name"], "w3");

    let missing = cluster.fails(&["bootc", "status", "nope"]).await;
    assert_eq!(
        missing,
        "error: bootcnodepools.node.bootc.dev \"nope\" not found\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_names_what_holds_a_pool_and_a_node() {
    let cluster = rolling_workers().await;
    controller_plans(&cluster, "workers").await;
    let w3 = cluster.ok(&["bootc", "why", "w3"]).await;
    println!("{w3}");
    assert!(w3.starts_with("node/w3 is not progressing:\n"), "{w3}");
    assert!(
        w3.contains("waiting for a reboot slot: reboot budget full: 1/1 slots in use (maxUnavailable 1): held by w2 (gate BudgetFull"),
        "{w3}"
    );
    let pool = cluster.ok(&["bootc", "why", "workers"]).await;
    println!("{pool}");
    assert!(pool.contains("reboot budget full"), "{pool}");
    let w1 = cluster.ok(&["bootc", "why", "w1"]).await;
    assert_eq!(
        w1,
        "node/w1: up to date: runs its pool's target 222222222222\n"
    );

    // Paused and held, as the admin's own commands leave them and the controller then
    // says.
    cluster.ok(&["bootc", "pause", "workers"]).await;
    cluster.ok(&["bootc", "hold", "w3"]).await;
    controller_plans(&cluster, "workers").await;
    let w3 = cluster.ok(&["bootc", "why", "w3"]).await;
    println!("{w3}");
    assert!(
        w3.contains("held: the Node has the label node.bootc.dev/hold=true"),
        "{w3}"
    );
    assert!(
        w3.contains("paused (gate Paused: no new reboot slot, on purpose)"),
        "{w3}"
    );

    let neither = cluster.fails(&["bootc", "why", "nobody"]).await;
    assert!(
        neither.starts_with("error: \"nobody\" is neither a BootcNodePool nor a node"),
        "{neither}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_hold_and_release_change_the_objects() {
    let cluster = rolling_workers().await;

    let out = cluster.ok(&["bootc", "pause", "workers"]).await;
    assert_eq!(out, "bootcnodepool.node.bootc.dev/workers paused\n");
    assert!(cluster.pool("workers").await.spec.rollout.paused);
    let again = cluster.ok(&["bootc", "pause", "workers"]).await;
    assert!(again.contains("already paused (no change)"), "{again}");
    let status = cluster.ok(&["bootc", "status"]).await;
    assert!(
        status.lines().nth(1).unwrap().ends_with("Paused"),
        "{status}"
    );
    cluster.ok(&["bootc", "resume", "workers"]).await;
    let pool = cluster.pool("workers").await;
    assert!(!pool.spec.rollout.paused);
    // The merge patch touched nothing else.
    assert_eq!(
        pool.spec.rollout.max_unavailable,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)
    );

    let out = cluster.ok(&["bootc", "hold", "w2"]).await;
    assert!(out.starts_with("node/w2 held"), "{out}");
    let labels = cluster.node("w2").await.labels().clone();
    assert_eq!(labels.get(HOLD_LABEL).map(String::as_str), Some("true"));
    assert_eq!(labels.get("pool").map(String::as_str), Some("workers"));
    let status = cluster.ok(&["bootc", "status", "workers"]).await;
    assert!(status.contains("\nw2     workers   Held "), "{status}");
    cluster.ok(&["bootc", "release", "w2"]).await;
    assert!(!cluster.node("w2").await.labels().contains_key(HOLD_LABEL));
    let again = cluster.ok(&["bootc", "release", "w2"]).await;
    assert!(again.contains("is not held (no change)"), "{again}");

    let missing = cluster.fails(&["bootc", "hold", "nosuch"]).await;
    assert_eq!(missing, "error: nodes \"nosuch\" not found\n");
    let missing = cluster.fails(&["bootc", "pause", "nosuch"]).await;
    assert!(
        missing.starts_with("error: ") && missing.contains("nosuch"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_pins_the_previous_digest_and_says_how_to_follow_the_tag_again() {
    let cluster = rolling_workers().await;

    let history = cluster.ok(&["bootc", "history", "workers"]).await;
    println!("{history}");
    let rows: Vec<&str> = history.lines().collect();
    assert!(
        rows[0].starts_with("DIGEST          VERSION   IMAGE"),
        "{history}"
    );
    assert!(
        rows[1].starts_with("222222222222*   v2        registry.test/os@sha256:2222"),
        "{history}"
    );
    assert!(
        rows[2].starts_with("111111111111    v1        registry.test/os@sha256:1111"),
        "{history}"
    );

    let bad = cluster
        .fails(&["bootc", "rollback", "workers", "--to", "3333333"])
        .await;
    assert!(
        bad.starts_with("error: --to 3333333: no deployHistory entry"),
        "{bad}"
    );
    let current = cluster
        .fails(&["bootc", "rollback", "workers", "--to", &digest('2')])
        .await;
    assert!(current.contains("is the current target"), "{current}");
    assert_eq!(
        cluster.pool("workers").await.spec.image.r#ref,
        "registry.test/os:stable"
    );

    let out = cluster.ok(&["bootc", "rollback", "workers", "--yes"]).await;
    println!("{out}");
    assert!(
        out.starts_with("bootcnodepool.node.bootc.dev/workers rolled back\n"),
        "{out}"
    );
    assert!(
        out.contains(r#"-p '{"spec":{"image":{"ref":"registry.test/os:stable"}}}'"#),
        "{out}"
    );
    assert_eq!(cluster.pool("workers").await.spec.image.r#ref, pin('1'));

    // --to by prefix gives the same pin.
    cluster
        .ok(&["bootc", "rollback", "workers", "--to", "1111111", "--yes"])
        .await;
    assert_eq!(cluster.pool("workers").await.spec.image.r#ref, pin('1'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_is_found_as_kubectl_finds_it() {
    let cluster = Cluster::start().await;
    cluster
        .create_pool("workers", json!({}), rolling_status('2', in_progress()))
        .await;
    let kubeconfig = cluster.kubeconfig();
    let kubeconfig = kubeconfig.to_str().unwrap();

    // --kubeconfig after the plugin's name, without KUBECONFIG.
    let mut c = cluster.command(&["bootc", "status", "--kubeconfig", kubeconfig]);
    c.env_remove("KUBECONFIG");
    let out = c.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nworkers "));

    // The kubeconfig's own context by name, and one it does not have.
    cluster
        .ok(&["bootc", "status", "--context", "emulator"])
        .await;
    let e = cluster
        .fails(&["bootc", "status", "--context", "elsewhere"])
        .await;
    assert!(
        e.starts_with("error: kubeconfig: ") && e.contains("elsewhere"),
        "{e}"
    );

    // A kubeconfig that is not there.
    let e = cluster
        .fails(&["bootc", "status", "--kubeconfig", "/nonexistent/kubeconfig"])
        .await;
    assert!(
        e.starts_with("error: kubeconfig /nonexistent/kubeconfig: "),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_node_shows_its_progress() {
    let cluster = Cluster::start().await;
    let pool = cluster
        .create_pool("workers", json!({}), rolling_status('2', in_progress()))
        .await;
    cluster.create_node("w1", "workers", true).await;
    let mut status = agent('1', ' ', "Staging");
    status["progress"] = json!({
        "imageDigest": digest('2'),
        "bytesDone": 150 * 1024 * 1024, "bytesTotal": 300 * 1024 * 1024,
        "step": "pulling", "stepsDone": 1, "stepsTotal": 3, "summary": "50%",
    });
    cluster
        .create_bootc_node("w1", &pool, '2', json!({}), status)
        .await;
    let text = cluster.ok(&["bootc", "status"]).await;
    println!("{text}");
    let row: Vec<&str> = text.lines().last().unwrap().split_whitespace().collect();
    assert_eq!(row[..3], ["w1", "workers", "Staging"], "{text}");
    assert_eq!(row[7..], ["pulling", "50%", "(150Mi/300Mi)"], "{text}");
    let why = cluster.ok(&["bootc", "why", "w1"]).await;
    assert_eq!(
        why,
        "node/w1 is progressing:\n  - staging 222222222222: pulling 50% (150Mi/300Mi)\n"
    );
}

/// `text` with each line's words joined by one space and every age (`59s`, `5m`, `5m1s`)
/// written `<age>`: what two runs of a command a second apart have in common.
fn ages_masked(text: &str) -> String {
    let is_age = |word: &str| {
        word.starts_with(|c: char| c.is_ascii_digit())
            && (word.ends_with('s') || word.ends_with('m'))
            && word
                .chars()
                .all(|c| c.is_ascii_digit() || c == 'm' || c == 's')
    };
    text.lines()
        .map(|line| {
            line.split_whitespace()
                .map(|w| if is_age(w) { "<age>" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn ages_are_masked_and_nothing_else() {
    assert_eq!(
        ages_masked("w1   workers   Idle   222222222222   5m1s   -\nv2  1/1  59s  3"),
        "w1 workers Idle 222222222222 <age> -\nv2 1/1 <age> 3"
    );
    assert_eq!(ages_masked("a  5m  b"), ages_masked("a 5m59s b"));
    assert_ne!(ages_masked("Idle 5m"), ages_masked("Rebooting 5m"));
}
