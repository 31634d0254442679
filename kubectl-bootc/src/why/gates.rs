//! What holds back every staged node of a pool: a pause, a halt or another pool-level
//! `Degraded` reason, a closed maintenance window, a full reboot budget. Worded after
//! the conditions the controller writes (`controller/src/plan/status.rs`).

use bootc_crds::budget::Budget;
use bootc_crds::conditions::{self, pool_degraded, up_to_date};
use bootc_crds::pool::{BootcNodePool, MaintenanceWindow};
use bootc_crds::window::{WindowState, window_state};
use bootc_pool_common::node::node_ready;
use chrono::{DateTime, SecondsFormat, Utc};
use kube::ResourceExt;

use crate::objects::{Cluster, condition, holds_slot};
use crate::status::Slots;
use crate::table::human_duration;

/// What kind of thing closes the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    /// `Degraded/RolloutHalted` or `Degraded/InvalidSpec`.
    Halted,
    /// `rollout.paused`.
    Paused,
    /// Outside every maintenance window.
    Window,
    /// Every slot of `maxUnavailable` is taken.
    Budget,
    /// Matching alerts fire, or the gate cannot be asked and fails closed.
    AlertGate,
    /// Pools named in `rollout.after` are not up to date.
    Ordering,
    /// The canary goes first (not a problem: the rollout goes on by itself).
    Canary,
}

/// `Degraded` reasons that keep every new reboot back (said as gates).
pub const BLOCKING: [&str; 4] = [
    pool_degraded::ROLLOUT_HALTED,
    pool_degraded::INVALID_SPEC,
    pool_degraded::ORDERING_CYCLE,
    pool_degraded::ALERT_GATE_UNREACHABLE,
];

/// One thing that keeps a pool's staged nodes from getting a reboot slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// What kind.
    pub kind: GateKind,
    /// What it is, for the admin.
    pub text: String,
}

/// `rollout.paused`, with how to resume.
pub fn paused(pool: &BootcNodePool) -> Option<String> {
    pool.spec.rollout.paused.then(|| {
        format!(
            "paused: spec.rollout.paused is true, so no new reboot is approved (UpToDate/Paused); resume with `kubectl bootc resume {}`",
            pool.name_any()
        )
    })
}

/// The pool's `Degraded` condition when it is `True`, worded by its reason.
pub fn degraded(pool: &BootcNodePool) -> Option<String> {
    let status = pool.status.as_ref()?;
    let c = condition(&status.conditions, conditions::DEGRADED).filter(|c| c.status == "True")?;
    if let Some(what) = super::health::degraded_text(pool, &c.reason) {
        return Some(format!("{what} (Degraded/{}): {}", c.reason, c.message));
    }
    let what = match c.reason.as_str() {
        pool_degraded::ROLLOUT_HALTED => {
            "rollout halted: too many nodes holding reboot slots are unhealthy, so no new reboot is approved"
        }
        pool_degraded::TAG_RESOLUTION_ERROR => {
            "the tag cannot be resolved; the last good target keeps rolling out"
        }
        pool_degraded::INVALID_SPEC => "invalid spec: nothing is rolled out until it is fixed",
        pool_degraded::NODE_CONFLICT => "nodes selected by more than one pool are left alone",
        pool_degraded::NODE_DEGRADED => "nodes report Degraded",
        _ => "degraded",
    };
    Some(format!("{what} (Degraded/{}): {}", c.reason, c.message))
}

