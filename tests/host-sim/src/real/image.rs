//! The real-bootc node image, built from a debootstrapped bookworm and the archive, and
//! cached (`<cache>/real-<key>`, key = a hash of every input) with:
//!
//! - `oci/`: an OCI layout with `v1` (the node's root file system as one layer, labelled
//!   `containers.bootc=1` and `ostree.bootable=1`) and `v2` (`v1` plus a layer that changes
//!   `/usr/lib/os-release`'s `VERSION_ID` from `1` to `2`);
//! - `tools/`: the archive unpacked, to run bootc and ostree on this machine
//!   ([`crate::real::tools_env`]).
//!
//! The base (`<cache>/bookworm-real-base-<key>`: debootstrap `minbase` plus the packages
//! bootc needs at run time) is cached on its own, so a change to the node's files does not
//! debootstrap again. Both are built beside their final place and renamed into it under
//! the cache lock, like the stand-in's images.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::error::{Result, SimError};
use crate::image::{
    CacheLock, DEFAULT_MIRROR, Fnv, MIRROR_ENV, cache_dir, remove_tree, require_root, require_tool,
    run_logged,
};
use crate::real::ARCHIVE;

/// The Debian release the archive was built for.
const SUITE: &str = "bookworm";
/// What debootstrap installs on top of `minbase`.
const INCLUDE: &str = "systemd,systemd-sysv,dbus";
/// Installed with apt in the base: what bootc runs (skopeo, podman) and its libraries.
const PACKAGES: &[&str] = &[
    "skopeo",
    "podman",
    "containernetworking-plugins",
    "libglib2.0-0",
    "libgpgme11",
    "libarchive13",
    "libcurl4",
    "libsystemd0",
    "libssl3",
    "libzstd1",
    "liblzma5",
    "libmount1",
    "libselinux1",
    "zlib1g",
];
/// Bumped when the way the image is made changes without its inputs changing.
const FORMAT: &str = "host-sim real-bootc image v1";
/// The stand-in kernel's version (`/usr/lib/modules/KVER/vmlinuz`).
const KERNEL: &str = "6.1.0-host-sim";

