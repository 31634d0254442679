//! The selective phase: each watcher watches one object by name (as node agents watch their
//! BootcNode) while several writers change every object; every watcher must see exactly its
//! object's changes, in order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::{Map, Value, json};
use tokio::sync::Barrier;

use crate::measure::{client, config_map, create_namespace, round3, rv_of};
use crate::{Args, BoxError};

/// The selective phase: `own_watchers` watchers each watch one ConfigMap by name while
/// `own_writers` writers change every ConfigMap `own_rounds` times. Every watcher must see
/// exactly its object's changes, in order.
pub(crate) async fn run(
    args: &Args,
    emulator: &Emulator,
) -> Result<(Map<String, Value>, bool), BoxError> {
    let admin = client(emulator)?;
    create_namespace(&admin, "bench-own").await?;
    let api = Api::<ConfigMap>::namespaced(admin, "bench-own");
    let mut from = 0u64;
    for i in 0..args.own_watchers {
        let cm = api
            .create(
                &PostParams::default(),
                &config_map(&format!("own-{i}"), &[("seq", "0")])?,
            )
            .await?;
        from = from.max(rv_of(&cm).unwrap_or(0));
    }
    let watch_client = client(emulator)?;
    let rounds = args.own_rounds as u64;
    let established = Arc::new(Barrier::new(args.own_watchers + 1));
    let tasks: Vec<_> = (0..args.own_watchers)
        .map(|i| {
            let api = Api::<ConfigMap>::namespaced(watch_client.clone(), "bench-own");
            tokio::spawn(own_watcher(
                api,
                i,
                from.to_string(),
                rounds,
                established.clone(),
            ))
        })
        .collect();
    established.wait().await;
    eprintln!(
        "OWN: {} watchers established; {} writers change every object {rounds} times",
        args.own_watchers, args.own_writers
    );
    let writer = client(emulator)?;
    let start = Instant::now();
    let write_errors = write_rounds(&writer, args, rounds).await;
    let write_seconds = start.elapsed().as_secs_f64();
    let expected: Vec<u64> = (1..=rounds).collect();
    let mut incomplete = 0u64;
    for task in tasks {
        if task.await? != expected {
            incomplete += 1;
        }
    }
    let all_seconds = start.elapsed().as_secs_f64();
    let writes = (args.own_watchers as u64) * rounds;
    let complete = write_errors == 0 && incomplete == 0;
    eprintln!(
        "OWN: {writes} writes in {write_seconds:.3} s, all delivered after {all_seconds:.3} s; {incomplete} watchers incomplete"
    );
    let mut fields = serde_json::Map::new();
    fields.insert("own_watchers".into(), json!(args.own_watchers));
    fields.insert("own_writers".into(), json!(args.own_writers));
    fields.insert("own_writes".into(), json!(writes));
    fields.insert("own_write_errors".into(), json!(write_errors));
    fields.insert("own_write_seconds".into(), json!(round3(write_seconds)));
    fields.insert(
        "own_write_rps".into(),
        json!(round3(writes as f64 / write_seconds)),
    );
    fields.insert("own_delivered_seconds".into(), json!(round3(all_seconds)));
    fields.insert("own_watchers_incomplete".into(), json!(incomplete));
    fields.insert("own_complete".into(), json!(complete));
    Ok((fields, complete))
}

/// Watches `own-{i}` from version `from` until it sees `data.seq` = `rounds` (or nothing for two
/// minutes); the `seq` of every change it saw. Waits at `established` once its watch is set up.
async fn own_watcher(
    api: Api<ConfigMap>,
    i: usize,
    from: String,
    rounds: u64,
    established: Arc<Barrier>,
) -> Vec<u64> {
    let params = WatchParams::default()
        .fields(&format!("metadata.name=own-{i}"))
        .disable_bookmarks()
        .timeout(290);
    let stream = api.watch(&params, &from).await;
    established.wait().await;
    let mut seqs = Vec::new();
    let Ok(stream) = stream else {
        return seqs;
    };
    let mut stream = std::pin::pin!(stream);
    while let Ok(Some(Ok(WatchEvent::Modified(cm)))) =
        tokio::time::timeout(Duration::from_secs(120), stream.next()).await
    {
        let seq: u64 = cm
            .data
            .as_ref()
            .and_then(|d| d.get("seq"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        seqs.push(seq);
        if seq == rounds {
            break;
        }
    }
    seqs
}

/// Changes every watched object once per round, `own_writers` at a time; the failed writes.
async fn write_rounds(writer: &Client, args: &Args, rounds: u64) -> u64 {
    let mut write_errors = 0u64;
    for round in 1..=rounds {
        let results: Vec<Result<ConfigMap, kube::Error>> = stream::iter(0..args.own_watchers)
            .map(|i| {
                let api = Api::<ConfigMap>::namespaced(writer.clone(), "bench-own");
                async move {
                    let patch = json!({"data": {"seq": round.to_string()}});
                    api.patch(
                        &format!("own-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                }
            })
            .buffer_unordered(args.own_writers.max(1))
            .collect()
            .await;
        write_errors += results.iter().filter(|r| r.is_err()).count() as u64;
    }
    write_errors
}
