//! Pool ordering (`spec.rollout.after`): a pool approves reboots for its target only once
//! every pool it names is up to date and not halted. Staging goes on meanwhile. A pool on
//! a cycle of `after` names approves nothing and says so; a named pool that does not
//! exist is waited for.

use std::collections::{BTreeMap, BTreeSet};

use bootc_crds::conditions::{self, pool_degraded, up_to_date};
use bootc_crds::pool::{BootcNodePool, GatePhase, GateReason};

use super::super::world::{PoolSummary, Snapshot};
use super::{Facts, Judgement, Verdict};

/// Closed while a pool named in `after` is not up to date or is halted (on purpose:
/// staging goes on), and on a cycle (a problem, said in the `Degraded` condition).
pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    let (reason, message, deliberate) = match wait(facts.snap) {
        Wait::Clear => return None,
        Wait::Pools(why) => (
            GateReason::WaitingForPools,
            format!("waiting for other pools: {}", super::super::list(&why)),
            true,
        ),
        Wait::Cycle(path) => (
            GateReason::OrderingCycle,
            format!(
                "rollout.after forms a cycle ({}); no reboots are approved until it is broken",
                path.join(" -> ")
            ),
            false,
        ),
    };
    let verdict =
        Verdict::pool(reason, GatePhase::Slots, message).up_to_date(up_to_date::WAITING_FOR_POOLS);
    Some(if deliberate {
        verdict.deliberate()
    } else {
        verdict
    })
}

/// What `after` needs of a pool: its own `after`, and whether its status, for its current
/// generation, says every node runs its target and its rollout is not halted.
pub fn summary(pool: &BootcNodePool) -> PoolSummary {
    let status = pool.status.as_ref();
    let current = status.and_then(|s| s.observed_generation) == pool.metadata.generation;
    let condition =
        |type_: &str| status.and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
    let up_to_date = current
        && condition(conditions::UP_TO_DATE)
            .is_some_and(|c| c.status == "True" && c.reason == up_to_date::ALL_UPDATED);
    let halted = condition(conditions::DEGRADED)
        .is_some_and(|c| c.status == "True" && c.reason == pool_degraded::ROLLOUT_HALTED);
    PoolSummary {
        after: pool.spec.rollout.after.clone(),
        up_to_date,
        halted,
    }
}

/// Why the pool may not approve reboots now because of `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// Every named pool is up to date and not halted.
    Clear,
    /// Named pools that are not there yet: each with why.
    Pools(Vec<String>),
    /// The pool waits on itself through these pools (in order, starting with itself).
    Cycle(Vec<String>),
}

/// Whether the pool in `snap` waits for the pools it names.
pub fn wait(snap: &Snapshot) -> Wait {
    let me = snap.pool.name.as_str();
    let after = &snap.pool.spec.rollout.after;
    if after.is_empty() {
        return Wait::Clear;
    }
    if let Some(cycle) = cycle(me, after, &snap.pools) {
        return Wait::Cycle(cycle);
    }
    let waiting: Vec<String> = after
        .iter()
        .filter_map(|name| match snap.pools.get(name) {
            None => Some(format!("pool {name} does not exist")),
            Some(s) if s.halted => Some(format!("pool {name} is halted")),
            Some(s) if !s.up_to_date => Some(format!("pool {name} is not up to date")),
            Some(_) => None,
        })
        .collect();
    if waiting.is_empty() {
        Wait::Clear
    } else {
        Wait::Pools(waiting)
    }
}

/// A path of `after` names from `me` back to `me`, if there is one (shortest first found
/// by breadth-first search, names in order).
fn cycle(me: &str, after: &[String], pools: &BTreeMap<String, PoolSummary>) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut queue: std::collections::VecDeque<&str> = std::collections::VecDeque::new();
    for name in after {
        if name == me {
            return Some(vec![me.to_owned(), me.to_owned()]);
        }
        if seen.insert(name.as_str()) {
            came_from.insert(name.as_str(), me);
            queue.push_back(name.as_str());
        }
    }
    while let Some(at) = queue.pop_front() {
        let Some(summary) = pools.get(at) else {
            continue;
        };
        for next in &summary.after {
            if next == me {
                let mut path = vec![me.to_owned()];
                let mut step = at;
                let mut back = vec![step.to_owned()];
                while let Some(prev) = came_from.get(step).copied().filter(|p| *p != me) {
                    back.push(prev.to_owned());
                    step = prev;
                }
                back.reverse();
                path.extend(back);
                path.push(me.to_owned());
                return Some(path);
            }
            if seen.insert(next.as_str()) {
                came_from.insert(next.as_str(), at);
                queue.push_back(next.as_str());
            }
        }
    }
    None
}
