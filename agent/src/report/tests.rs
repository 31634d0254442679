use chrono::TimeZone;

use super::*;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn entry(digest: &str, extra: &str) -> String {
    format!(
        r#"{{"image":{{"image":{{"image":"q.io/os@{digest}","transport":"registry"}},"imageDigest":"{digest}","timestamp":"2026-01-02T03:04:05Z"}},"incompatible":false,"pinned":false{extra}}}"#
    )
}

fn host(booted: &str, staged: Option<&str>) -> crate::bootc_status::BootcHost {
    let staged = staged.map_or("null".to_owned(), |d| {
        entry(d, r#","downloadOnly":true,"softRebootCapable":true"#)
    });
    let json = format!(
        r#"{{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","metadata":{{"name":"host"}},"spec":{{}},"status":{{"booted":{},"staged":{staged},"rollback":null}}}}"#,
        entry(booted, "")
    );
    crate::bootc_status::parse(json.as_bytes()).unwrap()
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 10, minute, 0).unwrap()
}

fn inputs<'a>(
    previous: Option<&'a BootcNodeStatus>,
    host: Option<&'a crate::bootc_status::BootcHost>,
    phase: Phase,
    now: DateTime<Utc>,
) -> Inputs<'a> {
    Inputs {
        previous,
        generation: Some(3),
        host,
        desired: "q.io/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        phase,
        degraded: None,
        last_reboot: None,
        agent_version: "0.1.0",
        bootc_version: Some("1.1.4"),
        progress: None,
        health_units: &[],
        health: None,
        timer_masked: Some(true),
        now,
    }
}

fn condition_of<'a>(status: &'a BootcNodeStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn bootc_version_is_reported_and_kept_when_it_could_not_be_read() {
    let h = host(A, Some(B));
    let first = compose(&inputs(None, Some(&h), Phase::Staged, at(0)));
    assert_eq!(first.bootc_version.as_deref(), Some("1.1.4"));
    let mut unknown = inputs(Some(&first), Some(&h), Phase::Staged, at(1));
    unknown.bootc_version = None;
    assert_eq!(compose(&unknown).bootc_version.as_deref(), Some("1.1.4"));
    let mut newer = inputs(Some(&first), Some(&h), Phase::Staged, at(2));
    newer.bootc_version = Some("1.2.0");
    assert_eq!(compose(&newer).bootc_version.as_deref(), Some("1.2.0"));
}

#[test]
fn the_same_situation_later_gives_the_same_status() {
    let h = host(A, Some(B));
    let first = compose(&inputs(None, Some(&h), Phase::Staged, at(0)));
    let again = compose(&inputs(Some(&first), Some(&h), Phase::Staged, at(30)));
    assert_eq!(
        first, again,
        "an unchanged situation must not cause a write"
    );
    assert_eq!(first.observed_generation, Some(3));
    let staged = first.staged.as_ref().unwrap();
    assert!(staged.download_only);
    assert_eq!(staged.image.image_digest, B);
    assert_eq!(condition_of(&first, IDLE).reason, "Staged");
    assert_eq!(condition_of(&first, IDLE).status, "False");
    assert_eq!(condition_of(&first, DEGRADED).status, "False");
    assert_eq!(condition_of(&first, DEGRADED).reason, "Healthy");
}

#[test]
fn transition_times_move_only_when_a_condition_flips() {
    let h = host(A, Some(B));
    let staging = compose(&inputs(None, Some(&h), Phase::Staging, at(0)));
    let staged = compose(&inputs(Some(&staging), Some(&h), Phase::Staged, at(5)));
    // Idle stays False (Staging -> Staged): time kept, reason and message follow.
    assert_eq!(
        condition_of(&staged, IDLE).last_transition_time,
        condition_of(&staging, IDLE).last_transition_time
    );
    assert_eq!(condition_of(&staged, IDLE).reason, "Staged");
    let h2 = host(B, None);
    let idle = compose(&inputs(Some(&staged), Some(&h2), Phase::Idle, at(9)));
    assert_eq!(condition_of(&idle, IDLE).status, "True");
    assert_eq!(
        condition_of(&idle, IDLE).last_transition_time,
        to_time(at(9)).unwrap()
    );
    let mut degraded_inputs = inputs(Some(&idle), Some(&h2), Phase::Idle, at(12));
    degraded_inputs.degraded = Some(("Error", "boom".to_owned()));
    let degraded = compose(&degraded_inputs);
    let d = condition_of(&degraded, DEGRADED);
    assert_eq!(
        (d.status.as_str(), d.reason.as_str(), d.message.as_str()),
        ("True", "Error", "boom")
    );
    assert_eq!(d.last_transition_time, to_time(at(12)).unwrap());
}

