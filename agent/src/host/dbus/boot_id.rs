//! The host's boot ID: hostname1's `BootID`, or the kernel's as the host's systemd reads
//! it, once per connection.

use zbus::proxy::CacheProperties;

use super::bus::is_unknown_property;
use super::proxies::HostnameProxy;
use super::{CAT, DbusHost, KERNEL_BOOT_ID, call_error};
use crate::host::HostError;

impl DbusHost {
    /// The host's boot ID, as 32 lowercase hex digits, read once per connection: the
    /// ID changes only with a new boot, and a new boot (soft or not) ends the host's bus
    /// and this connection with it (the agent then exits for its supervisor to restart
    /// it). Later passes ask nothing: hostname1 is a bus-activated service that exits
    /// when idle, and starting it again (in its sandbox) for every pass is work for the
    /// host, and one more thing that may not answer.
    pub(super) async fn boot_id(&self) -> Result<String, HostError> {
        self.boot_id
            .get_or_try_init(|| self.read_boot_id())
            .await
            .cloned()
    }

    /// hostname1's `BootID`. systemd before 256 (bookworm's 252, CentOS Stream 9's) has
    /// no such property, a minimal host may have no hostnamed, and a hostnamed may not
    /// answer: then the kernel's boot ID as the host sees it, read by the host's systemd
    /// (`cat` as a transient unit). A bus gone is an error, not a reason to ask
    /// elsewhere. The agent's own `/proc` is not asked: a pod's is the kernel's, but an
    /// agent in a container nested in the host's (a test node, a toolbox) would read
    /// another boot's.
    async fn read_boot_id(&self) -> Result<String, HostError> {
        let hostname = HostnameProxy::builder(&self.connection)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(call_error("hostname1"))?;
        let id = match hostname.boot_id().await {
            Ok(id) => id,
            Err(e) if is_unknown_property(&e) => return self.read_kernel_boot_id().await,
            Err(source) => {
                let error = call_error("hostname1.BootID")(source);
                if error.connection_lost() {
                    return Err(error);
                }
                tracing::warn!(
                    error = %bootc_pool_common::error_chain(&error),
                    "hostname1 gave no boot ID; reading the kernel's through systemd"
                );
                return self.read_kernel_boot_id().await;
            }
        };
        if id.len() != 16 {
            return Err(HostError::BadBootId { len: id.len() });
        }
        Ok(id.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// `/proc/sys/kernel/random/boot_id`, printed by the host's `cat`.
    async fn read_kernel_boot_id(&self) -> Result<String, HostError> {
        let text = self
            .output_of(vec![CAT.to_owned(), KERNEL_BOOT_ID.to_owned()])
            .await?;
        parse_kernel_boot_id(&text).ok_or_else(|| HostError::Unexpected {
            what: format!("`{CAT} {KERNEL_BOOT_ID}` printed no boot ID: {text:?}"),
        })
    }
}

/// `8f1e…-…` (the kernel's form) as 32 lowercase hex digits; `None` unless it is a UUID.
pub fn parse_kernel_boot_id(text: &str) -> Option<String> {
    let hex: String = text.trim().chars().filter(|c| *c != '-').collect();
    (hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::parse_kernel_boot_id;

    #[test]
    fn kernel_boot_id_is_hostname1_form() {
        assert_eq!(
            parse_kernel_boot_id("4bfb7581-dc86-4622-ba01-9EBBD29EE978\n").as_deref(),
            Some("4bfb7581dc864622ba019ebbd29ee978")
        );
        assert_eq!(parse_kernel_boot_id("not a boot id"), None);
        assert_eq!(parse_kernel_boot_id(""), None);
    }
}
