//! `status.health` from the agent's run loop on in-process hosts, against the API
//! emulator, the test playing the controller by hand: the units' states per image
//! (`SimCluster::set_boot_units`), a unit that becomes active some time after the reboot
//! (read again every 2 s while it settles, with a poll interval of 5 minutes), failed and
//! missing units (no fast reads once one has a final answer), the list following the
//! spec, and names the agent refuses (reported `unknown`, the rest of the status intact).
//!
//! "No more reads" is held over counted passes of a second node's agent polling every
//! second (the clock node), which runs on the same runtime as the agent under test: on
//! a loaded machine it slows down with it, so its passes stand for time the agent under
//! test really had to read its units, where a span of wall-clock time would not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use bootc_crds::node::{BootcNode, NodeHealth};
use host_sim::cluster::{SimCluster, SimOptions};
use host_sim::fixtures::{approve, digest, staged_spec, unit_states, wait_for};
use host_sim::memory::{Catalog, MemoryHost};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_emulator::Emulator;
use serde_json::json;

const REPO: &str = "registry.test/os";

/// A poll interval long enough that only the fast reads of settling units (and events)
/// explain a change seen within a test.
fn options() -> SimOptions {
    SimOptions {
        poll_interval: Duration::from_secs(300),
        node_labels: BTreeMap::new(),
        ..SimOptions::default()
    }
}

/// The clock node's agent polls every second.
const CLOCK_POLL: Duration = Duration::from_secs(1);

/// The other node, whose agent's passes are counted as a clock (see the module's text).
struct Clock {
    host: MemoryHost,
}

impl Clock {
    /// Waits until the clock node's agent has made `passes` more passes (its status reads,
    /// one a pass).
    async fn passes(&self, passes: usize) {
        let start = status_reads(&self.host);
        wait_for(&format!("{passes} passes of the clock node"), async || {
            (status_reads(&self.host) >= start + passes).then_some(())
        })
        .await;
    }
}

/// Passes of the clock node to wait for where nothing may happen: six seconds of its
/// polling, three times the fast reads' interval.
const QUIET_PASSES: usize = 6;

/// The emulator, the BootcNode API, a cluster of n1 (on v1, v2 in its catalog) and the
/// clock node: (emulator, api, cluster, clock, v1, v2).
async fn setup() -> (Emulator, Api<BootcNode>, SimCluster, Clock, String, String) {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let catalog = Catalog::new();
    let [v1, v2] = catalog.push_versions(REPO, [None, None]);
    let cluster = SimCluster::start(emulator.config(), catalog).await.unwrap();
    cluster.add_node("n1", &v1, &options()).await.unwrap();
    let clock_options = SimOptions {
        poll_interval: CLOCK_POLL,
        ..options()
    };
    cluster
        .add_node("clock", &v1, &clock_options)
        .await
        .unwrap();
    let api = Api::all(client);
    create_named(&api, "clock", &v1, &[]).await;
    let clock = Clock {
        host: cluster.host("clock").unwrap(),
    };
    (emulator, api, cluster, clock, v1, v2)
}

async fn create(api: &Api<BootcNode>, image: &str, units: &[&str]) {
    create_named(api, "n1", image, units).await;
}

async fn create_named(api: &Api<BootcNode>, name: &str, image: &str, units: &[&str]) {
    let mut spec = staged_spec(image);
    spec.health_units = units.iter().map(|u| (*u).to_owned()).collect();
    let node = BootcNode::new(name, spec);
    api.create(&PostParams::default(), &node).await.unwrap();
}

async fn patch(api: &Api<BootcNode>, body: serde_json::Value) {
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
}

/// Waits for `status.health` to be read in the host's current boot and to satisfy
/// `check`.
async fn wait_health(
    what: &str,
    api: &Api<BootcNode>,
    host: &MemoryHost,
    check: impl Fn(&NodeHealth) -> bool,
) -> NodeHealth {
    wait_for(what, async || {
        let node = api.get("n1").await.ok()?;
        let health = node.status?.health?;
        (health.boot_id == host.boot_id() && check(&health)).then_some(health)
    })
    .await
}

/// How many times the host's units were read so far.
fn unit_reads(host: &MemoryHost) -> usize {
    host.steps()
        .iter()
        .filter(|s| *s == "before unit_states")
        .count()
}

/// How many times the host's status was read so far (once a pass).
fn status_reads(host: &MemoryHost) -> usize {
    host.steps()
        .iter()
        .filter(|s| *s == "before status")
        .count()
}

/// How many unit reads so far no pass made: a pass reads the status, then the boot's
/// identity, then the units; a fast read reads the units alone.
fn fast_reads(host: &MemoryHost) -> usize {
    let steps = host.steps();
    steps
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            *s == "before unit_states" && (*i == 0 || steps[i - 1] != "after identity")
        })
        .count()
}

