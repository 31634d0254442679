//! Simulated bootc hosts: Debian root file systems booted with real systemd under
//! systemd-nspawn, and an in-process host for scale runs.
//!
//! - [`image`]: the debootstrapped base and the node image (bootc's units, the stand-in's
//!   finalize unit), cached outside the checkout (`$BOOTC_SIM_CACHE`, default
//!   `/var/cache/bootc-sim`).
//! - [`node`]: one node, a `systemd-nspawn` container supervised across reboots, with
//!   failure injection (comes back on the old image, never comes back).
//! - [`bus`]: the few D-Bus calls the harness makes on a node's system bus.
//! - [`kubelet`]: the kubelet's part (the Node object and its `Ready` condition).
//! - [`daemonset`]: the real agent binary run against a [`Node`] as a DaemonSet would.
//! - [`real`]: real-bootc nodes: the upstream bootc and ostree in the node, an ostree
//!   sysroot per node deployed by bootc itself, the harness playing boot loader.
//! - [`memory`]: an in-process host with the stand-in's semantics.
//! - [`cluster`]: a cluster of in-process nodes (hosts, kubelets, supervised agents) and
//!   the rollout's availability checker.
//! - [`error`]: the harness's error type.
//! - [`fixtures`]: small pieces the tests share (a BootcNode asking for an image, the
//!   approval, polling with a deadline, reads of bootc's status).
//!
//! The nspawn parts need root, `systemd-nspawn` (Debian `systemd-container`) and, the first
//! time, `debootstrap` and the network; they fail with a clear error otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod bus;
pub mod cluster;
pub mod daemonset;
pub mod error;
pub mod fixtures;
pub mod image;
pub mod kubelet;
pub mod memory;
pub mod node;
pub mod pods;
pub mod real;
pub mod throttle;

pub use bus::{ListedUnit, UnitState};
pub use error::{Result, SimError};
pub use image::{BaseImage, NodeImage};
pub use node::{Node, NodeOptions, NodePhase, NodeStatus};

/// The environment variable that names a prebuilt stand-in binary.
pub const STANDIN_ENV: &str = "BOOTC_STANDIN_BIN";

/// The bootc stand-in binary (`tests/bootc-standin`, bin `bootc`) for
/// [`NodeOptions::bootc_binary`].
///
/// `$BOOTC_STANDIN_BIN` when set. Otherwise the `bootc` beside this test executable in
/// the cargo target directory (`target/<profile>/bootc`); when running under cargo
/// (`$CARGO` is set) it is first built there with `cargo build -p bootc-standin --bin
/// bootc` (cargo only builds a package's own binaries for its tests), once per process.
pub fn standin_binary() -> Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(find_or_build_standin)
        .clone()
        .map_err(SimError::Standin)
}

fn find_or_build_standin() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(STANDIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "${STANDIN_ENV} = `{}` is not a file",
                path.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let profile_dir = profile_dir(&exe).ok_or_else(|| {
        format!(
            "cannot tell the cargo target directory from `{}`; set ${STANDIN_ENV}",
            exe.display()
        )
    })?;
    let binary = profile_dir.join("bootc");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let mut command = Command::new(cargo);
        command.current_dir(env!("CARGO_MANIFEST_DIR")).args([
            "build",
            "--quiet",
            "-p",
            "bootc-standin",
            "--bin",
            "bootc",
        ]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            command.arg("--release");
        }
        if let Some(target_dir) = profile_dir.parent() {
            command.env("CARGO_TARGET_DIR", target_dir);
        }
        let out = command
            .output()
            .map_err(|e| format!("cannot run `cargo build -p bootc-standin`: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`cargo build -p bootc-standin --bin bootc` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "`{}` is missing: build it with `cargo build -p bootc-standin --bin bootc` (or \
             `cargo build --workspace`), or set ${STANDIN_ENV}",
            binary.display()
        ))
    }
}

/// `target/<profile>` for an executable in `target/<profile>/deps` or `target/<profile>`.
fn profile_dir(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_dir_of_test_and_bin() {
        assert_eq!(
            profile_dir(Path::new("/t/target/debug/deps/node-0123")),
            Some(PathBuf::from("/t/target/debug"))
        );
        assert_eq!(
            profile_dir(Path::new("/t/target/debug/harness")),
            Some(PathBuf::from("/t/target/debug"))
        );
    }
}
