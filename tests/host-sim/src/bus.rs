//! The few D-Bus calls the harness itself makes on a node's system bus (never this
//! machine's).

use std::path::Path;
use std::time::Duration;

use zbus::Connection;
use zbus::proxy::CacheProperties;

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
pub(crate) trait Manager {
    fn load_unit(&self, name: &str) -> zbus::Result<zbus::OwnedObjectPath>;

    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<Vec<ListedUnit>>;

    #[zbus(property)]
    fn system_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn soft_reboots_count(&self) -> zbus::Result<u32>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
pub(crate) trait Unit {
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn load_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn unit_file_state(&self) -> zbus::Result<String>;
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
pub(crate) trait Login {
    fn reboot_with_flags(&self, flags: u64) -> zbus::Result<()>;
}

#[zbus::proxy(
    interface = "org.freedesktop.hostname1",
    default_service = "org.freedesktop.hostname1",
    default_path = "/org/freedesktop/hostname1"
)]
pub(crate) trait Hostname {
    #[zbus(property, name = "BootID")]
    fn boot_id(&self) -> zbus::Result<Vec<u8>>;
}

/// The systemd unit's load and activity, as the node's systemd reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitState {
    /// `LoadState`: `loaded`, `masked`, `not-found`, …
    pub load_state: String,
    /// `ActiveState`: `active`, `inactive`, `failed`, …
    pub active_state: String,
    /// `UnitFileState`: `enabled`, `masked-runtime`, `static`, …
    pub unit_file_state: String,
}

/// One row of the Manager's `ListUnitsByPatterns`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, zbus::zvariant::Type)]
pub struct ListedUnit {
    pub name: String,
    pub description: String,
    pub load_state: String,
    pub active_state: String,
    pub sub_state: String,
    pub following: String,
    pub path: zbus::OwnedObjectPath,
    pub job_id: u32,
    pub job_type: String,
    pub job_path: zbus::OwnedObjectPath,
}

/// Connects to `address`, giving up after `timeout`.
pub(crate) async fn connect(address: &str, timeout: Duration) -> zbus::Result<Connection> {
    let build = zbus::connection::Builder::address(address).build();
    match tokio::time::timeout(timeout, build).await {
        Ok(r) => r,
        Err(_) => Err(zbus::Error::Failure(format!(
            "connecting to {address} took longer than {timeout:?}"
        ))),
    }
}

pub(crate) async fn manager(conn: &Connection) -> zbus::Result<ManagerProxy<'static>> {
    ManagerProxy::builder(conn)
        .cache_properties(CacheProperties::No)
        .build()
        .await
}

pub(crate) async fn system_state(conn: &Connection) -> zbus::Result<String> {
    manager(conn).await?.system_state().await
}

/// The Manager's `SoftRebootsCount`; 0 on a systemd older than 254, which lacks it (a
/// real-bootc node runs bookworm's 252).
pub(crate) async fn soft_reboots(conn: &Connection) -> zbus::Result<u32> {
    match manager(conn).await?.soft_reboots_count().await {
        Err(e) if is_unknown_property(&e) => Ok(0),
        other => other,
    }
}

fn is_unknown_property(error: &zbus::Error) -> bool {
    const NAMES: [&str; 2] = [
        "org.freedesktop.DBus.Error.UnknownProperty",
        "org.freedesktop.DBus.Error.InvalidArgs",
    ];
    match error {
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::UnknownProperty(_) | zbus::fdo::Error::InvalidArgs(_)
        ),
        zbus::Error::MethodError(name, _, _) => NAMES.contains(&name.as_str()),
        _ => false,
    }
}

/// hostname1's `BootID` as 32 lowercase hex digits; on a systemd older than 256, which
/// lacks it, the kernel's boot ID as the node sees it (`root` is the node's root).
pub(crate) async fn boot_id(conn: &Connection, root: &Path) -> zbus::Result<String> {
    let proxy = HostnameProxy::builder(conn)
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    let id = match proxy.boot_id().await {
        Err(e) if is_unknown_property(&e) => {
            let path = root.join("proc/sys/kernel/random/boot_id");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| zbus::Error::Failure(format!("{}: {e}", path.display())))?;
            return bootc_node_agent::host::dbus::parse_kernel_boot_id(&text).ok_or_else(|| {
                zbus::Error::Failure(format!("{}: no boot ID in {text:?}", path.display()))
            });
        }
        other => other?,
    };
    if id.len() != 16 {
        return Err(zbus::Error::Failure(format!(
            "hostname1 BootID has {} bytes, not 16",
            id.len()
        )));
    }
    Ok(id.iter().map(|b| format!("{b:02x}")).collect())
}

pub(crate) async fn unit_state(conn: &Connection, unit: &str) -> zbus::Result<UnitState> {
    let path = manager(conn).await?.load_unit(unit).await?;
    let proxy = UnitProxy::builder(conn)
        .path(path)
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    Ok(UnitState {
        load_state: proxy.load_state().await?,
        active_state: proxy.active_state().await?,
        unit_file_state: proxy.unit_file_state().await?,
    })
}

pub(crate) async fn reboot_with_flags(conn: &Connection, flags: u64) -> zbus::Result<()> {
    LoginProxy::new(conn).await?.reboot_with_flags(flags).await
}

pub(crate) async fn list_units(
    conn: &Connection,
    states: &[&str],
    patterns: &[&str],
) -> zbus::Result<Vec<ListedUnit>> {
    manager(conn)
        .await?
        .list_units_by_patterns(states, patterns)
        .await
}
