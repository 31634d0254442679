//! The node's own BootcNode as the watch delivers it: relists, deletions, and our own
//! status writes coming back (which need no reconcile).

use bootc_crds::REBOOT_SLOT_ANNOTATION;
use bootc_crds::node::BootcNode;
use bootc_pool_common::error_chain;
use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};
use tracing::{info, warn};

use super::{Agent, RunError};
use crate::host::Host;
use crate::report;

impl<H: Host + 'static> Agent<H> {
    /// Takes in one watch event; true when a reconcile is needed. `listing` holds the
    /// object seen between a (re)list's `Init` and `InitDone`.
    pub(super) fn watched(
        &mut self,
        event: Option<Result<Event<BootcNode>, watcher::Error>>,
        listing: &mut Option<Option<BootcNode>>,
    ) -> Result<bool, RunError> {
        Ok(match event {
            None => return Err(RunError::WatchEnded),
            Some(Err(e)) => {
                warn!(error = %error_chain(&e), "BootcNode watch failed; retrying");
                false
            }
            Some(Ok(Event::Init)) => {
                *listing = Some(None);
                false
            }
            Some(Ok(Event::InitApply(node))) => {
                *listing = Some(Some(node));
                false
            }
            Some(Ok(Event::InitDone)) => {
                let node = listing.take().flatten();
                self.observe(node)
            }
            Some(Ok(Event::Apply(node))) => self.observe(Some(node)),
            Some(Ok(Event::Delete(_))) => self.observe(None),
        })
    }

    /// Takes in the object from the watch; true when a reconcile is needed (anything
    /// but our own status write coming back).
    fn observe(&mut self, node: Option<BootcNode>) -> bool {
        let Some(node) = node else {
            if self.node.take().is_some() {
                info!("BootcNode deleted; waiting for it to come back");
            }
            return false;
        };
        if !self.restored {
            self.restored = true;
            if let Some(last) = node.status.as_ref().and_then(|s| s.last_reboot.as_ref()) {
                self.memory.last_reboot = report::record_from_status(last);
            }
        }
        let changed = match &self.node {
            None => true,
            Some(old) => {
                old.spec != node.spec
                    || old.annotations().get(REBOOT_SLOT_ANNOTATION)
                        != node.annotations().get(REBOOT_SLOT_ANNOTATION)
                    || old.status != node.status && !self.is_stale(&node)
            }
        };
        if !self.is_stale(&node) {
            self.node = Some(node);
        }
        changed
    }

    /// True when `node` is older than the object we already hold (a watch event that
    /// arrives after our own write's response).
    fn is_stale(&self, node: &BootcNode) -> bool {
        let version = |n: &BootcNode| {
            n.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        match (self.node.as_ref().and_then(version), version(node)) {
            (Some(held), Some(seen)) => seen < held,
            _ => false,
        }
    }
}
