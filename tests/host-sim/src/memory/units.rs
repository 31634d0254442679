//! Unit states on in-process hosts, for `status.health`: set per image by the test.
//!
//! A test says, for an image digest, which state some units are in once a host has
//! booted it: [`Catalog::set_boot_units`] (or [`crate::cluster::SimCluster::set_boot_units`],
//! the same table: every host of a cluster shares its catalog). A host answers
//! [`Host::unit_states`](bootc_node_agent::host::Host::unit_states) from the entry for
//! the digest it runs now, so a later call changes what every host running that digest
//! reports from then on: a unit set `activating` and then `active` becomes active some
//! time after boot. A unit the table does not name is `active`.
//!
//! A state is an `ActiveState` (`active`, `activating`, `inactive`, `failed`,
//! `deactivating`, `reloading`, or what a unit that is not loaded reports: `not-found`,
//! `masked`, `bad-setting`, `error`), optionally with its `SubState` after a slash
//! (`active/exited`); without one, the usual sub-state goes with it (`active` →
//! `running`, `activating` → `start`, `failed` → `failed`, `inactive` → `dead`, …).

use std::collections::HashMap;

use bootc_crds::node::UnitHealth;
use bootc_node_agent::host::{HostError, check_unit_names};

use super::{Catalog, MemoryHost};

/// Unit states by image digest: digest → unit → state (`active/running`, …).
pub(super) type BootUnits = HashMap<String, HashMap<String, String>>;

impl Catalog {
    /// From now on, hosts running the image `digest` (as `bootc status` shows it booted,
    /// or as pinned in the reference it was pulled by) report these units in these
    /// states (see the module's documentation); units set before and not named here
    /// keep their state.
    pub fn set_boot_units(&self, digest: &str, units: &[(&str, &str)]) {
        let mut inner = self.lock();
        let table = inner.boot_units.entry(digest.to_owned()).or_default();
        for (unit, state) in units {
            table.insert((*unit).to_owned(), (*state).to_owned());
        }
    }

    /// Forgets every state set for `digest`: its units are all `active` again.
    pub fn clear_boot_units(&self, digest: &str) {
        self.lock().boot_units.remove(digest);
    }

    /// The state set for `unit` on the first of `digests` that names it.
    fn boot_unit(&self, digests: &[String], unit: &str) -> Option<String> {
        let inner = self.lock();
        digests
            .iter()
            .find_map(|d| inner.boot_units.get(d).and_then(|t| t.get(unit)))
            .cloned()
    }
}

/// The (ActiveState, SubState) of a state as a test writes it.
pub fn parse_state(state: &str) -> (String, String) {
    if let Some((active, sub)) = state.split_once('/') {
        return (active.to_owned(), sub.to_owned());
    }
    let sub = match state {
        "active" => "running",
        "activating" => "start",
        "deactivating" => "stop",
        "reloading" => "reload",
        "failed" => "failed",
        _ => "dead",
    };
    (state.to_owned(), sub.to_owned())
}

impl MemoryHost {
    /// [`Host::unit_states`](bootc_node_agent::host::Host::unit_states) on this host.
    pub(super) fn read_units(&self, names: &[String]) -> Result<Vec<UnitHealth>, HostError> {
        check_unit_names(names)?;
        self.require_up("Manager.LoadUnit")?;
        let digests: Vec<String> = {
            let inner = self.lock();
            let booted = inner.state.booted.as_ref();
            booted
                .map(|b| b.info.digest.clone())
                .into_iter()
                .chain(booted.and_then(|b| Some(b.info.image.rsplit_once('@')?.1.to_owned())))
                .collect()
        };
        Ok(names
            .iter()
            .map(|name| {
                let state = self.catalog.boot_unit(&digests, name);
                let (active_state, sub_state) = parse_state(state.as_deref().unwrap_or("active"));
                UnitHealth {
                    name: name.clone(),
                    active_state,
                    sub_state,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_state;

    #[test]
    fn a_state_brings_its_usual_sub_state_unless_given_one() {
        let pair = |s: &str| parse_state(s);
        assert_eq!(pair("active"), ("active".into(), "running".into()));
        assert_eq!(pair("active/exited"), ("active".into(), "exited".into()));
        assert_eq!(pair("activating"), ("activating".into(), "start".into()));
        assert_eq!(pair("failed"), ("failed".into(), "failed".into()));
        assert_eq!(pair("not-found"), ("not-found".into(), "dead".into()));
    }
}
