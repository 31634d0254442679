//! Every pool's selector and `after` summary, as each pool's plan needs them (conflicts,
//! ordering). Made from the pool cache once and shared by every pool's snapshot until
//! the cache holds other objects: with many pools, copying them into each snapshot made
//! every reconcile cost as much as the pools are many, and a round of reconciles as much
//! as their square.

use std::sync::Arc;

use bootc_crds::pool::BootcNodePool;
use kube::ResourceExt;

use crate::plan::world::{PoolSelectors, PoolSummaries};

/// The pools' selectors (those not being deleted) and summaries, and the cached objects
/// they were made from.
#[derive(Debug, Default)]
pub struct PoolIndex {
    from: Vec<Arc<BootcNodePool>>,
    selectors: PoolSelectors,
    summaries: PoolSummaries,
}

impl PoolIndex {
    /// The selectors and summaries of `pools` (the pool cache's state), made again only
    /// when the cache holds other objects than last time: the cache replaces an object
    /// when it changes, so the same objects in the same order mean nothing changed.
    pub fn shared(&mut self, pools: &[Arc<BootcNodePool>]) -> (PoolSelectors, PoolSummaries) {
        let same = self.from.len() == pools.len()
            && self.from.iter().zip(pools).all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.selectors = Arc::new(
                pools
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| (p.name_any(), p.spec.node_selector.clone()))
                    .collect(),
            );
            self.summaries = Arc::new(
                pools
                    .iter()
                    .map(|p| (p.name_any(), crate::plan::ordering::summary(p)))
                    .collect(),
            );
            self.from = pools.to_vec();
        }
        (Arc::clone(&self.selectors), Arc::clone(&self.summaries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bootc_crds::pool::BootcNodePoolSpec;

    fn pool(name: &str, role: &str, after: &[&str]) -> Arc<BootcNodePool> {
        let spec: BootcNodePoolSpec = serde_json::from_value(serde_json::json!({
            "image": {"ref": "registry.test/os:latest"},
            "nodeSelector": {"matchLabels": {"role": role}},
            "rollout": {"after": after},
        }))
        .unwrap();
        Arc::new(BootcNodePool::new(name, spec))
    }

    #[test]
    fn the_index_follows_the_cache_and_is_shared_while_it_holds() {
        let mut index = PoolIndex::default();
        let (a, b) = (pool("a", "web", &[]), pool("b", "db", &["a"]));
        let (selectors, summaries) = index.shared(&[a.clone(), b.clone()]);
        let names: Vec<&str> = selectors.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(summaries["b"].after, ["a"]);
        // The same objects: the very same lists, not copies.
        let (again, again_summaries) = index.shared(&[a.clone(), b.clone()]);
        assert!(Arc::ptr_eq(&selectors, &again));
        assert!(Arc::ptr_eq(&summaries, &again_summaries));
        // A pool changed (a new object in the cache): made again from it.
        let b2 = pool("b", "gpu", &[]);
        let (changed, changed_summaries) = index.shared(&[a.clone(), b2]);
        assert_eq!(
            changed[1].1.match_labels.as_ref().unwrap()["role"],
            "gpu".to_owned()
        );
        assert!(changed_summaries["b"].after.is_empty());
        // A pool being deleted keeps its summary but selects nothing any more.
        let mut deleting = (*b).clone();
        deleting.metadata.deletion_timestamp =
            Some(serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap());
        let (selectors, summaries) = index.shared(&[a.clone(), Arc::new(deleting)]);
        let names: Vec<&str> = selectors.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a"]);
        assert!(summaries.contains_key("b"));
        // A pool gone.
        let (selectors, summaries) = index.shared(&[a]);
        assert_eq!(selectors.len(), 1);
        assert_eq!(summaries.len(), 1);
    }
}
