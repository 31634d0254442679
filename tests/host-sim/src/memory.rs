//! An in-process host with the stand-in's semantics, for simulations too large for
//! containers (hundreds or thousands of nodes on two cores).
//!
//! It keeps a [`bootc_standin::State`] and changes it exactly as the stand-in's
//! commands do (`switch --download-only`, `upgrade --from-downloaded`, `rollback`, the
//! finalize step at boot), resolves images from a shared [`Catalog`] instead of a
//! registry, and reboots on its own after a configurable delay. Like a real host, a
//! reboot ends the agent's connection: the channel from [`Host::changes`] closes, the
//! agent's run loop returns, and whoever plays the supervisor starts a new agent.
//!
//! Every call is traced as step points, and a halt at one of them stands in for killing
//! the agent there (`steps`). The states of the units `status.health` names are set per
//! image by the test (`units`: [`Catalog::set_boot_units`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bootc_crds::node::UnitHealth;
use bootc_node_agent::host::{BootIdentity, Host, HostError, StageProgress};
use bootc_node_agent::machine::Unlock;
use bootc_standin::{ImageResolver, State};
use tokio::sync::{Notify, watch};

mod catalog;
mod lock;
mod steps;
mod units;

pub use catalog::Catalog;
pub use steps::TRACE_KEPT;

pub use units::parse_state;

/// What happens at the next reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NextBoot {
    /// Boots normally: the finalize step applies what is staged.
    #[default]
    Normal,
    /// Comes back on the old image: the staged deployment is lost.
    OldImage,
    /// Never comes back.
    Never,
}

/// Timings and failures of a [`MemoryHost`].
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// How long a pull takes.
    pub stage_time: Duration,
    /// How long a full reboot takes until the host is up again.
    pub reboot_time: Duration,
    /// How long a soft reboot takes.
    pub soft_reboot_time: Duration,
    /// Whether this host's systemd can soft-reboot.
    pub can_soft_reboot: bool,
    /// Make every `stage` fail with this bootc error message.
    pub stage_error: Option<String>,
    /// Make `stage` hang until cancelled.
    pub stage_hangs: bool,
    /// Make every `mask_update_timer` fail with this error message.
    pub mask_error: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            stage_time: Duration::from_millis(50),
            reboot_time: Duration::from_millis(200),
            soft_reboot_time: Duration::from_millis(100),
            can_soft_reboot: true,
            stage_error: None,
            stage_hangs: false,
            mask_error: None,
        }
    }
}

/// What the host has been asked to do, for tests to check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// `stage` calls.
    pub stages: u64,
    /// `stage` calls that were cancelled.
    pub cancelled_stages: u64,
    /// Full reboots requested.
    pub reboots: u64,
    /// Soft reboots requested.
    pub soft_reboots: u64,
    /// Boots completed (not counting the first).
    pub boots: u64,
    /// Boots completed (not counting the first), per digest they booted: a node
    /// rebooted twice for one target shows a count above 1.
    pub boots_into: std::collections::BTreeMap<String, u64>,
    /// `bootc status` reads answered.
    pub status_reads: u64,
}

#[derive(Debug)]
struct MemoryState {
    state: State,
    behaviour: Behaviour,
    next_boot: NextBoot,
    boot_id: String,
    soft_reboots: u64,
    up: bool,
    timer_masked: bool,
    credentials: Option<Vec<u8>>,
    counters: Counters,
    steps: steps::Steps,
    changes: watch::Sender<u64>,
    boots: watch::Sender<u64>,
    /// Never moves: the in-process host reports no staging progress.
    progress: watch::Sender<Option<StageProgress>>,
}

/// An in-process host. Cheap to clone: clones share the host.
#[derive(Debug, Clone)]
pub struct MemoryHost {
    inner: Arc<Mutex<MemoryState>>,
    catalog: Arc<Catalog>,
    cancel: Arc<Notify>,
}

