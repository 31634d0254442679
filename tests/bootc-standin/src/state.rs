//! The stand-in's deployments (booted, staged, rollback), their transitions, and how
//! they are kept on disk and shown as bootc's `BootcHost` document.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::policy::Policy;
use crate::reference::Reference;
use crate::resolver::{ImageInfo, ImageResolver};

/// The state file inside the state directory.
pub const STATE_FILE: &str = "state.json";
/// The lock file inside the state directory (locked with `File::lock`, never removed).
pub const LOCK_FILE: &str = "lock";

/// One deployment of an image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// The image it was made from.
    pub info: ImageInfo,
    /// True when staged with `--download-only`: a boot discards it.
    #[serde(default)]
    pub locked: bool,
    /// True when pulled under the host's `containers-policy.json` (`switch
    /// --enforce-container-sigpolicy`, and every `upgrade` of the image it tracks): its
    /// image reference shows `signature: containerPolicy`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub container_policy: bool,
    /// The ostree commit checksum (the hex of the image digest: the same image gives the
    /// same commit).
    pub checksum: String,
    /// The deployment serial: as ostree allocates it, one more than the highest serial of
    /// the same commit among the deployment directories still on disk (the booted and
    /// rollback deployments, and [`State::leftovers`]), else 0.
    pub deploy_serial: u32,
}

impl Deployment {
    fn new(
        (info, container_policy): (ImageInfo, bool),
        locked: bool,
        others: &[Option<&Deployment>],
        leftovers: &[Deployment],
    ) -> Deployment {
        let checksum = info
            .digest
            .strip_prefix("sha256:")
            .unwrap_or(&info.digest)
            .to_owned();
        let serial = others
            .iter()
            .flatten()
            .copied()
            .chain(leftovers)
            .filter(|d| d.checksum == checksum)
            .map(|d| d.deploy_serial.saturating_add(1))
            .max()
            .unwrap_or(0);
        Deployment {
            info,
            locked,
            container_policy,
            checksum,
            deploy_serial: serial,
        }
    }
}

/// What a state transition did (its `Display` is what the CLI prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A deployment was staged (`locked` for `--download-only`).
    Staged {
        /// The image staged.
        image: String,
        /// Its digest.
        digest: String,
        /// True when locked (download only).
        locked: bool,
    },
    /// `switch` to the image already tracked: nothing pulled, nothing changed.
    SpecUnchanged,
    /// `upgrade` found the booted digest: nothing staged.
    NoUpdate,
    /// `upgrade` found the digest already staged with the asked lock state.
    AlreadyStaged,
    /// `--from-downloaded` unlocked the staged deployment (or it was unlocked already).
    Unlocked,
    /// `rollback` queued the rollback deployment for the next boot (discarding a staged
    /// one, if any).
    RollbackQueued,
    /// `rollback` while a rollback was queued: the current deployment boots next again.
    RollbackUnqueued,
    /// At boot: the staged deployment became the booted one.
    AppliedStaged,
    /// At boot: the queued rollback deployment became the booted one.
    AppliedRollback,
    /// At boot: a locked staged deployment was discarded.
    DiscardedLocked,
    /// At boot: nothing to do.
    Nothing,
}

