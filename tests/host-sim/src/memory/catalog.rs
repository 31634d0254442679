//! The images a simulated registry holds, shared by the in-process hosts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bootc_standin::{ImageInfo, ImageResolver};

use super::units::BootUnits;

/// The images a simulated registry holds: by digest, and tags pointing at digests.
#[derive(Debug, Default)]
pub struct Catalog {
    inner: Mutex<CatalogInner>,
}

#[derive(Debug, Default)]
pub(super) struct CatalogInner {
    by_digest: HashMap<String, ImageInfo>,
    tags: HashMap<String, String>,
    pub(super) boot_units: BootUnits,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, CatalogInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an image `repository:tag` (e.g. `registry.test/os:stable`) with this digest
    /// and kernel label; returns the pin `repository@digest`.
    pub fn push(&self, repository: &str, tag: &str, digest: &str, kernel: Option<&str>) -> String {
        let pin = format!("{repository}@{digest}");
        let info = ImageInfo {
            image: pin.clone(),
            digest: digest.to_owned(),
            version: Some(tag.to_owned()),
            created: Some("2026-11-01T00:00:00Z".to_owned()),
            architecture: bootc_standin::resolver::host_architecture().to_owned(),
            kernel: kernel.map(str::to_owned),
            layers: Vec::new(),
        };
        let mut inner = self.lock();
        inner.by_digest.insert(digest.to_owned(), info);
        inner
            .tags
            .insert(format!("{repository}:{tag}"), digest.to_owned());
        pin
    }

    /// Adds `repository:v1`, `:v2`, … with the made-up digests of `'1'`, `'2'`, …
    /// ([`crate::fixtures::digest`]) and these kernel labels; their pins, in order.
    pub fn push_versions<const N: usize>(
        &self,
        repository: &str,
        kernels: [Option<&str>; N],
    ) -> [String; N] {
        std::array::from_fn(|i| {
            let n = i + 1;
            let digest = crate::fixtures::digest(char::from(b'0' + n as u8));
            self.push(repository, &format!("v{n}"), &digest, kernels[i])
        })
    }

    /// Adds a manifest list `repository:tag` with digest `index` whose entry for this
    /// machine's architecture is `arch_digest`: pulled by the list digest, a host reports
    /// the per-architecture digest and tracks the reference it was given, as bootc does.
    pub fn push_list(
        &self,
        repository: &str,
        tag: &str,
        index: &str,
        arch_digest: &str,
        kernel: Option<&str>,
    ) -> String {
        let pin = self.push(repository, tag, index, kernel);
        let mut inner = self.lock();
        if let Some(info) = inner.by_digest.get_mut(index) {
            info.digest = arch_digest.to_owned();
        }
        pin
    }

    /// The image behind `reference` (a tag or a pin), as pulled under that name.
    pub fn get(&self, reference: &str) -> Option<ImageInfo> {
        let inner = self.lock();
        let digest = match reference.rsplit_once('@') {
            Some((_, digest)) => digest.to_owned(),
            None => inner.tags.get(reference)?.clone(),
        };
        let mut info = inner.by_digest.get(&digest)?.clone();
        info.image = reference.to_owned();
        Some(info)
    }
}

impl ImageResolver for Catalog {
    fn resolve(&self, image: &str) -> Result<ImageInfo, bootc_standin::Error> {
        self.get(image).ok_or_else(|| bootc_standin::Error::Pull {
            image: image.to_owned(),
            message: "manifest unknown (HTTP 404)".to_owned(),
        })
    }
}
