//! A node boots under systemd-nspawn, and reboots (full and soft) the way the harness
//! promises (`docs/testing.md`, "Nodes under systemd-nspawn"): a full reboot ends the
//! container with status 133 and the harness boots it again with a new boot ID; a soft
//! reboot keeps the container and the boot ID and counts up the Manager's
//! `SoftRebootsCount`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use host_sim::NodePhase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boots_and_reads_its_state() {
    let dir = common::test_dir("boot");
    let started = Instant::now();
    let node = common::boot("sim-boot", dir.path()).await;
    eprintln!("sim-boot: up in {:?}", started.elapsed());

    let status = node.status();
    assert_eq!(status.phase, NodePhase::Up);
    assert_eq!(status.boots, 1);
    let boot_id = node.boot_id().await.unwrap();
    assert_eq!(boot_id.len(), 32);
    assert_eq!(status.boot_id.as_deref(), Some(boot_id.as_str()));
    assert_eq!(node.soft_reboots().await.unwrap(), 0);
    let state = node.system_state().await.unwrap();
    assert_eq!(state, "running", "see {}", node.log_file().display());

    // The node image is a bootc host: the marker, bootc's units enabled, the finalize unit
    // ran, the stand-in installed.
    let root = node.root_path().unwrap();
    assert!(root.join("run/ostree-booted").exists());
    assert!(root.join("run/ostree").is_dir());
    let path_unit = node.unit_state("bootc-status-updated.path").await.unwrap();
    assert_eq!(path_unit.active_state, "active", "{path_unit:?}");
    let timer = node
        .unit_state("bootc-fetch-apply-updates.timer")
        .await
        .unwrap();
    assert_eq!(timer.active_state, "active", "{timer:?}");
    assert_eq!(timer.unit_file_state, "enabled", "{timer:?}");
    let finalize = node
        .unit_state("bootc-standin-finalize.service")
        .await
        .unwrap();
    assert_eq!(finalize.active_state, "active", "{finalize:?}");
    // systemd breaks an ordering cycle by dropping a job at random: there must be none.
    let console = std::fs::read_to_string(node.log_file()).unwrap();
    assert!(
        !console.contains("ordering cycle"),
        "the node's units form an ordering cycle:\n{console}"
    );
    // Marked as updated (image.rs, `stamp_updated`): no "first boot after an update" units.
    assert!(root.join("etc/.updated").exists());
    assert!(
        !console.contains("Rebuild Dynamic Linker Cache"),
        "ldconfig.service ran at boot:\n{console}"
    );
    assert!(root.join("usr/bin/bootc").metadata().unwrap().len() > 0);
    let conn = node.connect().await.unwrap();
    let hostname1 = zbus::Proxy::new(
        &conn,
        "org.freedesktop.hostname1",
        "/org/freedesktop/hostname1",
        "org.freedesktop.hostname1",
    )
    .await
    .unwrap();
    let hostname: String = hostname1.get_property("Hostname").await.unwrap();
    assert_eq!(hostname, "sim-boot");

    let started = Instant::now();
    node.stop().await.unwrap();
    eprintln!("sim-boot: stopped in {:?}", started.elapsed());
    let status = node.status();
    assert_eq!(status.phase, NodePhase::Stopped);
    assert_eq!(status.last_exit, Some(0));
    assert!(node.bus_address().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_reboot_comes_back_with_a_new_boot_id() {
    let dir = common::test_dir("reboot");
    let node = common::boot("sim-reboot", dir.path()).await;
    let before = node.status();
    let first_pid = node.init_pid().unwrap();

    let started = Instant::now();
    node.reboot(false).await.unwrap();
    let after = node.wait_booted(before.boots, common::BOOT).await.unwrap();
    eprintln!("sim-reboot: full reboot took {:?}", started.elapsed());

    assert_eq!(after.boots, 2);
    assert_eq!(after.last_exit, Some(host_sim::node::EXIT_REBOOT));
    assert_ne!(after.boot_id, before.boot_id);
    assert_ne!(node.init_pid().unwrap(), first_pid);
    assert_eq!(node.boot_id().await.unwrap(), after.boot_id.unwrap());
    assert_eq!(node.soft_reboots().await.unwrap(), 0);
    node.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_reboot_keeps_the_boot_id_and_counts() {
    let dir = common::test_dir("soft");
    let node = common::boot("sim-soft", dir.path()).await;
    let before = node.status();
    let pid = node.init_pid().unwrap();

    let started = Instant::now();
    node.reboot(true).await.unwrap();
    let after = node
        .wait_soft_rebooted(before.soft_reboots, common::BOOT)
        .await
        .unwrap();
    eprintln!("sim-soft: soft reboot took {:?}", started.elapsed());

    assert_eq!(after.soft_reboots, before.soft_reboots + 1);
    assert_eq!(after.boots, before.boots, "no full boot");
    assert_eq!(after.boot_id, before.boot_id);
    assert_eq!(node.init_pid(), Some(pid), "same container, same init");
    assert_eq!(node.soft_reboots().await.unwrap(), before.soft_reboots + 1);
    assert_eq!(node.boot_id().await.unwrap(), before.boot_id.unwrap());
    // The finalize unit ran again after the soft reboot, with the stand-in still there.
    let finalize = node
        .unit_state("bootc-standin-finalize.service")
        .await
        .unwrap();
    assert_eq!(finalize.active_state, "active");
    // The boot marker stays (as on a host: the initramfs is not run again).
    assert!(node.root_path().unwrap().join("run/ostree-booted").exists());

    assert!(
        node.root_path()
            .unwrap()
            .join("usr/bin/bootc")
            .metadata()
            .unwrap()
            .len()
            > 0
    );
    assert!(
        node.root_path()
            .unwrap()
            .join("var/lib/bootc-standin/state.json")
            .exists()
    );

    node.stop().await.unwrap();
}