/// The files the node image adds: (path, contents, mode).
fn files() -> Vec<(String, &'static str, u32)> {
    let unit = |name| format!("usr/lib/systemd/system/{name}");
    let units: [(&str, &str); 6] = [
        (
            "bootc-status-updated.path",
            include_str!("../../units/bootc-status-updated.path"),
        ),
        (
            "bootc-status-updated.target",
            include_str!("../../units/bootc-status-updated.target"),
        ),
        (
            "bootc-status-updated-onboot.target",
            include_str!("../../units/bootc-status-updated-onboot.target"),
        ),
        (
            "bootc-fetch-apply-updates.service",
            include_str!("../../units/bootc-fetch-apply-updates.service"),
        ),
        (
            "bootc-fetch-apply-updates.timer",
            include_str!("../../units/bootc-fetch-apply-updates.timer"),
        ),
        (
            "bootc-finalize-staged.service",
            include_str!("../../units/bootc-finalize-staged.service"),
        ),
    ];
    let mut files: Vec<(String, &'static str, u32)> = units
        .into_iter()
        .map(|(name, text)| (unit(name), text, 0o644))
        .collect();
    let ours: [(&str, &'static str, u32); 5] = [
        (
            "usr/lib/tmpfiles.d/host-sim-real.conf",
            include_str!("../../units/real/host-sim-real.tmpfiles.conf"),
            0o644,
        ),
        (
            "etc/containers/registries.conf.d/50-host-sim-loopback.conf",
            include_str!("../../units/real/50-host-sim-loopback.conf"),
            0o644,
        ),
        (
            "usr/lib/modules/6.1.0-host-sim/vmlinuz",
            "host-sim stand-in kernel\n",
            0o644,
        ),
        (
            "usr/lib/modules/6.1.0-host-sim/initramfs.img",
            "host-sim stand-in initramfs\n",
            0o644,
        ),
        // systemd takes the machine ID nspawn passes; no builder's hostname.
        ("etc/machine-id", "", 0o444),
    ];
    files.extend(ours.into_iter().map(|(p, c, m)| (p.to_owned(), c, m)));
    files
}

/// Symbolic links the image adds: (path, target).
const LINKS: &[(&str, &str)] = &[
    ("ostree", "sysroot/ostree"),
    (
        "etc/systemd/system/multi-user.target.wants/bootc-status-updated.path",
        "/usr/lib/systemd/system/bootc-status-updated.path",
    ),
    (
        "etc/systemd/system/timers.target.wants/bootc-fetch-apply-updates.timer",
        "/usr/lib/systemd/system/bootc-fetch-apply-updates.timer",
    ),
];

/// The cached image: its OCI layout and the unpacked tools.
#[derive(Debug, Clone)]
pub struct RealImage {
    dir: PathBuf,
    key: String,
}

impl RealImage {
    /// The image for this process: built (or found in the cache) once, then shared.
    pub async fn shared(archive_dir: &Path) -> Result<RealImage> {
        static IMAGE: OnceLock<std::result::Result<RealImage, String>> = OnceLock::new();
        let archive_dir = archive_dir.to_path_buf();
        let found = tokio::task::spawn_blocking(move || {
            IMAGE
                .get_or_init(|| RealImage::ensure_blocking(&archive_dir).map_err(|e| e.to_string()))
                .clone()
        })
        .await
        .map_err(|e| SimError::Standin(format!("building the real-bootc image panicked: {e}")))?;
        found.map_err(SimError::Standin)
    }

    /// Checks the archive against its `SHA256SUMS`, then returns the cached image,
    /// building it (and the base) first when missing. Blocks for minutes when cold.
    pub fn ensure_blocking(archive_dir: &Path) -> Result<RealImage> {
        require_root()?;
        let sums = verify_archive(archive_dir)?;
        let cache = cache_dir();
        let base = ensure_base(&cache)?;
        let key = image_key(&sums, &base);
        let dir = cache.join(format!("real-{key}"));
        let done = |dir: &Path| dir.join("oci/index.json").is_file();
        if !done(&dir) {
            let _lock = CacheLock::acquire(&cache)?;
            if !done(&dir) {
                build_image(&cache, &base, &archive_dir.join(ARCHIVE), &dir)?;
            }
        }
        Ok(RealImage { dir, key })
    }

    /// The OCI layout (`oci:<layout>:v1`, `oci:<layout>:v2`).
    pub fn layout(&self) -> PathBuf {
        self.dir.join("oci")
    }

    /// The archive unpacked, for running bootc on this machine.
    pub fn tools(&self) -> PathBuf {
        self.dir.join("tools")
    }

    /// The cache key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// `sha256sum -c --strict SHA256SUMS` in the archive directory; the sums' text.
fn verify_archive(archive_dir: &Path) -> Result<String> {
    let sums = archive_dir.join("SHA256SUMS");
    let text =
        fs::read_to_string(&sums).map_err(|e| SimError::io("reading the checksums", &sums, e))?;
    let out = Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(archive_dir)
        .output()
        .map_err(|e| SimError::io("running sha256sum", &sums, e))?;
    if !out.status.success() || !text.contains(ARCHIVE) {
        return Err(SimError::Command {
            command: format!("sha256sum -c SHA256SUMS (in {})", archive_dir.display()),
            status: out.status.to_string(),
            details: format!(
                ": {}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(text)
}

fn base_key() -> String {
    let mut h = Fnv::new();
    for part in [FORMAT, SUITE, INCLUDE, &PACKAGES.join(",")] {
        h.write(part.as_bytes());
        h.write(b"\0");
    }
    format!("{:016x}", h.finish())
}

fn image_key(sums: &str, base: &Path) -> String {
    let mut h = Fnv::new();
    h.write(FORMAT.as_bytes());
    h.write(sums.as_bytes());
    h.write(base.as_os_str().as_encoded_bytes());
    h.write(KERNEL.as_bytes());
    for (path, contents, mode) in files() {
        h.write(path.as_bytes());
        h.write(&mode.to_le_bytes());
        h.write(contents.as_bytes());
    }
    for (path, target) in LINKS {
        h.write(path.as_bytes());
        h.write(target.as_bytes());
    }
    format!("{:016x}", h.finish())
}

/// The cached bookworm base, debootstrapped and completed with apt when missing.
fn ensure_base(cache: &Path) -> Result<PathBuf> {
    let root = cache.join(format!("bookworm-real-base-{}", base_key()));
    let done = |root: &Path| root.join("usr/bin/skopeo").is_file();
    if done(&root) {
        return Ok(root);
    }
    let _lock = CacheLock::acquire(cache)?;
    if done(&root) {
        return Ok(root);
    }
    require_tool("debootstrap", "debootstrap")?;
    let tmp = cache.join(format!(".bookworm-real-base-{}.tmp", base_key()));
    remove_tree(&tmp)?;
    let log = cache.join(format!("bookworm-real-base-{}.log", base_key()));
    let mirror = std::env::var(MIRROR_ENV)
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| DEFAULT_MIRROR.to_owned());
    let mut debootstrap = Command::new("debootstrap");
    debootstrap
        .arg("--variant=minbase")
        .arg(format!("--include={INCLUDE}"))
        .args([SUITE])
        .arg(&tmp)
        .arg(&mirror);
    run_logged(debootstrap, &log)?;
    let mut apt = in_chroot(&tmp, &["apt-get", "install", "-y", "-q"]);
    apt.arg("--no-install-recommends").args(PACKAGES);
    run_logged(apt, &log)?;
    run_logged(in_chroot(&tmp, &["apt-get", "clean"]), &log)?;
    remove_tree(&tmp.join("var/lib/apt/lists"))?;
    fs::rename(&tmp, &root).map_err(|e| SimError::io("renaming the base into place", &root, e))?;
    Ok(root)
}

fn in_chroot(root: &Path, argv: &[&str]) -> Command {
    let mut command = Command::new("chroot");
    command.arg(root).args(["/usr/bin/env", "-i"]).args([
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "DEBIAN_FRONTEND=noninteractive",
    ]);
    command.args(argv);
    command
}

/// Builds the image directory `dir` (rootfs, OCI layout, tools) beside it, then renames.
fn build_image(cache: &Path, base: &Path, archive: &Path, dir: &Path) -> Result<()> {
    let mut tmp = dir.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    remove_tree(&tmp)?;
    fs::create_dir_all(&tmp).map_err(|e| SimError::io("creating the image directory", &tmp, e))?;
    let log = cache.join(format!(
        "{}.build.log",
        dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    let rootfs = tmp.join("rootfs");
    let mut cp = Command::new("cp");
    cp.args(["-a", "--reflink=auto"]).arg(base).arg(&rootfs);
    run_logged(cp, &log)?;
    let tools = tmp.join("tools");
    for target in [&rootfs, &tools] {
        fs::create_dir_all(target).map_err(|e| SimError::io("creating a directory", target, e))?;
        let mut tar = Command::new("tar");
        tar.arg("-C").arg(target).arg("-xJf").arg(archive);
        run_logged(tar, &log)?;
    }
    add_files(&rootfs)?;
    set_version_id(&rootfs.join("usr/lib/os-release"), &rootfs, "1")?;
    build_layout(&tmp, &rootfs, &log)?;
    remove_tree(&rootfs)?;
    fs::rename(&tmp, dir).map_err(|e| SimError::io("renaming the image into place", dir, e))
}

fn add_files(root: &Path) -> Result<()> {
    let parent = |p: &Path| -> Result<()> {
        let dir = p.parent().unwrap_or(root);
        fs::create_dir_all(dir).map_err(|e| SimError::io("creating a directory", dir, e))
    };
    for (rel, contents, mode) in files() {
        let path = root.join(rel);
        parent(&path)?;
        let _ = fs::remove_file(&path);
        fs::write(&path, contents).map_err(|e| SimError::io("writing a file", &path, e))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
            .map_err(|e| SimError::io("setting a file's mode", &path, e))?;
    }
    for (rel, target) in LINKS {
        let path = root.join(rel);
        parent(&path)?;
        let _ = fs::remove_file(&path);
        symlink(target, &path).map_err(|e| SimError::io("creating a symlink", &path, e))?;
    }
    let _ = fs::remove_file(root.join("etc/hostname"));
    let sysroot = root.join("sysroot");
    fs::create_dir_all(&sysroot).map_err(|e| SimError::io("creating /sysroot", &sysroot, e))
}

/// Writes `target` (under `root`) as the base's `os-release` with `VERSION_ID="<id>"`.
fn set_version_id(target: &Path, root: &Path, id: &str) -> Result<()> {
    let source = root.join("usr/lib/os-release");
    let text =
        fs::read_to_string(&source).map_err(|e| SimError::io("reading os-release", &source, e))?;
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("VERSION_ID="))
        .map(str::to_owned)
        .collect();
    lines.push(format!("VERSION_ID=\"{id}\""));
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| SimError::io("creating a directory", parent, e))?;
    }
    fs::write(target, lines.join("\n") + "\n")
        .map_err(|e| SimError::io("writing os-release", target, e))
}

/// `oci/` in `tmp`: `v1` from `rootfs`, `v2` = `v1` + a new `os-release`.
fn build_layout(tmp: &Path, rootfs: &Path, log: &Path) -> Result<()> {
    let layout = tmp.join("oci").display().to_string();
    let v1 = format!("{layout}:v1");
    let umoci = |args: &[&str]| {
        let mut c = Command::new("umoci");
        c.args(args);
        run_logged(c, log)
    };
    // A layer from `tar` on top of v1, as v1 itself or as a new `tag`.
    let add_layer = |tar: &Path, tag: Option<&str>| {
        let tar = tar.display().to_string();
        let mut args = vec!["raw", "add-layer", "--image", &v1];
        if let Some(tag) = tag {
            args.extend(["--tag", tag]);
        }
        args.push(&tar);
        umoci(&args)
    };
    require_tool("umoci", "umoci")?;
    umoci(&["init", "--layout", &layout])?;
    umoci(&["new", "--image", &v1])?;
    let v1_tar = tmp.join("v1.tar");
    let mut tar = Command::new("tar");
    tar.args(["--numeric-owner", "-C"]).arg(rootfs);
    for dir in ["dev", "proc", "sys", "run", "tmp"] {
        tar.arg(format!("--exclude={dir}/*"));
    }
    tar.arg("-cf").arg(&v1_tar);
    let mut top: Vec<String> = fs::read_dir(rootfs)
        .map_err(|e| SimError::io("listing the root file system", rootfs, e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    tar.args(&top);
    run_logged(tar, log)?;
    add_layer(&v1_tar, None)?;
    umoci(&[
        "config",
        "--image",
        &v1,
        "--os",
        "linux",
        "--architecture",
        "amd64",
        "--config.label",
        "containers.bootc=1",
        "--config.label",
        "ostree.bootable=1",
    ])?;
    let v2_root = tmp.join("v2");
    set_version_id(&v2_root.join("usr/lib/os-release"), rootfs, "2")?;
    let v2_tar = tmp.join("v2.tar");
    let mut tar = Command::new("tar");
    tar.args(["--numeric-owner", "-C"])
        .arg(&v2_root)
        .arg("-cf")
        .arg(&v2_tar)
        .arg("usr");
    run_logged(tar, log)?;
    add_layer(&v2_tar, Some("v2"))?;
    for leftover in [&v1_tar, &v2_tar] {
        let _ = fs::remove_file(leftover);
    }
    remove_tree(&v2_root)?;
    umoci(&["gc", "--layout", &layout])
}