impl Outcome {
    /// True when the state changed (so it must be saved and the marker touched).
    pub fn changed(&self) -> bool {
        !matches!(
            self,
            Outcome::SpecUnchanged | Outcome::NoUpdate | Outcome::AlreadyStaged | Outcome::Nothing
        )
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Staged {
                image,
                digest,
                locked: false,
            } => write!(f, "Queued for next boot: {image}\n  Digest: {digest}"),
            Outcome::Staged {
                image,
                digest,
                locked: true,
            } => write!(
                f,
                "Image downloaded and staged (download-only, locked): {image}\n  Digest: {digest}\n  Run `bootc upgrade --from-downloaded` to apply it at the next boot"
            ),
            Outcome::SpecUnchanged => f.write_str("Image specification is unchanged."),
            Outcome::NoUpdate => f.write_str("No update available."),
            Outcome::AlreadyStaged => f.write_str("Update already staged."),
            Outcome::Unlocked => {
                f.write_str("Staged deployment unlocked; it will be applied at the next boot.")
            }
            Outcome::RollbackQueued => f.write_str("Next boot: rollback deployment"),
            Outcome::RollbackUnqueued => f.write_str("Next boot: current deployment"),
            Outcome::AppliedStaged => f.write_str("Finalized the staged deployment."),
            Outcome::AppliedRollback => f.write_str("Booted the rollback deployment."),
            Outcome::DiscardedLocked => {
                f.write_str("Discarded the locked (download-only) staged deployment.")
            }
            Outcome::Nothing => f.write_str("Nothing to finalize."),
        }
    }
}

/// A host's deployments, as kept in `<state dir>/state.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The running deployment (`None`: not a bootc host).
    pub booted: Option<Deployment>,
    /// The deployment staged for the next boot.
    pub staged: Option<Deployment>,
    /// The previous deployment.
    pub rollback: Option<Deployment>,
    /// True when the next boot boots the rollback deployment.
    #[serde(default)]
    pub rollback_queued: bool,
    /// Locked deployments discarded at boot: ostree never finalized them, but their
    /// directories stay until the next deployment is made (and cleans up), so they still
    /// count when that deployment's serial is allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<Deployment>,
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// An exclusive lock on a state directory, released on drop (or when the process dies).
#[derive(Debug)]
pub struct StateLock {
    file: File,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Takes the exclusive lock of `dir` (creating `dir` if needed), waiting for another
/// holder to release it.
pub fn lock(dir: &Path) -> Result<StateLock, Error> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(format!("opening {}", path.display())))?;
    file.lock()
        .map_err(io_err(format!("locking {}", path.display())))?;
    Ok(StateLock { file })
}

/// Gives a node its first image: writes a state with `booted` as the booted deployment
/// (replacing any state there).
pub fn seed(state_dir: &Path, booted: ImageInfo) -> Result<(), Error> {
    let _lock = lock(state_dir)?;
    State::new(booted).save(state_dir)
}

impl State {
    /// A host booted from `booted`, nothing staged, no rollback.
    pub fn new(booted: ImageInfo) -> Self {
        State {
            booted: Some(Deployment::new((booted, false), false, &[], &[])),
            staged: None,
            rollback: None,
            rollback_queued: false,
            leftovers: Vec::new(),
        }
    }

    /// The state file of `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    /// Reads the state of `dir`; `None` when it was never seeded.
    pub fn load_optional(dir: &Path) -> Result<Option<State>, Error> {
        let path = State::path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(format!("reading {}", path.display()))(e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::Other(format!("parsing {}: {e}", path.display())))
    }

    /// Reads the state of `dir`; an error when it was never seeded.
    pub fn load(dir: &Path) -> Result<State, Error> {
        State::load_optional(dir)?.ok_or_else(|| Error::NotSeeded(dir.to_path_buf()))
    }

