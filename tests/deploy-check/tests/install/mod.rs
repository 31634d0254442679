//! The install applied as an admin applies it: `kubectl apply -k` of an overlay on the
//! default install whose only change is the image (kustomize `images:`), against an API
//! emulator.

use std::path::{Path, PathBuf};

use deploy_check::repo_root;
use kube_emulator::{Emulator, EmulatorOptions};

use crate::common;

/// The image name the manifests use, which the overlay points elsewhere.
pub const SHIPPED_IMAGE_NAME: &str = "ghcr.io/bootc-pool/bootc-pool";

/// An overlay on the default install whose only change is the image (`NAME:TAG`).
pub fn write_overlay(dir: &Path, image: &str) -> PathBuf {
    let (name, tag) = image.rsplit_once(':').unwrap();
    let overlay = dir.join("overlay");
    std::fs::create_dir(&overlay).unwrap();
    // kustomize takes a base by relative path only.
    let base = repo_root()
        .join("deploy/overlays/default")
        .canonicalize()
        .unwrap();
    let up = overlay.canonicalize().unwrap().components().count() - 1;
    let base = format!(
        "{}{}",
        "../".repeat(up),
        base.strip_prefix("/").unwrap().display()
    );
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\nimages:\n  - name: {SHIPPED_IMAGE_NAME}\n    newName: {name}\n    newTag: {tag}\n"
        ),
    )
    .unwrap();
    overlay
}

/// Applies the install pointed at `image` (kubeconfig in `dir`), and returns a client.
pub async fn apply(emulator: &Emulator, dir: &Path, image: &str) -> kube::Client {
    emulator.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    let overlay = write_overlay(dir, image);
    common::ok(dir, &["apply", "-k", overlay.to_str().unwrap()]).await;
    emulator.client().unwrap()
}

/// An API emulator serving TLS (pods use in-cluster configuration), and a directory for
/// the kubeconfig and the overlay.
pub async fn tls_emulator() -> (Emulator, tempfile::TempDir) {
    let emulator = Emulator::start_with(EmulatorOptions {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    (emulator, tempfile::tempdir().unwrap())
}
