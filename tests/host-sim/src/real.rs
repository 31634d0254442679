//! Real-bootc nodes: the upstream bootc 1.16.9 and ostree 2026.4 (a prebuilt archive kept
//! beside the checkout) instead of the stand-in.
//!
//! - [`image`]: the node image: a debootstrapped bookworm with systemd, skopeo, podman and
//!   bootc's runtime libraries, the archive unpacked over it, bootc's units, a stand-in
//!   kernel; an OCI layout holding `v1` and `v2` (which differ in `os-release`'s
//!   `VERSION_ID`), and the archive unpacked for this machine's own use. Cached by a hash
//!   of its inputs in the cache directory ([`crate::image::cache_dir`]).
//! - [`registry`]: a loopback `docker-registry` with its access log kept, so a test can
//!   tell which blobs a node fetched.
//! - [`sysroot`]: a node's ostree sysroot: initialised and `v1` deployed by bootc itself
//!   (run on this machine), the boot entry that decides what boots, and the removal of it
//!   all (deployments are immutable).
//! - [`node`]: [`RealNode`], a [`crate::Node`] whose every boot starts the deployment
//!   that the highest-version boot entry names, as a boot loader would.
//!
//! Everything here needs the archive directory ([`archive_dir`]); tests skip, with a
//! message, only when it is absent.

use std::path::{Path, PathBuf};

pub mod agent_image;
pub mod image;
pub mod node;
pub mod registry;
pub mod sysroot;

pub use image::RealImage;
pub use node::{RealNode, RealNodeOptions, SharedDirs};
pub use registry::{LoggedRegistry, Request};
pub use sysroot::Sysroot;

/// The environment variable naming the directory that holds the archive and its
/// `SHA256SUMS`.
pub const ARCHIVE_ENV: &str = "BOOTC_REAL_ARCHIVE_DIR";
/// The archive's file name.
pub const ARCHIVE: &str = "real-bootc-1.16.9-ostree-2026.4-bookworm-amd64.tar.xz";
/// The stateroot every real node deploys into.
pub const STATEROOT: &str = "debian";
/// The repository the images are pushed to.
pub const REPOSITORY: &str = "node";

/// The archive directory: `$BOOTC_REAL_ARCHIVE_DIR`, else `shared/tools/real-bootc` beside
/// the checkout. `None` when that directory does not exist.
pub fn archive_dir() -> Option<PathBuf> {
    let dir = std::env::var_os(ARCHIVE_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(default_archive_dir, PathBuf::from);
    dir.is_dir().then_some(dir)
}

/// The variable a developer sets to `1` to skip the real-bootc tests on a machine without
/// the archive: an explicit opt-out, reported by each test it skips. CI cannot opt out.
pub const SKIP_ENV: &str = "BOOTC_SKIP_REAL";

/// The archive directory for a real-bootc test: `Ok(Some(dir))` when it is there;
/// `Ok(None)` (the test skips, and says so) only when it is absent, `$BOOTC_SKIP_REAL` is
/// `1` and `CI` is not `true`; otherwise an error the test fails with.
pub fn archive_for_test(test: &str) -> Result<Option<PathBuf>, String> {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let decision = archive_decision(archive_dir(), env("CI") == "true", env(SKIP_ENV) == "1");
    if let Ok(None) = &decision {
        // Straight to stderr, past the test harness's capture: a skip is always seen.
        use std::io::Write;
        let line = format!("SKIPPED {test}: the real-bootc archive is absent and {SKIP_ENV}=1\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
    decision
}

/// What [`archive_for_test`] decides from what it found and the two variables.
pub fn archive_decision(
    found: Option<PathBuf>,
    ci: bool,
    opted_out: bool,
) -> Result<Option<PathBuf>, String> {
    let where_ =
        format!("set ${ARCHIVE_ENV} or put it at shared/tools/real-bootc beside the checkout");
    match (found, ci, opted_out) {
        (Some(dir), _, _) => Ok(Some(dir)),
        (None, true, _) => Err(format!(
            "the real-bootc archive directory is absent, and under CI=true a real-bootc test \
             fails rather than skips ({where_})"
        )),
        (None, false, true) => Ok(None),
        (None, false, false) => Err(format!(
            "the real-bootc archive directory is absent ({where_}); to skip the real-bootc \
             tests on purpose, set {SKIP_ENV}=1"
        )),
    }
}

/// `<checkout>/../shared/tools/real-bootc`, the checkout found from this crate's manifest.
fn default_archive_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/real-bootc")
}

/// The environment that runs the unpacked bootc and ostree on this machine: their
/// libraries first, their programs first on the PATH (ostree-ext runs `ostree`).
pub(crate) fn tools_env(tools: &Path) -> Vec<(String, String)> {
    let lib = tools.join("usr/lib/x86_64-linux-gnu");
    let bin = tools.join("usr/bin");
    vec![
        ("LD_LIBRARY_PATH".to_owned(), lib.display().to_string()),
        (
            "PATH".to_owned(),
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::archive_decision;

    #[test]
    fn an_absent_archive_fails_unless_a_developer_opts_out_outside_ci() {
        let dir = PathBuf::from("/archive");
        for (found, ci, out, expect) in [
            (Some(dir.clone()), false, false, Ok(Some(dir.clone()))),
            (Some(dir.clone()), true, true, Ok(Some(dir.clone()))),
            (None, false, true, Ok(None)),
            (None, false, false, Err("BOOTC_SKIP_REAL=1")),
            (None, true, false, Err("CI=true")),
            (None, true, true, Err("CI=true")),
        ] {
            let got = archive_decision(found.clone(), ci, out);
            match (&got, expect) {
                (Ok(a), Ok(b)) => assert_eq!(a, &b),
                (Err(e), Err(says)) => assert!(e.contains(says), "{e}"),
                _ => panic!("{found:?} ci={ci} opted out={out}: {got:?}"),
            }
        }
    }
}
