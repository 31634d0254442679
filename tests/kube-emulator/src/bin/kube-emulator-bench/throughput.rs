//! The GET and LIST phases: requests per second and latencies of many clients hammering one
//! object, and a namespace of many objects.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::{Map, Value, json};

use crate::measure::{config_map, create_namespace, hammer, percentile, round3, sorted};
use crate::{Args, BoxError};

/// GET throughput: `concurrency` clients read one ConfigMap for `seconds`.
pub(crate) async fn get(
    args: &Args,
    emulator: &Emulator,
    admin: &Client,
) -> Result<Map<String, Value>, BoxError> {
    let handle = emulator.handle();
    eprintln!("GET: {} clients for {} s", args.concurrency, args.seconds);
    create_namespace(admin, "bench-get").await?;
    Api::<ConfigMap>::namespaced(admin.clone(), "bench-get")
        .create(
            &PostParams::default(),
            &config_map("target", &[("k", "v")])?,
        )
        .await?;
    handle.clear_requests();
    let (latencies, errors, wall) =
        hammer(emulator, args.concurrency, args.seconds, |c| async move {
            Api::<ConfigMap>::namespaced(c, "bench-get")
                .get("target")
                .await?;
            Ok(())
        })
        .await?;
    let logged = handle.counters().by_verb.get("get").copied().unwrap_or(0);
    let latencies = sorted(latencies);
    let get_rps = latencies.len() as f64 / wall.as_secs_f64();
    eprintln!("GET: {} requests, {get_rps:.0}/s", latencies.len());
    let mut report = Map::new();
    report.insert("concurrency".into(), json!(args.concurrency));
    report.insert("get_seconds".into(), json!(round3(wall.as_secs_f64())));
    report.insert("get_requests".into(), json!(latencies.len()));
    report.insert("get_errors".into(), json!(errors));
    report.insert("get_requests_logged_by_emulator".into(), json!(logged));
    report.insert("get_rps".into(), json!(round3(get_rps)));
    report.insert(
        "get_p50_ms".into(),
        json!(round3(percentile(&latencies, 50.0))),
    );
    report.insert(
        "get_p99_ms".into(),
        json!(round3(percentile(&latencies, 99.0))),
    );
    Ok(report)
}

/// LIST throughput: `list_concurrency` clients list `list_objects` ConfigMaps for `list_seconds`
/// (after creating them, which measures creates per second too).
pub(crate) async fn list(
    args: &Args,
    emulator: &Emulator,
    admin: &Client,
) -> Result<Map<String, Value>, BoxError> {
    eprintln!("LIST: creating {} ConfigMaps", args.list_objects);
    create_namespace(admin, "bench-list").await?;
    let list_api = Api::<ConfigMap>::namespaced(admin.clone(), "bench-list");
    let created = Instant::now();
    stream::iter(0..args.list_objects)
        .map(|i| {
            let api = list_api.clone();
            async move {
                let cm = config_map(&format!("cm-{i:05}"), &[("index", &i.to_string())])?;
                api.create(&PostParams::default(), &cm).await?;
                Ok::<(), BoxError>(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    let create_rps = args.list_objects as f64 / created.elapsed().as_secs_f64();
    eprintln!(
        "LIST: {} clients for {} s",
        args.list_concurrency, args.list_seconds
    );
    let expected = args.list_objects;
    let (latencies, errors, wall) = hammer(
        emulator,
        args.list_concurrency,
        args.list_seconds,
        move |c| async move {
            let list = Api::<ConfigMap>::namespaced(c, "bench-list")
                .list(&ListParams::default())
                .await?;
            if list.items.len() != expected {
                return Err(format!("listed {} of {expected} objects", list.items.len()).into());
            }
            Ok(())
        },
    )
    .await?;
    let latencies = sorted(latencies);
    let list_rps = latencies.len() as f64 / wall.as_secs_f64();
    eprintln!("LIST: {} requests, {list_rps:.1}/s", latencies.len());
    let mut report = Map::new();
    report.insert("create_rps".into(), json!(round3(create_rps)));
    report.insert("list_objects".into(), json!(args.list_objects));
    report.insert("list_concurrency".into(), json!(args.list_concurrency));
    report.insert("list_seconds".into(), json!(round3(wall.as_secs_f64())));
    report.insert("list_requests".into(), json!(latencies.len()));
    report.insert("list_errors".into(), json!(errors));
    report.insert("list_rps".into(), json!(round3(list_rps)));
    report.insert(
        "listed_objects_per_second".into(),
        json!(round3(list_rps * args.list_objects as f64)),
    );
    report.insert(
        "list_p50_ms".into(),
        json!(round3(percentile(&latencies, 50.0))),
    );
    report.insert(
        "list_p99_ms".into(),
        json!(round3(percentile(&latencies, 99.0))),
    );
    Ok(report)
}
