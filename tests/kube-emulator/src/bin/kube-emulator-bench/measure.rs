//! What every phase uses: clients of the emulator, test objects, timing, percentiles, and the
//! process's open files and memory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::PostParams;
use kube::{Api, Client};
use kube_emulator::Emulator;
use serde_json::json;
use tokio::sync::Barrier;

use crate::BoxError;

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Nearest-rank percentile of sorted samples (0 when there are none).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The `(soft, hard)` open-file limits of this process (`None` for unlimited).
pub(crate) fn nofile_limits() -> Option<(Option<u64>, Option<u64>)> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line["Max open files".len()..].split_whitespace();
    let parse = |f: Option<&str>| -> Option<Option<u64>> {
        match f? {
            "unlimited" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some((parse(fields.next())?, parse(fields.next())?))
}

pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// `(VmHWM, VmRSS)` of this process in MiB.
pub(crate) fn memory_mib() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l[key.len()..].split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmHWM:") / 1024.0, kib("VmRSS:") / 1024.0)
}

pub(crate) fn client(emulator: &Emulator) -> Result<Client, kube::Error> {
    let mut config = emulator.config();
    config.default_retry = false;
    Client::try_from(config)
}

pub(crate) fn config_map(
    name: &str,
    data: &[(&str, &str)],
) -> Result<ConfigMap, serde_json::Error> {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data,
    }))
}

pub(crate) async fn create_namespace(client: &Client, name: &str) -> Result<(), BoxError> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

pub(crate) fn rv_of(cm: &ConfigMap) -> Option<u64> {
    cm.metadata.resource_version.as_deref()?.parse().ok()
}

/// Each of `workers` clients runs `call` in a loop for `seconds` (after one untimed call each);
/// returns the latencies in ms, the error count and the measured wall time.
pub(crate) async fn hammer<F, Fut>(
    emulator: &Emulator,
    workers: usize,
    seconds: u64,
    call: F,
) -> Result<(Vec<f64>, u64, Duration), BoxError>
where
    F: Fn(Client) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send,
{
    let barrier = Arc::new(Barrier::new(workers + 1));
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let client = client(emulator)?;
        let call = call.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            // Warm up the connection before the clock starts.
            let warm = call(client.clone()).await;
            barrier.wait().await;
            let start = Instant::now();
            let mut latencies = Vec::new();
            let mut errors = u64::from(warm.is_err());
            while start.elapsed() < Duration::from_secs(seconds) {
                let t = Instant::now();
                match call(client.clone()).await {
                    Ok(()) => latencies.push(ms(t.elapsed())),
                    Err(_) => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (l, e) = task.await?;
        latencies.extend(l);
        errors += e;
    }
    Ok((latencies, errors, start.elapsed()))
}
