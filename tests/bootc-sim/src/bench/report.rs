//! The report: the numbers derived from what was measured, what failed, the JSON result
//! and the SVG picture, and the summary on standard error.

use std::path::Path;

use bootc_pool_controller::reconcile;
use serde_json::{Value, json};

use super::end_state::EndState;
use super::rollout::Measured;
use super::setup::{PoolPlan, Settings};
use super::{BenchArgs, gated, round, secs};
use crate::stats::{self, Histogram};
use crate::svg;

/// Everything the report is made of.
pub(super) struct Run<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) settings: &'a Settings,
    pub(super) setup_s: f64,
    pub(super) measured: &'a Measured,
    pub(super) end: &'a EndState,
    /// The process's peak resident size, MiB.
    pub(super) peak_rss: Option<f64>,
}

/// The numbers derived from the measurements.
struct Numbers {
    waves: usize,
    ideal_s: f64,
    makespan_s: Option<f64>,
    counters: kube_emulator::RequestCounts,
    writes: usize,
    controller_requests: usize,
    controller_writes: usize,
    histogram: Histogram,
    reboots_max: u64,
    /// Pool applied → the first reboot slot granted.
    first_reboot_s: Option<f64>,
    /// Mean slots held ÷ budget, from the first grant to the last.
    slot_utilisation: Option<f64>,
    /// Where the slots' time went, step to step.
    slot_phases: Vec<crate::track::cycles::Phase>,
    /// Under `--canary`: the gap after its last grant, and whether it was short.
    canary: Option<gated::CanaryCheck>,
    /// Under `--alert-gate`: what is wrong with the gate's part.
    gate_problems: Vec<String>,
}

/// The reboot waves along the longest path: the pools ordered by `after` one after
/// another, the others side by side; a pool's waves are its nodes over its budget.
fn waves(pools: &[PoolPlan]) -> usize {
    let of = |p: &PoolPlan| {
        p.nodes
            .len()
            .div_ceil(p.budget.clamp(1, p.nodes.len().max(1)))
    };
    let mut chained = 0;
    let mut widest = 0;
    for (i, p) in pools.iter().enumerate() {
        let in_chain = p.after.is_some() || pools.get(i + 1).is_some_and(|q| q.after.is_some());
        if in_chain {
            chained += of(p);
        } else {
            widest = widest.max(of(p));
        }
    }
    chained.max(widest)
}

