//! The alert gate (`spec.health.alerts`): closed, for new slots and approvals alike,
//! while matching alerts fire and (failing closed) while it cannot be asked. Its answer
//! is kept in `status.alertGate`, and it is asked again every `intervalSeconds`, open or
//! not.

use std::time::Duration;

use bootc_crds::conditions::{to_time, up_to_date};
use bootc_crds::pool::{AlertGateState, AlertGateStatus, GatePhase, GateReason};

use super::super::world::GateView;
use super::{Facts, Judgement, Verdict};

/// How many alerts a message names.
const NAMED_ALERTS: usize = 5;

pub(super) fn check(facts: &Facts<'_>, j: &mut Judgement) -> Option<Verdict> {
    let snap = facts.snap;
    let spec = snap
        .pool
        .spec
        .health
        .as_ref()
        .and_then(|h| h.alerts.as_ref())?;
    let interval = Duration::from_secs(u64::try_from(spec.interval_seconds.max(1)).unwrap_or(30));
    // The URL as messages show it: its user name, password and query stay out of the
    // status, the conditions, the Events and the logs.
    let url = bootc_crds::bounds::shown_url(&spec.url);
    let (state, message, checked) = read_gate(&snap.gate, &url, snap.now);
    // The time kept is when the gate was first seen in this state with this message, so
    // that asking again and hearing the same writes nothing.
    let previous = snap
        .pool
        .status
        .as_ref()
        .and_then(|s| s.alert_gate.as_ref());
    let kept = (!message.is_empty()).then(|| message.clone());
    let checked_time = match previous {
        Some(prev) if prev.state == state && prev.message == kept => prev.checked_time.clone(),
        _ => to_time(checked),
    };
    j.alert_gate = Some(AlertGateStatus {
        state,
        message: kept,
        checked_time,
    });
    j.look_again_in(interval);
    let (reason, why) = match state {
        AlertGateState::Open => return None,
        AlertGateState::Unreachable if !spec.fail_closed => return None,
        AlertGateState::Firing => (GateReason::AlertsFiring, message),
        AlertGateState::Unreachable => (
            GateReason::AlertGateUnreachable,
            format!("the alert gate cannot be asked: {message}"),
        ),
    };
    // Firing alerts are the gate doing its work; an alert gate nobody can ask is a
    // problem (the Degraded condition says so).
    let verdict = Verdict::pool(
        reason,
        GatePhase::SlotsAndApprovals,
        format!("alert gate closed: {why}"),
    )
    .up_to_date(up_to_date::ALERT_GATE_CLOSED);
    Some(if reason == GateReason::AlertsFiring {
        verdict.deliberate()
    } else {
        verdict
    })
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