/// `days start +duration zone` of each window.
fn describe_windows(windows: &[MaintenanceWindow]) -> String {
    windows
        .iter()
        .map(|w| {
            let days: Vec<String> = w.days.iter().map(|d| format!("{d:?}")).collect();
            format!(
                "{} {} +{} {}",
                days.join(","),
                w.start,
                w.duration,
                w.time_zone
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Outside every maintenance window now: when the next one opens (by the crate's own
/// window code), and the windows.
pub fn window(pool: &BootcNodePool, now: DateTime<Utc>) -> Option<String> {
    let windows = &pool.spec.rollout.maintenance_windows;
    let reported = pool.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, conditions::UP_TO_DATE)
            .is_some_and(|c| c.reason == up_to_date::OUTSIDE_MAINTENANCE_WINDOW)
    });
    let tag = if reported {
        " (UpToDate/OutsideMaintenanceWindow)"
    } else {
        ""
    };
    match window_state(windows, now) {
        Ok(WindowState::Closed { next }) => {
            let when = match next {
                Some(t) => format!(
                    "the next window opens at {} (in {})",
                    t.to_rfc3339_opts(SecondsFormat::Secs, true),
                    human_duration(t - now)
                ),
                None => "no window ever opens (none names a day)".to_owned(),
            };
            Some(format!(
                "outside the maintenance windows{tag}: {when}; windows: {}",
                describe_windows(windows)
            ))
        }
        Ok(_) => None,
        Err(e) => Some(format!(
            "the maintenance windows cannot be evaluated, so no reboot is approved: {e}"
        )),
    }
}

/// The reboot budget: who holds slots, which members without one are NotReady (they
/// count against `maxUnavailable` too), and whether that fills it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetGate {
    /// Members with the reboot-slot annotation.
    pub holders: Vec<String>,
    /// Members without a slot whose Node is not Ready.
    pub not_ready: Vec<String>,
    /// `maxUnavailable` resolved, or why it cannot be.
    pub budget: Result<u32, String>,
}

impl BudgetGate {
    /// No slot is free.
    pub fn full(&self) -> bool {
        match self.budget {
            Ok(b) => self.holders.len() + self.not_ready.len() >= b as usize,
            Err(_) => true,
        }
    }

    /// `2/2 slots in use (maxUnavailable 2): worker-1, worker-2; NotReady: worker-5`.
    pub fn describe(&self, pool: &BootcNodePool) -> String {
        let max = match &pool.spec.rollout.max_unavailable {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n.to_string(),
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
        };
        let budget = match &self.budget {
            Ok(b) => b.to_string(),
            Err(_) => "?".to_owned(),
        };
        let mut out = format!(
            "{}/{budget} slots in use (maxUnavailable {max})",
            self.holders.len() + self.not_ready.len()
        );
        if !self.holders.is_empty() {
            out.push_str(&format!(": held by {}", self.holders.join(", ")));
        }
        if !self.not_ready.is_empty() {
            out.push_str(&format!(
                "; NotReady nodes count too: {}",
                self.not_ready.join(", ")
            ));
        }
        out
    }
}

/// The budget of `pool` as its BootcNodes and Nodes stand.
pub fn budget_gate(cluster: &Cluster, pool: &BootcNodePool) -> BudgetGate {
    let mut holders = Vec::new();
    let mut not_ready = Vec::new();
    for member in cluster.members(&pool.name_any()) {
        let name = member.typed.name_any();
        if holds_slot(&member.typed) {
            holders.push(name);
        } else if cluster.node(&name).is_some_and(|n| !node_ready(n)) {
            not_ready.push(name);
        }
    }
    let budget = match Slots::of(cluster, pool).budget {
        Some(b) => Ok(b),
        None => Err(match Budget::parse(&pool.spec.rollout.max_unavailable) {
            Err(e) => format!("spec.rollout.maxUnavailable: {e}"),
            Ok(_) => "spec.rollout.maxUnavailable cannot be resolved".to_owned(),
        }),
    };
    BudgetGate {
        holders,
        not_ready,
        budget,
    }
}

/// Everything that keeps the pool's staged nodes from a reboot slot now.
pub fn pool_gates(cluster: &Cluster, pool: &BootcNodePool) -> Vec<Gate> {
    let mut gates = Vec::new();
    let halted = pool.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, conditions::DEGRADED)
            .is_some_and(|c| c.status == "True" && BLOCKING.contains(&c.reason.as_str()))
    });
    if halted && let Some(text) = degraded(pool) {
        gates.push(Gate {
            kind: GateKind::Halted,
            text,
        });
    }
    if let Some(text) = paused(pool) {
        gates.push(Gate {
            kind: GateKind::Paused,
            text,
        });
    }
    if let Some(text) = window(pool, cluster.now) {
        gates.push(Gate {
            kind: GateKind::Window,
            text,
        });
    }
    gates.extend(health_gates(cluster, pool));
    let budget = budget_gate(cluster, pool);
    if budget.full() {
        let text = match &budget.budget {
            Err(e) => format!("no reboot slot can be granted: {e}"),
            Ok(_) => format!("reboot budget full: {}", budget.describe(pool)),
        };
        gates.push(Gate {
            kind: GateKind::Budget,
            text,
        });
    }
    gates
}

/// The alert gate, the pools waited for and the canary.
fn health_gates(cluster: &Cluster, pool: &BootcNodePool) -> Vec<Gate> {
    let mut gates = Vec::new();
    if let Some(Err(text)) = super::health::alert_gate(pool, cluster.now) {
        gates.push(Gate {
            kind: GateKind::AlertGate,
            text,
        });
    }
    if let Some(text) = super::health::waiting_for_pools(cluster, pool) {
        gates.push(Gate {
            kind: GateKind::Ordering,
            text,
        });
    }
    if let Some((_, text)) = super::health::canary(pool, cluster.now) {
        gates.push(Gate {
            kind: GateKind::Canary,
            text,
        });
    }
    gates
}
