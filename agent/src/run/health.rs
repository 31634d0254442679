//! `status.health`: the states of `spec.healthUnits` in the running boot.
//!
//! The units are read with every full pass (the poll interval, a change of the
//! BootcNode or of bootc's status) and, while they settle, every [`FAST_POLL`] on their
//! own: while some unit is not `active` and none has a final answer (`failed`, or a load
//! state of [`NOT_LOADED`] such as `not-found`), for at most [`SETTLE_BOUND`] after this
//! agent first saw the boot (the agent starts again with every boot, so that is about
//! the boot's own start). Those reads patch `status.health` alone, and only when it
//! changed; a full pass writes it with the rest of the status, as ever only when
//! something changed.
//!
//! A host error reading the units does not hold up the rest of the status: it is logged
//! and every unit is reported `unknown` (so `healthy` is false) until a read succeeds;
//! the controller then waits, as for a unit still starting. A bus that went away is the
//! host going down, as for any host call.

use std::time::Duration;

use bootc_crds::node::NodeHealth;
use bootc_pool_common::error_chain;
use chrono::Utc;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::Agent;
use crate::host::{BootIdentity, Host, NOT_LOADED};
use crate::report;

/// How often settling units are read.
pub const FAST_POLL: Duration = Duration::from_secs(2);

/// How long after the boot was first seen settling units are read every [`FAST_POLL`];
/// after that, at the poll interval.
pub const SETTLE_BOUND: Duration = Duration::from_secs(600);

/// The units' states in this boot, as last read.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    /// The boot they were read in, and when this agent first saw it.
    boot: Option<(BootIdentity, Instant)>,
    /// What was read, and when.
    read: Option<(NodeHealth, Instant)>,
}

impl Tracker {
    /// Takes in `health`, read in the boot `identity` at `now`.
    fn record(&mut self, identity: &BootIdentity, health: NodeHealth, now: Instant) {
        let same_boot = self.boot.as_ref().is_some_and(|(b, _)| {
            b.boot_id == identity.boot_id && b.soft_reboots == identity.soft_reboots
        });
        if !same_boot {
            self.boot = Some((identity.clone(), now));
        }
        self.read = Some((health, now));
    }

    /// Forgets what was read (there are no units to read any more).
    fn clear(&mut self) {
        self.read = None;
    }

    /// What was read last.
    pub(super) fn current(&self) -> Option<&NodeHealth> {
        self.read.as_ref().map(|(h, _)| h)
    }

    /// When to read the units on their own: [`FAST_POLL`] after the last read while they
    /// settle, within [`SETTLE_BOUND`] of the boot; `None` otherwise.
    pub(super) fn next_read(&self) -> Option<Instant> {
        let (health, at) = self.read.as_ref()?;
        let (_, since) = self.boot.as_ref()?;
        let next = *at + FAST_POLL;
        (settling(health) && next <= *since + SETTLE_BOUND).then_some(next)
    }
}

/// Whether `health` may still change on its own soon: some unit is not `active` and
/// none has a final answer (`failed`, or a load state of [`NOT_LOADED`]).
pub fn settling(health: &NodeHealth) -> bool {
    let finished = |state: &str| state == "failed" || NOT_LOADED.contains(&state);
    !health.healthy && !health.units.iter().any(|u| finished(&u.active_state))
}

