//! The simulated nodes' root file system: a debootstrapped Debian base, cached once, and a
//! node image (base + the units and files in `units/`), cached by a hash of those files.
//!
//! Both live in the cache directory (`$BOOTC_SIM_CACHE`, default [`DEFAULT_CACHE_DIR`]),
//! never in the checkout. Each is built in a temporary directory beside its final place and
//! renamed into place, under an exclusive `flock` on `<cache>/.lock`, so parallel test
//! binaries neither race nor see half-built trees.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{Flock, FlockArg};

use crate::error::{Result, SimError};

/// Where the images are cached unless `$BOOTC_SIM_CACHE` says otherwise.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/bootc-sim";
/// The environment variable naming the cache directory.
pub const CACHE_ENV: &str = "BOOTC_SIM_CACHE";
/// The environment variable naming the Debian mirror debootstrap uses.
pub const MIRROR_ENV: &str = "BOOTC_SIM_MIRROR";
/// The Debian mirror debootstrap uses unless `$BOOTC_SIM_MIRROR` says otherwise.
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
/// The Debian release: trixie has systemd 257, which can soft reboot.
pub const SUITE: &str = "trixie";
/// The packages debootstrap adds to `minbase`.
pub const INCLUDE: &str = "systemd,systemd-sysv,dbus,libpam-systemd";

/// The base's directory name in the cache.
const BASE_DIR: &str = "trixie-minbase";
/// Bumped when the way the node image is made changes without its files changing.
const NODE_IMAGE_FORMAT: &str = "host-sim node image v2";
/// Where the stand-in is bind-mounted in a node.
pub const BOOTC_PATH: &str = "/usr/bin/bootc";
/// Where the stand-in's state directory is bind-mounted in a node.
pub const STANDIN_STATE_PATH: &str = "/var/lib/bootc-standin";

/// One thing the node image adds to (or removes from) the base.
#[derive(Debug, Clone, Copy)]
enum ImageEntry {
    /// A regular file with these contents and mode.
    File(&'static str, &'static str, u32),
    /// A symbolic link to this target.
    Symlink(&'static str, &'static str),
    /// A directory.
    Dir(&'static str),
    /// Nothing: the base's file is removed.
    Absent(&'static str),
}

/// What the node image adds to the base, paths relative to its root.
fn entries() -> Vec<ImageEntry> {
    vec![
        // bootc's own units, unchanged.
        ImageEntry::File(
            "usr/lib/systemd/system/bootc-status-updated.path",
            include_str!("../units/bootc-status-updated.path"),
            0o644,
        ),
        ImageEntry::File(
            "usr/lib/systemd/system/bootc-status-updated.target",
            include_str!("../units/bootc-status-updated.target"),
            0o644,
        ),
        ImageEntry::File(
            "usr/lib/systemd/system/bootc-fetch-apply-updates.service",
            include_str!("../units/bootc-fetch-apply-updates.service"),
            0o644,
        ),
        ImageEntry::File(
            "usr/lib/systemd/system/bootc-fetch-apply-updates.timer",
            include_str!("../units/bootc-fetch-apply-updates.timer"),
            0o644,
        ),
        // Ours.
        ImageEntry::File(
            "usr/lib/systemd/system/bootc-standin-finalize.service",
            include_str!("../units/bootc-standin-finalize.service"),
            0o644,
        ),
        ImageEntry::File(
            "usr/lib/tmpfiles.d/bootc-sim.conf",
            include_str!("../units/bootc-sim.tmpfiles.conf"),
            0o644,
        ),
        // Keep nspawn's bind mounts across soft reboots.
        ImageEntry::File(
            "etc/systemd/system/mount.d/10-host-sim-keep-mounts.conf",
            include_str!("../units/host-sim-keep-mounts.conf"),
            0o644,
        ),
        // Enabled as on a bootc host.
        ImageEntry::Dir("etc/systemd/system/multi-user.target.wants"),
        ImageEntry::Dir("etc/systemd/system/timers.target.wants"),
        ImageEntry::Symlink(
            "etc/systemd/system/multi-user.target.wants/bootc-status-updated.path",
            "/usr/lib/systemd/system/bootc-status-updated.path",
        ),
        ImageEntry::Symlink(
            "etc/systemd/system/multi-user.target.wants/bootc-standin-finalize.service",
            "/usr/lib/systemd/system/bootc-standin-finalize.service",
        ),
        ImageEntry::Symlink(
            "etc/systemd/system/timers.target.wants/bootc-fetch-apply-updates.timer",
            "/usr/lib/systemd/system/bootc-fetch-apply-updates.timer",
        ),
        // An empty machine-id: systemd takes the ID nspawn passes (`--uuid`, derived from the
        // node's name), so each node keeps its own across reboots and none is a "first boot".
        ImageEntry::File("etc/machine-id", "", 0o444),
        // No hostname of the base's builder: nspawn's machine name (the node's) is used.
        ImageEntry::Absent("etc/hostname"),
        // Mount points: the stand-in binary and its state are bind-mounted per node.
        ImageEntry::File("usr/bin/bootc", "", 0o755),
        ImageEntry::Dir("var/lib/bootc-standin"),
        ImageEntry::Dir("ostree"),
        ImageEntry::Dir("var/lib/bootc-node-agent"),
    ]
}

/// The cache directory: `$BOOTC_SIM_CACHE` or [`DEFAULT_CACHE_DIR`].
pub fn cache_dir() -> PathBuf {
    std::env::var_os(CACHE_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR), PathBuf::from)
}

/// Fails unless this process runs as root.
pub fn require_root() -> Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    if uid == 0 {
        Ok(())
    } else {
        Err(SimError::NotRoot { uid })
    }
}

