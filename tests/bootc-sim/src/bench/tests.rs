#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::child::cpu_ticks;
use super::end_state::history_problems;
use super::gate::{AlertServer, Answers, firing_alerts, request_target};
use super::gated::{canary_check, gate_problems};
use super::rollout::pool_spec;
use super::setup::budget;
use crate::stats::status_kib;

fn entry(digest: char, last: &str) -> Value {
    json!({"digest": format!("sha256:{}", digest.to_string().repeat(64)), "lastDeployed": last})
}

#[test]
fn the_history_must_have_the_target_newest_ties_allowed() {
    let target = format!("sha256:{}", "2".repeat(64));
    let newest = [
        entry('2', "2026-11-22T11:18:15Z"),
        entry('1', "2026-11-22T11:18:05Z"),
    ];
    assert!(history_problems(&newest, 5, &target).is_empty());
    // The old image's last report in the target's last second sorts first by digest.
    let tie = [
        entry('1', "2026-11-22T11:18:15Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(history_problems(&tie, 5, &target).is_empty());
    let older = [
        entry('1', "2026-11-22T11:18:16Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert_eq!(
        history_problems(&older, 5, &target),
        vec!["deployHistory's newest entry is not the target"]
    );
    let missing = [entry('1', "2026-11-22T11:18:16Z")];
    assert_eq!(
        history_problems(&missing, 5, &target),
        vec!["deployHistory has no entry for the target"]
    );
    let unordered = [
        entry('1', "2026-11-22T11:18:05Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(
        history_problems(&unordered, 5, &target)
            .contains(&"deployHistory is not newest lastDeployed first".to_owned())
    );
    let repeated = [
        entry('2', "2026-11-22T11:18:15Z"),
        entry('2', "2026-11-22T11:18:15Z"),
    ];
    assert!(
        history_problems(&repeated, 1, &target)
            .iter()
            .any(|p| p.contains("repeats") || p.contains("limit 1"))
    );
}

#[test]
fn budgets() {
    assert_eq!(budget("5", 50).unwrap().0, 5);
    assert_eq!(budget("10%", 200).unwrap().0, 20);
    assert_eq!(budget("5%", 10).unwrap().0, 1);
    assert_eq!(budget("10%", 200).unwrap().1, json!("10%"));
    assert!(budget("0", 5).is_err());
    assert!(budget("x", 5).is_err());
    assert!(budget("0%", 5).is_err());
}

#[test]
fn the_childs_cpu_time_and_peak_are_read_from_proc() {
    // The command name may hold spaces and parentheses; utime 250 + stime 50.
    let stat = "4242 (tokio (x) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
    assert_eq!(cpu_ticks(stat), Some(300));
    assert_eq!(cpu_ticks("4242 (x) S 1"), None);
    let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n";
    assert_eq!(status_kib(status, "VmHWM"), Some(2048.0));
    assert_eq!(status_kib(status, "VmSwap"), None);
    let own = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert!(cpu_ticks(&own).is_some());
}

#[test]
fn a_canary_count_or_share_is_checked_like_the_budget() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::BenchArgs,
    }
    let parse = |extra: &[&str]| {
        let mut argv = vec!["bench", "--json", "x.json", "--nodes", "20"];
        argv.extend_from_slice(extra);
        super::setup::Settings::check(&Cli::try_parse_from(argv).unwrap().args)
    };
    let settings = parse(&["--canary", "10%", "--canary-soak", "3"]).unwrap();
    assert_eq!(settings.canary, Some((2, json!("10%"))));
    assert_eq!(settings.canary_soak, 3);
    assert_eq!(settings.alert_firing, None);
    let e = parse(&["--canary", "0"]).err().unwrap();
    assert_eq!(e, "--canary `0`: must be at least 1");
    let e = parse(&["--canary", "many"]).err().unwrap();
    assert_eq!(e, "--canary `many`: not a count or a percentage");
    let e = parse(&["--alert-gate", "--alert-firing-s=-1"])
        .err()
        .unwrap();
    assert!(e.starts_with("--alert-firing-s must be"), "{e}");
    let gate = parse(&["--alert-gate", "--alert-firing-s", "1.5"]).unwrap();
    assert_eq!(gate.alert_firing, Some(Duration::from_millis(1500)));
    // The flags that configure them need them.
    let mut argv = vec!["bench", "--json", "x.json", "--canary-soak", "3"];
    assert!(Cli::try_parse_from(&argv).is_err());
    argv[3] = "--alert-firing-s";
    assert!(Cli::try_parse_from(&argv).is_err());
}

#[test]
fn the_pool_gets_the_canary_and_the_gate_and_passes_validation() {
    let pool = super::setup::PoolPlan {
        name: "bench-002".into(),
        nodes: vec!["node-001".into()],
        budget: 5,
        after: Some("bench-001".into()),
    };
    let settings = |canary: Option<(usize, Value)>| super::setup::Settings {
        kill_every: None,
        pools: vec![pool.clone()],
        budget: 5,
        spec_budget: json!(5),
        svg_path: "x.svg".into(),
        controller_binary: None,
        controller_log: "x.log".into(),
        canary,
        canary_soak: 2,
        alert_firing: Some(Duration::from_secs(1)),
    };
    let plain = pool_spec("registry.test/os@sha256:2", &settings(None), None, &pool);
    assert!(plain["rollout"].get("canary").is_none() && plain.get("health").is_none());
    assert_eq!(
        plain["nodeSelector"],
        json!({"matchLabels": {"pool": "bench-002"}})
    );
    assert_eq!(plain["rollout"]["after"], json!(["bench-001"]));
    let spec = pool_spec(
        "registry.test/os@sha256:2",
        &settings(Some((2, json!("10%")))),
        Some("http://127.0.0.1:9"),
        &pool,
    );
    assert_eq!(
        spec["rollout"]["canary"],
        json!({"nodes": "10%", "soakSeconds": 2})
    );
    assert_eq!(
        spec["health"]["alerts"],
        json!({"url": "http://127.0.0.1:9", "matchers": ["severity=\"critical\""],
               "failClosed": true, "intervalSeconds": 1})
    );
    let mut spec = spec;
    spec["image"]["ref"] = json!(format!("registry.test/os@sha256:{}", "2".repeat(64)));
    let spec: bootc_crds::pool::BootcNodePoolSpec = serde_json::from_value(spec).unwrap();
    spec.validate().unwrap();
}

#[test]
fn the_canary_check_wants_the_soak_between_the_canary_and_the_rest() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let grants = [at(0), at(100), at(2300), at(2300), at(2400)];
    let ok = canary_check(&grants, 2, Duration::from_secs(2));
    assert_eq!(ok.failure, None);
    assert!((ok.gap_s.unwrap() - 2.2).abs() < 1e-9);
    let short = canary_check(&grants, 2, Duration::from_secs(3));
    assert_eq!(
        short.failure.as_deref(),
        Some(
            "the first node after the canary of 2 got its reboot slot 2.20 s after the canary's last, sooner than the 3 s soak"
        )
    );
    // A canary of the whole pool, or a rollout that never got past it: nothing to check.
    assert_eq!(
        canary_check(&grants, 5, Duration::from_secs(9)),
        Default::default()
    );
    assert_eq!(
        canary_check(&[], 1, Duration::from_secs(9)),
        Default::default()
    );
}

#[test]
fn the_gate_check_wants_an_open_answer_before_the_first_grant() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let answers = |firing, open, first_open: Option<Instant>| Answers {
        firing,
        open,
        other: 0,
        first_open,
    };
    assert!(gate_problems(Some(at(1500)), &answers(3, 2, Some(at(1200))), t0).is_empty());
    assert_eq!(
        gate_problems(Some(at(500)), &answers(1, 2, Some(at(1200))), t0),
        [
            "a reboot slot was granted 0.50 s after the pool's creation, before the alert gate first answered that no alert fires (1.20 s)"
        ]
    );
    assert_eq!(
        gate_problems(None, &answers(0, 0, None), t0),
        ["the alert gate's Alertmanager was never asked for its alerts"]
    );
    assert_eq!(
        gate_problems(Some(at(9)), &answers(4, 0, None), t0).len(),
        1
    );
}

