//! How a node is started: its [`NodeOptions`], the checks before booting, and the
//! `systemd-nspawn` command line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Result, SimError};
use crate::image::{BOOTC_PATH, Fnv, STANDIN_STATE_PATH, require_root, require_tool};

/// How to start a [`Node`].
#[derive(Clone)]
pub struct NodeOptions {
    /// The node's name: nspawn's machine name, the container's hostname, the Kubernetes
    /// Node's name. Must be unique among running nodes.
    pub name: String,
    /// The host directory bind-mounted at `/var/lib/bootc-standin` (the stand-in's state);
    /// it survives reboots. Created if missing.
    pub state_dir: PathBuf,
    /// The stand-in binary, bind-mounted read-only at `/usr/bin/bootc`
    /// (see [`crate::standin_binary`]).
    pub bootc_binary: PathBuf,
    /// The root file system to boot; `None`: [`NodeImage::ensure`].
    pub image: Option<PathBuf>,
    /// Host directories bind-mounted read-write at the same absolute path inside the node,
    /// so that a process outside (an agent) and the node's systemd see the same files
    /// there. Created if missing. Avoid `/tmp` (the node mounts a tmpfs over it).
    pub shared_dirs: Vec<PathBuf>,
    /// More read-write bind mounts: (host path, path in the node).
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// Where nspawn's output (the container's console) goes; `None`: `<state_dir>.log`.
    pub log_file: Option<PathBuf>,
    /// How long [`Node::start`] waits for the first boot.
    pub boot_timeout: Duration,
    /// How long [`Node::stop`] waits for a clean shutdown before SIGKILL.
    pub stop_timeout: Duration,
    /// When set, the harness plays the kubelet against this API: it creates the Node
    /// object and keeps its `Ready` condition (see [`crate::kubelet`]).
    pub kube: Option<kube::Client>,
    /// Which bootc the stand-in plays, written to the state directory's `version` file
    /// at start (`None`: the file removed, the stand-in's default, 1.16.9).
    pub bootc_version: Option<bootc_standin::Version>,
}

impl std::fmt::Debug for NodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOptions")
            .field("name", &self.name)
            .field("state_dir", &self.state_dir)
            .field("bootc_binary", &self.bootc_binary)
            .field("image", &self.image)
            .field("shared_dirs", &self.shared_dirs)
            .field("binds", &self.binds)
            .field("log_file", &self.log_file)
            .field("boot_timeout", &self.boot_timeout)
            .field("stop_timeout", &self.stop_timeout)
            .field("kube", &self.kube.as_ref().map(|_| "kube::Client"))
            .field("bootc_version", &self.bootc_version)
            .finish()
    }
}

impl NodeOptions {
    /// RunOptions with the defaults: the cached node image, no extra mounts, 60 s to boot,
    /// 30 s to stop, no kubelet, the stand-in playing bootc 1.16.10 (with `switch
    /// --download-only`; the fallback of 1.16.9 is the stand-in's default and is asked
    /// for with `bootc_version: None`).
    pub fn new(
        name: impl Into<String>,
        state_dir: impl Into<PathBuf>,
        bootc_binary: impl Into<PathBuf>,
    ) -> Self {
        NodeOptions {
            name: name.into(),
            state_dir: state_dir.into(),
            bootc_binary: bootc_binary.into(),
            image: None,
            shared_dirs: Vec::new(),
            binds: Vec::new(),
            log_file: None,
            boot_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(30),
            kube: None,
            bootc_version: Some(bootc_standin::Version::V1_16_10),
        }
    }
}

