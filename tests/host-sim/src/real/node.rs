//! [`RealNode`]: a [`Node`] running the real bootc and ostree.
//!
//! The harness plays boot loader and initramfs: before every boot it reads the sysroot's
//! boot entries, takes the one with the highest `version`, follows its `ostree=` to the
//! deployment directory and boots that with `systemd-nspawn`, the sysroot at `/sysroot`,
//! its `/boot` at `/boot` and the stateroot's `/var` at `/var`. A reboot inside the node
//! ends nspawn (status 133); at that shutdown the node's own `ostree-finalize-staged`
//! has written the staged deployment's entry, or not when it was locked. Supervision,
//! the bus, the kubelet's Ready marking and the agent's access are [`Node`]'s.
//!
//! The node's `/run/dbus` and `/run/ostree` are directories of this machine bound into
//! the container (emptied before every boot, as the tmpfs they stand for would be), so
//! that a container runtime here can mount them where a DaemonSet's hostPath volumes
//! say, as it mounts the node's `/var` ([`RealNode::host_path`]). A mount cannot be
//! bound from another mount namespace, so the node's own `/run` would not do.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Result, SimError};
use crate::node::{BOOTED_MARKER, Boot, Node, bind_arg, machine_uuid};
use crate::real::{RealImage, Sysroot};

/// How to start a [`RealNode`].
#[derive(Clone)]
pub struct RealNodeOptions {
    /// The node's name (nspawn's machine name, the Kubernetes Node's name).
    pub name: String,
    /// A directory for the node's sysroot (`<dir>/sysroot`) and logs; created if missing.
    pub dir: PathBuf,
    /// The image bootc deploys first (`HOST/REPO:TAG` or `HOST/REPO@DIGEST`).
    pub image: String,
    /// How long the first boot may take.
    pub boot_timeout: Duration,
    /// When set, the harness keeps the Kubernetes Node and its `Ready` condition.
    pub kube: Option<kube::Client>,
    /// Files written (mode 0600) under the first deployment's `/etc` before its first
    /// boot, as a provisioning step would (paths relative to `/etc`); ostree carries them
    /// into later deployments by its `/etc` merge.
    pub etc: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for RealNodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNodeOptions")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("image", &self.image)
            .field("boot_timeout", &self.boot_timeout)
            .finish_non_exhaustive()
    }
}

/// What it took to make a node, for the record.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// `ostree admin init-fs` to the end of bootc's deploy.
    pub deploy: Duration,
    /// nspawn started to the node's systemd up.
    pub first_boot: Duration,
}

/// A real-bootc node. Dropping it stops the container, then removes the sysroot.
#[derive(Debug)]
pub struct RealNode {
    // Dropped first: the container stops before its sysroot goes.
    node: Node,
    sysroot: Arc<Sysroot>,
    /// This machine's directories bound at the node's `/run/dbus` and `/run/ostree`.
    run: PathBuf,
    timings: Timings,
}

impl RealNode {
    /// Deploys `options.image` into a new sysroot with bootc, and boots it.
    pub async fn start(image: &RealImage, options: RealNodeOptions) -> Result<RealNode> {
        crate::image::require_tool("systemd-nspawn", "systemd-container")?;
        crate::image::require_tool("chattr", "e2fsprogs")?;
        std::fs::create_dir_all(&options.dir)
            .map_err(|e| SimError::io("creating the node's directory", &options.dir, e))?;
        let path = options.dir.join("sysroot");
        let tools = image.tools();
        let deploy_log = options.dir.join("deploy.log");
        let reference = format!("ostree-unverified-registry:{}", options.image);
        let started = Instant::now();
        let sysroot = tokio::task::spawn_blocking(move || {
            Sysroot::deploy(&path, &tools, &reference, &deploy_log)
        })
        .await
        .map_err(|e| SimError::Standin(format!("deploying the sysroot panicked: {e}")))??;
        let deploy = started.elapsed();
        provision(&sysroot, &options.etc)?;
        let sysroot = Arc::new(sysroot);
        let fallback = Arc::new(AtomicBool::new(false));
        let log_file = options.dir.join(format!("{}.log", options.name));
        let run = options.dir.join("run");
        let command = {
            let run = run.clone();
            let sysroot = Arc::clone(&sysroot);
            let fallback = Arc::clone(&fallback);
            let name = options.name.clone();
            let log_file = log_file.clone();
            Box::new(move || {
                let deployment = sysroot
                    .boot_deployment(fallback.swap(false, Ordering::SeqCst))
                    .map_err(std::io::Error::other)?;
                note(
                    &log_file,
                    &format!("host-sim: booting {}", deployment.display()),
                );
                fresh_run_dirs(&run)?;
                Ok(nspawn_command(&name, &sysroot, &deployment, &run))
            })
        };
        let boot = Boot {
            name: options.name.clone(),
            state_dir: sysroot.path().to_path_buf(),
            log_file,
            stop_timeout: Duration::from_secs(60),
            boot_timeout: options.boot_timeout,
            kube: options.kube.clone(),
            command,
            discard: Box::new(move || {
                fallback.store(true, Ordering::SeqCst);
                Ok(())
            }),
        };
        let started = Instant::now();
        let node = Node::boot(boot).await?;
        let timings = Timings {
            deploy,
            first_boot: started.elapsed(),
        };
        Ok(RealNode {
            node,
            sysroot,
            run,
            timings,
        })
    }