#[tokio::test]
async fn a_unit_that_becomes_active_after_the_reboot_is_seen_within_seconds() {
    let (_emulator, api, cluster, clock, _, v2) = setup().await;
    let host = cluster.host("n1").unwrap();
    // After booting v2, kubelet.service is still starting.
    cluster.set_boot_units(&digest('2'), &[("kubelet.service", "activating")]);
    create(&api, &v2, &["kubelet.service", "boot-complete.target"]).await;

    // On v1 every unit is active (the default).
    let before = wait_health("health on v1", &api, &host, |h| h.healthy).await;
    assert_eq!(
        unit_states(&before.units),
        [
            ("kubelet.service", "active", "running"),
            ("boot-complete.target", "active", "running"),
        ]
    );
    assert_eq!(before.soft_reboots, 0);

    wait_for("Staged", async || {
        let n = api.get("n1").await.ok()?;
        n.status?.staged.map(|_| ())
    })
    .await;
    let old_boot = host.boot_id();
    approve(&api, "n1", "pool").await;
    wait_for("the reboot", async || {
        (host.counters().boots == 1 && host.is_up()).then_some(())
    })
    .await;
    assert_ne!(host.boot_id(), old_boot);
    let settling = wait_health("health in the new boot", &api, &host, |_| true).await;
    assert!(!settling.healthy);
    assert_eq!(
        unit_states(&settling.units),
        [
            ("kubelet.service", "activating", "start"),
            ("boot-complete.target", "active", "running"),
        ]
    );

    // It comes up: seen by a fast read, within a deadline far below the 5-minute poll.
    let fast = fast_reads(&host);
    cluster.set_boot_units(&digest('2'), &[("kubelet.service", "active")]);
    let healthy = wait_health("kubelet active", &api, &host, |h| h.healthy).await;
    assert!(fast_reads(&host) > fast, "read again on its own");
    assert_eq!(
        unit_states(&healthy.units)[0],
        ("kubelet.service", "active", "running")
    );

    // Settled: no more reads over the clock node's passes.
    let reads = unit_reads(&host);
    clock.passes(QUIET_PASSES).await;
    assert_eq!(unit_reads(&host), reads, "read again after settling");
    cluster.stop().await;
}

#[tokio::test]
async fn failed_and_missing_units_are_reported_and_the_list_follows_the_spec() {
    let (_emulator, api, cluster, clock, v1, _) = setup().await;
    let host = cluster.host("n1").unwrap();
    cluster.set_boot_units(
        &digest('1'),
        &[
            ("broken.service", "failed"),
            ("gone.service", "not-found"),
            ("late.service", "activating"),
        ],
    );
    create(
        &api,
        &v1,
        &[
            "ok.service",
            "broken.service",
            "gone.service",
            "late.service",
        ],
    )
    .await;
    let health = wait_health("health", &api, &host, |_| true).await;
    assert!(!health.healthy);
    assert_eq!(
        unit_states(&health.units),
        [
            ("ok.service", "active", "running"),
            ("broken.service", "failed", "failed"),
            ("gone.service", "not-found", "dead"),
            ("late.service", "activating", "start"),
        ]
    );
    // A unit has failed: the answer is final, no fast reads although one still starts
    // (over the clock node's passes).
    let reads = unit_reads(&host);
    clock.passes(QUIET_PASSES).await;
    assert_eq!(unit_reads(&host), reads, "read again with a final answer");

    // The spec's list changes: read again at once, in the new order.
    patch(
        &api,
        json!({"spec": {"healthUnits": ["late.service", "ok.service"]}}),
    )
    .await;
    let health = wait_health("the new list", &api, &host, |h| h.units.len() == 2).await;
    assert_eq!(
        unit_states(&health.units),
        [
            ("late.service", "activating", "start"),
            ("ok.service", "active", "running"),
        ]
    );
    cluster
        .catalog()
        .set_boot_units(&digest('1'), &[("late.service", "active/exited")]);
    let health = wait_health("late.service active", &api, &host, |h| h.healthy).await;
    assert_eq!(
        unit_states(&health.units)[0],
        ("late.service", "active", "exited")
    );

    // No units: no health.
    patch(&api, json!({"spec": {"healthUnits": null}})).await;
    wait_for("health removed", async || {
        let n = api.get("n1").await.ok()?;
        n.status?.health.is_none().then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test]
async fn names_the_agent_refuses_are_reported_unknown_and_the_rest_of_the_status_stands() {
    let (_emulator, api, cluster, _, v1, _) = setup().await;
    let host = cluster.host("n1").unwrap();
    // A template passes the CRD's pattern, but has no state of its own.
    create(&api, &v1, &["ok.service", "getty@.service"]).await;
    let health = wait_health("health", &api, &host, |_| true).await;
    assert!(!health.healthy);
    assert_eq!(
        unit_states(&health.units),
        [
            ("ok.service", "unknown", ""),
            ("getty@.service", "unknown", "")
        ]
    );
    let node = api.get("n1").await.unwrap();
    let status = node.status.unwrap();
    assert_eq!(status.booted.unwrap().image.image_digest, digest('1'));
    let condition = |t: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| (c.status.clone(), c.reason.clone()))
            .unwrap()
    };
    assert_eq!(condition("Idle").0, "True");
    assert_eq!(
        condition("Degraded").0,
        "False",
        "a health read is no agent failure"
    );

    // Once the spec names loadable units, they are read.
    patch(
        &api,
        json!({"spec": {"healthUnits": ["ok.service", "getty@tty1.service"]}}),
    )
    .await;
    wait_health("the instance", &api, &host, |h| h.healthy).await;
    cluster.stop().await;
}