/// Fails unless `program` is on the PATH.
pub(crate) fn require_tool(program: &'static str, package: &'static str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(extra)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(SimError::MissingTool { program, package })
}

/// An exclusive lock on the cache directory, released on drop.
#[derive(Debug)]
pub(crate) struct CacheLock {
    _lock: Flock<File>,
}

impl CacheLock {
    pub(crate) fn acquire(cache: &Path) -> Result<Self> {
        fs::create_dir_all(cache)
            .map_err(|e| SimError::io("creating the cache directory", cache, e))?;
        let path = cache.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| SimError::io("opening the cache lock", &path, e))?;
        let lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| {
            SimError::io("locking the cache", &path, std::io::Error::from(errno))
        })?;
        Ok(CacheLock { _lock: lock })
    }
}

/// The debootstrapped Debian base (read-only once built).
#[derive(Debug, Clone)]
pub struct BaseImage {
    root: PathBuf,
}

impl BaseImage {
    /// Returns the cached base, debootstrapping it first if it is not there yet (about a
    /// minute and 250 MB; needs root, `debootstrap` and network access to the mirror).
    ///
    /// Blocks; async callers use [`BaseImage::ensure`].
    pub fn ensure_blocking() -> Result<Self> {
        require_root()?;
        let cache = cache_dir();
        let root = cache.join(BASE_DIR);
        if root.join("usr/lib/systemd/systemd").exists() {
            return Ok(BaseImage { root });
        }
        let _lock = CacheLock::acquire(&cache)?;
        if root.join("usr/lib/systemd/systemd").exists() {
            return Ok(BaseImage { root });
        }
        require_tool("debootstrap", "debootstrap")?;
        let tmp = cache.join(format!(".{BASE_DIR}.tmp"));
        remove_tree(&tmp)?;
        let log = cache.join(format!("{BASE_DIR}.debootstrap.log"));
        let mirror = std::env::var(MIRROR_ENV)
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEFAULT_MIRROR.to_owned());
        let mut command = Command::new("debootstrap");
        command
            .arg("--variant=minbase")
            .arg(format!("--include={INCLUDE}"))
            .arg(SUITE)
            .arg(&tmp)
            .arg(&mirror);
        run_logged(command, &log)?;
        fs::rename(&tmp, &root)
            .map_err(|e| SimError::io("renaming the new base into place", &root, e))?;
        Ok(BaseImage { root })
    }

    /// [`BaseImage::ensure_blocking`] on a blocking thread.
    pub async fn ensure() -> Result<Self> {
        spawn_blocking(Self::ensure_blocking).await
    }

    /// The base's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// The image the nodes boot: the base plus the files of `units/` (bootc's units enabled,
