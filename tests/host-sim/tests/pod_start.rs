//! The kubelet's start of a container that cannot start, with podman: `podman run`
//! creates the container before it starts it, so a failed start must not leave it behind
//! holding its name. The kubelet retries a pod under the same name (one per boot), and a
//! name still taken would turn one failed start (the node's bus socket not there yet)
//! into a pod that never runs again in that boot.
//!
//! Needs podman (`scripts/install-packages`); fails without it under `CI=true`.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use host_sim::pods::spec::ContainerRun;
use host_sim::pods::{Pod, Runtime, ServiceAccountFiles, podman_command, podman_for_test};

/// `scripts/image podman`: podman with the storage the harness runs containers from.
fn podman(args: &[&str]) -> Output {
    let command = podman_command();
    Command::new(&command[0])
        .args(&command[1..])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running scripts/image podman: {e}"))
}

/// Removes the test's container and image, also when it fails.
struct Cleanup {
    container: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-t", "0", &self.container]);
        let _ = podman(&["rmi", "--ignore", &self.image]);
    }
}

/// The containers named exactly `name`, in any state.
fn containers_named(name: &str) -> String {
    let filter = format!("name=^{name}$");
    let out = podman(&[
        "ps",
        "-a",
        "--filter",
        &filter,
        "--format",
        "{{.Names}} {{.Status}}",
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_container_that_could_not_start_leaves_its_name_free_for_the_next_try() {
    let test = "a_container_that_could_not_start_leaves_its_name_free_for_the_next_try";
    if podman_for_test(test).is_none() {
        return;
    }
    let id = std::process::id();
    let cleanup = Cleanup {
        container: format!("host-sim-pod-start-{id}"),
        image: format!("localhost/host-sim-empty:{id}"),
    };
    // An image with nothing in it: its entrypoint cannot be found, so the container is
    // created and then fails to start.
    let dir = tempfile::tempdir().unwrap();
    let tar = dir.path().join("empty.tar");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let packed = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(packed.success(), "tar of an empty directory failed");
    let imported = podman(&["import", &tar.display().to_string(), &cleanup.image]);
    assert!(
        imported.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&imported.stderr)
    );

    let run = ContainerRun {
        image: cleanup.image.clone(),
        command: vec!["/not-in-the-image".to_owned()],
        args: Vec::new(),
        env: Vec::new(),
        ports: BTreeMap::new(),
        liveness: None,
        readiness: None,
        run_as_user: None,
        run_as_group: None,
        read_only_root: false,
        no_new_privileges: false,
        cap_drop: Vec::new(),
        cap_add: Vec::new(),
        seccomp: None,
        memory_limit: None,
        host_paths: Vec::new(),
    };
    let files = ServiceAccountFiles {
        token: "token".to_owned(),
        ca_pem: String::new(),
        namespace: "default".to_owned(),
    };
    let runtime = Runtime::Podman {
        podman: podman_command(),
    };
    let mut errors = Vec::new();
    for _ in 0..2 {
        match Pod::start(&runtime, &cleanup.container, run.clone(), &files).await {
            Ok(mut pod) => {
                pod.kill().await;
                panic!("a container whose entrypoint is not in the image started");
            }
            Err(e) => errors.push(e),
        }
        assert_eq!(
            containers_named(&cleanup.container),
            "",
            "a failed start left its container behind (errors so far: {errors:?})"
        );
    }
    // Both tries failed on the entrypoint: the second did not find the name taken.
    assert!(
        errors.iter().all(|e| e.contains("/not-in-the-image")),
        "a try failed for another reason than the missing entrypoint: {errors:?}"
    );
    drop(cleanup);
}
