//! The pools' watch, each pool read on its own: a pool this controller cannot read (a
//! CRD version it does not know, a field its types refuse) is left out of the cache, as
//! if absent, so nothing is done to its nodes; it gets a `PoolUnreadable` Warning event
//! naming the error, and the other pools go on. A typed watch would instead fail the
//! whole list and stop every pool.
//!
//! A plan starts from the pool as this controller last wrote it (its status, its
//! finalizer) until the watch has delivered that write: a plan made from an older pool
//! would not see what the last one decided (a target marked failed, a canary's phase)
//! and could undo it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bootc_crds::pool::BootcNodePool;
use futures::{Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::warn;

use super::Context;
use super::cache::{Overlay, lock};

/// The pools' writes the watch has not delivered yet (see [`Overlay`]).
pub(super) type PoolOverlay = Arc<Mutex<Overlay<BootcNodePool>>>;

/// The reason of the event on a pool that cannot be read.
pub const POOL_UNREADABLE: &str = "PoolUnreadable";

/// The readable pools' changes, after the cache returned took them, and the overlay of
/// the pools' writes, which they keep up to date.
pub(super) fn pool_changes(
    client: &Client,
    recorder: crate::shared::Recorders,
) -> (
    impl Stream<Item = Result<BootcNodePool, watcher::Error>> + use<>,
    Store<BootcNodePool>,
    PoolOverlay,
) {
    let (store, writer) = reflector::store();
    let resource = ApiResource::erase::<BootcNodePool>(&());
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let mut reader = Reader {
        cache: writer.as_reader(),
        resource,
        recorder,
        reported: HashMap::new(),
    };
    let typed = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| std::future::ready(reader.convert(event)));
    let overlay = PoolOverlay::default();
    let observer = Arc::clone(&overlay);
    let changes = reflector::reflector(writer, typed)
        .inspect(move |event| {
            if let Ok(event) = event {
                lock(&observer).observe(event);
            }
        })
        .applied_objects();
    (changes, store, overlay)
}

impl Context {
    /// The pool to plan: as this controller last wrote it while the watch has not
    /// delivered that write, else as the cache has it now (`given` was read from it when
    /// the reconcile was queued), else `given` (gone from the cache since).
    pub(super) fn pool_now(&self, given: Arc<BootcNodePool>) -> Arc<BootcNodePool> {
        let name = given.name_any();
        // The overlay first: once it holds nothing for the pool, the cache has the write.
        // A pool of the same name deleted and made again is another pool.
        let written = lock(&self.pool_overlay).pick(&name, None);
        if let Some(written) = written.filter(|w| w.metadata.uid == given.metadata.uid) {
            return written;
        }
        self.pools
            .get(&reflector::ObjectRef::new(&name))
            .unwrap_or(given)
    }

    /// Takes note that `pool` was let go: what is kept of it is forgotten once this
    /// reconcile has ended ([`Context::forget_if_gone`]), not before, as the reconcile
    /// still keeps its members' views and its metrics after its actions.
    pub(super) fn let_go(&self, pool: &str) {
        lock(&self.gone).insert(pool.to_owned());
    }

    /// Forgets what the reconciler kept of `pool` if it was let go.
    pub(super) fn forget_if_gone(&self, pool: &str) {
        if !lock(&self.gone).remove(pool) {
            return;
        }
        lock(&self.progress).remove(pool);
        lock(&self.failures).remove(pool);
        lock(&self.pool_overlay).forget(pool);
        self.membership.forget(pool);
        self.views.forget(pool);
        self.pacing.forget(pool);
        self.deps.metrics.forget_pool(pool);
        self.notifier.forget(pool);
    }

    /// Takes note of what a write of a pool returned.
    pub(super) fn wrote_pool(&self, pool: BootcNodePool) {
        let name = pool.name_any();
        lock(&self.pool_overlay).wrote(&name, pool);
    }
}

struct Reader {
    cache: Store<BootcNodePool>,
    resource: ApiResource,
    recorder: crate::shared::Recorders,
    /// Unreadable pools already reported, with the version reported.
    reported: HashMap<String, Option<String>>,
}

type Converted = Option<Result<Event<BootcNodePool>, watcher::Error>>;

impl Reader {
    fn convert(&mut self, event: Result<Event<DynamicObject>, watcher::Error>) -> Converted {
        let event = match event {
            Err(e) => return Some(Err(e)),
            Ok(event) => event,
        };
        Some(Ok(match event {
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
            Event::InitApply(object) => Event::InitApply(self.read(&object)?),
            Event::Apply(object) => match self.read(&object) {
                Some(pool) => Event::Apply(pool),
                // Was readable, is not any more: out of the cache.
                None => Event::Delete(self.cached(&object)?),
            },
            Event::Delete(object) => {
                self.reported.remove(&object.name_any());
                match read(&object) {
                    Ok(pool) => Event::Delete(pool),
                    Err(_) => Event::Delete(self.cached(&object)?),
                }
            }
        }))
    }

    fn cached(&self, object: &DynamicObject) -> Option<BootcNodePool> {
        let key = reflector::ObjectRef::new(&object.name_any());
        self.cache.get(&key).map(|p| (*p).clone())
    }

    /// The pool, or `None` after reporting why it cannot be read.
    fn read(&mut self, object: &DynamicObject) -> Option<BootcNodePool> {
        let error = match read(object) {
            Ok(pool) => {
                self.reported.remove(&pool.name_any());
                return Some(pool);
            }
            Err(e) => e,
        };
        let name = object.name_any();
        let version = object.resource_version();
        if self.reported.get(&name) == Some(&version) {
            return None;
        }
        self.reported.insert(name.clone(), version);
        warn!(pool = %name, %error, "pool cannot be read; leaving it alone");
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: POOL_UNREADABLE.to_owned(),
            note: Some(format!(
                "this controller cannot read the pool ({error}); nothing is done for it, \
                 its nodes included, until it can: check its spec against the CRD version \
                 the controller was built for"
            )),
            action: POOL_UNREADABLE.to_owned(),
            secondary: None,
        };
        let reference = object.object_ref(&self.resource);
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &reference).await {
                warn!(pool = %name, error = %e, "cannot record an event");
            }
        });
        None
    }
}

fn read(object: &DynamicObject) -> Result<BootcNodePool, serde_json::Error> {
    serde_json::to_value(object).and_then(serde_json::from_value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dynamic(spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": "p", "resourceVersion": "a"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_pool_is_read_on_its_own() {
        let good = dynamic(json!({
            "nodeSelector": {"matchLabels": {"role": "worker"}},
            "image": {"ref": "registry.test/os:v1"},
        }));
        assert_eq!(read(&good).unwrap().spec.image.r#ref, "registry.test/os:v1");
        let bad = dynamic(json!({"nodeSelector": {}, "image": {"ref": 42}}));
        let error = read(&bad).unwrap_err().to_string();
        assert!(error.contains("invalid type"), "{error}");
    }
}