fn new_boot_id() -> String {
    uuid_like()
}

/// 32 random-looking hex digits from the process's hasher seed and a counter.
fn uuid_like() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = RandomState::new();
    let mut a = state.build_hasher();
    a.write_u64(n);
    let mut b = state.build_hasher();
    b.write_u64(!n);
    format!("{:016x}{:016x}", a.finish(), b.finish())
}

fn failed(command: &str, stderr: String) -> HostError {
    HostError::CommandFailed {
        command: command.to_owned(),
        job_result: "failed".to_owned(),
        result: "exit-code".to_owned(),
        exit_status: 1,
        stderr,
    }
}

impl MemoryHost {
    /// A host booted into `booted` (a pin the catalog holds).
    pub fn new(catalog: Arc<Catalog>, booted: &str, behaviour: Behaviour) -> Result<Self, String> {
        let info = catalog
            .get(booted)
            .ok_or_else(|| format!("the catalog has no image {booted}"))?;
        let (changes, _) = watch::channel(0);
        let (boots, _) = watch::channel(0);
        Ok(Self {
            inner: Arc::new(Mutex::new(MemoryState {
                state: State::new(info),
                behaviour,
                next_boot: NextBoot::Normal,
                boot_id: new_boot_id(),
                soft_reboots: 0,
                up: true,
                timer_masked: false,
                credentials: None,
                counters: Counters::default(),
                steps: steps::Steps::default(),
                changes,
                boots,
                progress: watch::Sender::new(None),
            })),
            catalog,
            cancel: Arc::new(Notify::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host's deployments.
    pub fn state(&self) -> State {
        self.lock().state.clone()
    }

    /// What the host was asked to do.
    pub fn counters(&self) -> Counters {
        self.lock().counters.clone()
    }

    /// The current boot ID.
    pub fn boot_id(&self) -> String {
        self.lock().boot_id.clone()
    }

    /// Whether the host is up (not in the middle of a reboot, not gone for good).
    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// Whether the update timer is masked in this boot.
    pub fn timer_masked(&self) -> bool {
        self.lock().timer_masked
    }

    /// The registry credentials the agent wrote (lost at a full reboot, like /run).
    pub fn credentials(&self) -> Option<Vec<u8>> {
        self.lock().credentials.clone()
    }

    /// A channel that moves with every completed boot (full or soft).
    pub fn boots(&self) -> watch::Receiver<u64> {
        self.lock().boots.subscribe()
    }

    /// Changes timings and failures from now on.
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        self.lock().behaviour = behaviour;
    }

    /// Decides what the next reboot does.
    pub fn set_next_boot(&self, next: NextBoot) {
        self.lock().next_boot = next;
    }

    /// Signals a status change, as `bootc-status-updated.target` does.
    fn signal(inner: &MemoryState) {
        inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn require_up(&self, command: &str) -> Result<(), HostError> {
        if self.lock().up {
            Ok(())
        } else {
            Err(failed(command, "the host is not running".to_owned()))
        }
    }

    /// Ends the current boot: the agent's connection closes (its `changes` channel) and,
    /// after the reboot time, the host is up again with the finalize step applied.
    fn start_reboot(&self, soft: bool) {
        let delay = {
            let mut inner = self.lock();
            inner.up = false;
            inner.timer_masked = false;
            if soft {
                inner.counters.soft_reboots += 1;
            } else {
                inner.counters.reboots += 1;
                inner.credentials = None;
            }
            // Close every receiver of this boot: a new sender for the next one.
            let (changes, _) = watch::channel(0);
            inner.changes = changes;
            if soft {
                inner.behaviour.soft_reboot_time
            } else {
                inner.behaviour.reboot_time
            }
        };
        self.cancel.notify_waiters();
        let host = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let never = {
                let mut inner = host.lock();
                match inner.next_boot {
                    NextBoot::Never => true,
                    NextBoot::OldImage => {
                        inner.state.staged = None;
                        inner.state.rollback_queued = false;
                        false
                    }
                    NextBoot::Normal => false,
                }
            };
            if !never {
                host.come_up(soft);
            }
        });
    }

    /// Finishes a boot: the finalize step, a new boot ID (or one more soft reboot), up.
    fn come_up(&self, soft: bool) {
        let mut inner = self.lock();
        inner.next_boot = NextBoot::Normal;
        inner.state.finalize_boot();
        if soft {
            inner.soft_reboots += 1;
        } else {
            inner.boot_id = new_boot_id();
        }
        inner.up = true;
        inner.counters.boots += 1;
        let booted = inner.state.booted.as_ref().map(|b| b.info.digest.clone());
        *inner
            .counters
            .boots_into
            .entry(booted.unwrap_or_default())
            .or_default() += 1;
        inner.boots.send_modify(|n| *n += 1);
    }

    /// Powers on a host that stayed down ([`NextBoot::Never`]): a full boot, as an admin
    /// fixing the machine would do. Nothing happens when the host is up.
    pub fn power_on(&self) {
        if self.lock().up {
            return;
        }
        self.come_up(false);
    }
}

/// What `bootc --version` says on an in-process host.
pub const BOOTC_VERSION: &str = "1.16.9-memory";

impl Host for MemoryHost {
    async fn bootc_version(&self) -> Result<String, HostError> {
        self.step("bootc_version", false).await;
        self.require_up("bootc --version")?;
        self.step("bootc_version", true).await;
        Ok(BOOTC_VERSION.to_owned())
    }

    async fn status(&self) -> Result<bootc_node_agent::bootc_status::BootcHost, HostError> {
        let command = "bootc status --format=json --format-version=1";
        self.step("status", false).await;
        self.require_up(command)?;
        let json = {
            let mut inner = self.lock();
            inner.counters.status_reads += 1;
            let status = inner.state.status();
            serde_json::to_vec(&status).unwrap_or_else(|_| status.to_string().into_bytes())
        };
        self.step("status", true).await;
        bootc_node_agent::bootc_status::parse(&json).map_err(|source| HostError::ParseStatus {
            command: command.to_owned(),
            source,
        })
    }

    async fn identity(&self) -> Result<BootIdentity, HostError> {
        self.step("identity", false).await;
        self.require_up("hostname1.BootID")?;
        let identity = {
            let inner = self.lock();
            BootIdentity {
                boot_id: inner.boot_id.clone(),
                soft_reboots: inner.soft_reboots,
                can_soft_reboot: inner.behaviour.can_soft_reboot,
            }
        };
        self.step("identity", true).await;
        Ok(identity)
    }

    async fn stage(
        &self,
        pin: &bootc_crds::ImageRef,
        policy: bootc_crds::pool::SignaturePolicy,
    ) -> Result<(), HostError> {
        let reference = pin.to_string();
        if !pin.is_pin() || pin.pinned().as_deref() != Some(reference.as_str()) {
            return Err(HostError::NotAPin { reference });
        }
        // No policy file here: an enforced staging is recorded as such (bootc shows
        // `signature: containerPolicy`), and admitted.
        let enforce = policy == bootc_crds::pool::SignaturePolicy::Enforce;
        let flag = if enforce {
            " --enforce-container-sigpolicy"
        } else {
            ""
        };
        let command = format!("bootc switch --download-only{flag} {reference}");
        self.step("stage", false).await;
        self.require_up(&command)?;
        let behaviour = {
            let mut inner = self.lock();
            inner.counters.stages += 1;
            inner.behaviour.clone()
        };
        let cancelled = self.cancel.notified();
        tokio::pin!(cancelled);
        cancelled.as_mut().enable();
        let wait = async {
            if behaviour.stage_hangs {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(behaviour.stage_time).await;
        };
        tokio::select! {
            () = wait => {}
            () = &mut cancelled => {
                self.lock().counters.cancelled_stages += 1;
                return Err(HostError::CommandFailed {
                    command,
                    job_result: "canceled".to_owned(),
                    result: "success".to_owned(),
                    exit_status: 0,
                    stderr: String::new(),
                });
            }
        }
        if let Some(message) = behaviour.stage_error {
            return Err(failed(&command, format!("error: {message}")));
        }
        let info = self
            .catalog
            .resolve(&reference)
            .map_err(|e| failed(&command, format!("error: {e}")))?;
        {
            let mut inner = self.lock();
            if !inner.up {
                return Err(failed(&command, "the host went down".to_owned()));
            }
            inner
                .state
                .switch_under(info, true, enforce)
                .map_err(|e| failed(&command, format!("error: {e}")))?;
            Self::signal(&inner);
        }
        self.step("stage", true).await;
        Ok(())
    }

    async fn lock(&self) -> Result<(), HostError> {
        self.lock_staged().await
    }

    async fn unlock(&self, how: Unlock) -> Result<(), HostError> {
        self.step("unlock", false).await;
        let command = match how {
            Unlock::FromDownloaded => "bootc upgrade --from-downloaded",
            Unlock::Rollback => "bootc rollback",
            Unlock::AlreadyUnlocked => "",
        };
        if !command.is_empty() {
            self.require_up(command)?;
            let mut inner = self.lock();
            let result = match how {
                Unlock::Rollback => inner.state.rollback(),
                _ => inner.state.from_downloaded(),
            };
            result.map_err(|e| failed(command, format!("error: {e}")))?;
            Self::signal(&inner);
        }
        self.step("unlock", true).await;
        Ok(())
    }

    async fn unit_states(&self, names: &[String]) -> Result<Vec<UnitHealth>, HostError> {
        self.step("unit_states", false).await;
        let units = self.read_units(names)?;
        self.step("unit_states", true).await;
        Ok(units)
    }

    async fn reboot(&self, soft: bool) -> Result<(), HostError> {
        self.step("reboot", false).await;
        self.require_up("login1.RebootWithFlags")?;
        self.start_reboot(soft);
        self.step("reboot", true).await;
        Ok(())
    }

    async fn mask_update_timer(&self) -> Result<(), HostError> {
        let command = "Manager.MaskUnitFiles";
        self.step("mask_update_timer", false).await;
        self.require_up(command)?;
        {
            let mut inner = self.lock();
            if let Some(message) = inner.behaviour.mask_error.clone() {
                return Err(HostError::Call {
                    call: command,
                    source: zbus::Error::Failure(message),
                });
            }
            inner.timer_masked = true;
        }
        self.step("mask_update_timer", true).await;
        Ok(())
    }

    async fn release_update_timer(&self) -> Result<(), HostError> {
        self.step("release_update_timer", false).await;
        self.require_up("Manager.UnmaskUnitFiles")?;
        self.lock().timer_masked = false;
        self.step("release_update_timer", true).await;
        Ok(())
    }

    async fn write_credentials(&self, auth: Option<&[u8]>) -> Result<(), HostError> {
        self.step("write_credentials", false).await;
        self.require_up("write /run/ostree/auth.json")?;
        self.lock().credentials = auth.map(<[u8]>::to_vec);
        self.step("write_credentials", true).await;
        Ok(())
    }

    async fn cancel(&self) -> Result<(), HostError> {
        self.step("cancel", false).await;
        self.cancel.notify_waiters();
        self.step("cancel", true).await;
        Ok(())
    }

    async fn await_leftovers(&self) -> Result<usize, HostError> {
        // Its commands are futures of the agent that started them: none outlives it.
        Ok(0)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.lock().changes.subscribe()
    }

    fn progress(&self) -> watch::Receiver<Option<StageProgress>> {
        self.lock().progress.subscribe()
    }
}
