//! What else closes the gate to new reboot slots, besides a halt, a pause and a closed
//! window (in [`super::slots`]): the alert gate (`spec.health.alerts`), the pools this
//! one waits for (`spec.rollout.after`), and the canary (`spec.rollout.canary`), which
//! lets only its first nodes through and then holds the rest until they have soaked.
//! Each is decided here once per plan, for the status and for [`super::slots::grant`].

use std::time::Duration;

use bootc_crds::conditions::to_time;
use bootc_crds::pool::{AlertGateState, AlertGateStatus, CanaryPhase, CanaryStatus};

use super::actions::NodeState;
use super::ordering::{self, Wait};
use super::target::Target;
use super::world::GateView;
use super::{Planner, list};

/// How many alerts a message names.
const NAMED_ALERTS: usize = 5;

/// The alert gate: closed while matching alerts fire, and (failing closed) while it
/// cannot be asked; its `status.alertGate`. The gate is asked again every
/// `intervalSeconds` while work remains.
pub(super) fn alert(p: &mut Planner<'_>) {
    let Some(spec) = p
        .snap
        .pool
        .spec
        .health
        .as_ref()
        .and_then(|h| h.alerts.as_ref())
    else {
        return;
    };
    let fail_closed = spec.fail_closed;
    let interval = Duration::from_secs(u64::try_from(spec.interval_seconds.max(1)).unwrap_or(30));
    // The URL as messages show it: its user name, password and query stay out of the
    // status, the conditions, the Events and the logs.
    let url = bootc_crds::bounds::shown_url(&spec.url);
    let now = p.snap.now;
    let (state, message, checked) = read_gate(&p.snap.gate, &url, now);
    match state {
        AlertGateState::Open => {}
        AlertGateState::Firing => p.gate_closed = Some(message.clone()),
        AlertGateState::Unreachable if fail_closed => {
            p.gate_closed = Some(format!("the alert gate cannot be asked: {message}"));
            p.gate_unreachable = Some(message.clone());
        }
        AlertGateState::Unreachable => {}
    }
    // The time kept is when the gate was first seen in this state with this message, so
    // that asking again and hearing the same writes nothing.
    let previous = p
        .snap
        .pool
        .status
        .as_ref()
        .and_then(|s| s.alert_gate.as_ref());
    let message = (!message.is_empty()).then_some(message);
    let checked_time = match previous {
        Some(prev) if prev.state == state && prev.message == message => prev.checked_time.clone(),
        _ => to_time(checked),
    };
    p.alert_gate = Some(AlertGateStatus {
        state,
        message,
        checked_time,
    });
    p.requeue_in(interval);
}

