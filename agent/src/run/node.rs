//! The node's own BootcNode as the watch delivers it: relists, deletions, and our own
//! status writes coming back (which need no reconcile).

use std::collections::VecDeque;

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
                self.listed = true;
                let node = listing.take().flatten();
                if let Some(node) = &node {
                    self.versions.delivered(node, true);
                }
                self.observe(node, false)
            }
            Some(Ok(Event::Apply(node))) => {
                let stale = self.is_stale(&node);
                self.versions.delivered(&node, false);
                self.observe(Some(node), stale)
            }
            Some(Ok(Event::Delete(_))) => self.observe(None, false),
        })
    }

    /// Takes in the object from the watch (`stale`: from before our last write); true
    /// when a reconcile is needed (anything but our own status write coming back).
    fn observe(&mut self, node: Option<BootcNode>, stale: bool) -> bool {
        let Some(node) = node else {
            if self.node.take().is_some() {
                info!("BootcNode deleted; waiting for it to come back");
            }
            // Known not to exist: a pass hands the host's update timer back.
            return self.timer_masked;
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
                    || old.status != node.status && !stale
            }
        };
        if !stale {
            self.node = Some(node);
        }
        changed
    }

    /// True when `node` is older than the object we already hold (a watch event that
    /// arrives after our own write's response).
    fn is_stale(&self, node: &BootcNode) -> bool {
        self.versions.is_older_than_our_write(node)
    }
}

/// How many versions the watch delivered are remembered: enough for a write whose
/// response arrives after the watch delivered it and a change or two after it.
const REMEMBERED: usize = 4;

/// Which versions of the BootcNode the watch delivered, and the one our last write is
/// waiting for. The watch delivers an object's versions in order, so until it delivers
/// the version our write returned, what it delivers is older than what we hold.
#[derive(Debug, Default)]
pub(super) struct Versions {
    delivered: VecDeque<String>,
    awaiting: Option<String>,
}

impl Versions {
    /// Our write returned `node`.
    pub(super) fn wrote(&mut self, node: &BootcNode) {
        let rv = node.metadata.resource_version.clone();
        let already = rv
            .as_ref()
            .is_some_and(|rv| self.delivered.iter().any(|d| d == rv));
        self.awaiting = if already { None } else { rv };
    }

    /// The watch delivered `node` (a relist's object too: a relist is at least as new as
    /// the writes before it).
    pub(super) fn delivered(&mut self, node: &BootcNode, relisted: bool) {
        let rv = node.metadata.resource_version.clone().unwrap_or_default();
        if relisted || self.awaiting.as_ref() == Some(&rv) {
            self.awaiting = None;
        }
        if self.delivered.len() == REMEMBERED {
            self.delivered.pop_front();
        }
        self.delivered.push_back(rv);
    }

    /// True while our last write has not come back through the watch and `node` is not
    /// it: `node` is from before the write.
    fn is_older_than_our_write(&self, node: &BootcNode) -> bool {
        self.awaiting
            .as_ref()
            .is_some_and(|awaiting| node.metadata.resource_version.as_ref() != Some(awaiting))
    }
}

#[cfg(test)]
mod tests;