/// the stand-in's finalize unit, `/run/ostree-booted`, mount points). Shared read-only by
/// all nodes (`--volatile=overlay`).
#[derive(Debug, Clone)]
pub struct NodeImage {
    root: PathBuf,
    key: String,
}

impl NodeImage {
    /// Returns the cached node image for the current files, building it (from
    /// [`BaseImage::ensure_blocking`]) if needed. Blocks; async callers use
    /// [`NodeImage::ensure`].
    pub fn ensure_blocking() -> Result<Self> {
        let base = BaseImage::ensure_blocking()?;
        let cache = cache_dir();
        let key = node_image_key();
        let root = cache.join(format!("node-{key}"));
        if root.join("usr/lib/systemd/systemd").exists() {
            return Ok(NodeImage { root, key });
        }
        let _lock = CacheLock::acquire(&cache)?;
        if root.join("usr/lib/systemd/systemd").exists() {
            return Ok(NodeImage { root, key });
        }
        let tmp = cache.join(format!(".node-{key}.tmp"));
        remove_tree(&tmp)?;
        let mut cp = Command::new("cp");
        cp.arg("-a")
            .arg("--reflink=auto")
            .arg(base.root())
            .arg(&tmp);
        run_logged(cp, &cache.join(format!("node-{key}.build.log")))?;
        for entry in entries() {
            apply(&tmp, entry)?;
        }
        stamp_updated(&tmp)?;
        fs::rename(&tmp, &root)
            .map_err(|e| SimError::io("renaming the node image into place", &root, e))?;
        prune_node_images(&cache, &key);
        Ok(NodeImage { root, key })
    }

    /// [`NodeImage::ensure_blocking`] on a blocking thread.
    pub async fn ensure() -> Result<Self> {
        spawn_blocking(Self::ensure_blocking).await
    }

    /// The image's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cache key: a hash of the files the image adds to the base.
    pub fn key(&self) -> &str {
        &self.key
    }
}

pub(crate) async fn spawn_blocking<T: Send + 'static>(f: fn() -> Result<T>) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(SimError::io(
            "building an image (the build task panicked)",
            cache_dir(),
            std::io::Error::other(e.to_string()),
        )),
    }
}

/// The node image's cache key: FNV-1a over the format and every entry.
pub(crate) fn node_image_key() -> String {
    let mut h = Fnv::new();
    h.write(NODE_IMAGE_FORMAT.as_bytes());
    for entry in entries() {
        match entry {
            ImageEntry::File(path, contents, mode) => {
                h.write(b"\0file\0");
                h.write(path.as_bytes());
                h.write(&mode.to_le_bytes());
                h.write(contents.as_bytes());
            }
            ImageEntry::Symlink(path, target) => {
                h.write(b"\0symlink\0");
                h.write(path.as_bytes());
                h.write(target.as_bytes());
            }
            ImageEntry::Dir(path) => {
                h.write(b"\0dir\0");
                h.write(path.as_bytes());
            }
            ImageEntry::Absent(path) => {
                h.write(b"\0absent\0");
                h.write(path.as_bytes());
            }
        }
    }
    format!("{:016x}", h.finish())
}

