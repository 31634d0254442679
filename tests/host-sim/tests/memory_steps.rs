//! The in-process host's step trace: bounded for hosts that run for hours, while halts
//! still count every pass of a point from the host's creation.

#![allow(clippy::unwrap_used)]

use bootc_node_agent::host::Host;
use host_sim::fixtures::{DEADLINE, digest};
use host_sim::memory::{Behaviour, Catalog, MemoryHost, TRACE_KEPT};

/// Reads the host's status on a task of its own until the host halts; returns where.
async fn halted_reading(host: &MemoryHost) -> String {
    let reader = host.clone();
    let task = tokio::spawn(async move { reader.status().await.map(|_| ()) });
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let at = loop {
        if let Some(at) = host.halted() {
            break at;
        }
        assert!(!task.is_finished(), "the read went through: no halt");
        assert!(tokio::time::Instant::now() < deadline, "no halt in time");
        tokio::task::yield_now().await;
    };
    task.abort();
    at
}

fn host() -> MemoryHost {
    let catalog = Catalog::new();
    let v1 = catalog.push("registry.test/os", "v1", &digest('1'), None);
    MemoryHost::new(catalog, &v1, Behaviour::default()).unwrap()
}

/// A host read more times than the trace keeps: the trace holds the latest points in
/// order, and a halt at a pass beyond what the trace holds still comes at that pass.
#[tokio::test]
async fn the_trace_keeps_the_latest_points_and_halts_count_every_pass() {
    let host = host();
    let reads = TRACE_KEPT; // two points each: twice what the trace keeps
    for _ in 0..reads {
        host.status().await.unwrap();
    }
    let steps = host.steps();
    assert_eq!(steps.len(), TRACE_KEPT);
    assert_eq!(steps[TRACE_KEPT - 2..], ["before status", "after status"]);
    assert!(
        steps
            .chunks(2)
            .all(|c| c == ["before status", "after status"])
    );

    // The next pass of `after status` is its (reads + 1)th, past what the trace keeps.
    host.halt_at("after status", reads + 1);
    assert_eq!(
        halted_reading(&host).await,
        format!("after status ({})", reads + 1)
    );
    host.resume();
    host.status().await.unwrap();
    assert_eq!(host.halted(), None);
}

/// A halt names its point exactly: `after status` is not `before status`, nor a call
/// whose name begins alike.
#[tokio::test]
async fn a_halt_stops_only_at_the_point_it_names() {
    let host = host();
    host.halt_at("before statu", 1);
    host.status().await.unwrap();
    host.halt_at("after  status", 1);
    host.status().await.unwrap();
    assert_eq!(host.halted(), None);
    host.halt_at("before status", 3);
    assert_eq!(halted_reading(&host).await, "before status (3)");
}
