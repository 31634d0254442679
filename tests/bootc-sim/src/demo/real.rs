//! `--real-bootc`: the demo on nodes running the upstream bootc 1.16.9 and ostree (the
//! archive in `$BOOTC_REAL_ARCHIVE_DIR`, or `shared/tools/real-bootc` beside the
//! checkout): the node image built once and cached, v1 and v2 of it pushed to one tag of
//! a loopback registry that keeps its access log, each node's sysroot deployed by bootc
//! itself from that tag, and the agents in pods of their own (their own PID and mount
//! namespaces).
//!
//! Also here, for either kind of node: the reboot nobody approved (`--unapproved-reboot`)
//! and the rollback by reference (`--rollback`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use host_sim::real::{LoggedRegistry, REPOSITORY, RealImage, RealNode, RealNodeOptions};
use kube::Client;
use tokio::time::Instant;

use super::display::rows;
use super::processes::Parts;
use super::step;

/// The tag the pool follows.
const TAG: &str = "stable";

/// The agent's unit as `systemd/` ships it, for `--host-service`.
const AGENT_UNIT_TEXT: &str = include_str!("../../../../systemd/bootc-node-agent.service");

/// The registry and image of a real-bootc demo.
#[derive(Debug)]
pub(super) struct RealRegistry {
    pub(super) registry: LoggedRegistry,
    layout: PathBuf,
    /// `-agent` when the images carry the agent as a host service, else empty.
    suffix: &'static str,
}

impl RealRegistry {
    /// `host/node:stable`.
    pub(super) fn tag_ref(&self) -> String {
        format!("{}/{REPOSITORY}:{TAG}", self.registry.host())
    }

    /// Pushes `oci:<layout>:<version>` to the tag; its digest.
    fn push(&self, version: &str) -> Result<String, String> {
        let tag = format!("{version}{}", self.suffix);
        self.registry
            .push_layout_as(&self.layout, &tag, REPOSITORY, TAG)
            .map_err(|e| format!("cannot push {version} to {}: {e}", self.tag_ref()))
    }
}

/// The archive directory, or why there is none.
fn archive() -> Result<PathBuf, String> {
    host_sim::real::archive_dir().ok_or_else(|| {
        format!(
            "--real-bootc needs the real bootc archive: set ${} to its directory, or put it \
             at shared/tools/real-bootc beside the checkout",
            host_sim::real::ARCHIVE_ENV
        )
    })
}

/// Builds (or finds) the node image, starts the registry and pushes v1 to the tag;
/// returns the tag's reference and v1's digest. With `host_service`, the images pushed
/// carry the agent and its unit from `systemd/`, enabled.
pub(super) async fn start_with_v1(
    parts: &mut Parts,
    started: Instant,
    dir: &Path,
    host_service: bool,
) -> Result<(String, String), String> {
    let archive = archive()?;
    step(
        started,
        "the real-bootc node image (the first run builds it, about a minute) …",
    );
    let image = RealImage::shared(&archive)
        .await
        .map_err(|e| format!("cannot build the real-bootc node image: {e}"))?;
    step(started, &format!("node image {} ready", image.key()));
    let registry = LoggedRegistry::start(dir).map_err(|e| {
        format!("cannot start docker-registry (Debian package docker-registry): {e}")
    })?;
    let (layout, suffix) = if host_service {
        let agent = host_sim::daemonset::agent_binary().map_err(|e| e.to_string())?;
        let layout = host_sim::real::agent_image::with_agent(
            &image,
            &agent,
            AGENT_UNIT_TEXT,
            &dir.join("agent-image"),
        )
        .map_err(|e| format!("cannot add the agent to the node image: {e}"))?;
        step(
            started,
            "the agent and its unit (systemd/bootc-node-agent.service) added to v1 and v2 as a host service",
        );
        (layout, "-agent")
    } else {
        (image.layout(), "")
    };
    let real = RealRegistry {
        registry,
        layout,
        suffix,
    };
    let v1 = real.push("v1")?;
    let tag = real.tag_ref();
    step(started, &format!("v1 pushed to {tag} ({v1})"));
    parts.real = Some((real, image));
    Ok((tag, v1))
}

/// Pushes v2 to the same tag; returns its digest.
pub(super) fn push_v2(parts: &Parts, started: Instant) -> Result<String, String> {
    let (real, _) = parts.real.as_ref().ok_or("the registry is gone")?;
    let v2 = real.push("v2")?;
    step(
        started,
        &format!(
            "v2 pushed to {} ({v2}); the controller picks it up within 30 s (its resolve interval)",
            real.tag_ref()
        ),
    );
    Ok(v2)
}

/// The real nodes to deploy and boot.
pub(super) struct RealNodes<'a> {
    /// The work directory (sysroots under `nodes/`).
    pub(super) dir: &'a Path,
    /// How many.
    pub(super) count: usize,
    /// The API, for the kubelet's part.
    pub(super) client: &'a Client,
    /// How long a node may take to boot.
    pub(super) boot_timeout: Duration,
    /// Provisioned as `/etc/bootc-node-agent/kubeconfig`, for a host-service agent.
    pub(super) kubeconfig: Option<&'a Path>,
}