impl Run<'_> {
    /// Node updates: every node once per rollout run.
    fn updates(&self) -> f64 {
        (self.args.nodes * self.measured.rollouts.len().max(1)) as f64
    }

    /// Writes the picture and the JSON result and prints the summary; true when nothing
    /// failed.
    pub(super) fn finish(&self) -> Result<bool, String> {
        let (args, budget) = (self.args, self.settings.budget);
        let numbers = self.numbers();
        let failures = self.failures(&numbers);
        let result = self.json(&numbers, &failures);
        let makespan = numbers
            .makespan_s
            .map_or("-".to_owned(), |m| format!("{m:.2}"));
        let pools = match args.pools {
            1 => String::new(),
            p => format!(" in {p} pools"),
        };
        let rollouts = match self.measured.rollouts.len() {
            1 => String::new(),
            r => format!(", {r} rollouts"),
        };
        let title = format!(
            "{} nodes{pools}, maxUnavailable {} ({budget}){rollouts}: makespan {makespan} s, ideal {:.2} s",
            args.nodes, args.max_unavailable, numbers.ideal_s
        );
        let svg_path = &self.settings.svg_path;
        write(
            svg_path,
            &svg::render(&title, &self.measured.samples, args.nodes, budget),
            "the picture",
        )?;
        let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        write(&args.json, &(text + "\n"), "the JSON result")?;

        let report = &self.measured.report;
        eprintln!(
            "bootc-sim bench: makespan {makespan} s (ideal {:.2} s), {} requests, max unavailable {} of {budget}, {} violations; wrote {} and {}",
            numbers.ideal_s,
            self.measured.requests.len(),
            report.max_unavailable_seen,
            report.violations.len(),
            args.json.display(),
            svg_path.display()
        );
        eprintln!("bootc-sim bench: {}", self.cost_line(&numbers));
        for f in &failures {
            eprintln!("bootc-sim bench: FAILED: {f}");
        }
        for v in report.violations.iter().take(5) {
            eprintln!("bootc-sim bench: violation: {v}");
        }
        Ok(failures.is_empty())
    }

    fn numbers(&self) -> Numbers {
        let (args, m) = (self.args, self.measured);
        let waves = waves(&self.settings.pools);
        let ideal_s = (args.stage_ms as f64
            + waves as f64 * (args.reboot_ms + args.ready_ms) as f64)
            / 1000.0;
        let controller = |r: &&kube_emulator::RequestRecord| r.user_agent == reconcile::USER_AGENT;
        let (slots, slots_budget) = (m.tracker.slot_log(), self.settings.budget);
        let host_reboots_max = self.end.host_reboots.values().copied().max().unwrap_or(0);
        let event_reboots_max = m.report.reboots.values().copied().max().unwrap_or(0);
        Numbers {
            waves,
            ideal_s,
            makespan_s: m.done_at.map(|d| secs(d - m.t0)),
            counters: kube_emulator::RequestCounts::of(&m.requests),
            writes: m.requests.iter().filter(|r| r.is_write()).count(),
            controller_requests: m.requests.iter().filter(controller).count(),
            controller_writes: m
                .requests
                .iter()
                .filter(controller)
                .filter(|r| r.is_write())
                .count(),
            histogram: stats::parse_histogram(&m.metrics, "bootc_pool_reconcile_duration_seconds"),
            reboots_max: host_reboots_max.max(u64::from(event_reboots_max)),
            first_reboot_s: slots
                .first_grant()
                .map(|t| secs(t.saturating_duration_since(m.t0))),
            slot_utilisation: slots.utilisation(slots_budget),
            slot_phases: m.tracker.slot_phases(),
            canary: self.settings.canary.as_ref().map(|(canary, _)| {
                let soak = std::time::Duration::from_secs(u64::from(self.settings.canary_soak));
                match m.chaos {
                    // The pool deleted and created again starts a second canary.
                    Some(_) => gated::CanaryCheck::default(),
                    None => gated::canary_check(&slots.grants(), *canary, soak),
                }
            }),
            gate_problems: m
                .gate
                .as_ref()
                .map(|g| gated::gate_problems(slots.first_grant(), &g.answers(), m.t0))
                .unwrap_or_default(),
        }
    }

    /// What went wrong: no completion, availability violations, a node rebooted twice,
    /// nodes off target, cordoned or holding a slot, a bad deployHistory, a pool that
    /// did not wait for the one named in its `after`.
    fn failures(&self, numbers: &Numbers) -> Vec<String> {
        let (n, report, end) = (self.args.nodes, &self.measured.report, self.end);
        let mut failures = self.rollout_failures();
        let rollouts = &self.measured.rollouts;
        if !report.violations.is_empty() {
            failures.push(format!(
                "{} availability violations",
                report.violations.len()
            ));
        }
        // At most one reboot per node and target: no host booted one digest twice. The
        // Ready→NotReady transitions seen in the store are held to the number of targets
        // (one per rollout; two under --chaos, whose edit moves the target from v2 to
        // v3), and one more
        // for a node deleted and added again.
        let twice: Vec<&String> = end
            .boots_per_target
            .iter()
            .filter(|(_, b)| **b > 1)
            .map(|(n, _)| n)
            .collect();
        if !twice.is_empty() {
            failures.push(format!("nodes that booted one digest twice: {twice:?}"));
        }
        let chaos = self.measured.chaos.as_ref();
        let targets = if chaos.is_some() {
            2
        } else {
            rollouts.len() as u64
        };
        let allowed = |node: &str| {
            targets + u64::from(chaos.is_some_and(|c| c.replaced.iter().any(|r| r == node)))
        };
        let seen = |node: &str| {
            let host = end.host_reboots.get(node).copied().unwrap_or(0);
            let events = u64::from(report.reboots.get(node).copied().unwrap_or(0));
            host.max(events)
        };
        let more: std::collections::BTreeSet<&String> = end
            .host_reboots
            .keys()
            .chain(report.reboots.keys())
            .filter(|n| seen(n) > allowed(n))
            .collect();
        if !more.is_empty() {
            failures.push(format!(
                "nodes rebooted more often than there were targets: {more:?}"
            ));
        }
        if let Some(chaos) = &self.measured.chaos {
            failures.extend(chaos.violations.iter().cloned());
        }
        if end.on_target != n {
            failures.push(format!("{} of {n} nodes on the target", end.on_target));
        }
        if !report.left_cordoned.is_empty() {
            failures.push(format!("nodes left cordoned: {:?}", report.left_cordoned));
        }
        if !end.slots_held.is_empty() {
            failures.push(format!("reboot slots still held: {:?}", end.slots_held));
        }
        failures.extend(end.history_problems.iter().cloned());
        if let Some(f) = numbers.canary.as_ref().and_then(|c| c.failure.clone()) {
            failures.push(f);
        }
        failures.extend(numbers.gate_problems.iter().cloned());
        failures
    }

    /// Rollouts that did not complete, and pools that did not wait for the one named in
    /// their `after`.
    fn rollout_failures(&self) -> Vec<String> {
        let mut failures: Vec<String> = Vec::new();
        let rollouts = &self.measured.rollouts;
        let completed = rollouts.iter().filter(|r| r.makespan_s.is_some()).count();
        if self.measured.done_at.is_none() {
            failures.push(format!(
                "the rollout did not complete within {} s",
                self.args.deadline_s
            ));
        } else if completed < self.args.rollouts {
            failures.push(format!(
                "{completed} of {} rollouts completed, each within {} s",
                self.args.rollouts, self.args.deadline_s
            ));
        }
        for (k, r) in rollouts.iter().enumerate() {
            let rollout = k + 1;
            failures.extend(
                r.order_problems
                    .iter()
                    .map(|p| format!("rollout {rollout}: {p}")),
            );
        }
        failures
    }

    /// The text report's line on the controller's cost and the slots.
    fn cost_line(&self, numbers: &Numbers) -> String {
        let n = self.updates();
        let or_dash = |x, places| crate::stats::or_dash(x, places, "-");
        let controller = match self.measured.controller_usage {
            Some(u) => format!(
                "controller process: {:.2} s CPU ({:.2} ms per node update), peak RSS \
                 {:.1} MiB; ",
                u.cpu_s,
                u.cpu_s * 1000.0 / n,
                u.peak_rss_mib
            ),
            None => String::new(),
        };
        let bench = match self.measured.bench_cpu_s {
            Some(s) => format!(
                "bench process: {s:.2} s CPU ({:.2} ms per node update); ",
                s * 1000.0 / n
            ),
            None => String::new(),
        };
        let phases = numbers
            .slot_phases
            .iter()
            .map(|p| format!("{} {:.1}", p.step, p.mean_ms))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{controller}{bench}first reboot after {} s, slot utilisation {}, writes per node {:.2} \
             (controller {:.2}); mean ms from a slot's grant: {phases}",
            or_dash(numbers.first_reboot_s, 3),
            or_dash(numbers.slot_utilisation, 3),
            numbers.writes as f64 / n,
            numbers.controller_writes as f64 / n,
        )
    }

    /// How to read the result.
    fn notes(&self) -> Vec<String> {
        let memory = if self.measured.controller_usage.is_some() {
            "the controller ran as a child process (--controller-process): \
             controller_cpu_s is its user + system CPU time and controller_peak_rss_mib its \
             peak resident size (VmHWM), read from /proc/<pid> until just before it was \
             stopped (summed and the largest over restarts); agent_peak_rss_mib and \
             bench_peak_rss_mib are this process's (agents, hosts, the API emulator)"
        } else {
            "controller, agents, hosts and the API emulator share this one process: \
             controller_peak_rss_mib and agent_peak_rss_mib are both the process's peak \
             resident size (VmHWM), not per component; controller_cpu_s needs \
             --controller-process"
        };
        let mut notes = vec![
            memory.to_owned(),
            "reconcile_p50_ms / reconcile_p99_ms are computed from the controller's \
             bootc_pool_reconcile_duration_seconds histogram buckets (linear interpolation \
             inside a bucket, as histogram_quantile does), not from exact timings"
                .to_owned(),
            "ideal_s = stage + ceil(nodes / slots) x (drain + reboot + ready + delay) with \
             drain = 0 (no pods) and delay = postRebootDelaySeconds = 0; with --pools, \
             ceil(nodes / slots) per pool, summed along the pools ordered by after and the \
             largest of the others, whichever is more"
                .to_owned(),
            "api_* count every request the emulator served from the pool's creation to the \
             last rollout's completion: controller, agents and the simulated kubelets; \
             per node and per update figures divide by nodes x rollouts"
                .to_owned(),
        ];
        if self.measured.rollouts.len() > 1 {
            notes.push(
                "makespan_s and ideal_s are the first rollout's (the picture shows every one); \
                 rollout_figures has each one's makespan, the reconciles during it (from the \
                 histogram scraped at its start and end) and the controller's VmRSS after it"
                    .to_owned(),
            );
        }
        if self.settings.canary.is_some() || self.settings.alert_firing.is_some() {
            notes.push(
                "ideal_s leaves out the canary's soak and the time the alert gate held the \
                 rollout; makespan_s and first_reboot_s include them"
                    .to_owned(),
            );
        }
        let lagged = self.measured.tracker.lagged();
        if lagged > 0 {
            notes.push(format!(
                "the state follower fell behind by {lagged} events and re-listed"
            ));
        }
        notes
    }

    /// The report's `canary` object, under `--canary`.
    fn canary_json(&self, numbers: &Numbers) -> Option<Value> {
        let (resolved, nodes) = self.settings.canary.as_ref()?;
        let gap = numbers.canary.as_ref().and_then(|c| c.gap_s);
        Some(json!({
            "nodes": nodes,
            "resolved": resolved,
            "soak_s": self.settings.canary_soak,
            "gap_after_canary_s": gap.map(|g| round(g, 3)),
        }))
    }

    /// The JSON result's fields on `--chaos`, `--canary`, `--alert-gate`, `--pools` and
    /// `--rollouts`.
    fn optional_json(&self, numbers: &Numbers) -> serde_json::Map<String, Value> {
        let (args, m) = (self.args, self.measured);
        let rollouts = &m.rollouts;
        let figures: Vec<Value> = rollouts.iter().map(super::soak::Figures::json).collect();
        let soak = (rollouts.len() > 1).then(|| super::soak::summary(rollouts));
        let gate = m.gate.as_ref().zip(self.settings.alert_firing);
        let fields = json!({
            "chaos": m.chaos.as_ref().map(|c| c.json()),
            "canary": self.canary_json(numbers),
            "alert_gate": gate.map(|(g, firing)| gated::gate_json(&g.answers(), firing, m.t0)),
            "pools": args.pools,
            "ordered": args.ordered,
            "rollouts": args.rollouts,
            "rollout_figures": figures,
            "soak": soak,
        });
        match fields {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        }
    }

    /// The JSON result.
    fn json(&self, numbers: &Numbers, failures: &[String]) -> Value {
        let (args, m, end) = (self.args, self.measured, self.end);
        let (n, report, histogram) = (self.updates(), &m.report, &numbers.histogram);
        let ms = |q: f64| histogram.quantile(q).map(|s| round(s * 1000.0, 2));
        let mut result = json!({
            "nodes": args.nodes,
            "max_unavailable": args.max_unavailable,
            "stage_ms": args.stage_ms,
            "reboot_ms": args.reboot_ms,
            "ready_ms": args.ready_ms,
            "api_fault_rate": args.api_fault_rate,
            "fault_scope": args.fault_scope.as_str(),
            "sim_transport": args.sim_transport.as_str(),
            "kill_controller_every_s": args.kill_controller_every,
            "kill_agents_rate": args.kill_agents_rate,
            "seed": args.seed,
            "ok": failures.is_empty(),
            "failures": failures,
            "setup_s": round(self.setup_s, 2),
            "makespan_s": numbers.makespan_s.map(|m| round(m, 3)),
            "ideal_s": round(numbers.ideal_s, 3),
            "makespan_ratio": numbers.makespan_s.map(|m| round(m / numbers.ideal_s, 3)),
            "waves": numbers.waves,
            "api_requests_total": m.requests.len(),
            "api_writes_total": numbers.writes,
            "api_writes_per_node": round(numbers.writes as f64 / n, 2),
            "api_requests_controller": numbers.controller_requests,
            "api_writes_controller_per_node": round(numbers.controller_writes as f64 / n, 2),
            "api_faults_injected": numbers.counters.injected,
            "api_requests_by_verb": numbers.counters.by_verb,
            "api_requests_by_user_agent": numbers.counters.by_user_agent,
            "watches_cut_behind": m.watches_cut_behind,
            "writes_per_node_total": round(numbers.writes as f64 / n, 2),
            "writes_per_node_controller": round(numbers.controller_writes as f64 / n, 2),
            "first_reboot_s": numbers.first_reboot_s.map(|s| round(s, 3)),
            "slot_utilisation": numbers.slot_utilisation.map(|u| round(u, 3)),
            "slot_phases": crate::track::cycles::to_json(&numbers.slot_phases),
            "controller_process": args.controller_process,
            "controller_cpu_s": m.controller_usage.map(|u| round(u.cpu_s, 2)),
            "controller_cpu_ms_per_update": m
                .controller_usage
                .map(|u| round(u.cpu_s * 1000.0 / n, 3)),
            "bench_cpu_s": m.bench_cpu_s.map(|s| round(s, 2)),
            "bench_cpu_ms_per_update": m.bench_cpu_s.map(|s| round(s * 1000.0 / n, 3)),
            "controller_peak_rss_mib": m
                .controller_usage
                .map(|u| u.peak_rss_mib)
                .or(self.peak_rss)
                .map(|m| round(m, 1)),
            "agent_peak_rss_mib": self.peak_rss.map(|m| round(m, 1)),
            "bench_peak_rss_mib": self.peak_rss.map(|m| round(m, 1)),
            "reconcile_count": histogram.count,
            "reconcile_mean_ms": (histogram.count > 0)
                .then(|| round(histogram.sum / histogram.count as f64 * 1000.0, 2)),
            "reconcile_p50_ms": ms(0.5),
            "reconcile_p99_ms": ms(0.99),
            "max_concurrent_unavailable": report.max_unavailable_seen,
            "unavailable_budget": self.settings.budget,
            "reboots_per_node_max": numbers.reboots_max,
            "nodes_on_target": end.on_target,
            "nodes_left_cordoned": report.left_cordoned.len(),
            "reboot_slots_left": end.slots_held.len(),
            "invariant_violations": report.violations.len(),
            "violations": report.violations.iter().take(20).collect::<Vec<_>>(),
            "invariant_events_checked": report.events,
            "deploy_history": end.pool_status.get("deployHistory").cloned().unwrap_or(Value::Null),
            "deploy_history_limit": end.history_limit,
            "controller_kills": m.controller_kills,
            "agents_killed": m.agents_killed,
            "samples": m.samples.len(),
            "svg": self.settings.svg_path.file_name().map(|f| f.to_string_lossy().into_owned()),
            "notes": self.notes(),
        });
        if let Value::Object(fields) = &mut result {
            fields.extend(self.optional_json(numbers));
        }
        result
    }
}

fn write(path: &Path, text: &str, what: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write {what} to `{}`: {e}", path.display()))
}
