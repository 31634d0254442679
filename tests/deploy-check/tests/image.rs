//! The image, built for real: `scripts/image` builds the one `Containerfile` with podman
//! (with local stand-ins for the public bases when those cannot be pulled) and pushes it
//! to a registry on loopback. What the registry then holds is checked: the digest the
//! script prints is the registry's, the layers hold both binaries and no shell or package
//! manager, the image runs as 65532, and both binaries start in it.
//!
//! Slow when cold (the stand-in bases, then the workspace's release build inside the
//! builder); podman's layer cache makes a run without source changes fast. Without podman
//! the test fails, unless `BOOTC_SKIP_IMAGE=1` asks to skip it (never under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use test_registry::Registry;

mod podman;

use podman::{podman, podman_for_test, run};

/// Paths no layer may hold: shells and package managers.
const FORBIDDEN: [&str; 9] = [
    "bin/sh",
    "usr/bin/sh",
    "bin/bash",
    "usr/bin/bash",
    "bin/dash",
    "usr/bin/dash",
    "bin/busybox",
    "usr/bin/dpkg",
    "usr/bin/apt-get",
];

const CONTROLLER: &str = "/usr/bin/bootc-pool-controller";
const AGENT: &str = "/usr/bin/bootc-node-agent";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last `n` lines of `s`.
fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Removes the named containers and the pulled image, also when the test fails.
struct Cleanup {
    containers: Vec<String>,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = podman(&["rm", "--force", "--ignore", name]);
        }
        let _ = podman(&["rmi", "--ignore", &self.image]);
    }
}

fn skopeo_json(args: &[&str]) -> Value {
    let out = run("skopeo", args);
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every path in the image's layers (copied from the registry into an OCI layout),
/// without a leading `./` or `/`.
fn layer_paths(reference: &str, dir: &Path) -> BTreeSet<String> {
    let layout = dir.join("layout");
    let dest = format!("oci:{}:image", layout.display());
    let src = format!("docker://{reference}");
    let out = run(
        "skopeo",
        &["copy", "--src-tls-verify=false", "-q", &src, &dest],
    );
    assert!(out.status.success(), "skopeo copy: {}", text(&out.stderr));
    let blob = |digest: &str| layout.join("blobs/sha256").join(&digest["sha256:".len()..]);
    let read = |digest: &str| -> Value {
        serde_json::from_slice(&std::fs::read(blob(digest)).unwrap()).unwrap()
    };
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest = read(index["manifests"][0]["digest"].as_str().unwrap());
    let mut paths = BTreeSet::new();
    for layer in manifest["layers"].as_array().unwrap() {
        let path = blob(layer["digest"].as_str().unwrap());
        let out = run("tar", &["-tzf", &path.to_string_lossy()]);
        assert!(out.status.success(), "tar -tzf: {}", text(&out.stderr));
        paths.extend(
            text(&out.stdout)
                .lines()
                .map(|l| {
                    l.trim_start_matches("./")
                        .trim_start_matches('/')
                        .to_owned()
                })
                .filter(|l| !l.is_empty()),
        );
    }
    paths
}

/// `podman run --rm --name NAME [--entrypoint E] IMAGE ARGS…`.
fn run_in_image(name: &str, entrypoint: &str, image: &str, args: &[&str]) -> Output {
    let mut all = vec![
        "run",
        "--rm",
        "--tls-verify=false",
        "--name",
        name,
        "--entrypoint",
        entrypoint,
        image,
    ];
    all.extend_from_slice(args);
    podman(&all)
}

/// What `scripts/image` printed: `digest: sha256:…`.
fn printed_digest(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("no `digest:` line in {stdout}"))
        .trim()
        .to_owned()
}

#[test]
fn scripts_image_builds_the_containerfile_and_pushes_what_runs() {
    let test = "scripts_image_builds_the_containerfile_and_pushes_what_runs";
    let Some(()) = podman_for_test(test) else {
        return;
    };
    let registry = Registry::start().unwrap();
    let reference = registry.image("bootc-pool", "deploy-check");
    let out = run(
        "scripts/image",
        &[
            "--push",
            &reference,
            "--tls-verify=false",
            "--tag",
            "localhost/bootc-pool:deploy-check",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "scripts/image failed:\n{}",
        tail(&stderr, 80)
    );
    let digest = printed_digest(&stdout);
    assert!(stdout.contains("size: "), "{stdout}");
    eprintln!("scripts/image: {stdout}");

    let inspected = skopeo_json(&[
        "inspect",
        "--tls-verify=false",
        &format!("docker://{reference}"),
    ]);
    assert_eq!(
        inspected["Digest"],
        digest.as_str(),
        "the registry's digest"
    );
    let pinned = format!("{}/bootc-pool@{digest}", registry.host());
    let config = skopeo_json(&[
        "inspect",
        "--tls-verify=false",
        "--config",
        &format!("docker://{pinned}"),
    ]);
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(config["config"]["Entrypoint"][0], CONTROLLER, "{config}");

    let dir = tempfile::tempdir().unwrap();
    let paths = layer_paths(&pinned, dir.path());
    for binary in [CONTROLLER, AGENT] {
        assert!(paths.contains(&binary[1..]), "{binary} is not in the image");
    }
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|p| paths.contains(**p)).collect();
    assert!(found.is_empty(), "the image holds {found:?}");

    let names = [0, 1, 2].map(|i| format!("deploy-check-image-{}-{i}", std::process::id()));
    let _cleanup = Cleanup {
        containers: names.to_vec(),
        image: pinned.clone(),
    };
    for (name, binary) in names.iter().zip([CONTROLLER, AGENT]) {
        let out = run_in_image(name, binary, &pinned, &["--help"]);
        assert!(
            out.status.success() && text(&out.stdout).contains("Usage"),
            "{binary} --help in the image: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let shell = run_in_image(&names[2], "/bin/sh", &pinned, &["-c", "true"]);
    assert!(!shell.status.success(), "the image runs /bin/sh");
}
