//! The Secrets the controller watches and writes: the pools' source pull Secrets, watched
//! as metadata in the namespaces the admin allowed, and the controller's copy of each
//! pool's pull Secret in the install's namespace, the only Secret its BootcNodes name.
//!
//! A copy is `bootc-pull-<pool>` ([`copy_name`]), of type `kubernetes.io/dockerconfigjson`,
//! owned by its pool (so that garbage collection removes it with the pool), labelled as
//! the project's, and annotated with its source and its content's hash: an unchanged copy
//! is known as such from the metadata cache, and is written (server-side apply) only when
//! its source's content, its source or its owner changed. A pool that names no Secret, or
//! one in a namespace the controller may not read, or that is being deleted, has none.

use std::collections::BTreeMap;

use bootc_crds::pool::{BootcNodePool, SecretRef};
use futures::{Stream, StreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::info;

use super::{Context, ReconcileError, api_error, is_status};
use crate::secrets::{
    COPY_LABEL, HASH_ANNOTATION, MANAGED_BY, SOURCE_ANNOTATION, SecretNamespaces, copy_name,
};
use crate::shared::FIELD_MANAGER;

/// The copies' cache: metadata only.
pub type Copies = Store<PartialObjectMeta<Secret>>;

/// Secrets in the namespaces sources may be read in: metadata only (names and versions,
/// never content); the content is read when a pool is reconciled.
pub(super) fn source_changes(
    client: &Client,
    namespaces: &SecretNamespaces,
) -> impl Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + use<> {
    let watches = namespaces.allowed.iter().map(|ns| {
        watcher::watcher(
            Api::<PartialObjectMeta<Secret>>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        )
        .default_backoff()
        .touched_objects()
        .boxed()
    });
    futures::stream::select_all(watches)
}

/// The copies in the install's namespace, cached as metadata.
pub(super) fn copy_changes(
    client: &Client,
    namespaces: &SecretNamespaces,
    writer: reflector::store::Writer<PartialObjectMeta<Secret>>,
) -> impl Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + use<> {
    let api = Api::<PartialObjectMeta<Secret>>::namespaced(client.clone(), &namespaces.install);
    reflector::reflector(
        writer,
        watcher::watcher(
            api,
            watcher::Config::default().labels(&format!("{COPY_LABEL}=true")),
        )
        .default_backoff()
        .modify(|s: &mut PartialObjectMeta<Secret>| s.managed_fields_mut().clear()),
    )
    .touched_objects()
}

/// The pools naming a Secret as their pull Secret.
pub(super) fn pools_of_secret(
    pools: &Store<BootcNodePool>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<BootcNodePool>> {
    let (ns, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    pools
        .state()
        .iter()
        .filter(|p| {
            p.spec
                .pull_secret_ref
                .as_ref()
                .is_some_and(|r| r.namespace == ns && r.name == name)
        })
        .map(|p| ObjectRef::new(&p.name_any()))
        .collect()
}

/// The pool owning a copy (a copy changed or deleted by someone else is put right).
pub(super) fn pool_of_copy(copy: &PartialObjectMeta<Secret>) -> Option<ObjectRef<BootcNodePool>> {
    copy.owner_references()
        .iter()
        .find(|o| o.kind == "BootcNodePool")
        .map(|o| ObjectRef::new(&o.name))
}

/// The copy of `source` (content `data`, hash `hash`) for `pool`, as applied.
fn copy_of(pool: &BootcNodePool, at: &SecretRef, source: &str, data: &[u8], hash: &str) -> Secret {
    let labels = BTreeMap::from([
        (COPY_LABEL.to_owned(), "true".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
        (
            "app.kubernetes.io/part-of".to_owned(),
            "bootc-pool".to_owned(),
        ),
    ]);
    let annotations = BTreeMap::from([
        (SOURCE_ANNOTATION.to_owned(), source.to_owned()),
        (HASH_ANNOTATION.to_owned(), hash.to_owned()),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(at.name.clone()),
            namespace: Some(at.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: pool.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(data.to_vec()),
        )])),
        ..Secret::default()
    }
}

impl Context {
    /// Where `pool`'s copy is.
    pub(super) fn copy_ref(&self, pool: &BootcNodePool) -> SecretRef {
        SecretRef {
            name: copy_name(&pool.name_any()),
            namespace: self.deps.secrets.install.clone(),
        }
    }

    fn cached_copy(&self, at: &SecretRef) -> Option<std::sync::Arc<PartialObjectMeta<Secret>>> {
        self.copies
            .get(&ObjectRef::new(&at.name).within(&at.namespace))
    }

    /// Makes `pool`'s copy hold `data` (the content of `source`, whose hash is `hash`).
    pub(super) async fn ensure_copy(
        &self,
        pool: &BootcNodePool,
        source: &SecretRef,
        data: &[u8],
        hash: &str,
    ) -> Result<(), ReconcileError> {
        let at = self.copy_ref(pool);
        let from = format!("{}/{}", source.namespace, source.name);
        let uid = pool.metadata.uid.clone().unwrap_or_default();
        let fresh = self.cached_copy(&at).is_some_and(|c| {
            let a = c.annotations();
            a.get(HASH_ANNOTATION).map(String::as_str) == Some(hash)
                && a.get(SOURCE_ANNOTATION) == Some(&from)
                && c.owner_references().iter().any(|o| o.uid == uid)
        });
        if fresh {
            return Ok(());
        }
        let copy = copy_of(pool, &at, &from, data, hash);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &at.namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let what = format!("copying pull Secret {from} to {}/{}", at.namespace, at.name);
        api.patch(&at.name, &params, &Patch::Apply(&copy))
            .await
            .map_err(api_error(what))?;
        info!(pool = %pool.name_any(), source = %from, copy = %at.name, %hash, "pull Secret copied");
        Ok(())
    }

    /// Removes `pool`'s copy, if it has one.
    pub(super) async fn drop_copy(&self, pool: &BootcNodePool) -> Result<(), ReconcileError> {
        let at = self.copy_ref(pool);
        if self.cached_copy(&at).is_none() {
            return Ok(());
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &at.namespace);
        match api.delete(&at.name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(pool = %pool.name_any(), copy = %at.name, "pull Secret copy removed");
                Ok(())
            }
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(api_error(format!(
                "removing pull Secret copy {}/{}",
                at.namespace, at.name
            ))(e)),
        }
    }
}