    /// Writes the state to `dir` atomically (temporary file, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let path = State::path(dir);
        let tmp = dir.join(format!(".{STATE_FILE}.{}.tmp", std::process::id()));
        let body = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Other(format!("serialising state: {e}")))?;
        let mut f = File::create(&tmp).map_err(io_err(format!("creating {}", tmp.display())))?;
        f.write_all(&body)
            .and_then(|()| f.sync_all())
            .map_err(io_err(format!("writing {}", tmp.display())))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io_err(format!("renaming to {}", path.display())))
    }

    /// The image the host tracks (`spec.image`): the staged deployment's, else the
    /// booted one's.
    pub fn spec_image(&self) -> Option<&str> {
        self.tracked().map(|d| d.info.image.as_str())
    }

    /// Whether the tracked image is pulled under the host's `containers-policy.json`.
    pub fn spec_container_policy(&self) -> bool {
        self.tracked().is_some_and(|d| d.container_policy)
    }

    fn tracked(&self) -> Option<&Deployment> {
        self.staged.as_ref().or(self.booted.as_ref())
    }

    fn require_booted(&self) -> Result<&Deployment, Error> {
        self.booted.as_ref().ok_or(Error::NotBootcHost)
    }

    fn stage(&mut self, (info, container_policy): (ImageInfo, bool), locked: bool) -> Outcome {
        let outcome = Outcome::Staged {
            image: info.image.clone(),
            digest: info.digest.clone(),
            locked,
        };
        let d = Deployment::new(
            (info, container_policy),
            locked,
            &[self.booted.as_ref(), self.rollback.as_ref()],
            &self.leftovers,
        );
        // The deployment made, ostree cleans up the directories nothing refers to.
        self.leftovers.clear();
        self.staged = Some(d);
        self.rollback_queued = false;
        outcome
    }

    /// `bootc switch [--download-only]` with an image already pulled: stages it
    /// (replacing any staged deployment), locked for `download_only`.
    pub fn switch(&mut self, info: ImageInfo, download_only: bool) -> Result<Outcome, Error> {
        self.switch_under(info, download_only, false)
    }

    /// [`State::switch`] of an image pulled under the host's signature policy when
    /// `container_policy` (`switch --enforce-container-sigpolicy`, the policy already
    /// checked), which its deployment remembers.
    pub fn switch_under(
        &mut self,
        info: ImageInfo,
        download_only: bool,
        container_policy: bool,
    ) -> Result<Outcome, Error> {
        self.require_booted()?;
        Ok(self.stage((info, container_policy), download_only))
    }

    /// `bootc switch`: checks `image` ([`Reference::parse`]); like bootc, does nothing
    /// (and pulls nothing) when `image` is already the tracked image; otherwise resolves
    /// it and stages it.
    pub fn switch_with(
        &mut self,
        resolver: &dyn ImageResolver,
        image: &str,
        download_only: bool,
    ) -> Result<Outcome, Error> {
        self.switch_checked(resolver, image, download_only, None)
    }

    /// [`State::switch_with`] under the host's signature policy when `policy` is given
    /// (`--enforce-container-sigpolicy`): the policy must admit `image` before anything
    /// is pulled. The tracked image with another policy is not unchanged.
    pub fn switch_checked(
        &mut self,
        resolver: &dyn ImageResolver,
        image: &str,
        download_only: bool,
        policy: Option<&Policy>,
    ) -> Result<Outcome, Error> {
        Reference::parse(image)?;
        self.require_booted()?;
        if self.spec_image() == Some(image) && self.spec_container_policy() == policy.is_some() {
            return Ok(Outcome::SpecUnchanged);
        }
        if let Some(policy) = policy {
            policy.admit(image)?;
        }
        let info = resolver.resolve(image)?;
        self.switch_under(info, download_only, policy.is_some())
    }

    /// `bootc upgrade [--download-only]` with the tracked image already re-pulled:
    /// nothing when it is the booted digest and nothing is staged, nothing when it is
    /// already staged with the same lock state, else stages it (under the tracked
    /// image's signature policy).
    pub fn upgrade(&mut self, info: ImageInfo, download_only: bool) -> Result<Outcome, Error> {
        let container_policy = self.spec_container_policy();
        let booted_digest = self.require_booted()?.info.digest.clone();
        if let Some(staged) = &mut self.staged {
            if staged.info.digest == info.digest {
                if staged.locked == download_only {
                    return Ok(Outcome::AlreadyStaged);
                }
                staged.locked = download_only;
                return Ok(Outcome::Staged {
                    image: staged.info.image.clone(),
                    digest: staged.info.digest.clone(),
                    locked: download_only,
                });
            }
        } else if booted_digest == info.digest {
            return Ok(Outcome::NoUpdate);
        }
        Ok(self.stage((info, container_policy), download_only))
    }

    /// `bootc upgrade [--download-only]`: re-pulls the tracked image and stages it.
    pub fn upgrade_with(
        &mut self,
        resolver: &dyn ImageResolver,
        download_only: bool,
    ) -> Result<Outcome, Error> {
        self.upgrade_checked(resolver, download_only, None)
    }

    /// [`State::upgrade_with`], the tracked image re-pulled under `policy` when it was
    /// switched to under the host's signature policy (`policy` is then required).
    pub fn upgrade_checked(
        &mut self,
        resolver: &dyn ImageResolver,
        download_only: bool,
        policy: Option<&Policy>,
    ) -> Result<Outcome, Error> {
        self.require_booted()?;
        let image = self.spec_image().ok_or(Error::NoImageSource)?.to_owned();
        if self.spec_container_policy() {
            policy
                .ok_or_else(|| Error::Other("no signature policy loaded".to_owned()))?
                .admit(&image)?;
        }
        let info = resolver.resolve(&image)?;
        self.upgrade(info, download_only)
    }

    /// `bootc upgrade --check`: the image an upgrade would stage, if it differs from the
    /// booted and the staged one.
    pub fn check_with(&self, resolver: &dyn ImageResolver) -> Result<Option<ImageInfo>, Error> {
        let booted = self.require_booted()?;
        let image = self.spec_image().ok_or(Error::NoImageSource)?;
        let info = resolver.resolve(image)?;
        let known = info.digest == booted.info.digest
            || self
                .staged
                .as_ref()
                .is_some_and(|s| s.info.digest == info.digest);
        Ok((!known).then_some(info))
    }

    /// `bootc upgrade --from-downloaded`: unlocks the staged deployment, without network
    /// access; an error when nothing is staged.
    pub fn from_downloaded(&mut self) -> Result<Outcome, Error> {
        self.require_booted()?;
        let staged = self.staged.as_mut().ok_or(Error::NoStaged)?;
        staged.locked = false;
        Ok(Outcome::Unlocked)
    }

    /// `bootc rollback`: discards a staged deployment and queues the rollback deployment
    /// for the next boot; run again, it un-queues it (bootc swaps the boot order each
    /// time). An error when there is no rollback deployment.
    pub fn rollback(&mut self) -> Result<Outcome, Error> {
        self.require_booted()?;
        if self.rollback.is_none() {
            return Err(Error::NoRollback);
        }
        self.staged = None;
        self.rollback_queued = !self.rollback_queued;
        Ok(if self.rollback_queued {
            Outcome::RollbackQueued
        } else {
            Outcome::RollbackUnqueued
        })
    }

    /// What happens at boot (and soft reboot), as bootc's finalize step does it: a
    /// queued rollback swaps booted and rollback; else an unlocked staged deployment
    /// becomes the booted one (the booted one becomes the rollback); a locked one is
    /// discarded (its directory left behind, see [`State::leftovers`]).
    pub fn finalize_boot(&mut self) -> Outcome {
        if self.rollback_queued {
            self.rollback_queued = false;
            self.staged = None;
            std::mem::swap(&mut self.booted, &mut self.rollback);
            return Outcome::AppliedRollback;
        }
        match self.staged.take() {
            None => Outcome::Nothing,
            Some(s) if s.locked => {
                self.leftovers.push(s);
                Outcome::DiscardedLocked
            }
            Some(s) => {
                self.rollback = self.booted.take();
                self.booted = Some(s);
                Outcome::AppliedStaged
            }
        }
    }

    fn booted_kernel(&self) -> Option<&str> {
        self.booted.as_ref().and_then(|b| b.info.kernel.as_deref())
    }

    /// True when, relative to the booted deployment, a soft reboot can switch to `d`:
    /// the kernel labels are equal (both absent counts as equal).
    fn soft_reboot_capable(&self, d: &Deployment) -> bool {
        self.booted.is_some() && d.info.kernel.as_deref() == self.booted_kernel()
    }

    /// The image reference as bootc shows it: with `signature: containerPolicy` when
    /// pulled under the host's policy, without a signature when not.
    fn reference(image: &str, container_policy: bool) -> Value {
        let mut reference = json!({"image": image, "transport": "registry"});
        if container_policy {
            reference["signature"] = json!("containerPolicy");
        }
        reference
    }

    fn entry(d: &Deployment, soft_reboot_capable: bool) -> Value {
        json!({
            "image": {
                "image": State::reference(&d.info.image, d.container_policy),
                "version": d.info.version,
                "timestamp": d.info.created,
                "imageDigest": d.info.digest,
                "architecture": d.info.architecture,
            },
            "cachedUpdate": null,
            "composefs": null,
            "incompatible": false,
            "pinned": false,
            "softRebootCapable": soft_reboot_capable,
            "downloadOnly": d.locked,
            "store": "ostreeContainer",
            "ostree": {
                "checksum": d.checksum,
                "deploySerial": d.deploy_serial,
                "stateroot": "default",
            },
        })
    }

    /// The `BootcHost` document `bootc status --format=json --format-version=1` prints.
    pub fn status(&self) -> Value {
        let staged = self
            .staged
            .as_ref()
            .map(|d| State::entry(d, self.soft_reboot_capable(d)));
        let rollback = self
            .rollback
            .as_ref()
            .map(|d| State::entry(d, self.rollback_queued && self.soft_reboot_capable(d)));
        let booted = self.booted.as_ref().map(|d| State::entry(d, false));
        let spec_image = self
            .tracked()
            .map(|d| State::reference(&d.info.image, d.container_policy));
        json!({
            "apiVersion": "org.containers.bootc/v1",
            "kind": "BootcHost",
            "metadata": {"name": "host"},
            "spec": {
                "image": spec_image,
                "bootOrder": if self.rollback_queued { "rollback" } else { "default" },
            },
            "status": {
                "staged": staged,
                "booted": booted,
                "rollback": rollback,
                "rollbackQueued": self.rollback_queued,
                "type": if self.booted.is_some() { json!("bootcHost") } else { Value::Null },
                // bootc >= 1.14 and >= 1.16.7 print these on every host: no overlay on
                // `/usr`, a writable physical root.
                "usrOverlay": null,
                "readOnly": false,
            },
        })
    }

    /// A short human summary (plain `bootc status`).
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let mut slot = |name: &str, d: Option<&Deployment>, extra: &str| match d {
            None => out.push_str(&format!("No {name} image present\n")),
            Some(d) => {
                out.push_str(&format!("{name} image: {}{extra}\n", d.info.image));
                out.push_str(&format!("        Digest: {}\n", d.info.digest));
                if let Some(v) = &d.info.version {
                    out.push_str(&format!("       Version: {v}\n"));
                }
            }
        };
        let locked = if self.staged.as_ref().is_some_and(|s| s.locked) {
            " (download-only, locked)"
        } else {
            ""
        };
        slot("Staged", self.staged.as_ref(), locked);
        slot("Booted", self.booted.as_ref(), "");
        let queued = if self.rollback_queued {
            " (queued for next boot)"
        } else {
            ""
        };
        slot("Rollback", self.rollback.as_ref(), queued);
        out
    }
}

/// Touches `<root>/ostree/bootc` (creating directories), as bootc does after a change
/// so that `bootc-status-updated.path` fires.
pub fn touch_marker(root: &Path) -> Result<(), Error> {
    let dir = root.join("ostree");
    std::fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let path = dir.join("bootc");
    std::fs::write(&path, b"").map_err(io_err(format!("touching {}", path.display())))
}