    /// The supervised node (bus, reboots, status, kubelet).
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The node's sysroot on this machine.
    pub fn sysroot(&self) -> &Sysroot {
        &self.sysroot
    }

    /// Where this machine holds the node's directories that a DaemonSet's hostPath
    /// volumes may name.
    pub fn shared_dirs(&self) -> SharedDirs {
        SharedDirs {
            var: self.sysroot.var(),
            run: self.run.clone(),
        }
    }

    /// See [`SharedDirs::host_path`].
    pub fn host_path(&self, path: &Path) -> Option<PathBuf> {
        self.shared_dirs().host_path(path)
    }

    /// How long the deploy and the first boot took.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// `VERSION_ID` of the running deployment's `/usr/lib/os-release`.
    pub fn version_id(&self) -> Result<String> {
        let path = self.node.root_path()?.join("usr/lib/os-release");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| SimError::io("reading the node's os-release", &path, e))?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("VERSION_ID="))
            .unwrap_or_default()
            .trim_matches('"')
            .to_owned())
    }

    /// A file under the node's `/run/ostree` exists now (`staged-deployment`,
    /// `staged-deployment-locked`).
    pub fn run_ostree_has(&self, name: &str) -> bool {
        self.node
            .root_path()
            .is_ok_and(|root| root.join("run/ostree").join(name).exists())
    }
}

impl std::ops::Deref for RealNode {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.node
    }
}

/// The node's `/run` directories that are this machine's directories.
const RUN_DIRS: [&str; 2] = ["dbus", "ostree"];

/// Empties (or makes) the directories bound at the node's [`RUN_DIRS`]: a boot starts
/// with an empty `/run`; and writes the empty file bound at [`BOOTED_MARKER`].
fn fresh_run_dirs(run: &Path) -> std::io::Result<()> {
    for dir in RUN_DIRS {
        let path = run.join(dir);
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::create_dir_all(&path)?;
    }
    std::fs::write(run.join("ostree-booted"), b"")
}

/// Where this machine holds a node's `/var`, `/run/dbus` and `/run/ostree`.
#[derive(Debug, Clone)]
pub struct SharedDirs {
    var: PathBuf,
    run: PathBuf,
}

impl SharedDirs {
    /// Where this machine holds `path`, an absolute path on the node, when it is under
    /// the node's `/var`, `/run/dbus` or `/run/ostree`; `None` for any other path.
    pub fn host_path(&self, path: &Path) -> Option<PathBuf> {
        let under = |prefix: &str| path.strip_prefix(prefix).ok();
        if let Some(rest) = under("/var") {
            return Some(self.var.join(rest));
        }
        RUN_DIRS.iter().find_map(|dir| {
            let rest = under(&format!("/run/{dir}"))?;
            Some(self.run.join(dir).join(rest))
        })
    }
}

/// The nspawn command booting `deployment` of `sysroot` as node `name`, `run`'s
/// directories bound at [`RUN_DIRS`].
fn nspawn_command(name: &str, sysroot: &Sysroot, deployment: &Path, run: &Path) -> Command {
    let mut command = Command::new("systemd-nspawn");
    command
        .arg("-D")
        .arg(deployment)
        .args(["-b", "--register=no", "--keep-unit", "-M", name])
        .arg(format!("--uuid={}", machine_uuid(name)))
        .arg("--console=read-only")
        .arg(bind_arg("--bind", sysroot.path(), Path::new("/sysroot")))
        .arg(bind_arg(
            "--bind",
            &sysroot.path().join("boot"),
            Path::new("/boot"),
        ))
        .arg(bind_arg("--bind", &sysroot.var(), Path::new("/var")));
    for dir in RUN_DIRS {
        let inside = Path::new("/run").join(dir);
        command.arg(bind_arg("--bind", &run.join(dir), &inside));
    }
    command.arg(bind_arg(
        "--bind-ro",
        &run.join("ostree-booted"),
        Path::new(BOOTED_MARKER),
    ));
    command
}

/// Writes `files` under the deployment's `/etc` (mode 0600, directories 0700).
fn provision(sysroot: &Sysroot, files: &[(String, Vec<u8>)]) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if files.is_empty() {
        return Ok(());
    }
    let etc = sysroot.boot_deployment(false)?.join("etc");
    for (path, contents) in files {
        let relative = Path::new(path);
        if relative.is_absolute() || relative.components().any(|c| c.as_os_str() == "..") {
            return Err(SimError::InvalidOptions(format!(
                "`{path}`: a path relative to /etc, without `..`"
            )));
        }
        let target = etc.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| SimError::io("creating a directory under /etc", parent, e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&target)
            .map_err(|e| SimError::io("provisioning a file under /etc", &target, e))?;
        std::io::Write::write_all(&mut file, contents)
            .map_err(|e| SimError::io("provisioning a file under /etc", &target, e))?;
    }
    Ok(())
}

fn note(log: &Path, line: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{line}");
    }
}
