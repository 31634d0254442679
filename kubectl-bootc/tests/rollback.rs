//! `kubectl bootc rollback` run by the real kubectl against the API emulator: it goes
//! only to a digest the controller targeted in the pool's own repository, shows what it
//! will do, and writes only once confirmed (`--yes`; never by default without a
//! terminal to ask on).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

/// An entry of `deployHistory`; `origin` as the controller writes it, or none (an entry
/// written before origins were recorded).
fn entry(image: String, c: char, origin: Option<&str>, last: i64) -> Value {
    let mut e = json!({
        "digest": digest(c), "image": image, "version": format!("v{c}"),
        "nodeCount": 1, "firstDeployed": ago(last + 60), "lastDeployed": ago(last),
    });
    if let Some(origin) = origin {
        e["origin"] = json!(origin);
    }
    e
}

/// Pool `workers` on 3 whose newest entries are what single nodes reported: a foreign
/// image and one of its own repository; 2 is the last digest the controller targeted.
async fn lied_to(cluster: &Cluster) {
    let mut status = rolling_status('3', in_progress());
    status["deployHistory"] = json!([
        entry(
            format!("evil.example/os@{}", digest('9')),
            '9',
            Some("Observed"),
            0
        ),
        entry(pin('8'), '8', Some("Observed"), 5),
        entry(pin('3'), '3', Some("Targeted"), 10),
        entry(pin('2'), '2', Some("Targeted"), 60),
        entry(pin('1'), '1', None, 120),
    ]);
    cluster.create_pool("workers", json!({}), status).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_goes_only_to_a_targeted_digest_and_asks_first() {
    let cluster = Cluster::start().await;
    lied_to(&cluster).await;
    let unchanged = "registry.test/os:stable";

    // Without a terminal to ask on and without --yes: shows the choice, writes nothing.
    let out = cluster.kubectl(&["bootc", "rollback", "workers"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&digest('2')), "{stderr}");
    assert!(stderr.contains(&pin('2')), "{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    assert!(!stderr.contains(&digest('9')), "{stderr}");
    assert_eq!(cluster.pool("workers").await.spec.image.r#ref, unchanged);

    // What only nodes reported is never a rollback target, even when named.
    for (named, why) in [
        ("9999999", "another repository"),
        ("8888888", "only nodes reported"),
    ] {
        let e = cluster
            .fails(&["bootc", "rollback", "workers", "--to", named, "--yes"])
            .await;
        assert!(e.contains(why), "--to {named}: {e}");
    }
    // An entry written before origins were recorded is not known to have been targeted.
    let e = cluster
        .fails(&["bootc", "rollback", "workers", "--to", "1111111", "--yes"])
        .await;
    assert!(e.contains("only nodes reported"), "{e}");
    assert_eq!(cluster.pool("workers").await.spec.image.r#ref, unchanged);

    // Confirmed with --yes: the last targeted digest of the pool's repository.
    let out = cluster.ok(&["bootc", "rollback", "workers", "--yes"]).await;
    println!("{out}");
    assert!(out.contains("workers rolled back"), "{out}");
    assert_eq!(cluster.pool("workers").await.spec.image.r#ref, pin('2'));
}
