//! The few D-Bus calls the harness itself makes on a node's system bus (never this
//! machine's).

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

pub(crate) async fn soft_reboots(conn: &Connection) -> zbus::Result<u32> {
    manager(conn).await?.soft_reboots_count().await
}

/// hostname1's `BootID` as 32 lowercase hex digits.
pub(crate) async fn boot_id(conn: &Connection) -> zbus::Result<String> {
    let proxy = HostnameProxy::builder(conn)
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    let id = proxy.boot_id().await?;
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
