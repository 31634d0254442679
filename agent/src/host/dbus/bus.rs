//! Talking to the bus: connections whose calls are answered in bounded time, naming
//! failed calls, telling a lost connection from an error answer, and following
//! `bootc-status-updated.target`.

use std::time::Duration;

use futures::StreamExt;
use zbus::Connection;
use zbus::proxy::CacheProperties;

use super::proxies::SystemdManagerProxy;
use crate::host::HostError;

/// The target bootc's path unit starts whenever bootc's status changes.
const STATUS_UPDATED_TARGET: &str = "bootc-status-updated.target";

/// How long the agent waits for the answer to a D-Bus call before it gives the call up
/// as failed (and tries again later, as after any failed call). Without a bound, a call
/// whose answer never came (a wedged systemd or bus) would stop the agent's loop without
/// a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTimeouts {
    /// Every call but `Manager.Reload`: 25 s, sd-bus's default for a method call.
    pub call: Duration,
    /// `Manager.Reload`, which systemd answers once the reload is done: 180 s, the
    /// bound `systemctl daemon-reload` gives it (twice systemd's default unit timeout).
    pub reload: Duration,
}

impl Default for CallTimeouts {
    fn default() -> Self {
        CallTimeouts {
            call: Duration::from_secs(25),
            reload: Duration::from_secs(180),
        }
    }
}

/// A connection to the bus at `address` whose method calls fail after `timeout`
/// without an answer.
pub(super) async fn bus_connection(
    address: &str,
    timeout: Duration,
) -> Result<Connection, HostError> {
    zbus::connection::Builder::address(address)
        .method_timeout(timeout)
        .build()
        .await
        .map_err(|source| HostError::Connect {
            address: address.to_owned(),
            source,
        })
}

pub(super) async fn manager_on(
    connection: &Connection,
) -> Result<SystemdManagerProxy<'static>, HostError> {
    SystemdManagerProxy::builder(connection)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .map_err(call_error("systemd1.Manager"))
}

/// Wraps a failed D-Bus call's error with the call's name.
pub(super) fn call_error(call: &'static str) -> impl FnOnce(zbus::Error) -> HostError {
    move |source| HostError::Call { call, source }
}

/// systemd's answers to a job while the host shuts down: the shutdown's queued stop of
/// `sysinit.target` makes any new start "destructive", and newer systemd says so by name.
const SHUTTING_DOWN: [&str; 2] = [
    "org.freedesktop.systemd1.TransactionIsDestructive",
    "org.freedesktop.systemd1.ShuttingDown",
];

/// True when `error` means the host is going away under the call: the bus connection
/// itself went away (the peer closed it or the socket broke), or systemd refused a new
/// job because it is shutting down, rather than a method answering with an error of its
/// own. During a reboot request this is the host going down before its reply could be
/// delivered; at any other time it is a reboot the agent did not start (or its own), and
/// the agent's supervisor starts it again in the next boot.
pub fn connection_lost(error: &zbus::Error) -> bool {
    use std::io::ErrorKind;
    match error {
        zbus::Error::InputOutput(e) => matches!(
            e.kind(),
            ErrorKind::BrokenPipe
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::UnexpectedEof
                | ErrorKind::NotConnected
        ),
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::NoReply(_) | zbus::fdo::Error::Disconnected(_)
        ),
        _ => {
            is_error(error, "org.freedesktop.DBus.Error.Disconnected")
                || is_error(error, "org.freedesktop.DBus.Error.NoReply")
                || SHUTTING_DOWN.iter().any(|name| is_error(error, name))
        }
    }
}

/// True when `error` is the D-Bus error `name` (e.g. `org.freedesktop.systemd1.NoSuchUnit`).
fn is_error(error: &zbus::Error, name: &str) -> bool {
    matches!(error, zbus::Error::MethodError(n, _, _) if n.as_str() == name)
}

/// `Manager.StopUnit`; a unit that is not loaded is fine.
pub(super) async fn stop_if_loaded(
    manager: &SystemdManagerProxy<'_>,
    unit: &str,
) -> Result<(), HostError> {
    match manager.stop_unit(unit, "replace").await {
        Ok(_) => Ok(()),
        Err(e) if is_error(&e, "org.freedesktop.systemd1.NoSuchUnit") => Ok(()),
        Err(source) => Err(call_error("Manager.StopUnit")(source)),
    }
}