/// 64-bit FNV-1a: stable across Rust releases, unlike `DefaultHasher`.
#[derive(Debug)]
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn with_seed(seed: u64) -> Self {
        let mut h = Fnv::new();
        h.write(&seed.to_le_bytes());
        h
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

fn apply(root: &Path, entry: ImageEntry) -> Result<()> {
    let parent_of = |p: &Path| -> Result<()> {
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| SimError::io("creating a directory in the node image", parent, e))?;
        }
        Ok(())
    };
    match entry {
        ImageEntry::File(rel, contents, mode) => {
            let path = root.join(rel);
            parent_of(&path)?;
            remove_if_present(&path)?;
            fs::write(&path, contents)
                .map_err(|e| SimError::io("writing a file into the node image", &path, e))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))
                .map_err(|e| SimError::io("setting a file's mode in the node image", &path, e))?;
        }
        ImageEntry::Symlink(rel, target) => {
            let path = root.join(rel);
            parent_of(&path)?;
            remove_if_present(&path)?;
            symlink(target, &path)
                .map_err(|e| SimError::io("creating a symlink in the node image", &path, e))?;
        }
        ImageEntry::Dir(rel) => {
            let path = root.join(rel);
            fs::create_dir_all(&path)
                .map_err(|e| SimError::io("creating a directory in the node image", &path, e))?;
        }
        ImageEntry::Absent(rel) => remove_if_present(&root.join(rel))?,
    }
    Ok(())
}

/// Marks `/etc` and `/var` as up to date with `/usr`, as `systemd-update-done` leaves them
/// after a host's first boot. Without the marks, `ConditionNeedsUpdate=` holds on every
/// boot of a node (its root is a fresh overlay each time), so `ldconfig.service` and
/// `systemd-update-done.service` run each time: two more boot units that can fail to
/// spawn under load and leave the node `degraded`. The marks are one second newer than
/// `/usr`, which systemd reads as "no update" without the nanosecond field.
fn stamp_updated(root: &Path) -> Result<()> {
    let usr = root.join("usr");
    let usr_mtime = fs::metadata(&usr)
        .and_then(|m| m.modified())
        .map_err(|e| SimError::io("reading /usr's mtime in the node image", &usr, e))?;
    let stamp = usr_mtime + std::time::Duration::from_secs(1);
    for dir in ["etc", "var"] {
        let path = root.join(dir).join(".updated");
        remove_if_present(&path)?;
        let file = File::create(&path)
            .and_then(|f| f.set_modified(stamp).map(|()| f))
            .map_err(|e| SimError::io("stamping the node image as updated", &path, e))?;
        drop(file);
    }
    Ok(())
}

/// Removes node images made from other files (older versions of this crate): each is a
/// full copy of the base. Best effort.
fn prune_node_images(cache: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_prefix("node-") else {
            continue;
        };
        let key = key.strip_suffix(".build.log").unwrap_or(key);
        if key != keep && key.len() == 16 && key.chars().all(|c| c.is_ascii_hexdigit()) {
            let path = entry.path();
            let _ = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
        }
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SimError::io("removing a file from the node image", path, e)),
    }
}

pub(crate) fn remove_tree(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SimError::io("removing a leftover build directory", path, e)),
    }
}

/// Runs `command` with its output appended to `log`; fails with the log's path.
pub(crate) fn run_logged(mut command: Command, log: &Path) -> Result<()> {
    let shown = format!("{command:?}");
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| SimError::io("opening a build log", log, e))?;
    let err = out
        .try_clone()
        .map_err(|e| SimError::io("opening a build log", log, e))?;
    let status = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| SimError::io("running a build command", log, e))?;
    if status.success() {
        Ok(())
    } else {
        Err(SimError::Command {
            command: shown,
            status: status.to_string(),
            details: format!("; see {}", log.display()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_stable_and_hex() {
        let a = node_image_key();
        assert_eq!(a, node_image_key());
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn fnv_matches_reference_vector() {
        // FNV-1a 64 of "a" (from the FNV reference test vectors).
        let mut h = Fnv::new();
        h.write(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
    }
}
