//! `bootc-sim bench` as CI runs it: 50 in-process nodes with short timings, once
//! undisturbed, once with injected API faults and the controller killed every 2 s, and
//! once with faults on every client and agents killed, and once under `--chaos`; 250
//! nodes under `--chaos` at harsher rates on two seeds; 20
//! nodes once with a canary and an alert gate that fires at first; 40 nodes in four
//! pools, two of them ordered, moved three times in a row; each must complete
//! with every node on the target and no invariant violated. The simulated agents and
//! kubelets reach the emulator in-process, but in the run with controller faults, whose
//! agents and kubelets go over loopback HTTP as the controller does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

/// Every field the benchmark promises.
const FIELDS: [&str; 17] = [
    "nodes",
    "makespan_s",
    "ideal_s",
    "makespan_ratio",
    "api_requests_total",
    "api_writes_per_node",
    "controller_peak_rss_mib",
    "agent_peak_rss_mib",
    "reconcile_p50_ms",
    "reconcile_p99_ms",
    "max_concurrent_unavailable",
    "unavailable_budget",
    "reboots_per_node_max",
    "nodes_on_target",
    "nodes_left_cordoned",
    "invariant_violations",
    "notes",
];

/// The words of `line`: a command line's arguments.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `bootc-sim bench ARGS --json JSON`; asserts that it succeeded (naming the run
/// `what`, with its standard error and result) and reported `ok`; the JSON result.
fn run_bench(json: &Path, what: &str, args: &[&str]) -> Value {
    run_bench_with(json, what, args, &[])
}