/// Starts `unit` if its unit file is enabled (`Manager.GetUnitFileState`); a unit with
/// no unit file, or one that is masked, disabled or static, is left as it is.
pub(super) async fn start_if_enabled(
    manager: &SystemdManagerProxy<'_>,
    unit: &str,
) -> Result<(), HostError> {
    let state = match manager.get_unit_file_state(unit).await {
        Ok(state) => state,
        // systemd answers ENOENT, which D-Bus names FileNotFound.
        Err(zbus::Error::FDO(e)) if matches!(*e, zbus::fdo::Error::FileNotFound(_)) => {
            return Ok(());
        }
        Err(e) if is_error(&e, "org.freedesktop.systemd1.NoSuchUnit") => return Ok(()),
        Err(source) => return Err(call_error("Manager.GetUnitFileState")(source)),
    };
    if state != "enabled" {
        return Ok(());
    }
    manager
        .start_unit(unit, "replace")
        .await
        .map(drop)
        .map_err(call_error("Manager.StartUnit"))
}

/// `Manager.Subscribe`; a client that is already subscribed is fine.
pub(super) async fn subscribe(manager: &SystemdManagerProxy<'_>) -> Result<(), HostError> {
    match manager.subscribe().await {
        Ok(()) => Ok(()),
        Err(e) if is_error(&e, "org.freedesktop.systemd1.AlreadySubscribed") => Ok(()),
        Err(source) => Err(call_error("Manager.Subscribe")(source)),
    }
}

/// Follows `JobRemoved` for `bootc-status-updated.target`: each one moves the returned
/// counter. The counter's channel closes when the bus connection ends.
pub(super) async fn follow_status_updates(
    connection: &Connection,
) -> Result<
    (
        tokio::sync::watch::Receiver<u64>,
        tokio::task::JoinHandle<()>,
    ),
    HostError,
> {
    let manager = SystemdManagerProxy::builder(connection)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .map_err(call_error("systemd1.Manager"))?;
    let mut removed = manager
        .receive_job_removed()
        .await
        .map_err(call_error("Manager.JobRemoved"))?;
    subscribe(&manager).await?;
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let task = tokio::spawn(async move {
        while let Some(signal) = removed.next().await {
            if signal
                .args()
                .is_ok_and(|args| args.unit == STATUS_UPDATED_TARGET)
            {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
        // The connection is gone: dropping `tx` closes the channel.
    });
    Ok((rx, task))
}

/// True when a property read failed because the property does not exist.
pub(super) fn is_unknown_property(error: &zbus::Error) -> bool {
    match error {
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::UnknownProperty(_) | zbus::fdo::Error::InvalidArgs(_)
        ),
        zbus::Error::MethodError(name, _, _) => matches!(
            name.as_str(),
            "org.freedesktop.DBus.Error.UnknownProperty" | "org.freedesktop.DBus.Error.InvalidArgs"
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method error named `name`, as a call's answer brings it.
    fn answered(name: &str) -> zbus::Error {
        let message =
            zbus::message::Message::method_call("/org/freedesktop/systemd1", "StartTransientUnit")
                .build(&())
                .unwrap_or_else(|e| panic!("a message: {e}"));
        let name = zbus::names::OwnedErrorName::try_from(name)
            .unwrap_or_else(|e| panic!("an error name: {e}"));
        zbus::Error::MethodError(name, Some("refused".into()), message)
    }

    #[test]
    fn a_shutdown_refusing_new_jobs_is_the_host_going_away() {
        assert!(connection_lost(&answered(
            "org.freedesktop.systemd1.TransactionIsDestructive"
        )));
        assert!(connection_lost(&answered(
            "org.freedesktop.systemd1.ShuttingDown"
        )));
        assert!(connection_lost(&answered(
            "org.freedesktop.DBus.Error.NoReply"
        )));
        assert!(!connection_lost(&answered(
            "org.freedesktop.systemd1.NoSuchUnit"
        )));
        assert!(!connection_lost(&answered(
            "org.freedesktop.DBus.Error.AccessDenied"
        )));
    }
}
