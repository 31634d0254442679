//! The agent's host access against the real bootc 1.16.9 and ostree 2026.4: nodes whose
//! sysroot bootc deployed itself, booted by the harness from the highest-version boot
//! entry, with the real `ostree-finalize-staged` at shutdown (see `host_sim::real`).
//!
//! Skipped, with a message, only when the archive directory is absent
//! (`$BOOTC_REAL_ARCHIVE_DIR`, default `shared/tools/real-bootc` beside the checkout).
//! The tests run one at a time (each boots a node on a 2-core machine); the node image is
//! built once per process and cached across runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bootc_crds::ImageRef;
use bootc_node_agent::bootc_status::BootcHost as Status;
use bootc_node_agent::host::{DbusHost, Host, HostError};
use bootc_node_agent::machine::Unlock;
use host_sim::real::{LoggedRegistry, REPOSITORY, RealImage, RealNode, RealNodeOptions};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
const BOOT: Duration = Duration::from_secs(120);
/// The agent's host directory, as the node sees it.
const WORK_DIR: &str = "/var/lib/bootc-node-agent";

/// One real node at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The archive directory, or `None` (and a message) when the tests must skip.
fn archive() -> Option<PathBuf> {
    let dir = host_sim::real::archive_dir();
    if dir.is_none() {
        eprintln!(
            "SKIPPED: the real-bootc archive directory is absent (set ${} or put it at \
             shared/tools/real-bootc beside the checkout)",
            host_sim::real::ARCHIVE_ENV
        );
    }
    dir
}

/// A real node booted on v1, with v1 and v2 in a registry of its own. Fields drop in
/// order: node (container, then sysroot) before registry before the directory.
struct Fixture {
    node: RealNode,
    registry: LoggedRegistry,
    dir: common::TestDir,
    /// `HOST/node@sha256:…` of v1 and v2.
    v1: String,
    v2: String,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Fixture {
    /// Boots node `name` with v1 deployed by tag (`by_tag`) or by digest.
    async fn new(name: &str, by_tag: bool, kube: Option<kube::Client>) -> Option<Fixture> {
        let archive = archive()?;
        let serial = SERIAL.lock().await;
        host_sim::image::require_root().unwrap();
        let started = Instant::now();
        let image = RealImage::shared(&archive)
            .await
            .expect("the real-bootc node image");
        eprintln!(
            "{name}: node image {} ready in {:?}",
            image.key(),
            started.elapsed()
        );
        let dir = common::test_dir(name);
        let registry = LoggedRegistry::start(dir.path()).unwrap();
        let started = Instant::now();
        let d1 = registry
            .push_layout(&image.layout(), "v1", REPOSITORY)
            .unwrap();
        let d2 = registry
            .push_layout(&image.layout(), "v2", REPOSITORY)
            .unwrap();
        eprintln!("{name}: v1 and v2 pushed in {:?}", started.elapsed());
        let v1 = format!("{}/{REPOSITORY}@{d1}", registry.host());
        let v2 = format!("{}/{REPOSITORY}@{d2}", registry.host());
        let first = if by_tag {
            format!("{}/{REPOSITORY}:v1", registry.host())
        } else {
            v1.clone()
        };
        let options = RealNodeOptions {
            name: name.to_owned(),
            dir: dir.path().join("node"),
            image: first,
            boot_timeout: BOOT,
            kube,
        };
        let node = RealNode::start(&image, options)
            .await
            .expect("the real node");
        let t = node.timings();
        eprintln!(
            "{name}: deployed v1 in {:?}, first boot in {:?}, sysroot {} KiB",
            t.deploy,
            t.first_boot,
            node.sysroot().disk_usage_kib().unwrap_or_default()
        );
        Some(Fixture {
            node,
            registry,
            dir,
            v1,
            v2,
            _serial: serial,
        })
    }

    async fn host(&self) -> DbusHost {
        DbusHost::connect(&self.node.bus_address().unwrap(), WORK_DIR, COMMAND_TIMEOUT)
            .await
            .expect("connecting DbusHost to the node's bus")
            .with_host_root(self.node.root_path().unwrap())
    }

    fn log(&self) -> String {
        format!("node log: {}", self.node.log_file().display())
    }

    /// Reboots through the node's logind (as an unasked reboot would) and waits for the
    /// next boot.
    async fn reboot(&self) {
        let boots = self.node.status().boots;
        self.node.reboot(false).await.unwrap();
        self.node.wait_booted(boots, BOOT).await.unwrap();
    }
}

fn digest_of(pin: &str) -> &str {
    pin.rsplit_once('@').unwrap().1
}

fn pin(s: &str) -> ImageRef {
    ImageRef::parse(s).unwrap()
}

fn booted_digest(status: &Status) -> String {
    status
        .status
        .booted
        .as_ref()
        .and_then(|b| b.image.as_ref())
        .map(|i| i.image_digest.to_string())
        .unwrap_or_default()
}

/// The staged deployment's digest and `downloadOnly`.
fn staged(status: &Status) -> Option<(String, Option<bool>)> {
    let s = status.status.staged.as_ref()?;
    Some((s.image.as_ref()?.image_digest.to_string(), s.download_only))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_by_digest_on_a_node_deployed_by_tag_is_locked_and_an_unasked_reboot_drops_it() {
    let Some(f) = Fixture::new("real-tag", true, None).await else {
        return;
    };
    let host = f.host().await;
    assert_eq!(host.bootc_version().await.unwrap(), "1.16.9");
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(f.node.version_id().unwrap(), "1");

    let started = Instant::now();
    host.stage(&pin(&f.v2)).await.unwrap();
    eprintln!("real-tag: stage v1 → v2 took {:?}", started.elapsed());
    let status = host.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(true))),
        "staged locked: {status:#?}"
    );
    assert_eq!(
        status.spec.image.as_ref().map(|i| i.image.as_str()),
        Some(f.v2.as_str())
    );
    assert!(f.node.run_ostree_has("staged-deployment-locked"));

    // (b) An unasked reboot: the locked deployment is dropped, v1 boots again.
    f.reboot().await;
    let host = f.host().await;
    let status = host.status().await.unwrap();
    assert_eq!(booted_digest(&status), digest_of(&f.v1), "{}", f.log());
    assert_eq!(staged(&status), None, "{status:#?}");
    assert_eq!(f.node.version_id().unwrap(), "1");

    // The agent stages again, locked again.
    host.stage(&pin(&f.v2)).await.unwrap();
    let status = host.status().await.unwrap();
    assert_eq!(
        staged(&status),
        Some((digest_of(&f.v2).to_owned(), Some(true)))
    );
    let _ = (&f.registry, &f.dir, Unlock::FromDownloaded);
    let _: Option<HostError> = None;
}
