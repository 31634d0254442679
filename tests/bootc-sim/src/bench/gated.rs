//! What a canary (`--canary`) and an alert gate (`--alert-gate`) must show in the reboot
//! slots the controller granted, followed from the event stream: the first node after
//! the canary gets its slot no sooner than the soak after the canary's last one, and no
//! slot is granted before the gate first answered that no alert fires.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::gate::Answers;
use super::{round, secs};

/// The canary's figure and what is wrong with it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct CanaryCheck {
    /// Seconds from the canary's last grant to the next grant (`None` when the canary is
    /// the whole pool or the rollout did not get past it).
    pub(super) gap_s: Option<f64>,
    /// Set when that gap is shorter than the soak.
    pub(super) failure: Option<String>,
}

/// Holds `grants` (every slot grant, in order) to a canary of `canary` nodes soaking
/// `soak`: the first `canary` grants are the canary's, and the next one comes only once
/// they all ran the target and soaked, so no sooner than `soak` after the last of them.
pub(super) fn canary_check(grants: &[Instant], canary: usize, soak: Duration) -> CanaryCheck {
    let (Some(last), Some(next)) = (
        canary.checked_sub(1).and_then(|i| grants.get(i)),
        grants.get(canary),
    ) else {
        return CanaryCheck::default();
    };
    let gap = next.saturating_duration_since(*last);
    let failure = (gap < soak).then(|| {
        format!(
            "the first node after the canary of {canary} got its reboot slot {:.2} s after the canary's last, sooner than the {} s soak",
            secs(gap),
            soak.as_secs()
        )
    });
    CanaryCheck {
        gap_s: Some(secs(gap)),
        failure,
    }
}

/// What is wrong with the alert gate's part: never asked, or a slot granted before it
/// first answered open.
pub(super) fn gate_problems(
    first_grant: Option<Instant>,
    answers: &Answers,
    t0: Instant,
) -> Vec<String> {
    let mut problems = Vec::new();
    if answers.firing + answers.open == 0 {
        problems.push("the alert gate's Alertmanager was never asked for its alerts".to_owned());
    }
    if let Some(grant) = first_grant {
        let since = |t: Instant| secs(t.saturating_duration_since(t0));
        match answers.first_open {
            Some(open) if open <= grant => {}
            Some(open) => problems.push(format!(
                "a reboot slot was granted {:.2} s after the pool's creation, before the alert gate first answered that no alert fires ({:.2} s)",
                since(grant),
                since(open)
            )),
            None => problems.push(format!(
                "a reboot slot was granted {:.2} s after the pool's creation, while the alert gate had never answered that no alert fires",
                since(grant)
            )),
        }
    }
    problems
}

/// The report's `alert_gate` object.
pub(super) fn gate_json(answers: &Answers, firing: Duration, t0: Instant) -> Value {
    json!({
        "firing_s": round(secs(firing), 3),
        "answered_firing": answers.firing,
        "answered_open": answers.open,
        "other_requests": answers.other,
        "first_open_s": answers
            .first_open
            .map(|t| round(secs(t.saturating_duration_since(t0)), 3)),
    })
}
