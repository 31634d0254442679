//! `kubectl bootc status -w` through the real kubectl: it prints, prints again when a
//! pool changes, and ends with an error (exit 1) when its watch ends in an error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;

use common::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_w_prints_each_change_and_fails_when_the_server_goes() {
    let cluster = rolling_workers().await;
    let mut child = cluster
        .command(&["bootc", "status", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_pool_line = async || loop {
        let line = timeout(DEADLINE, lines.next_line())
            .await
            .expect("the watch prints within the deadline")
            .unwrap()
            .expect("the watch is still running");
        if line.starts_with("workers ") {
            return line;
        }
    };
    let first = next_pool_line().await;
    assert!(first.ends_with("RollingOut"), "{first}");

    cluster.ok(&["bootc", "pause", "workers"]).await;
    // Printed again with the pool's new state (an age that moved may print it once more
    // before).
    while !next_pool_line().await.ends_with("Paused") {}

    // The server goes away: the watch ends, the list after it fails, and so does the plugin.
    cluster.emulator.stop().await;
    let status = timeout(DEADLINE, child.wait())
        .await
        .expect("the watch ends once the server is gone")
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
        .await
        .unwrap();
    assert!(stderr.starts_with("error: "), "{stderr}");
}
