//! The canary (`spec.rollout.canary`): the first `nodes` of a new target go alone; once
//! they run it, they soak for `soakSeconds` (a problem meanwhile starts the count again)
//! and only then does the rest of the pool go on. Its phase is kept in `status.canary`.
//! A rollback goes to an image the pool ran before: no canary.

use std::time::Duration;

use bootc_crds::conditions::{to_time, up_to_date};
use bootc_crds::pool::{CanaryPhase, CanaryStatus, GatePhase, GateReason};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::actions::NodeState;
use super::{Facts, Judgement, Verdict};

pub(super) fn check(facts: &Facts<'_>, j: &mut Judgement) -> Option<Verdict> {
    let spec = facts.snap.pool.spec.rollout.canary.as_ref()?;
    let target = facts.target?;
    if facts.rolling_back.is_some() {
        return None;
    }
    let count = j
        .read(super::super::limits::canary(spec, facts.members.len()))
        .max(1);
    let soak = j.read(super::super::limits::canary_soak(spec));
    let digest = target.digest.to_string();
    let previous = facts
        .snap
        .pool
        .status
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .filter(|c| c.digest == digest);
    let alerts = j.verdicts.iter().any(|v| {
        matches!(
            v.reason,
            GateReason::AlertsFiring | GateReason::AlertGateUnreachable
        )
    });
    let now = Now::of(facts, count, alerts);
    let (phase, started, room, wait) = now.phase(previous, soak, facts.snap.now);
    j.canary = Some(CanaryStatus {
        digest,
        phase,
        nodes: i32::try_from(count).unwrap_or(i32::MAX),
        soak_started_time: started,
    });
    if let Some(after) = wait {
        j.look_again_in(after);
    }
    Some(now.verdict(phase, room?, soak))
}

/// Where the canary stands in this plan.
struct Now {
    /// The canary's size.
    count: usize,
    /// Members on the target, members left, members degraded on the target, holders.
    done: usize,
    left: usize,
    degraded: usize,
    holders: usize,
    /// A problem (an unhealthy holder, a degraded node on the target, a closed alert
    /// gate) restarts the soak.
    troubled: bool,
}

impl Now {
    fn of(facts: &Facts<'_>, count: usize, alerts: bool) -> Self {
        let done = facts.states.count(NodeState::UpToDate);
        let degraded = facts.on_target_degraded.len();
        Now {
            count,
            done,
            left: facts.states.len() - done,
            degraded,
            holders: facts.holders,
            troubled: !facts.unhealthy.is_empty() || degraded > 0 || alerts,
        }
    }

    /// The phase, when the soak started, how many more slots it lets through (`None`:
    /// any) and when to look again.
    fn phase(
        &self,
        previous: Option<&CanaryStatus>,
        soak: Duration,
        now: DateTime<Utc>,
    ) -> (CanaryPhase, Option<Time>, Option<usize>, Option<Duration>) {
        if previous.is_some_and(|c| c.phase == CanaryPhase::Complete) || self.left == 0 {
            let started = previous.and_then(|c| c.soak_started_time.clone());
            return (CanaryPhase::Complete, started, None, None);
        }
        if self.done + self.degraded < self.count {
            let room = self
                .count
                .saturating_sub(self.done + self.holders + self.degraded);
            return (CanaryPhase::Updating, None, Some(room), None);
        }
        let kept = previous
            .filter(|c| c.phase == CanaryPhase::Soaking && !self.troubled)
            .and_then(|c| c.soak_started_time.as_ref())
            .and_then(bootc_crds::conditions::from_time);
        // A new soak starts at the next whole second (the status keeps whole seconds), so
        // that it is never shorter than soakSeconds.
        let start = kept.unwrap_or_else(|| ceil_second(now));
        let soaked = (now - start).to_std().unwrap_or(Duration::ZERO);
        if !self.troubled && soaked >= soak {
            // The plan that ends the soak only says so: the rest of the pool goes in the
            // next plan, once the status reads `Complete`, so that nobody sees a node
            // beyond the canary move while the status still says `Soaking`. The status
            // write wakes the pool; the look again is in case it does not.
            let wait = Some(Duration::from_secs(1));
            (CanaryPhase::Complete, to_time(start), Some(0), wait)
        } else {
            let wait = Some(soak.saturating_sub(soaked) + Duration::from_millis(10));
            (CanaryPhase::Soaking, to_time(start), Some(0), wait)
        }
    }

    /// The verdict of a canary that lets `room` more slots through.
    fn verdict(&self, phase: CanaryPhase, room: usize, soak: Duration) -> Verdict {
        let (done, count) = (self.done, self.count);
        let (reason, message) = match phase {
            CanaryPhase::Updating => (
                GateReason::CanaryUpdating,
                format!(
                    "canary: {done}/{count} canary nodes run the target; the rest of the pool waits"
                ),
            ),
            CanaryPhase::Soaking => (
                GateReason::CanarySoaking,
                format!(
                    "canary: {count} nodes run the target, soaking for {}s{}; the rest of the pool waits",
                    soak.as_secs(),
                    if self.troubled {
                        ", restarted because of a problem"
                    } else {
                        ""
                    }
                ),
            ),
            // The soak just ended: nothing is granted until the status says so.
            CanaryPhase::Complete => (
                GateReason::CanarySoaking,
                format!(
                    "canary: {count} nodes soaked for {}s; the rest of the pool goes next",
                    soak.as_secs()
                ),
            ),
        };
        let mut verdict = Verdict::pool(reason, GatePhase::Slots, message);
        verdict.admits = Some(room);
        // A soak is a wait on purpose, bounded by soakSeconds; canary nodes that do not
        // update are a stall like any other. The plan that ends the soak says nothing new
        // in the status; the next one does.
        verdict.deliberate = phase != CanaryPhase::Updating;
        if phase != CanaryPhase::Complete {
            verdict.up_to_date = Some(up_to_date::CANARY);
        }
        verdict
    }
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
