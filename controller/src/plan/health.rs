//! What a plan says of its pool's health beyond the status, for the controller's
//! metrics: how many members' agents have not answered their spec, and the longest any
//! member has been Staging or Rebooting.
//!
//! Each of these is a fact of one member's view and the state the plan gives it. The
//! members planned in full are read once the plan's states are final; the settled
//! members' part is kept with their outcomes (see [`super::settled`]), so that a plan
//! that visits only the members that changed does not visit the others for it.

use bootc_crds::conditions::{IDLE, from_time};
use chrono::{DateTime, Utc};

use super::actions::NodeState;
use super::states::States;
use super::world::NodeView;

/// The states whose time is measured: the two a member can get stuck in without the
/// plan calling it Degraded.
pub const TIMED_STATES: [NodeState; 2] = [NodeState::Staging, NodeState::Rebooting];

/// The pool's health as one plan found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Members with a BootcNode (not being deleted) whose `status.observedGeneration` is
    /// behind its `metadata.generation`, or missing.
    pub unreported: usize,
    /// For each of [`TIMED_STATES`], the longest any member has been in it, in whole
    /// seconds (0 when no member is). A Staging member counts from its `Idle` condition's
    /// `lastTransitionTime` (when its agent left Idle to pull) while that condition is
    /// False, and not at all before its agent left Idle; a Rebooting member from its
    /// reboot slot annotation (when the slot was granted), and a slot granted by this
    /// very plan counts 0.
    pub oldest: [i64; TIMED_STATES.len()],
}

/// The settled members' part of [`Health`]: what their kept outcomes add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Kept {
    /// Members unreported.
    pub unreported: usize,
    /// For each of [`TIMED_STATES`], the earliest time a member in it entered it (a
    /// Staging member left Idle, a Rebooting one was granted its slot).
    pub since: [Option<DateTime<Utc>>; TIMED_STATES.len()],
}

impl Kept {
    /// One settled member's part: whether it is `unreported`, and since when it has
    /// been in its state, when that is one of [`TIMED_STATES`] (`at`, its place there).
    pub fn add(&mut self, unreported: bool, since: Option<(usize, DateTime<Utc>)>) {
        self.unreported += usize::from(unreported);
        if let Some((at, t)) = since {
            self.since[at] = earliest(self.since[at], Some(t));
        }
    }
}

/// Where `state` is among [`TIMED_STATES`].
pub(super) fn timed(state: NodeState) -> Option<usize> {
    TIMED_STATES.iter().position(|s| *s == state)
}

/// The earlier of two times, where there is one.
fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The health: the settled members' part (`kept`), and the members planned in full
/// (`unsettled`, in member order) with the states the plan gave them.
pub(super) fn of(
    kept: &Kept,
    unsettled: &[&NodeView],
    states: &States,
    now: DateTime<Utc>,
) -> Health {
    let mut health = Health {
        unreported: kept.unreported,
        oldest: [0; TIMED_STATES.len()],
    };
    let mut since = kept.since;
    let mut states = states.in_order();
    for view in unsettled {
        let Some(state) = states.get(&view.name) else {
            continue;
        };
        health.unreported += usize::from(unreported(view));
        match state {
            NodeState::Staging => since[0] = earliest(since[0], staging_since(view)),
            NodeState::Rebooting => since[1] = earliest(since[1], rebooting_since(view, now)),
            _ => {}
        }
    }
    for (oldest, since) in health.oldest.iter_mut().zip(since) {
        *oldest = since.map_or(0, |t| (now - t).num_seconds().max(0));
    }
    health
}

/// The member has a BootcNode (not being deleted) and its agent has not answered the
/// current spec.
pub(super) fn unreported(view: &NodeView) -> bool {
    view.bootc.as_ref().is_some_and(|b| {
        !b.deleting()
            && b.status().and_then(|s| s.observed_generation) < b.generation()
            && b.generation().is_some()
    })
}

/// Since when the member has been Staging: when its agent left Idle (its `Idle`
/// condition False), when it has.
pub(super) fn staging_since(view: &NodeView) -> Option<DateTime<Utc>> {
    view.bootc
        .as_ref()?
        .status()?
        .conditions
        .iter()
        .find(|c| c.type_ == IDLE && c.status == "False")
        .and_then(|c| from_time(&c.last_transition_time))
}

/// Since when the member has been Rebooting: when its slot was granted (its
/// annotation, read with its view), or `now` for a slot granted by this plan.
fn rebooting_since(view: &NodeView, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    view.bootc.as_ref()?;
    Some(granted_at(view).unwrap_or(now))
}

/// When the member's slot was granted, as its annotation says.
pub(super) fn granted_at(view: &NodeView) -> Option<DateTime<Utc>> {
    view.bootc.as_ref()?.granted_at()
}