/// What the gate said, as `(state, message, when)`.
fn read_gate(
    gate: &GateView,
    url: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> (AlertGateState, String, chrono::DateTime<chrono::Utc>) {
    match gate {
        GateView::NotConfigured => (
            AlertGateState::Unreachable,
            format!("{url} has not been asked yet"),
            now,
        ),
        GateView::Open { checked } => (AlertGateState::Open, String::new(), *checked),
        GateView::Firing {
            alerts,
            count,
            checked,
        } => {
            let mut named = alerts
                .iter()
                .take(NAMED_ALERTS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if *count > NAMED_ALERTS.min(alerts.len()) {
                named.push_str(&format!(
                    " and {} more",
                    count - NAMED_ALERTS.min(alerts.len())
                ));
            }
            (
                AlertGateState::Firing,
                format!("{count} matching alerts fire at {url}: {named}"),
                *checked,
            )
        }
        GateView::Unreachable { error, checked } => {
            (AlertGateState::Unreachable, error.clone(), *checked)
        }
    }
}

/// The pools this one waits for: closed while any is not up to date or halted; a
/// cycle closes it and is reported.
pub(super) fn order(p: &mut Planner<'_>) {
    p.order = ordering::wait(p.snap);
}

/// Whether the alert gate or the ordering keeps new slots closed.
pub(super) fn closed(p: &Planner<'_>) -> bool {
    p.gate_closed.is_some() || p.order != Wait::Clear
}

/// The canary of `target`: its phase (kept in `status.canary`) and how many more slots it
/// lets through now (`p.canary_room`; `None`: no limit).
pub(super) fn canary(p: &mut Planner<'_>, pool_size: usize, target: &Target) {
    let Some(spec) = p.snap.pool.spec.rollout.canary.clone() else {
        return;
    };
    if p.rolling_back.is_some() {
        // A rollback goes to an image the pool ran before: no canary.
        return;
    }
    let count = p.read(super::limits::canary(&spec, pool_size)).max(1);
    let soak = p.read(super::limits::canary_soak(&spec));
    let digest = target.digest.to_string();
    let now = p.snap.now;
    let previous = p
        .snap
        .pool
        .status
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .filter(|c| c.digest == digest);
    let done = p
        .states
        .values()
        .filter(|s| **s == NodeState::UpToDate)
        .count();
    let left = p.states.len() - done;
    let troubled =
        !p.unhealthy.is_empty() || !p.on_target_degraded.is_empty() || p.gate_closed.is_some();
    let (phase, started, room) =
        if previous.is_some_and(|c| c.phase == CanaryPhase::Complete) || left == 0 {
            (
                CanaryPhase::Complete,
                previous.and_then(|c| c.soak_started_time.clone()),
                None,
            )
        } else if done + p.on_target_degraded.len() < count {
            (
                CanaryPhase::Updating,
                None,
                Some(count.saturating_sub(done + p.holders + p.on_target_degraded.len())),
            )
        } else {
            let kept = previous
                .filter(|c| c.phase == CanaryPhase::Soaking && !troubled)
                .and_then(|c| c.soak_started_time.as_ref())
                .and_then(bootc_crds::conditions::from_time);
            // A new soak starts at the next whole second (the status keeps whole seconds), so
            // that it is never shorter than soakSeconds.
            let start = kept.unwrap_or_else(|| ceil_second(now));
            let soaked = (now - start).to_std().unwrap_or(Duration::ZERO);
            if !troubled && soaked >= soak {
                // The plan that ends the soak only says so: the rest of the pool goes in
                // the next plan, once the status reads `Complete`, so that nobody sees a
                // node beyond the canary move while the status still says `Soaking`. The
                // status write wakes the pool; the requeue is in case it does not.
                p.requeue_in(Duration::from_secs(1));
                (CanaryPhase::Complete, to_time(start), Some(0))
            } else {
                p.requeue_in(soak.saturating_sub(soaked) + Duration::from_millis(10));
                (CanaryPhase::Soaking, to_time(start), Some(0))
            }
        };
    p.canary_room = room;
    p.canary = Some(CanaryStatus {
        digest,
        phase,
        nodes: i32::try_from(count).unwrap_or(i32::MAX),
        soak_started_time: started,
    });
    p.canary_note = note(phase, done, count, soak, troubled);
}

/// What a canary that is not complete waits for.
fn note(
    phase: CanaryPhase,
    done: usize,
    count: usize,
    soak: Duration,
    troubled: bool,
) -> Option<String> {
    match phase {
        CanaryPhase::Complete => None,
        CanaryPhase::Updating => Some(format!(
            "canary: {done}/{count} canary nodes run the target; the rest of the pool waits"
        )),
        CanaryPhase::Soaking => Some(format!(
            "canary: {count} nodes run the target, soaking for {}s{}; the rest of the pool waits",
            soak.as_secs(),
            if troubled {
                ", restarted because of a problem"
            } else {
                ""
            }
        )),
    }
}

/// What keeps the gate closed beyond halts, pauses and windows, for the `UpToDate`
/// condition: `(reason, message)`.
pub(super) fn why_waiting(p: &Planner<'_>) -> Option<(&'static str, String)> {
    use bootc_crds::conditions::up_to_date;
    if let Some(why) = &p.gate_closed {
        return Some((
            up_to_date::ALERT_GATE_CLOSED,
            format!("alert gate closed: {why}"),
        ));
    }
    match &p.order {
        Wait::Clear => {}
        Wait::Pools(why) => {
            return Some((
                up_to_date::WAITING_FOR_POOLS,
                format!("waiting for other pools: {}", list(why)),
            ));
        }
        Wait::Cycle(_) => {
            return Some((
                up_to_date::WAITING_FOR_POOLS,
                "rollout.after forms a cycle (see the Degraded condition)".to_owned(),
            ));
        }
    }
    p.canary_note.clone().map(|m| (up_to_date::CANARY, m))
}

/// `t` rounded up to a whole second.
fn ceil_second(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    use chrono::{SubsecRound, Timelike};
    if t.nanosecond() == 0 {
        t
    } else {
        t.trunc_subsecs(0) + chrono::Duration::seconds(1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use bootc_crds::pool::BootcNodePool;
    use chrono::TimeZone;

    use super::super::world::{Lookup, NodeInfo, NodeView, PoolView, PullSecretView, Snapshot};
    use super::*;

    /// What the pool's alert gate URL carries that nothing may show.
    const SECRETS: [&str; 3] = ["alice", "s3cret", "t0ken"];

    /// A pool gated by an alert source whose URL carries a user, a password and a token,
    /// with one matching Node, as the gate answered `gate`.
    fn snapshot(gate: GateView) -> Snapshot {
        let pool: BootcNodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": "workers"},
            "spec": {
                "nodeSelector": {"matchLabels": {"role": "worker"}},
                "image": {"ref": format!("quay.io/os/node@sha256:{}", "b".repeat(64))},
                "rollout": {"maxUnavailable": 1},
                "health": {"alerts": {
                    "url": "http://alice:s3cret@am.test:9093/?token=t0ken",
                    "matchers": ["severity=\"critical\""],
                }},
            }
        }))
        .unwrap();
        let labels = BTreeMap::from([("role".to_owned(), "worker".to_owned())]);
        Snapshot {
            pool: PoolView {
                name: "workers".into(),
                generation: Some(1),
                spec: pool.spec,
                status: None,
                deleting: false,
                finalized: true,
            },
            lookup: Lookup::NotAsked,
            pull_secret: PullSecretView::default(),
            other_pools: Vec::new(),
            pools: BTreeMap::new(),
            gate,
            nodes: vec![NodeView {
                name: "n1".into(),
                node: Some(NodeInfo {
                    ready: true,
                    ..NodeInfo::with_labels(labels)
                }),
                bootc: None,
            }],
            drains: BTreeMap::new(),
            progress: None,
            now: chrono::Utc
                .with_ymd_and_hms(2026, 11, 22, 12, 0, 0)
                .unwrap(),
        }
    }

    /// Plans `gate` and checks that the URL shows in the alert gate's status, without
    /// anything of [`SECRETS`] in the status, its conditions or any action (Events
    /// included); returns the alert gate's message.
    fn planned_without_secrets(gate: GateView) -> String {
        let plan = super::super::plan(&snapshot(gate));
        let everything = format!("{plan:?}");
        for secret in SECRETS {
            assert!(
                !everything.contains(secret),
                "{secret:?} shows in the plan: {everything}"
            );
        }
        let message = plan
            .status
            .alert_gate
            .as_ref()
            .and_then(|g| g.message.clone())
            .unwrap();
        assert!(message.contains("http://am.test:9093"), "{message}");
        message
    }

    #[test]
    fn the_alert_gate_url_shows_without_credentials_or_query_when_alerts_fire() {
        let checked = chrono::Utc
            .with_ymd_and_hms(2026, 11, 22, 11, 59, 0)
            .unwrap();
        let message = planned_without_secrets(GateView::Firing {
            alerts: vec!["NodeTrouble{severity=\"critical\"}".into()],
            count: 1,
            checked,
        });
        assert_eq!(
            message,
            "1 matching alerts fire at http://am.test:9093/: NodeTrouble{severity=\"critical\"}"
        );
    }

    #[test]
    fn the_alert_gate_url_shows_without_credentials_or_query_when_not_yet_asked() {
        let message = planned_without_secrets(GateView::NotConfigured);
        assert_eq!(message, "http://am.test:9093/ has not been asked yet");
    }
}