#[test]
fn booted_since_is_kept_for_the_same_digest_and_reset_for_a_new_one() {
    let h = host(A, None);
    let first = compose(&inputs(None, Some(&h), Phase::Idle, at(0)));
    assert_eq!(first.booted.as_ref().unwrap().since, to_time(at(0)));
    let later = compose(&inputs(Some(&first), Some(&h), Phase::Idle, at(20)));
    assert_eq!(later.booted.as_ref().unwrap().since, to_time(at(0)));
    let h2 = host(B, None);
    let switched = compose(&inputs(Some(&later), Some(&h2), Phase::Idle, at(40)));
    assert_eq!(switched.booted.as_ref().unwrap().since, to_time(at(40)));
}

#[test]
fn an_unreadable_host_keeps_the_last_known_images() {
    let h = host(A, Some(B));
    let known = compose(&inputs(None, Some(&h), Phase::Staged, at(0)));
    let mut blind = inputs(Some(&known), None, Phase::Staged, at(1));
    blind.degraded = Some(("Error", "cannot read the host".to_owned()));
    let status = compose(&blind);
    assert_eq!(status.booted, known.booted);
    assert_eq!(status.staged, known.staged);
    assert_eq!(condition_of(&status, DEGRADED).status, "True");
}

#[test]
fn last_reboot_round_trips_and_survives_restarts() {
    let record = RebootRecord {
        digest: B.to_owned(),
        boot_id: "0123456789abcdef0123456789abcdef".to_owned(),
        soft_reboots: 2,
        time: at(7),
    };
    let h = host(A, Some(B));
    let mut with = inputs(None, Some(&h), Phase::Rebooting, at(7));
    with.last_reboot = Some(&record);
    let status = compose(&with);
    let last = status.last_reboot.as_ref().unwrap();
    assert_eq!(record_from_status(last), Some(record.clone()));
    // A later report without the record in memory keeps the one on the object.
    let kept = compose(&inputs(Some(&status), Some(&h), Phase::Rebooting, at(8)));
    assert_eq!(kept.last_reboot, status.last_reboot);
}

#[test]
fn merge_patch_removes_what_the_status_no_longer_has() {
    let h = host(A, None);
    let status = compose(&inputs(None, Some(&h), Phase::Idle, at(0)));
    let patch = merge_patch(&status);
    let body = &patch["status"];
    assert!(body["staged"].is_null() && body.get("staged").is_some());
    assert!(body["lastReboot"].is_null() && body.get("lastReboot").is_some());
    assert_eq!(body["booted"]["imageDigest"], A);
    assert_eq!(body["agentVersion"], "0.1.0");
    assert_eq!(body["conditions"].as_array().unwrap().len(), 3);
    // Nested: a usr overlay gone since the last report is removed too.
    assert!(body["host"]["usrOverlay"].is_null() && body["host"].get("usrOverlay").is_some());
}

#[test]
fn times_convert_both_ways_at_second_precision() {
    let t = at(3) + chrono::Duration::milliseconds(250);
    let k = to_time(t).unwrap();
    assert_eq!(from_time(&k), Some(at(3)));
}

#[test]
fn free_text_from_the_host_is_cut_to_the_schema_bounds() {
    let h = host(A, Some(B));
    let long = "9".repeat(bootc_crds::bounds::VERSION_MAX_LEN * 3);
    let mut i = inputs(None, Some(&h), Phase::Staged, at(0));
    i.bootc_version = Some(&long);
    i.agent_version = &long;
    let status = compose(&i);
    for v in [status.bootc_version.unwrap(), status.agent_version.unwrap()] {
        assert_eq!(v.chars().count(), bootc_crds::bounds::VERSION_MAX_LEN);
        assert!(v.ends_with('…'));
    }
}