/// The loopback Alertmanager: a firing alert first, `[]` after the window, 404 on other
/// paths, each answer counted.
#[tokio::test]
async fn the_alert_server_fires_for_its_window_then_answers_no_alerts() {
    let server = AlertServer::start(Duration::from_millis(300))
        .await
        .unwrap();
    let url = server.url.trim_start_matches("http://").to_owned();
    let get = |path: &'static str| {
        let url = url.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(&url).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: {url}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out
        }
    };
    let firing = get("/api/v2/alerts?active=true&silenced=false").await;
    assert!(firing.starts_with("HTTP/1.1 200 OK\r\n"), "{firing}");
    let body: Value = serde_json::from_str(firing.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body, firing_alerts());
    assert_eq!(body[0]["labels"]["severity"], "critical");
    assert!(get("/api/v1/alerts").await.starts_with("HTTP/1.1 404 "));
    let deadline = Instant::now() + Duration::from_secs(10);
    let open = loop {
        let answer = get("/api/v2/alerts").await;
        if answer.ends_with("\r\n\r\n[]") || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(open.ends_with("\r\n\r\n[]"), "{open}");
    let answers = server.answers();
    assert!(
        answers.firing >= 1 && answers.open == 1 && answers.other == 1,
        "{answers:?}"
    );
    assert!(answers.first_open.is_some());
    assert_eq!(request_target("GET /a?b HTTP/1.1\r\n"), Some("/a"));
    assert_eq!(request_target("POST /a HTTP/1.1\r\n"), None);
    assert_eq!(request_target(""), None);
}

