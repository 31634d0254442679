//! What the demo shows: one row per node, redrawn in place on a terminal (one line per
//! change otherwise), and the pool's status and deployHistory at the end.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use serde_json::Value;
use tokio::time::Instant;

use super::{GROUP, POOL};

/// One node's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) name: String,
    pub(super) state: String,
    pub(super) booted: String,
    pub(super) ready: bool,
    pub(super) cordoned: bool,
    pub(super) slot: bool,
}

pub(super) fn short(digest: &str) -> String {
    digest
        .strip_prefix("sha256:")
        .unwrap_or(digest)
        .chars()
        .take(12)
        .collect()
}

pub(super) fn rows(handle: &kube_emulator::Handle, names: &[String]) -> Vec<Row> {
    let bootc: BTreeMap<String, Value> = handle
        .list(GROUP, "bootcnodes")
        .into_iter()
        .filter_map(|b| Some((b.pointer("/metadata/name")?.as_str()?.to_owned(), b)))
        .collect();
    let nodes: BTreeMap<String, Value> = handle
        .list("", "nodes")
        .into_iter()
        .filter_map(|n| Some((n.pointer("/metadata/name")?.as_str()?.to_owned(), n)))
        .collect();
    names
        .iter()
        .map(|name| {
            let b = bootc.get(name);
            let n = nodes.get(name);
            let state = b
                .and_then(|b| b.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Idle"))
                .and_then(|c| c["reason"].as_str())
                .unwrap_or("-")
                .to_owned();
            let booted = b
                .and_then(|b| b.pointer("/status/booted"))
                .map(|booted| {
                    let digest = booted["imageDigest"].as_str().unwrap_or("");
                    match booted["version"].as_str() {
                        Some(v) => format!("{} ({v})", short(digest)),
                        None => short(digest),
                    }
                })
                .unwrap_or_else(|| "-".to_owned());
            let ready = n
                .and_then(|n| n.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            let cordoned = n
                .and_then(|n| n.pointer("/spec/unschedulable"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let slot = b
                .and_then(|b| b.pointer("/metadata/annotations"))
                .and_then(Value::as_object)
                .is_some_and(|a| a.contains_key(REBOOT_SLOT_ANNOTATION));
            Row {
                name: name.clone(),
                state,
                booted,
                ready,
                cordoned,
                slot,
            }
        })
        .collect()
}

/// The live view: redrawn in place on a terminal, one line per change otherwise.
#[derive(Debug)]
pub(super) struct Display {
    tty: bool,
    budget: usize,
    started: Instant,
    pub(super) last: Vec<Row>,
    last_header: String,
}

impl Display {
    pub(super) fn new(budget: usize, started: Instant) -> Self {
        Display {
            tty: std::io::stdout().is_terminal(),
            budget,
            started,
            last: Vec::new(),
            last_header: String::new(),
        }
    }

    pub(super) fn show(&mut self, phase: &str, pool: &Value, rows: Vec<Row>) {
        let status = pool.get("status");
        let slots = rows.iter().filter(|r| r.slot).count();
        let target = status
            .and_then(|s| s.get("targetDigest"))
            .and_then(Value::as_str)
            .map(short)
            .unwrap_or_else(|| "-".to_owned());
        let version = status
            .and_then(|s| s.get("targetVersion"))
            .and_then(Value::as_str)
            .unwrap_or("-");
        let updated = status
            .and_then(|s| s.get("updatedCount"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let header = format!(
            "{phase}: target {target} ({version}), {updated}/{} updated, slots in use {slots}/{}{}",
            rows.len(),
            self.budget,
            health_note(pool)
        );
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut out = std::io::stdout().lock();
        if self.tty {
            if header == self.last_header && rows == self.last {
                return;
            }
            let _ = write!(out, "\x1b[H\x1b[2J");
            let _ = writeln!(out, "[{elapsed:>5.1}s] {header}\n");
            let _ = writeln!(
                out,
                "NODE             STATE        BOOTED                 READY  CORDONED  SLOT"
            );
            for r in &rows {
                let _ = writeln!(
                    out,
                    "{:<16} {:<12} {:<22} {:<6} {:<9} {}",
                    r.name,
                    r.state,
                    r.booted,
                    yes(r.ready),
                    yes(r.cordoned),
                    if r.slot { "held" } else { "" }
                );
            }
        } else {
            if header != self.last_header {
                let _ = writeln!(out, "[{elapsed:>5.1}s] {header}");
            }
            for r in &rows {
                if self.last.iter().any(|l| l == r) {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "[{elapsed:>5.1}s]   {}: {}, booted {}, {}{}{}",
                    r.name,
                    r.state,
                    r.booted,
                    if r.ready { "Ready" } else { "NotReady" },
                    if r.cordoned { ", cordoned" } else { "" },
                    if r.slot { ", holds a reboot slot" } else { "" }
                );
            }
        }
        let _ = out.flush();
        self.last_header = header;
        self.last = rows;
    }
}

/// What a health-gated rollout adds to the header: the canary of the current target
/// while it is not complete (`, canary soaking: 2 nodes, soak 10 s`), and an alert gate
/// that is not open (`, alert gate Firing`); nothing otherwise.
pub(super) fn health_note(pool: &Value) -> String {
    let status = pool.get("status");
    let mut out = String::new();
    let target = status.and_then(|s| s.get("targetDigest"));
    if let Some(canary) = status.and_then(|s| s.get("canary"))
        && canary.get("digest") == target
        && let Some(phase) = canary["phase"].as_str().filter(|p| *p != "Complete")
    {
        let soak = pool
            .pointer("/spec/rollout/canary/soakSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        out.push_str(&format!(
            ", canary {}: {} nodes, soak {soak} s",
            phase.to_lowercase(),
            canary["nodes"].as_u64().unwrap_or(0)
        ));
    }
    if let Some(state) = status
        .and_then(|s| s.pointer("/alertGate/state"))
        .and_then(Value::as_str)
        .filter(|s| *s != "Open")
    {
        out.push_str(&format!(", alert gate {state}"));
    }
    out
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The pool's status and deployHistory, as tables.
pub(super) fn print_summary(handle: &kube_emulator::Handle, max_slots: usize) {
    let pool = handle
        .get(GROUP, "bootcnodepools", "", POOL)
        .unwrap_or(Value::Null);
    let status = pool.get("status").cloned().unwrap_or(Value::Null);
    let s = |k: &str| {
        status
            .get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_else(|| "-".to_owned())
    };
    println!("\npool `{POOL}` status:");
    for key in [
        "targetImage",
        "targetVersion",
        "nodeCount",
        "updatedCount",
        "updatingCount",
        "stagedCount",
        "degradedCount",
        "lastResolvedTime",
    ] {
        println!("  {key:<17} {}", s(key));
    }
    println!("  most reboot slots held at once: {max_slots}");
    if let Some(conditions) = status.get("conditions").and_then(Value::as_array) {
        println!("  conditions:");
        for c in conditions {
            println!(
                "    {:<12} {:<6} {:<16} {}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            );
        }
    }
    println!("\ndeployHistory:");
    println!(
        "  {:<14} {:<8} {:>5}  {:<21} {:<21}",
        "DIGEST", "VERSION", "NODES", "FIRST DEPLOYED", "LAST DEPLOYED"
    );
    for e in status
        .get("deployHistory")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        println!(
            "  {:<14} {:<8} {:>5}  {:<21} {:<21}",
            short(e["digest"].as_str().unwrap_or("")),
            e["version"].as_str().unwrap_or("-"),
            e["nodeCount"].as_i64().unwrap_or(0),
            e["firstDeployed"].as_str().unwrap_or(""),
            e["lastDeployed"].as_str().unwrap_or("")
        );
    }
}