#[test]
fn progress_is_reported_only_while_staging_the_desired_digest() {
    let now = chrono::Utc::now();
    let desired_digest = format!("sha256:{}", "b".repeat(64));
    let mut p = crate::host::StageProgress::new(desired_digest.clone());
    p.bytes_done = 50;
    p.bytes_total = 200;
    p.task = "pulling".into();
    p.description = "Pulling Image".into();
    let h = host(A, None);
    let mut i = inputs(None, Some(&h), Phase::Staging, now);
    i.progress = Some((&p, now));
    let status = compose(&i);
    let shown = status.progress.as_ref().expect("progress while staging");
    assert_eq!((shown.bytes_done, shown.bytes_total), (50, 200));
    assert_eq!(shown.summary, "25%");
    assert_eq!(shown.image_digest, desired_digest);
    assert_eq!(compose(&i), status, "the same inputs give the same status");

    i.phase = Phase::Staged;
    assert_eq!(compose(&i).progress, None, "gone once staged");

    let other = crate::host::StageProgress::new(format!("sha256:{}", "c".repeat(64)));
    i.phase = Phase::Staging;
    i.progress = Some((&other, now));
    assert_eq!(
        compose(&i).progress,
        None,
        "another digest's progress is not shown"
    );

    let patch = merge_patch(&compose(&i));
    assert!(patch["status"]["progress"].is_null(), "a merge removes it");
}

fn unit(name: &str, active: &str, sub: &str) -> bootc_crds::node::UnitHealth {
    bootc_crds::node::UnitHealth {
        name: name.to_owned(),
        active_state: active.to_owned(),
        sub_state: sub.to_owned(),
    }
}

fn boot(boot_id: &str, soft_reboots: u64) -> crate::host::BootIdentity {
    crate::host::BootIdentity {
        boot_id: boot_id.to_owned(),
        soft_reboots,
        can_soft_reboot: true,
    }
}

#[test]
fn health_reports_each_unit_in_order_with_the_boot_it_was_read_in() {
    let names = ["b.service".to_owned(), "a.target".to_owned()];
    let read = node_health(
        &boot("0123456789abcdef0123456789abcdef", 2),
        vec![
            unit("b.service", "active", "running"),
            unit("a.target", "active", "active"),
        ],
    );
    assert!(read.healthy, "every unit active");
    assert_eq!(
        (read.boot_id.as_str(), read.soft_reboots),
        ("0123456789abcdef0123456789abcdef", 2)
    );
    let h = host(A, None);
    let mut i = inputs(None, Some(&h), Phase::Idle, at(0));
    i.health_units = &names;
    i.health = Some(&read);
    let status = compose(&i);
    let health = status.health.as_ref().expect("health with units");
    let order: Vec<&str> = health.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(order, ["b.service", "a.target"], "the spec's order");
    assert_eq!(compose(&i), status, "the same read gives the same status");
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["health"]["bootID"], "0123456789abcdef0123456789abcdef");
    assert_eq!(json["health"]["units"][0]["activeState"], "active");
    assert_eq!(json["health"]["units"][0]["subState"], "running");

    // One unit not active, whatever the reason: not healthy.
    for state in ["activating", "failed", "not-found", "inactive", UNKNOWN] {
        let read = node_health(
            &boot("b1", 0),
            vec![
                unit("b.service", "active", "running"),
                unit("a.target", state, ""),
            ],
        );
        assert!(!read.healthy, "{state}");
    }
}

#[test]
fn no_health_without_units_and_a_merge_removes_it() {
    let names = ["x.service".to_owned()];
    let read = node_health(&boot("b1", 0), vec![unit("x.service", "failed", "failed")]);
    let h = host(A, None);
    let mut with = inputs(None, Some(&h), Phase::Idle, at(0));
    with.health_units = &names;
    with.health = Some(&read);
    let first = compose(&with);
    assert!(first.health.is_some());
    // The pool's units were dropped: the read (of the old list) is not reported.
    let mut without = inputs(Some(&first), Some(&h), Phase::Idle, at(1));
    without.health = Some(&read);
    let status = compose(&without);
    assert_eq!(status.health, None);
    let patch = merge_patch(&status);
    assert!(
        patch["status"].get("health").is_some() && patch["status"]["health"].is_null(),
        "a merge removes it"
    );
}

