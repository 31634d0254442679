//! The node image with the agent installed as a host service: `v1-agent` and `v2-agent`
//! are `v1` and `v2` plus one layer holding `/usr/bin/bootc-node-agent`, the unit
//! `bootc-node-agent.service` in `/usr/lib/systemd/system` and its `multi-user.target`
//! wants link, as an image built with the agent baked in has them. The node's own
//! systemd starts it; no DaemonSet runs.
//!
//! Built into a copy of the cached layout (the cache itself is never changed: it is keyed
//! by its inputs, and the agent binary is not one of them).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Result, SimError};
use crate::image::{remove_tree, require_tool, run_logged};
use crate::real::RealImage;

/// The agent unit's name.
pub const AGENT_UNIT: &str = "bootc-node-agent.service";

/// Copies `image`'s layout into `dir/oci` and adds `v1-agent` and `v2-agent` to it, with
/// `agent` (the binary) and `unit` (the unit file's text); the new layout's path.
pub fn with_agent(image: &RealImage, agent: &Path, unit: &str, dir: &Path) -> Result<PathBuf> {
    require_tool("umoci", "umoci")?;
    fs::create_dir_all(dir).map_err(|e| SimError::io("creating a directory", dir, e))?;
    let log = dir.join("agent-image.log");
    let layout = dir.join("oci");
    remove_tree(&layout)?;
    let mut cp = Command::new("cp");
    cp.args(["-a", "--reflink=auto"])
        .arg(image.layout())
        .arg(&layout);
    run_logged(cp, &log)?;

    let root = dir.join("agent-layer");
    remove_tree(&root)?;
    let file = |path: &str, mode: u32, write: &dyn Fn(&Path) -> std::io::Result<()>| {
        let target = root.join(path);
        let parent = target.parent().unwrap_or(&root);
        fs::create_dir_all(parent).map_err(|e| SimError::io("creating a directory", parent, e))?;
        write(&target).map_err(|e| SimError::io("writing the agent layer", &target, e))?;
        fs::set_permissions(&target, fs::Permissions::from_mode(mode))
            .map_err(|e| SimError::io("setting a mode", &target, e))
    };
    file("usr/bin/bootc-node-agent", 0o755, &|t| {
        fs::copy(agent, t).map(|_| ())
    })?;
    let unit_path = format!("usr/lib/systemd/system/{AGENT_UNIT}");
    file(&unit_path, 0o644, &|t| fs::write(t, unit))?;
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    fs::create_dir_all(&wants).map_err(|e| SimError::io("creating a directory", &wants, e))?;
    std::os::unix::fs::symlink(format!("/{unit_path}"), wants.join(AGENT_UNIT))
        .map_err(|e| SimError::io("linking the unit", &wants, e))?;

    let tar_path = dir.join("agent-layer.tar");
    let mut tar = Command::new("tar");
    tar.args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(&root)
        .arg("-cf")
        .arg(&tar_path)
        .args(["usr", "etc"]);
    run_logged(tar, &log)?;
    for tag in ["v1", "v2"] {
        let mut umoci = Command::new("umoci");
        umoci
            .args(["raw", "add-layer", "--image"])
            .arg(format!("{}:{tag}", layout.display()))
            .args(["--tag", &format!("{tag}-agent")])
            .arg(&tar_path);
        run_logged(umoci, &log)?;
    }
    let _ = fs::remove_file(&tar_path);
    remove_tree(&root)?;
    Ok(layout)
}
