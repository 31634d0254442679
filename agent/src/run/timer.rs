//! The host's own update timer (`bootc-fetch-apply-updates.timer`): masked while the
//! node belongs to a pool, so the host neither updates nor reboots itself; handed back as
//! the host had it once the node's BootcNode is gone (its pool deleted, or the node left
//! it), so uninstalling leaves the host updating itself again without waiting for a
//! reboot.

use bootc_pool_common::error_chain;
use chrono::Utc;
use tracing::{info, warn};

use super::Agent;
use crate::host::{Host, UPDATE_TIMER};

impl<H: Host + 'static> Agent<H> {
    /// Masks the timer while the node may belong to a pool, or hands it back once its
    /// BootcNode is known not to exist.
    pub(super) async fn keep_timer(&mut self) {
        if self.node.is_none() && self.listed {
            self.release_timer().await;
        } else {
            self.mask_timer().await;
        }
    }

    /// Masks the host's update timer, unless it is masked already or the last failure's
    /// backoff still runs; a failure is reported in `Degraded` until a retry succeeds.
    pub(super) async fn mask_timer(&mut self) {
        let now = Utc::now();
        if self.timer_masked || self.timer_retry.wait(now).is_some() {
            return;
        }
        match self.host.mask_update_timer().await {
            Ok(()) => {
                self.timer_masked = true;
                self.timer_retry.clear();
                info!(
                    unit = UPDATE_TIMER,
                    "masked the host's update timer until the next boot"
                );
            }
            Err(e) => {
                let message = format!(
                    "cannot mask {UPDATE_TIMER}, so the host may update and reboot itself: {}",
                    error_chain(&e)
                );
                warn!(error = %message, "will retry masking the update timer");
                self.timer_retry.fail(message, now);
            }
        }
    }

    /// Removes the agent's mask of the timer (and starts the timer again if the host has
    /// it enabled). A failure is logged and retried at the next pass: with no BootcNode
    /// there is nowhere to report it.
    async fn release_timer(&mut self) {
        if !self.timer_masked {
            return;
        }
        match self.host.release_update_timer().await {
            Ok(()) => {
                self.timer_masked = false;
                self.timer_retry.clear();
                info!(
                    unit = UPDATE_TIMER,
                    "no BootcNode for this node: handed the host's update timer back"
                );
            }
            Err(e) => warn!(
                error = %error_chain(&e),
                unit = UPDATE_TIMER,
                "cannot hand the host's update timer back; will retry"
            ),
        }
    }
}