/// `--pools`: the nodes in contiguous blocks, every node in exactly one pool, the budget
/// resolved per pool, the first `--ordered` pools each after the one before.
#[test]
fn the_nodes_are_split_between_the_pools_and_the_first_ones_ordered() {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::BenchArgs,
    }
    let args = |extra: &str| {
        let line = format!("bench --json x.json {extra}");
        Cli::try_parse_from(line.split_whitespace()).unwrap().args
    };
    let plans = super::setup::layout(&args(
        "--nodes 10 --pools 3 --ordered 2 --max-unavailable 50%",
    ))
    .unwrap();
    let sizes: Vec<usize> = plans.iter().map(|p| p.nodes.len()).collect();
    assert_eq!(sizes, [4, 3, 3]);
    let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["bench-001", "bench-002", "bench-003"]);
    assert_eq!(plans[0].nodes[0], "node-001");
    assert_eq!(plans[2].nodes[2], "node-010");
    let all: BTreeSet<&String> = plans.iter().flat_map(|p| &p.nodes).collect();
    assert_eq!(all.len(), 10);
    let budgets: Vec<usize> = plans.iter().map(|p| p.budget).collect();
    assert_eq!(budgets, [2, 1, 1]);
    let after: Vec<Option<&str>> = plans.iter().map(|p| p.after.as_deref()).collect();
    assert_eq!(after, [None, Some("bench-001"), None]);
    // One pool keeps the bench's name.
    let one = super::setup::layout(&args("--nodes 3")).unwrap();
    assert_eq!((one.len(), one[0].name.as_str()), (1, "bench"));
    for bad in [
        "--nodes 3 --pools 4",
        "--nodes 3 --pools 0",
        "--nodes 3 --pools 2 --ordered 3",
    ] {
        assert!(super::setup::layout(&args(bad)).is_err(), "{bad}");
    }
}

/// A pool ordered after another must be granted its first slot after the store showed
/// that one complete.
#[test]
fn an_ordered_pool_granted_before_the_one_it_waits_for_is_a_problem() {
    let plan = |name: &str, after: Option<&str>| super::setup::PoolPlan {
        name: name.into(),
        nodes: Vec::new(),
        budget: 1,
        after: after.map(str::to_owned),
    };
    let pools = [plan("a", None), plan("b", Some("a"))];
    let progress = |done: Option<u64>, granted: Option<u64>| {
        let mut a = crate::track::PoolProgress::default();
        a.name = "a".into();
        a.done_rv = done;
        let mut b = crate::track::PoolProgress::default();
        b.name = "b".into();
        b.first_grant_rv = granted;
        vec![a, b]
    };
    assert!(super::soak::order_problems(&pools, &progress(Some(10), Some(11))).is_empty());
    for (done, granted) in [(Some(10), Some(9)), (None, Some(9)), (Some(10), None)] {
        let problems = super::soak::order_problems(&pools, &progress(done, granted));
        assert_eq!(problems.len(), 1, "{done:?} {granted:?}");
        assert!(problems[0].starts_with("pool b granted"), "{problems:?}");
    }
}

/// A rollout's CPU per node is the difference of two readings of the same process; a
/// controller restarted in between (another PID) gives none.
#[test]
fn a_rollouts_cpu_per_update_is_read_from_one_process() {
    let per_update = super::soak::per_update;
    assert_eq!(
        per_update((Some((7, 1.0)), Some((7, 3.0))), 1000),
        Some(2.0)
    );
    assert_eq!(per_update((Some((7, 1.0)), Some((8, 3.0))), 1000), None);
    assert_eq!(per_update((None, Some((7, 3.0))), 1000), None);
    assert_eq!(per_update((Some((7, 1.0)), None), 1000), None);
    assert_eq!(per_update((Some((7, 1.0)), Some((7, 1.5))), 0), None);
}