/// [`run_bench`] with `env` set for the bench and the controller it starts.
fn run_bench_with(json: &Path, what: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-sim"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(json)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let result = std::fs::read_to_string(json).unwrap_or_default();
    assert!(
        out.status.success(),
        "bootc-sim bench {what} failed ({}); stderr:\n{}\nresult: {result}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["ok"], true, "{result:#}");
    result
}

fn bench(dir: &Path, name: &str, extra: &[&str]) -> Value {
    let json = dir.join(format!("{name}.json"));
    let started = Instant::now();
    let mut args = words(
        "--nodes 50 --max-unavailable 5 --stage-ms 50 --reboot-ms 100 --ready-ms 50 --deadline-s 45",
    );
    args.extend(extra);
    let result = run_bench(&json, &format!("{extra:?}"), &args);
    // No wall-clock bound: `--deadline-s` bounds the rollout itself, and the run fails
    // when it is passed.
    println!("bench {extra:?} took {:?}", started.elapsed());
    assert_faults_happened(&result, extra);
    for field in FIELDS {
        assert!(
            result.get(field).is_some_and(|v| !v.is_null()),
            "{field} missing or null in {result:#}"
        );
    }
    assert_eq!(result["nodes"], 50);
    assert_eq!(result["ok"], true, "{result:#}");
    assert_eq!(result["invariant_violations"], 0, "{result:#}");
    assert_eq!(result["nodes_on_target"], 50, "{result:#}");
    assert_eq!(result["nodes_left_cordoned"], 0, "{result:#}");
    assert_eq!(result["reboots_per_node_max"], 1, "{result:#}");
    assert_eq!(result["unavailable_budget"], 5);
    let max = result["max_concurrent_unavailable"].as_u64().unwrap();
    assert!((1..=5).contains(&max), "{result:#}");
    // stage + 10 waves × (reboot + ready).
    assert!((result["ideal_s"].as_f64().unwrap() - 1.55).abs() < 1e-9);
    let makespan = result["makespan_s"].as_f64().unwrap();
    let ratio = result["makespan_ratio"].as_f64().unwrap();
    assert!(makespan >= 1.55 && ratio >= 1.0, "{result:#}");
    assert!((ratio - makespan / 1.55).abs() < 0.01, "{result:#}");
    assert!(result["api_requests_total"].as_u64().unwrap() > 0);
    assert!(result["api_writes_per_node"].as_f64().unwrap() > 0.0);
    assert!(result["controller_peak_rss_mib"].as_f64().unwrap() > 0.0);
    let (p50, p99) = (
        result["reconcile_p50_ms"].as_f64().unwrap(),
        result["reconcile_p99_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99, "{result:#}");

    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polygon").count(), 5, "one area per state");
    println!(
        "bench {extra:?}: makespan {makespan} s, ratio {ratio}, {} requests, p99 {p99} ms",
        result["api_requests_total"]
    );
    result
}

#[test]
fn fifty_nodes_roll_out_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let result = bench(dir.path(), "plain", &[]);
    // The simulated agents and kubelets reach the emulator in-process by default, and
    // their requests are still served and logged under their own User-Agents.
    assert_eq!(result["sim_transport"], "local", "{result:#}");
    let by_agent = &result["api_requests_by_user_agent"];
    assert!(by_agent["host-sim"].as_u64().unwrap_or(0) > 0, "{result:#}");
    let agents = by_agent
        .as_object()
        .unwrap()
        .iter()
        .filter(|(ua, _)| ua.starts_with("bootc-node-agent/"))
        .map(|(_, n)| n.as_u64().unwrap_or(0))
        .sum::<u64>();
    assert!(agents > 0, "{result:#}");
    assert_eq!(result["controller_kills"], 0);
    assert_eq!(result["api_faults_injected"], 0);
    // The controller's own cost needs --controller-process; the rest is there.
    assert!(result["controller_cpu_s"].is_null(), "{result:#}");
    check_rollout_figures(&result);
}

/// Every disturbance `args` asked for is shown to have happened: API faults injected,
/// the controller killed, agents killed. A run over before its first kill proves nothing.
fn assert_faults_happened(result: &Value, args: &[&str]) {
    let asked = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v > 0.0)
    };
    let chaos = args.contains(&"--chaos");
    for (flag, field) in [
        ("--api-fault-rate", "api_faults_injected"),
        ("--kill-controller-every", "controller_kills"),
        ("--kill-agents-rate", "agents_killed"),
    ] {
        if chaos || asked(flag) {
            let n = result[field].as_u64().unwrap_or(0);
            assert!(n > 0, "{flag} given but {field} is {n}: {result:#}");
        }
    }
}

/// The figures every run reports on the slots and the writes, within their bounds.
fn check_rollout_figures(result: &Value) {
    let number = |field: &str| {
        result[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing in {result:#}"))
    };
    let utilisation = number("slot_utilisation");
    assert!(0.0 < utilisation && utilisation <= 1.0, "{result:#}");
    assert!(number("first_reboot_s") >= 0.0, "{result:#}");
    let (total, controller) = (
        number("writes_per_node_total"),
        number("writes_per_node_controller"),
    );
    assert!(0.0 < controller && controller <= total, "{result:#}");
}

/// `--controller-process`: the real controller binary as a child process; its own CPU
/// time and peak memory are reported, and it is stopped with SIGTERM at the end (its log
/// says it stopped).
#[test]
fn twenty_nodes_roll_out_with_the_controller_as_a_child_process() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("process.json");
    let started = Instant::now();
    let result = run_bench(
        &json,
        "--controller-process (it needs target/<profile>/bootc-pool-controller: \
         cargo build -p bootc-pool-controller)",
        &words("--controller-process --nodes 20 --max-unavailable 5 --deadline-s 45"),
    );
    println!("bench --controller-process took {:?}", started.elapsed());
    assert_eq!(result["controller_process"], true, "{result:#}");
    assert_eq!(result["nodes_on_target"], 20, "{result:#}");
    assert_eq!(result["invariant_violations"], 0, "{result:#}");
    assert!(
        result["controller_cpu_s"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    assert!(result["bench_cpu_s"].as_f64().unwrap() > 0.0, "{result:#}");
    assert!(
        result["controller_peak_rss_mib"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    check_rollout_figures(&result);
    // Its metrics were scraped before it was stopped.
    assert!(
        result["reconcile_count"].as_u64().unwrap() > 0,
        "{result:#}"
    );
    let log = std::fs::read_to_string(dir.path().join("process.controller.log")).unwrap();
    assert!(
        log.contains("controller stopped"),
        "the controller's log:\n{log}"
    );
}

/// `--pools 4 --ordered 2 --rollouts 3` with the controller as a child process: 40 nodes
/// in four pools of ten, the second waiting for the first (`after`), moved to a new
/// version three times in a row. Each pool keeps its own budget, the second pool is
/// granted nothing before the first is complete in every rollout, every node reboots
/// once per rollout, and each rollout reports its reconciles and the controller's
/// resident size after it.
#[test]
fn forty_nodes_in_four_pools_roll_out_three_times_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pools.json");
    let result = run_bench(&json, "--pools --rollouts", &words(FOUR_POOLS));
    check_four_pools(&result);
}

/// The same with the controller on one thread (`BOOTC_WORKER_THREADS=1`, tokio's
/// current-thread runtime): nothing in it may wait on another thread.
#[test]
fn forty_nodes_in_four_pools_roll_out_with_the_controller_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pools.json");
    let result = run_bench_with(
        &json,
        "--pools --rollouts, BOOTC_WORKER_THREADS=1",
        &words(FOUR_POOLS),
        &[("BOOTC_WORKER_THREADS", "1")],
    );
    check_four_pools(&result);
    let log = std::fs::read_to_string(dir.path().join("pools.controller.log")).unwrap();
    assert!(
        log.contains("controller started") && log.contains(" threads=1"),
        "the controller's log:\n{log}"
    );
}

const FOUR_POOLS: &str = "--controller-process --nodes 40 --pools 4 --ordered 2 --rollouts 3 \
                          --max-unavailable 2 --deadline-s 60";

fn check_four_pools(result: &Value) {
    assert_eq!(result["nodes_on_target"], 40, "{result:#}");
    assert_eq!(result["invariant_violations"], 0, "{result:#}");
    assert_eq!(result["unavailable_budget"], 8, "{result:#}");
    assert_eq!(result["reboots_per_node_max"], 3, "{result:#}");
    // Two ordered pools of five waves each, the other two side by side.
    assert_eq!(result["waves"], 10, "{result:#}");
    let rollouts = result["rollout_figures"].as_array().unwrap();
    assert_eq!(rollouts.len(), 3, "{result:#}");
    for r in rollouts {
        assert!(r["makespan_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["reconciles"].as_u64().unwrap() > 0, "{r}");
        assert!(r["controller_rss_mib"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["order_problems"], serde_json::json!([]), "{r}");
    }
    assert_eq!(result["soak"]["rollouts"], 3, "{result:#}");
    check_rollout_figures(result);
}

/// Also the run whose agents and kubelets go over loopback HTTP, as the controller does.
#[test]
fn fifty_nodes_roll_out_despite_api_faults_and_a_controller_killed_every_second() {
    let dir = tempfile::tempdir().unwrap();
    let result = bench(
        dir.path(),
        "faults",
        &words("--api-fault-rate 0.05 --kill-controller-every 1 --seed 3 --sim-transport http"),
    );
    assert_eq!(result["sim_transport"], "http", "{result:#}");
}

/// ApiFaults on every client's requests, the kubelets' and the agents' included, and agents
/// killed: a kubelet's NotReady that lands late must not let a freed slot push the
/// unavailable count past the budget (the controller waits for the kubelet's first
/// report after the reboot before it frees a slot).
#[test]
fn fifty_nodes_stay_within_the_budget_with_faults_on_every_client() {
    let dir = tempfile::tempdir().unwrap();
    bench(
        dir.path(),
        "faults-all",
        &words(
            "--api-fault-rate 0.05 --fault-scope all --kill-agents-rate 0.05 --kill-controller-every 1 --seed 5",
        ),
    );
}

/// `--chaos`: every disturbance together (controller and agent kills, faults on every
/// client, cut watch streams, a registry outage, a node deleted and added again, the
/// image edited, the pool deleted and created again); the rollout must still end with
/// every node on the final target, within the budget throughout, and the deleted pool
/// must have left no Node labelled or cordoned and no BootcNode of its own.
#[test]
fn fifty_nodes_come_through_the_chaos_soak() {
    let result = chaos_run(
        &["--nodes", "50", "--max-unavailable", "5", "--seed", "2"],
        150,
    );
    assert_eq!(result["nodes_on_target"], 50, "{result:#}");
    let chaos = &result["chaos"];
    for done in [
        "registry_outages",
        "nodes_deleted_and_added_again",
        "pool_image_edits",
    ] {
        assert_eq!(chaos[done], 1, "{done}: {result:#}");
    }
    assert!(chaos["watch_cuts"].as_u64().unwrap() > 0, "{result:#}");
}

/// Runs `bootc-sim bench --chaos` with `extra` and a deadline; checks what every chaos
/// run must show (success, no violation, nothing left cordoned, no trace of the deleted
/// pool, which went mid-rollout, and the controller kills and API faults it claims);
/// returns the JSON result.
fn chaos_run(extra: &[&str], deadline_s: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("chaos.json");
    let mut args = vec!["--chaos"];
    args.extend(extra);
    let deadline = deadline_s.to_string();
    args.extend(["--deadline-s", deadline.as_str()]);
    let result = run_bench(&json, &format!("--chaos {extra:?}"), &args);
    assert_eq!(result["invariant_violations"], 0, "{result:#}");
    assert_eq!(result["nodes_left_cordoned"], 0, "{result:#}");
    assert_faults_happened(&result, &["--chaos"]);
    let chaos = &result["chaos"];
    assert_eq!(chaos["no_trace_violations"], 0, "{result:#}");
    assert_eq!(chaos["pool_deleted_and_created_again"], 1, "{result:#}");
    assert!(
        chaos["nodes_in_flight_at_pool_delete"].as_u64().unwrap() > 0,
        "the pool went mid-rollout: {result:#}"
    );
    result
}

/// `--chaos` at the harsher rates: 250 nodes, 7 % budget (17 slots), 15 % of every
/// client's writes failed, the controller killed every 2 s, each agent killed with
/// probability 0.02 every 100 ms (a fifth of them a second), on two fixed seeds. These
/// rates found a node rebooting after its slot had been freed (a new target or the
/// pool's deletion while its Node still showed Ready from before the reboot); the budget
/// must hold throughout, and every disturbance must be shown to have happened.
#[test]
fn two_hundred_fifty_nodes_hold_the_budget_under_harsh_chaos() {
    for seed in ["4242", "12"] {
        let result = chaos_run(
            &[
                "--seed",
                seed,
                "--nodes",
                "250",
                "--max-unavailable",
                "7%",
                "--api-fault-rate",
                "0.15",
                "--kill-controller-every",
                "2",
                "--kill-agents-rate",
                "0.2",
                "--stage-ms",
                "100",
                "--reboot-ms",
                "200",
                "--ready-ms",
                "100",
            ],
            400,
        );
        assert_eq!(result["unavailable_budget"], 17, "seed {seed}: {result:#}");
        assert!(
            result["max_concurrent_unavailable"].as_u64().unwrap() <= 17,
            "seed {seed}: {result:#}"
        );
        assert_eq!(result["nodes_on_target"], 250, "seed {seed}: {result:#}");
        assert!(
            result["agents_killed"].as_u64().unwrap() > 0,
            "seed {seed}: {result:#}"
        );
    }
}

/// `--canary 10% --canary-soak 2 --alert-gate --alert-firing-s 1`: 20 nodes, the gate's
/// Alertmanager answers a firing alert for the first second, then none. No reboot slot
/// before the gate answered open, the third grant at least the soak after the canary's
/// two (both checked by the bench, which fails otherwise), and the report says so.
#[test]
fn twenty_nodes_wait_for_the_alert_gate_and_the_canary_soak() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gated.json");
    let started = Instant::now();
    let result = run_bench(
        &json,
        "with a canary and an alert gate",
        &words(
            "--nodes 20 --max-unavailable 5 --canary 10% --canary-soak 2 --alert-gate --alert-firing-s 1 --deadline-s 45",
        ),
    );
    let took = started.elapsed();
    assert_eq!(result["invariant_violations"], 0, "{result:#}");
    assert_eq!(result["nodes_on_target"], 20, "{result:#}");
    assert_eq!(result["nodes_left_cordoned"], 0, "{result:#}");
    assert_eq!(result["reboots_per_node_max"], 1, "{result:#}");
    let canary = &result["canary"];
    assert_eq!(
        (&canary["nodes"], &canary["resolved"], &canary["soak_s"]),
        (&Value::from("10%"), &Value::from(2), &Value::from(2)),
        "{result:#}"
    );
    assert!(
        canary["gap_after_canary_s"].as_f64().unwrap() >= 2.0,
        "{result:#}"
    );
    let gate = &result["alert_gate"];
    assert_eq!(gate["firing_s"], 1.0, "{result:#}");
    assert!(gate["answered_open"].as_u64().unwrap() > 0, "{result:#}");
    let first_open = gate["first_open_s"].as_f64().unwrap();
    let first_reboot = result["first_reboot_s"].as_f64().unwrap();
    assert!(
        first_open >= 1.0 && first_reboot >= first_open,
        "{result:#}"
    );
    // The soak and the alert are in the makespan.
    assert!(result["makespan_s"].as_f64().unwrap() >= 3.0, "{result:#}");
    println!(
        "bench with a canary and an alert gate: {took:?}, first reboot {first_reboot} s, \
         makespan {} s",
        result["makespan_s"]
    );
}

/// Memory ceilings a doubling breaks (debug build, measured 2026-11-27: controller 45.6
/// MiB, bench process 256.4 MiB at 1,000 nodes; docs/bench.md has the release figures).
const CONTROLLER_RSS_CEILING_MIB: f64 = 96.0;
const SIM_RSS_CEILING_MIB: f64 = 512.0;

/// The figures the docs give for 1,000 nodes, held by CI: the controller as a child
/// process, its peak resident size under a ceiling twice what was measured, and the
/// bench process (the emulator and 1,000 in-process agents and hosts) likewise.
#[test]
fn a_thousand_nodes_keep_the_controller_under_its_memory_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("thousand.json");
    let result = run_bench(
        &json,
        "--controller-process --nodes 1000",
        &words(
            "--controller-process --nodes 1000 --max-unavailable 10% --stage-ms 50 --reboot-ms 100 --ready-ms 50 --deadline-s 300",
        ),
    );
    assert_eq!(result["nodes_on_target"], 1000, "{result:#}");
    let controller = result["controller_peak_rss_mib"].as_f64().unwrap();
    let sim = result["bench_peak_rss_mib"].as_f64().unwrap();
    println!("1,000 nodes: controller {controller} MiB, bench process {sim} MiB");
    assert!(
        0.0 < controller && controller < CONTROLLER_RSS_CEILING_MIB,
        "the controller's peak RSS at 1,000 nodes: {controller} MiB (ceiling {CONTROLLER_RSS_CEILING_MIB})"
    );
    assert!(
        0.0 < sim && sim < SIM_RSS_CEILING_MIB,
        "the bench process's peak RSS at 1,000 nodes: {sim} MiB (ceiling {SIM_RSS_CEILING_MIB})"
    );
}