#[test]
fn health_not_read_keeps_the_previous_report_only_for_the_same_units() {
    let names = ["x.service".to_owned(), "y.service".to_owned()];
    let read = node_health(
        &boot("b1", 0),
        vec![
            unit("x.service", "active", "running"),
            unit("y.service", "activating", "start"),
        ],
    );
    let h = host(A, None);
    let mut first = inputs(None, Some(&h), Phase::Idle, at(0));
    first.health_units = &names;
    first.health = Some(&read);
    let first = compose(&first);
    // The host could not be read: the previous health stays, like the images.
    let mut unread = inputs(Some(&first), None, Phase::Idle, at(1));
    unread.health_units = &names;
    assert_eq!(compose(&unread).health, first.health);
    // Other units (or another order): nothing is known about them yet.
    let reordered = ["y.service".to_owned(), "x.service".to_owned()];
    unread.health_units = &reordered;
    assert_eq!(compose(&unread).health, None);
}

#[test]
fn units_the_host_could_not_read_are_unknown_and_long_states_are_cut() {
    let names = ["x.service".to_owned(), "y.service".to_owned()];
    let unknown = unknown_units(&names);
    assert_eq!(
        unknown,
        vec![
            unit("x.service", UNKNOWN, ""),
            unit("y.service", UNKNOWN, "")
        ]
    );
    assert!(!node_health(&boot("b1", 0), unknown).healthy);
    let long = "a".repeat(100);
    let read = node_health(&boot("b1", 0), vec![unit("x.service", &long, &long)]);
    assert_eq!(read.units[0].active_state.chars().count(), 32);
    assert_eq!(read.units[0].sub_state.chars().count(), 32);
    assert!(!read.healthy);
}

/// A host whose booted deployment carries `booted_extra` and whose status carries
/// `status_extra` (JSON members, each led by a comma).
fn host_with(booted_extra: &str, status_extra: &str) -> crate::bootc_status::BootcHost {
    let json = format!(
        r#"{{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","metadata":{{"name":"host"}},"spec":{{}},"status":{{"booted":{},"staged":null,"rollback":null{status_extra}}}}}"#,
        entry(A, booted_extra)
    );
    crate::bootc_status::parse(json.as_bytes()).unwrap()
}

#[test]
fn a_usr_overlay_or_local_changes_read_as_drift_and_clear_with_them() {
    let ostree = r#","ostree":{"checksum":"26836632adf6","deploySerial":0,"stateroot":"default"}"#;
    // As bootc's own fixture (spec-booted-usroverlay.yaml) says it.
    let overlay = r#","usrOverlay":{"accessMode":"readWrite","persistence":"transient"}"#;
    let h = host_with(ostree, overlay);
    let drifted = compose(&inputs(None, Some(&h), Phase::Idle, at(0)));
    let host = drifted.host.clone().expect("status.host");
    assert_eq!(host.backend.as_deref(), Some("ostree"));
    assert_eq!(host.usr_overlay.as_deref(), Some("readWrite/transient"));
    assert_eq!(host.update_timer_masked, Some(true));
    let c = condition_of(&drifted, "Drifted");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "UsrOverlay")
    );
    assert!(c.message.contains("readWrite/transient"), "{}", c.message);

    // After the reboot the overlay is gone: in sync again.
    let h = host_with(ostree, "");
    let clean = compose(&inputs(Some(&drifted), Some(&h), Phase::Idle, at(5)));
    let c = condition_of(&clean, "Drifted");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "InSync"));
    assert_eq!(clean.host.as_ref().unwrap().usr_overlay, None);

    // Local layering: bootc marks the booted deployment incompatible.
    let composefs = r#","composefs":{"verity":"ab","bootType":"bls","bootloader":"grub","missingVerityAllowed":false}"#;
    let mut h = host_with(composefs, "");
    h.status.booted.as_mut().unwrap().incompatible = true;
    let local = compose(&inputs(None, Some(&h), Phase::Idle, at(0)));
    assert_eq!(
        local.host.as_ref().unwrap().backend.as_deref(),
        Some("composefs")
    );
    let c = condition_of(&local, "Drifted");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "LocalChanges")
    );

    // The host cannot be read: the last report stands.
    let kept = compose(&inputs(Some(&drifted), None, Phase::Idle, at(9)));
    assert_eq!(kept.host, drifted.host);
    assert_eq!(condition_of(&kept, "Drifted").reason, "UsrOverlay");
}
