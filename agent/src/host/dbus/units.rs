//! The states of named units, for `status.health`: `Manager.LoadUnit` (which loads a unit
//! that is not loaded, never starts it, and answers for a missing one too), then the
//! unit object's `LoadState`, `ActiveState` and `SubState`.

use bootc_crds::node::UnitHealth;
use zbus::Connection;
use zbus::proxy::CacheProperties;

use super::bus::call_error;
use super::proxies::{SystemdManagerProxy, SystemdUnitProxy};
use crate::host::{HostError, NOT_LOADED};

/// Each of `names` (checked already: see [`crate::host::check_unit_names`]), in order,
/// as systemd reports it.
pub(super) async fn read(
    connection: &Connection,
    manager: &SystemdManagerProxy<'_>,
    names: &[String],
) -> Result<Vec<UnitHealth>, HostError> {
    let mut units = Vec::with_capacity(names.len());
    for name in names {
        units.push(read_one(connection, manager, name).await?);
    }
    Ok(units)
}

async fn read_one(
    connection: &Connection,
    manager: &SystemdManagerProxy<'_>,
    name: &str,
) -> Result<UnitHealth, HostError> {
    let path = manager
        .load_unit(name)
        .await
        .map_err(call_error("Manager.LoadUnit"))?;
    let unit = SystemdUnitProxy::builder(connection)
        .path(path)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .map_err(call_error("systemd1.Unit"))?;
    let load_state = unit
        .load_state()
        .await
        .map_err(call_error("Unit.LoadState"))?;
    let active_state = unit
        .active_state()
        .await
        .map_err(call_error("Unit.ActiveState"))?;
    let sub_state = unit
        .sub_state()
        .await
        .map_err(call_error("Unit.SubState"))?;
    Ok(UnitHealth {
        name: name.to_owned(),
        active_state: reported_state(&load_state, active_state),
        sub_state,
    })
}

/// The `ActiveState` to report: the load state when it says the unit is not there to be
/// active ([`NOT_LOADED`]), else systemd's own.
pub fn reported_state(load_state: &str, active_state: String) -> String {
    if NOT_LOADED.contains(&load_state) {
        load_state.to_owned()
    } else {
        active_state
    }
}

#[cfg(test)]
mod tests {
    use super::reported_state;

    #[test]
    fn a_unit_that_is_not_loaded_reports_why() {
        assert_eq!(reported_state("loaded", "failed".into()), "failed");
        assert_eq!(reported_state("not-found", "inactive".into()), "not-found");
        assert_eq!(reported_state("masked", "inactive".into()), "masked");
        assert_eq!(
            reported_state("bad-setting", "inactive".into()),
            "bad-setting"
        );
        assert_eq!(reported_state("error", "inactive".into()), "error");
        assert_eq!(reported_state("stub", "inactive".into()), "inactive");
    }
}
