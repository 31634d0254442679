//! `--install`: the install done the way `docs/install.md` says, against the demo's API:
//! the image built and pushed by `scripts/image` to the demo's registry, an overlay of
//! our own pointing the install at it by digest (with the registry listed as insecure
//! for the controller, as the guide says for a plain-HTTP registry), and
//! `kubectl apply -k`. Without `--install` the demo prints these steps and waits for a
//! person to take them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::time::Instant;

use super::kubelet::{DEPLOYMENT, NAMESPACE};
use super::step;

/// The checkout's root (this crate is `tests/bootc-sim`).
fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The overlay `docs/install.md` has the admin write, for `image` (`NAME@sha256:…`) and
/// a plain-HTTP registry `insecure` (`host:port`).
pub(super) fn overlay(base: &Path, image: &str, insecure: &str) -> Result<String, String> {
    let (name, digest) = image
        .split_once('@')
        .ok_or_else(|| format!("{image} is not pinned by digest"))?;
    Ok(format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {base}
images:
  - name: ghcr.io/bootc-pool/bootc-pool
    newName: {name}
    digest: {digest}
patches:
  - target: {{kind: Deployment, name: bootc-pool-controller}}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --insecure-registry={insecure}
",
        base = base.display()
    ))
}

/// What the guide's steps are here, printed for a person to follow.
pub(super) fn instructions(registry: &str, kubeconfig: &Path, dir: &Path) -> String {
    format!(
        "install bootc-pool as docs/install.md says; here:\n  \
         scripts/image --push {registry}/bootc-pool:demo --tls-verify=false\n  \
         an overlay in {dir}/my-install: images: newName {registry}/bootc-pool with the \
         digest printed, and the patch adding --insecure-registry={registry} to the \
         controller's args (docs/install.md, registries)\n  \
         kubectl --kubeconfig {kc} apply -k {dir}/my-install\n\
         the demo runs the Deployment's and the DaemonSet's pods once they are in the API",
        dir = dir.display(),
        kc = kubeconfig.display()
    )
}

async fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .current_dir(checkout())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds and pushes the image, writes the overlay and applies it.
pub(super) async fn as_documented(
    registry: &str,
    kubeconfig: &Path,
    dir: &Path,
    started: Instant,
) -> Result<(), String> {
    step(
        started,
        "building the image (scripts/image; minutes on a first run) …",
    );
    let reference = format!("{registry}/bootc-pool:demo");
    let script = checkout().join("scripts/image").display().to_string();
    let out = run(&script, &["--push", &reference, "--tls-verify=false"]).await?;
    let image = out
        .lines()
        .find_map(|l| l.strip_prefix("image: "))
        .ok_or_else(|| format!("scripts/image printed no image: {out}"))?;
    // image: NAME[:TAG]@sha256:… → NAME@sha256:… (a `:` before the last `/` is a port)
    let (named, digest) = image.split_once('@').ok_or("no digest")?;
    let name = match named.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => named,
    };
    let pinned = format!("{name}@{digest}");
    step(started, &format!("pushed {pinned}"));
    let mine = dir.join("my-install");
    std::fs::create_dir_all(&mine).map_err(|e| format!("{}: {e}", mine.display()))?;
    let base = checkout()
        .join("deploy/overlays/default")
        .canonicalize()
        .map_err(|e| format!("deploy/overlays/default: {e}"))?;
    let base = relative_to(&base, &mine)?;
    let text = overlay(&base, &pinned, registry)?;
    std::fs::write(mine.join("kustomization.yaml"), text)
        .map_err(|e| format!("{}: {e}", mine.display()))?;
    let kc = kubeconfig.display().to_string();
    let applied = run(
        "kubectl",
        &[
            "--kubeconfig",
            &kc,
            "apply",
            "-k",
            &mine.display().to_string(),
        ],
    )
    .await?;
    step(
        started,
        &format!(
            "kubectl apply -k {}:\n{}",
            mine.display(),
            applied.trim_end()
        ),
    );
    // The guide's check: the controller's Deployment rolled out.
    let rollout = [
        "--kubeconfig",
        &kc,
        "-n",
        NAMESPACE,
        "rollout",
        "status",
        "deploy/bootc-pool-controller",
        "--timeout=600s",
    ];
    let out = run("kubectl", &rollout).await?;
    step(
        started,
        &format!("kubectl rollout status: {}", out.trim_end()),
    );
    Ok(())
}

/// `target` as a path relative to directory `from` (kustomize takes a base by relative
/// path only).
fn relative_to(target: &Path, from: &Path) -> Result<PathBuf, String> {
    let from = from
        .canonicalize()
        .map_err(|e| format!("{}: {e}", from.display()))?;
    let common = target
        .components()
        .zip(from.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut path = PathBuf::new();
    for _ in from.components().skip(common) {
        path.push("..");
    }
    path.extend(target.components().skip(common));
    Ok(path)
}

/// Waits until a controller holds the Lease (the install is applied and its pods run).
pub(super) async fn wait_for_controller(
    client: &Client,
    limit: Option<Duration>,
) -> Result<String, String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = limit.map(|l| std::time::Instant::now() + l);
    loop {
        let holder = leases
            .get_opt(DEPLOYMENT)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        if let Some(holder) = holder {
            return Ok(holder);
        }
        if deadline.is_some_and(|d| std::time::Instant::now() > d) {
            return Err("no controller took the Lease in time".to_owned());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