impl<H: Host + 'static> Agent<H> {
    /// Reads `units` in the boot `identity` (nothing to read: forgets the last read). A
    /// host error reports every unit `unknown`; a bus gone sets `host_lost`.
    pub(super) async fn read_health(&mut self, units: &[String], identity: &BootIdentity) {
        if units.is_empty() {
            self.health.clear();
            return;
        }
        let states = match self.host.unit_states(units).await {
            Ok(states) => states,
            Err(e) if e.connection_lost() => {
                self.host_lost = true;
                return;
            }
            Err(e) => {
                warn!(
                    error = %error_chain(&e),
                    "cannot read the health units; reporting them unknown"
                );
                report::unknown_units(units)
            }
        };
        let health = report::node_health(identity, states);
        self.health.record(identity, health, Instant::now());
    }

    /// Reads the settling units again, on their own, and patches `status.health` alone
    /// when it changed.
    pub(super) async fn poll_health(&mut self) {
        let Some(node) = self.node.clone() else {
            return;
        };
        let Some(identity) = self.health.boot.as_ref().map(|(b, _)| b.clone()) else {
            return;
        };
        let units = &node.spec.health_units;
        self.read_health(units, &identity).await;
        if self.host_lost || units.is_empty() {
            return;
        }
        let health = self.health.current();
        let shown = node.status.as_ref().and_then(|s| s.health.as_ref());
        if health.is_none() || shown == health || self.api_retry.wait(Utc::now()).is_some() {
            return;
        }
        let body = serde_json::json!({ "status": { "health": health } });
        match self.patch_own_status(body).await {
            Ok(updated) => {
                debug!("health written");
                self.keep_answer(updated);
            }
            // Not a failure of the node: the next read, or the next status write,
            // carries it.
            Err(e) => warn!(error = %error_chain(&e), "health write failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use bootc_crds::node::UnitHealth;

    use super::*;

    fn identity(boot_id: &str, soft_reboots: u64) -> BootIdentity {
        BootIdentity {
            boot_id: boot_id.to_owned(),
            soft_reboots,
            can_soft_reboot: true,
        }
    }

    fn health(states: &[&str]) -> NodeHealth {
        let units = states
            .iter()
            .enumerate()
            .map(|(i, s)| UnitHealth {
                name: format!("u{i}.service"),
                active_state: (*s).to_owned(),
                sub_state: String::new(),
            })
            .collect();
        report::node_health(&identity("b1", 0), units)
    }

    #[test]
    fn units_settle_until_all_are_active_or_one_has_a_final_answer() {
        assert!(settling(&health(&["active", "activating"])));
        assert!(settling(&health(&["inactive"])));
        assert!(settling(&health(&[report::UNKNOWN])));
        assert!(!settling(&health(&["active", "active"])));
        assert!(!settling(&health(&["activating", "failed"])));
        assert!(!settling(&health(&["activating", "not-found"])));
        assert!(!settling(&health(&["masked"])));
    }

    #[test]
    fn settling_units_are_read_every_fast_poll_within_the_bound() {
        let mut t = Tracker::default();
        assert_eq!(t.next_read(), None, "nothing read yet");
        let boot = Instant::now();
        let id = identity("b1", 0);
        t.record(&id, health(&["activating"]), boot);
        assert_eq!(t.next_read(), Some(boot + FAST_POLL));
        t.record(&id, health(&["active"]), boot + FAST_POLL);
        assert_eq!(t.next_read(), None, "settled");
        // Near the bound: the last fast read is the one that still fits in it.
        let late = boot + SETTLE_BOUND - FAST_POLL;
        t.record(&id, health(&["activating"]), late);
        assert_eq!(t.next_read(), Some(boot + SETTLE_BOUND));
        t.record(&id, health(&["activating"]), late + Duration::from_secs(1));
        assert_eq!(
            t.next_read(),
            None,
            "past the bound: the poll interval only"
        );
    }

    #[test]
    fn a_new_boot_starts_the_bound_again() {
        let mut t = Tracker::default();
        let boot = Instant::now();
        t.record(&identity("b1", 0), health(&["activating"]), boot);
        let much_later = boot + SETTLE_BOUND * 2;
        t.record(&identity("b1", 0), health(&["activating"]), much_later);
        assert_eq!(t.next_read(), None);
        // A soft reboot keeps the boot ID but counts one more soft reboot.
        t.record(&identity("b1", 1), health(&["activating"]), much_later);
        assert_eq!(t.next_read(), Some(much_later + FAST_POLL));
        t.clear();
        assert_eq!(t.next_read(), None, "no units: nothing to read");
        assert_eq!(t.current(), None);
    }
}