impl RealNodes<'_> {
    /// Deploys the nodes from the tag and boots them (all together), kept in `parts`.
    pub(super) async fn boot(&self, parts: &mut Parts, started: Instant) -> Result<(), String> {
        let (real, image) = parts.real.as_ref().ok_or("the registry is gone")?;
        let image = image.clone();
        let options = self.options(&real.tag_ref())?;
        step(
            started,
            &format!(
                "deploying v1 into {} sysroots with bootc, and booting them …",
                self.count
            ),
        );
        let mut booting = tokio::task::JoinSet::new();
        for o in options {
            let image = image.clone();
            booting.spawn(async move {
                let name = o.name.clone();
                RealNode::start(&image, o)
                    .await
                    .map_err(|e| format!("node {name} did not deploy or boot: {e}"))
            });
        }
        let mut first_error = None;
        while let Some(joined) = booting.join_next().await {
            match joined {
                Ok(Ok(node)) => {
                    let t = node.timings();
                    step(
                        started,
                        &format!(
                            "{} deployed in {:.1} s, booted in {:.1} s",
                            node.node().name(),
                            t.deploy.as_secs_f64(),
                            t.first_boot.as_secs_f64()
                        ),
                    );
                    parts.real_nodes.push(node);
                }
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(e) => {
                    first_error = first_error.or(Some(format!("a node's start failed: {e}")));
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        parts.real_nodes.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(())
    }

    /// Each node's options: deployed from `tag`, the kubeconfig provisioned when asked.
    fn options(&self, tag: &str) -> Result<Vec<RealNodeOptions>, String> {
        let etc = match self.kubeconfig {
            Some(path) => {
                let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
                vec![("bootc-node-agent/kubeconfig".to_owned(), text)]
            }
            None => Vec::new(),
        };
        let pid = std::process::id();
        Ok((1..=self.count)
            .map(|i| {
                let name = format!("demo{pid}-r{i:02}");
                RealNodeOptions {
                    dir: self.dir.join("nodes").join(&name),
                    name,
                    image: tag.to_owned(),
                    boot_timeout: self.boot_timeout,
                    kube: Some(self.client.clone()),
                    etc: etc.clone(),
                }
            })
            .collect())
    }
}

/// Waits for a node staged on the new target and holding no slot, and reboots it through
/// its own logind, as a person at the console would; returns its name and its boot count
/// after that reboot.
pub(super) async fn unapproved_reboot(
    parts: &Parts,
    handle: &kube_emulator::Handle,
    started: Instant,
    timeout: Duration,
) -> Result<(String, u64), String> {
    let nodes = parts.all_nodes();
    let names: Vec<String> = nodes.iter().map(|n| n.name().to_owned()).collect();
    let deadline = Instant::now() + timeout;
    let victim = loop {
        if let Some(row) = rows(handle, &names)
            .into_iter()
            .find(|r| r.state == "Staged" && !r.slot && !r.cordoned)
        {
            break row.name;
        }
        if Instant::now() >= deadline {
            return Err("no node was ever staged without a slot to reboot unapproved".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let node = nodes
        .iter()
        .find(|n| n.name() == victim)
        .ok_or("the staged node is gone")?;
    let boots = node.status().boots;
    step(
        started,
        &format!("rebooting {victim} by hand, unapproved (it must come back on the old image) …"),
    );
    node.reboot(false)
        .await
        .map_err(|e| format!("cannot reboot {victim}: {e}"))?;
    let status = node
        .wait_booted(boots, timeout)
        .await
        .map_err(|e| format!("{victim} did not come back: {e}"))?;
    step(started, &format!("{victim} is up again"));
    Ok((victim, status.boots))
}

/// Checks that `name`, rebooted unapproved when it had `boots_after` boots, rebooted
/// exactly once more (its approved reboot) by the end of the rollout.
pub(super) fn check_one_approved_reboot(
    parts: &Parts,
    name: &str,
    boots_after: u64,
) -> Result<(), String> {
    let nodes = parts.all_nodes();
    let node = nodes
        .iter()
        .find(|n| n.name() == name)
        .ok_or("the rebooted node is gone")?;
    let more = node.status().boots.saturating_sub(boots_after);
    if more == 1 {
        println!("{name}: after the unapproved reboot, exactly one reboot (the approved one)");
        Ok(())
    } else {
        Err(format!(
            "{name} rebooted {more} times after its unapproved reboot, not once"
        ))
    }
}

/// The blobs the registry served since request `from` of its access log.
pub(super) fn blobs_fetched_since(parts: &Parts, from: usize) -> Option<usize> {
    let (real, _) = parts.real.as_ref()?;
    Some(
        real.registry
            .requests()
            .iter()
            .skip(from)
            .filter(|r| r.is_blob_fetch())
            .count(),
    )
}

/// How many requests the registry's access log holds now.
pub(super) fn requests_so_far(parts: &Parts) -> Option<usize> {
    let (real, _) = parts.real.as_ref()?;
    Some(real.registry.request_count())
}

/// Writes each real node's journal (every boot, as the node's own journald kept it under
/// its stateroot's `/var`) to `journal.log` beside its sysroot, before the teardown
/// removes the sysroots: a failed run keeps what the nodes' systemd saw.
pub(super) fn keep_journals(nodes: &[RealNode]) {
    for node in nodes {
        let journal = node.sysroot().var().join("log/journal");
        let out = node.sysroot().path().with_file_name("journal.log");
        let written = std::fs::File::create(&out).and_then(|file| {
            std::process::Command::new("journalctl")
                .arg("--directory")
                .arg(&journal)
                .args(["--no-pager", "--output", "short-precise"])
                .stdout(file)
                .stderr(std::process::Stdio::null())
                .status()
        });
        match written {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!(
                "bootc-sim demo: journalctl for {}: {status}",
                node.node().name()
            ),
            Err(e) => eprintln!("bootc-sim demo: {}: {e}", out.display()),
        }
    }
}