/// A UUID derived from the node's name: nspawn passes it to the container's systemd, which
/// makes it the machine ID (the image's `/etc/machine-id` is empty).
pub(crate) fn machine_uuid(name: &str) -> String {
    let mut a = Fnv::with_seed(1);
    a.write(name.as_bytes());
    let mut b = Fnv::with_seed(2);
    b.write(name.as_bytes());
    let (a, b) = (a.finish(), b.finish());
    // Version 4, variant 1 bits, so that it is a well-formed UUID.
    let a = (a & !0xf000) | 0x4000;
    let b = (b & !(0xc000_u64 << 48)) | (0x8000_u64 << 48);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// What [`Node::start`] needs before it boots anything: root, nspawn, a valid name, the
/// stand-in binary, absolute shared directories.
pub(super) fn check_options(options: &NodeOptions) -> Result<()> {
    require_root()?;
    require_tool("systemd-nspawn", "systemd-container")?;
    if !valid_name(&options.name) {
        return Err(SimError::InvalidOptions(format!(
            "node name `{}` is not a lowercase DNS label",
            options.name
        )));
    }
    if !options.bootc_binary.is_file() {
        return Err(SimError::Standin(format!(
            "`{}` is not a file",
            options.bootc_binary.display()
        )));
    }
    for dir in &options.shared_dirs {
        if !dir.is_absolute() {
            return Err(SimError::InvalidOptions(format!(
                "shared directory `{}` is not absolute",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Creates the state directory and the host side of every bind mount.
pub(super) fn create_dirs(options: &NodeOptions) -> Result<()> {
    let mut dirs: Vec<&Path> = vec![&options.state_dir];
    dirs.extend(options.shared_dirs.iter().map(PathBuf::as_path));
    dirs.extend(options.binds.iter().map(|(host, _)| host.as_path()));
    for dir in dirs {
        std::fs::create_dir_all(dir)
            .map_err(|e| SimError::io("creating a node directory", dir, e))?;
    }
    let marker = booted_marker(&options.state_dir);
    std::fs::write(&marker, b"")
        .map_err(|e| SimError::io("creating the boot marker", &marker, e))?;
    let file = options.state_dir.join(bootc_standin::version::VERSION_FILE);
    match options.bootc_version {
        Some(version) => version
            .save(&options.state_dir)
            .map_err(|e| SimError::InvalidOptions(format!("bootc_version: {e}"))),
        None => match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(SimError::io(
                "removing the stand-in's version file",
                &file,
                e,
            )),
            _ => Ok(()),
        },
    }
}

/// The `systemd-nspawn` command that boots `image` as the node.
pub(super) fn nspawn_command(options: &NodeOptions, image: &Path) -> Command {
    let mut command = Command::new("systemd-nspawn");
    command
        .arg("-D")
        .arg(image)
        .arg("-b")
        .arg("--register=no")
        .arg("--keep-unit")
        .arg("-M")
        .arg(&options.name)
        .arg(format!("--uuid={}", machine_uuid(&options.name)))
        .arg("--volatile=overlay")
        .arg("--console=read-only")
        .arg(bind_arg(
            "--bind",
            &options.state_dir,
            Path::new(STANDIN_STATE_PATH),
        ))
        .arg(bind_arg(
            "--bind-ro",
            &options.bootc_binary,
            Path::new(BOOTC_PATH),
        ))
        .arg(bind_arg(
            "--bind-ro",
            &booted_marker(&options.state_dir),
            Path::new(BOOTED_MARKER),
        ));
    for dir in &options.shared_dirs {
        command.arg(bind_arg("--bind", dir, dir));
    }
    for (host, inside) in &options.binds {
        command.arg(bind_arg("--bind", host, inside));
    }
    command
}

/// Where ostree and bootc look to know that the system booted a deployment. On a bootc
/// host `ostree-prepare-root` writes it in the initramfs, before systemd starts; a node
/// has no initramfs, so nspawn binds an empty file there. Not a boot unit's work: under
/// load a boot unit of a node can fail to spawn (see docs/testing.md), and every unit
/// conditioned on the marker (the update timer) would then stay off.
pub(crate) const BOOTED_MARKER: &str = "/run/ostree-booted";

/// The empty file bound at [`BOOTED_MARKER`]: beside the state directory, not in it.
fn booted_marker(state_dir: &Path) -> PathBuf {
    let mut path = state_dir.as_os_str().to_owned();
    path.push(".ostree-booted");
    PathBuf::from(path)
}

pub(crate) fn bind_arg(flag: &str, host: &Path, inside: &Path) -> String {
    format!("{flag}={}:{}", host.display(), inside.display())
}
