//! `spec.rollout.maintenanceWindows`: outside every window no new slot is granted, and
//! the plan looks again when the next one opens. Windows that cannot be evaluated are
//! closed, never to open (and the spec problem is reported).

use std::time::Duration;

use bootc_crds::conditions::up_to_date;
use bootc_crds::pool::{GatePhase, GateReason};

use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, j: &mut Judgement) -> Option<Verdict> {
    let now = facts.snap.now;
    let next = j.read(super::super::limits::window(
        &facts.snap.pool.spec.rollout,
        now,
    ))?;
    let when = next.map_or_else(
        || "no maintenance window ever opens".to_owned(),
        |t| {
            format!(
                "the next maintenance window opens at {}",
                super::super::stamp(t)
            )
        },
    );
    let verdict = Verdict::pool(
        GateReason::OutsideMaintenanceWindow,
        GatePhase::Slots,
        format!("outside the maintenance windows, {when}"),
    )
    .deliberate()
    .up_to_date(up_to_date::OUTSIDE_MAINTENANCE_WINDOW);
    Some(match next {
        Some(next) => {
            let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
            verdict.look_again(wait + Duration::from_millis(10))
        }
        None => verdict,
    })
}