#[cfg(test)]
mod tests {
    use bootc_crds::REBOOT_SLOT_ANNOTATION;
    use bootc_crds::node::BootcNodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use serde_json::json;

    use super::*;
    use crate::plan::BootcView;

    fn now() -> DateTime<Utc> {
        "2026-11-22T12:00:00Z".parse().unwrap()
    }

    fn condition(type_: &str, status: &str, since: &str) -> Condition {
        serde_json::from_value(json!({
            "type": type_, "status": status, "reason": "Why", "message": "",
            "lastTransitionTime": since,
        }))
        .unwrap()
    }

    /// A member whose BootcNode is at `generation`, its agent having answered `observed`,
    /// with an `Idle` condition and annotations.
    fn member(
        name: &str,
        (generation, observed): (i64, Option<i64>),
        idle: Option<Condition>,
        annotations: &[(&str, &str)],
    ) -> NodeView {
        NodeView {
            name: name.into(),
            node: None,
            bootc: Some(BootcView::of_parts(
                Some("p"),
                Some(generation),
                None,
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                serde_json::from_value(json!({"desiredImage": "quay.io/os@sha256:aa"})).unwrap(),
                Some(BootcNodeStatus {
                    observed_generation: observed,
                    conditions: idle.into_iter().collect(),
                    ..BootcNodeStatus::default()
                }),
            )),
        }
    }

    fn states(of: &[(&str, NodeState)]) -> States {
        of.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
    }

    #[test]
    fn members_planned_in_full_count_when_unreported_and_by_their_time_in_each_state() {
        let hour_ago = "2026-11-22T11:00:00Z";
        let views = [
            // Staging for an hour, answered.
            member(
                "a",
                (3, Some(3)),
                Some(condition(IDLE, "False", hour_ago)),
                &[],
            ),
            // Staging for ten minutes, its agent behind.
            member(
                "b",
                (4, Some(3)),
                Some(condition(IDLE, "False", "2026-11-22T11:50:00Z")),
                &[],
            ),
            // Pending with an agent that never reported: unreported, not timed.
            member("c", (1, None), None, &[]),
            // Its agent has not left Idle: not timed as Staging.
            member(
                "d",
                (2, Some(2)),
                Some(condition(IDLE, "True", "2026-01-01T00:00:00Z")),
                &[],
            ),
            // Holds a slot granted 20 minutes ago (the Idle time is older: not used).
            member(
                "e",
                (5, Some(5)),
                Some(condition(IDLE, "False", hour_ago)),
                &[(REBOOT_SLOT_ANNOTATION, "2026-11-22T11:40:00Z")],
            ),
            // No state in the plan (not a member): not counted at all.
            member("f", (9, Some(1)), None, &[]),
        ];
        let unsettled: Vec<&NodeView> = views.iter().collect();
        let states = states(&[
            ("a", NodeState::Staging),
            ("b", NodeState::Staging),
            ("c", NodeState::Pending),
            ("d", NodeState::Staging),
            ("e", NodeState::Rebooting),
        ]);
        let health = of(&Kept::default(), &unsettled, &states, now());
        assert_eq!(
            health,
            Health {
                unreported: 2,
                oldest: [3600, 1200],
            }
        );

        // A slot granted by this very plan (no annotation yet) counts 0, not the Idle
        // time.
        let granted = member(
            "e",
            (5, Some(5)),
            Some(condition(IDLE, "False", hour_ago)),
            &[],
        );
        let states = self::states(&[("e", NodeState::Rebooting)]);
        assert_eq!(
            of(&Kept::default(), &[&granted], &states, now()).oldest,
            [0, 0]
        );
    }

    /// The settled members' part adds to the members planned in full: their count, the
    /// earlier of the two Staging times, and the kept Rebooting times.
    #[test]
    fn the_settled_members_part_adds_to_those_planned_in_full() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let mut kept = Kept::default();
        kept.add(true, None);
        kept.add(false, Some((0, at("2026-11-22T10:00:00Z"))));
        kept.add(true, Some((0, at("2026-11-22T11:30:00Z"))));
        kept.add(false, Some((1, at("2026-11-22T11:50:00Z"))));
        kept.add(false, Some((1, at("2026-11-22T11:40:00Z"))));
        let b = member(
            "b",
            (4, Some(3)),
            Some(condition(IDLE, "False", "2026-11-22T11:00:00Z")),
            &[],
        );
        let states = states(&[("b", NodeState::Staging)]);
        let health = of(&kept, &[&b], &states, now());
        assert_eq!(
            health,
            Health {
                unreported: 3,
                oldest: [7200, 1200],
            }
        );
        // Planned in full, the earlier time is that member's.
        let mut later = Kept::default();
        later.add(false, Some((0, at("2026-11-22T11:45:00Z"))));
        assert_eq!(of(&later, &[&b], &states, now()).oldest, [3600, 0]);
    }
}
