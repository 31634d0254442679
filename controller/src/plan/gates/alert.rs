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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use bootc_crds::pool::BootcNodePool;
    use chrono::TimeZone;

    use super::super::super::world::{
        Lookup, NodeInfo, NodeView, PoolView, PullSecretView, Snapshot,
    };
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
        let plan = super::super::super::plan(&snapshot(gate));
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
