//! A real-bootc node's ostree sysroot on this machine: created with `ostree admin`, the
//! first image deployed by `bootc internals ostree-container image deploy` (both run here
//! from the unpacked archive), the boot entries read as a boot loader would, and removed
//! on drop (`chattr -i` on the immutable deployment directories first).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Result, SimError};
use crate::real::{STATEROOT, tools_env};

/// A node's sysroot. Dropping it removes it.
#[derive(Debug)]
pub struct Sysroot {
    path: PathBuf,
}

impl Sysroot {
    /// Creates the sysroot at `path` (which must not exist) and deploys `image`
    /// (`ostree-unverified-registry:HOST/REPO:TAG` form) into stateroot [`STATEROOT`] with
    /// the tools in `tools`. The directory is removed again when this fails.
    pub fn deploy(path: &Path, tools: &Path, image: &str, log: &Path) -> Result<Sysroot> {
        std::fs::create_dir_all(path).map_err(|e| SimError::io("creating the sysroot", path, e))?;
        let sysroot = Sysroot {
            path: path.to_path_buf(),
        };
        let p = path.display().to_string();
        let repo = path.join("ostree/repo").display().to_string();
        let sysroot_arg = format!("--sysroot={p}");
        let config_set = |key, value| vec!["ostree", "config", "--repo", &repo, "set", key, value];
        let steps: [Vec<&str>; 5] = [
            vec!["ostree", "admin", "init-fs", "--modern", &p],
            vec!["ostree", "admin", "os-init", STATEROOT, &sysroot_arg],
            config_set("sysroot.bootloader", "none"),
            // ostree keeps 3% of the file system free by default: 7.5 GB of a 250 GB disk
            // shared with build trees. A test node needs only its own few hundred MB.
            config_set("core.min-free-space-size", "256MB"),
            vec![
                "bootc",
                "internals",
                "ostree-container",
                "image",
                "deploy",
                "--sysroot",
                &p,
                "--stateroot",
                STATEROOT,
                "--insecure-skip-tls-verification",
                "--imgref",
                image,
            ],
        ];
        for argv in steps {
            let mut command = Command::new(tools.join("usr/bin").join(argv[0]));
            command.args(&argv[1..]).env_clear().envs(tools_env(tools));
            crate::image::run_logged(command, log)?;
        }
        Ok(sysroot)
    }

    /// The sysroot's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stateroot's `/var`.
    pub fn var(&self) -> PathBuf {
        self.path.join("ostree/deploy").join(STATEROOT).join("var")
    }

    /// The boot entries, highest `version` first: (version, deployment directory).
    pub fn entries(&self) -> Result<Vec<(u64, PathBuf)>> {
        let dir = self.path.join("boot/loader/entries");
        let listing = std::fs::read_dir(&dir)
            .map_err(|e| SimError::io("reading the boot entries", &dir, e))?;
        let mut entries = Vec::new();
        for entry in listing.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "conf") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| SimError::io("reading a boot entry", &path, e))?;
            let (version, ostree) = parse_entry(&text).ok_or_else(|| {
                SimError::io(
                    "a boot entry without version or ostree=",
                    &path,
                    std::io::Error::other(text.clone()),
                )
            })?;
            let link = self.path.join(ostree.trim_start_matches('/'));
            let deployment = link
                .canonicalize()
                .map_err(|e| SimError::io("following a boot entry's ostree=", &link, e))?;
            entries.push((version, deployment));
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(entries)
    }

    /// The deployment a boot loader would start: the highest-version entry's; with
    /// `fallback`, the next one (a failed boot falling back).
    pub fn boot_deployment(&self, fallback: bool) -> Result<PathBuf> {
        let entries = self.entries()?;
        let pick = if fallback && entries.len() > 1 { 1 } else { 0 };
        entries
            .into_iter()
            .nth(pick)
            .map(|(_, d)| d)
            .ok_or_else(|| {
                SimError::io(
                    "no boot entry",
                    self.path.join("boot/loader/entries"),
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                )
            })
    }

    /// How much disk the sysroot takes (`du -sk`), in KiB.
    pub fn disk_usage_kib(&self) -> Option<u64> {
        let out = Command::new("du")
            .arg("-sk")
            .arg(&self.path)
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
}

/// (`version`, the `ostree=` argument of `options`) of a boot entry.
fn parse_entry(text: &str) -> Option<(u64, String)> {
    let mut version = None;
    let mut ostree = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        match key {
            "version" => version = value.trim().parse().ok(),
            "options" => {
                ostree = value
                    .split_whitespace()
                    .find_map(|o| o.strip_prefix("ostree="))
                    .map(str::to_owned);
            }
            _ => {}
        }
    }
    Some((version?, ostree?))
}

impl Drop for Sysroot {
    fn drop(&mut self) {
        let deploy = self
            .path
            .join("ostree/deploy")
            .join(STATEROOT)
            .join("deploy");
        if let Ok(listing) = std::fs::read_dir(&deploy) {
            for entry in listing.flatten() {
                if entry.path().is_dir() {
                    let _ = Command::new("chattr").arg("-i").arg(entry.path()).status();
                }
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!(
                "host-sim: cannot remove the sysroot {}: {e}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_boot_entry() {
        let text = "title Debian GNU/Linux 12 (bookworm) (ostree:debian:0)\nversion 2\n\
                    options root=UUID=x rw ostree=/ostree/boot.1/debian/abc/0\nlinux /ostree/x/vmlinuz\n";
        assert_eq!(
            parse_entry(text),
            Some((2, "/ostree/boot.1/debian/abc/0".to_owned()))
        );
        assert_eq!(parse_entry("version 1\n"), None);
    }
}
