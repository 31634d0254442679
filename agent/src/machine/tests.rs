use super::*;
use chrono::TimeZone;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const LIST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
}

fn pin(digest: &str) -> String {
    format!("quay.io/example/os@{digest}")
}

fn slot(digest: &str) -> Slot {
    Slot {
        image: "quay.io/example/os:stable".to_string(),
        image_digest: digest.into(),
        soft_reboot_capable: false,
        download_only: true,
        policy_checked: false,
    }
}

/// `slot(digest)` unlocked: the deployment the next boot starts.
fn unlocked(digest: &str) -> Slot {
    Slot {
        download_only: false,
        ..slot(digest)
    }
}

fn host(booted: &str) -> HostFacts {
    HostFacts {
        booted: Some(slot(booted)),
        staged: None,
        rollback: None,
        rollback_queued: false,
        boot_id: "boot-1".into(),
        soft_reboots: 0,
        can_soft_reboot: true,
    }
}

/// `host(A)` with `staged` staged.
fn staged_on_a(staged: Slot) -> HostFacts {
    HostFacts {
        staged: Some(staged),
        ..host(A)
    }
}

fn want(digest: &str, state: DesiredImageState, holds_slot: bool) -> Desired {
    Desired {
        image: pin(digest),
        state,
        reboot_policy: RebootPolicy::RebootOnly,
        signature_policy: SignaturePolicy::Default,
        holds_slot,
    }
}

use DesiredImageState::{Booted, Staged};

fn record(digest: &str, boot_id: &str, soft: u64, minutes_ago: i64) -> RebootRecord {
    RebootRecord {
        digest: digest.into(),
        boot_id: boot_id.into(),
        soft_reboots: soft,
        time: now() - chrono::TimeDelta::minutes(minutes_ago),
    }
}

/// What the agent remembers after the reboot `record`, and nothing else.
fn after(record: RebootRecord) -> Memory {
    Memory {
        last_reboot: Some(record),
        ..Memory::default()
    }
}

/// (phase, action, retry_after) of a decision to wait in `phase`, trying again in `secs`.
fn waiting(phase: Phase, secs: u64) -> (Phase, HostAction, Option<Duration>) {
    (phase, HostAction::Wait, Some(Duration::from_secs(secs)))
}

fn reboot(unlock: Unlock, soft: bool, host: &HostFacts) -> HostAction {
    HostAction::Reboot {
        unlock,
        soft,
        record: RebootRecord {
            digest: B.into(),
            boot_id: host.boot_id.clone(),
            soft_reboots: host.soft_reboots,
            time: now(),
        },
    }
}

fn stage() -> HostAction {
    HostAction::Stage {
        image: pin(B),
        policy: SignaturePolicy::Default,
    }
}

fn lock() -> HostAction {
    HostAction::Lock { image: pin(B) }
}

#[test]
fn every_state() {
    let staged_b = staged_on_a(slot(B));
    let unlocked_b = staged_on_a(unlocked(B));
    let rollback_b = HostFacts {
        rollback: Some(slot(B)),
        ..host(A)
    };
    let staged_c = staged_on_a(slot(C));
    let mut via_list = host(A);
    via_list.booted = Some(Slot {
        image: format!("quay.io/example/os@{B}"),
        ..slot(LIST)
    });
    let none = Memory::default();
    type Case<'a> = (
        &'a str,
        Desired,
        HostFacts,
        Memory,
        Phase,
        Option<&'static str>,
        HostAction,
    );
    let cases: Vec<Case> = vec![
        (
            "booted is desired",
            want(B, Staged, false),
            host(B),
            none.clone(),
            Phase::Idle,
            None,
            HostAction::Wait,
        ),
        (
            "booted is desired, still approved",
            want(B, Booted, true),
            host(B),
            none.clone(),
            Phase::Idle,
            None,
            HostAction::Wait,
        ),
        (
            "booted via the digest in the reference",
            want(B, Staged, false),
            via_list,
            none.clone(),
            Phase::Idle,
            None,
            HostAction::Wait,
        ),
        (
            "nothing staged",
            want(B, Staged, false),
            host(A),
            none.clone(),
            Phase::Staging,
            None,
            stage(),
        ),
        (
            "another image staged",
            want(B, Booted, true),
            staged_c.clone(),
            none.clone(),
            Phase::Staging,
            None,
            stage(),
        ),
        (
            "staged, not approved",
            want(B, Staged, false),
            staged_b.clone(),
            none.clone(),
            Phase::Staged,
            None,
            HostAction::Wait,
        ),
        (
            "staged, Booted without the slot",
            want(B, Booted, false),
            staged_b.clone(),
            none.clone(),
            Phase::Staged,
            None,
            HostAction::Wait,
        ),
        (
            "staged, slot without Booted",
            want(B, Staged, true),
            staged_b.clone(),
            none.clone(),
            Phase::Staged,
            None,
            HostAction::Wait,
        ),
        (
            "approved",
            want(B, Booted, true),
            staged_b.clone(),
            none.clone(),
            Phase::Rebooting,
            None,
            reboot(Unlock::FromDownloaded, false, &staged_b),
        ),
        (
            "approved, already unlocked",
            want(B, Booted, true),
            unlocked_b.clone(),
            none.clone(),
            Phase::Rebooting,
            None,
            reboot(Unlock::AlreadyUnlocked, false, &unlocked_b),
        ),
        (
            "rollback slot, not approved: nothing to pull",
            want(B, Staged, false),
            rollback_b.clone(),
            none.clone(),
            Phase::Staged,
            None,
            HostAction::Wait,
        ),
        (
            "rollback slot, approved",
            want(B, Booted, true),
            rollback_b.clone(),
            none.clone(),
            Phase::Rebooting,
            None,
            reboot(Unlock::Rollback, false, &rollback_b),
        ),
    ];
    for (what, desired, host, memory, phase, degraded, action) in cases {
        let d = decide(&desired, &host, &memory, now());
        assert_eq!(d.phase, phase, "{what}");
        assert_eq!(
            d.degraded.as_ref().map(|(r, _)| *r),
            degraded,
            "{what}: {:?}",
            d.degraded
        );
        assert_eq!(d.action, action, "{what}");
    }
}

#[test]
fn soft_reboot_only_when_allowed_capable_and_supported() {
    let capable = |c: bool| HostFacts {
        staged: Some(Slot {
            soft_reboot_capable: c,
            ..slot(B)
        }),
        ..host(A)
    };
    let cases = [
        (RebootPolicy::AllowSoftReboot, true, true, true),
        (RebootPolicy::RebootOnly, true, true, false),
        (RebootPolicy::AllowSoftReboot, false, true, false),
        (RebootPolicy::AllowSoftReboot, true, false, false),
    ];
    for (policy, staged_capable, systemd_can, soft) in cases {
        let mut h = capable(staged_capable);
        h.can_soft_reboot = systemd_can;
        let desired = Desired {
            reboot_policy: policy,
            ..want(B, Booted, true)
        };
        let d = decide(&desired, &h, &Memory::default(), now());
        assert!(
            matches!(d.action, HostAction::Reboot { soft: s, .. } if s == soft),
            "{policy:?} {staged_capable} {systemd_can}: {:?}",
            d.action
        );
    }
}

#[test]
fn bad_desired_images_never_reach_a_command() {
    for bad in [
        "quay.io/example/os:stable".to_string(),
        format!("quay.io/example/os:stable@{B}"),
        format!("os@{B}"),
        "--apply".to_string(),
        "x; reboot".to_string(),
        format!("quay.io/example/os @{B}"),
        String::new(),
    ] {
        let desired = Desired {
            image: bad.clone(),
            ..want(B, Booted, true)
        };
        let h = staged_on_a(slot(B));
        let d = decide(&desired, &h, &Memory::default(), now());
        assert_eq!(d.action, HostAction::Wait, "{bad:?}");
        let (reason, message) = d.degraded.expect("degraded");
        assert_eq!(reason, node_degraded::ERROR);
        assert!(
            message.contains("spec.desiredImage") && message.contains("nothing was done"),
            "{message}"
        );
    }
}

#[test]
fn reboots_that_did_not_apply_are_not_repeated() {
    let approved = want(B, Booted, true);
    // Came back (new boot ID, or one more soft reboot) on the old image.
    for (boot_id, soft) in [("boot-2", 0), ("boot-1", 1)] {
        let h = HostFacts {
            boot_id: boot_id.into(),
            soft_reboots: soft,
            staged: Some(slot(B)),
            ..host(A)
        };
        let memory = after(record(B, "boot-1", 0, 5));
        let d = decide(&approved, &h, &memory, now());
        assert_eq!(d.action, HostAction::Wait);
        assert_eq!(
            d.degraded.as_ref().map(|(r, _)| *r),
            Some(node_degraded::REBOOT_DID_NOT_APPLY)
        );
        assert_eq!(d.phase, Phase::Staged);
    }
    // The reboot was for another digest: this approval may reboot.
    let h = HostFacts {
        boot_id: "boot-2".into(),
        staged: Some(slot(B)),
        ..host(A)
    };
    let memory = after(record(C, "boot-1", 0, 5));
    assert!(matches!(
        decide(&approved, &h, &memory, now()).action,
        HostAction::Reboot { .. }
    ));
    // It applied: idle and healthy.
    let memory = after(record(B, "boot-1", 0, 5));
    let d = decide(
        &approved,
        &HostFacts {
            boot_id: "boot-2".into(),
            ..host(B)
        },
        &memory,
        now(),
    );
    assert_eq!(
        (d.phase, d.degraded, d.action),
        (Phase::Idle, None, HostAction::Wait)
    );
}

#[test]
fn a_requested_reboot_is_awaited_then_requested_again() {
    let approved = want(B, Booted, true);
    // Unlocked: the reboot may have been requested.
    let h = staged_on_a(unlocked(B));
    let recent = after(record(B, "boot-1", 0, 2));
    let d = decide(&approved, &h, &recent, now());
    assert_eq!((d.phase, d.action), (Phase::Rebooting, HostAction::Wait));
    assert_eq!(
        d.retry_after,
        Some(REBOOT_REQUEST_TIMEOUT - Duration::from_secs(120))
    );
    let overdue = after(record(B, "boot-1", 0, 11));
    assert_eq!(
        decide(&approved, &h, &overdue, now()).action,
        reboot(Unlock::AlreadyUnlocked, false, &h)
    );
}

/// The record is written before the unlock, and the reboot requested only after it: a
/// record beside a deployment still locked (or a rollback not queued) is of an attempt
/// that stopped before the unlock (a failed unlock, a killed agent). No reboot was asked
/// for, so there is none to wait for: go on at once, or after a failure's backoff.
#[test]
fn a_record_without_its_unlock_holds_back_no_reboot() {
    let approved = want(B, Booted, true);
    let recent = after(record(B, "boot-1", 0, 2));
    let locked = staged_on_a(slot(B));
    assert_eq!(
        decide(&approved, &locked, &recent, now()).action,
        reboot(Unlock::FromDownloaded, false, &locked)
    );
    let rollback = HostFacts {
        rollback: Some(slot(B)),
        ..host(A)
    };
    assert_eq!(
        decide(&approved, &rollback, &recent, now()).action,
        reboot(Unlock::Rollback, false, &rollback)
    );
    // The rollback is queued: `bootc rollback` must not run again (it would un-queue it),
    // and the reboot may have been requested.
    let queued = HostFacts {
        rollback_queued: true,
        ..rollback.clone()
    };
    let d = decide(&approved, &queued, &recent, now());
    assert_eq!((d.phase, d.action), (Phase::Rebooting, HostAction::Wait));
    let overdue = after(record(B, "boot-1", 0, 11));
    assert_eq!(
        decide(&approved, &queued, &overdue, now()).action,
        reboot(Unlock::AlreadyUnlocked, false, &queued)
    );
    // A failed unlock backs off like any failed command.
    let failed = Memory {
        enforced: None,
        failure: Some(Failure {
            image: pin(B),
            message: "error: upgrade --from-downloaded: no space left".into(),
            attempts: 1,
            at: now() - chrono::TimeDelta::seconds(4),
            reason: None,
        }),
        ..recent
    };
    let d = decide(&approved, &locked, &failed, now());
    assert_eq!(
        (d.phase, d.action, d.retry_after),
        waiting(Phase::Rebooting, 6)
    );
}

#[test]
fn failures_back_off_and_stay_reported() {
    let failed = |attempts: u32, seconds_ago: i64, image: &str| Memory {
        enforced: None,
        staging: None,
        last_reboot: None,
        failure: Some(Failure {
            image: image.into(),
            message: "error: pulling image: 401 Unauthorized".into(),
            attempts,
            at: now() - chrono::TimeDelta::seconds(seconds_ago),
            reason: None,
        }),
    };
    let d = decide(
        &want(B, Staged, false),
        &host(A),
        &failed(1, 3, &pin(B)),
        now(),
    );
    assert_eq!(
        (d.phase, d.action.clone(), d.retry_after),
        waiting(Phase::Staging, 7)
    );
    let (reason, message) = d.degraded.unwrap();
    assert_eq!(
        (reason, message.as_str()),
        (
            node_degraded::REGISTRY_AUTH_FAILED,
            "the registry refused the pull credentials (check the pull Secret): error: \
             pulling image: 401 Unauthorized"
        )
    );
    // Past the backoff: try again, still reporting the last failure.
    let d = decide(
        &want(B, Staged, false),
        &host(A),
        &failed(1, 11, &pin(B)),
        now(),
    );
    assert_eq!(d.action, stage());
    assert!(d.degraded.is_some());
    // A failure for another image does not hold this one back.
    let d = decide(
        &want(B, Staged, false),
        &host(A),
        &failed(3, 1, &pin(C)),
        now(),
    );
    assert_eq!((d.action, d.degraded), (stage(), None));
    // A failed reboot backs off too.
    let h = staged_on_a(slot(B));
    let d = decide(&want(B, Booted, true), &h, &failed(2, 5, &pin(B)), now());
    assert_eq!(
        (d.phase, d.action, d.retry_after),
        waiting(Phase::Rebooting, 15)
    );
}

#[test]
fn backoff_doubles_up_to_five_minutes() {
    let secs: Vec<u64> = (1..=8).map(|a| BACKOFF.delay(a).as_secs()).collect();
    assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(BACKOFF.delay(0).as_secs(), 10);
    assert_eq!(BACKOFF.delay(u32::MAX).as_secs(), 300);
}

/// Over every combination of a small state space, an approval never reboots a host that
/// already rebooted for this digest and came back on another image.
#[test]
fn at_most_one_reboot_per_approval_exhaustively() {
    let unlocked_b = unlocked(B);
    let slots = [
        None,
        Some(slot(A)),
        Some(slot(B)),
        Some(unlocked_b),
        Some(slot(C)),
    ];
    let records = [
        None,
        Some(record(B, "boot-1", 0, 1)),
        Some(record(B, "boot-1", 0, 30)),
        Some(record(C, "boot-1", 0, 1)),
    ];
    // Every record is of boot-1 with no soft reboot: its reboot happened exactly when the
    // host is on another boot or has soft-rebooted since (stated here, not asked of
    // `RebootRecord::happened`, which has its own table).
    assert!(
        records
            .iter()
            .flatten()
            .all(|r| r.boot_id == "boot-1" && r.soft_reboots == 0)
    );
    // How often each property was put to the test (each must be, or it proves nothing).
    let (mut refused_second, mut approved, mut under_way_seen, mut idle) = (0, 0, 0, 0);
    for booted in &slots {
        for staged in &slots {
            for rollback in &slots {
                for (boot_id, rollback_queued) in
                    [("boot-1", false), ("boot-2", false), ("boot-1", true)]
                {
                    for soft_reboots in [0, 1] {
                        for last_reboot in &records {
                            for state in [Staged, Booted] {
                                for holds_slot in [false, true] {
                                    let h = HostFacts {
                                        booted: booted.clone(),
                                        staged: staged.clone(),
                                        rollback: rollback.clone(),
                                        rollback_queued,
                                        boot_id: boot_id.into(),
                                        soft_reboots,
                                        can_soft_reboot: true,
                                    };
                                    let memory = Memory {
                                        enforced: None,
                                        staging: None,
                                        last_reboot: last_reboot.clone(),
                                        failure: None,
                                    };
                                    let d = decide(&want(B, state, holds_slot), &h, &memory, now());
                                    let on_b = booted.as_ref().is_some_and(|s| s.image_digest == B);
                                    let happened = boot_id != "boot-1" || soft_reboots > 0;
                                    let rebooted_for_b = happened
                                        && last_reboot.as_ref().is_some_and(|r| r.digest == B);
                                    if rebooted_for_b && !on_b {
                                        refused_second += 1;
                                        assert!(
                                            !matches!(d.action, HostAction::Reboot { .. }),
                                            "{h:?} {memory:?}"
                                        );
                                    }
                                    if matches!(d.action, HostAction::Reboot { .. }) {
                                        approved += 1;
                                        assert!(
                                            state == Booted && holds_slot,
                                            "reboot without approval: {h:?}"
                                        );
                                    }
                                    // A recent record whose reboot has not happened, beside
                                    // an unlocked deployment: that reboot may be under way.
                                    let under_way = last_reboot.as_ref().is_some_and(|r| {
                                        r.digest == B
                                            && !happened
                                            && now() - r.time < chrono::TimeDelta::minutes(10)
                                    });
                                    if under_way {
                                        under_way_seen += 1;
                                        assert!(
                                            !matches!(
                                                d.action,
                                                HostAction::Reboot {
                                                    unlock: Unlock::AlreadyUnlocked,
                                                    ..
                                                }
                                            ),
                                            "a second request: {h:?} {memory:?}"
                                        );
                                    }
                                    if on_b {
                                        idle += 1;
                                        assert_eq!(
                                            (d.phase, &d.action),
                                            (Phase::Idle, &HostAction::Wait)
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for (what, n) in [
        ("no second reboot after one happened", refused_second),
        ("reboots, each approved", approved),
        ("no second request while one is under way", under_way_seen),
        ("on the target: idle", idle),
    ] {
        assert!(n > 0, "{what}: never put to the test");
    }
}

#[test]
fn a_reboot_record_happened_once_the_boot_changed_or_a_soft_reboot_came() {
    let r = record(B, "boot-1", 2, 1);
    for (boot_id, soft_reboots, happened) in [
        ("boot-1", 2, false),
        ("boot-1", 1, false),
        ("boot-1", 3, true),
        ("boot-2", 2, true),
        ("boot-2", 0, true),
    ] {
        let h = HostFacts {
            booted: None,
            staged: None,
            rollback: None,
            rollback_queued: false,
            boot_id: boot_id.into(),
            soft_reboots,
            can_soft_reboot: true,
        };
        assert_eq!(r.happened(&h), happened, "{boot_id} {soft_reboots}");
    }
}

#[test]
fn a_deployment_switch_left_unlocked_is_still_staging_while_the_agent_stages() {
    // bootc without `switch --download-only`: `switch` has staged B unlocked, and the
    // agent's `upgrade --download-only` has not locked it yet.
    let half = staged_on_a(unlocked(B));
    let staging = Memory {
        enforced: None,
        staging: Some(pin(B)),
        ..Memory::default()
    };
    for (state, holds_slot) in [(Staged, false), (Booted, false), (Booted, true)] {
        let d = decide(&want(B, state, holds_slot), &half, &staging, now());
        assert_eq!(
            (d.phase, d.action, d.degraded),
            (Phase::Staging, stage(), None),
            "{state:?} {holds_slot}: keep staging, report no Staged, do not reboot"
        );
    }
    // Once locked, it is staged.
    let locked = staged_on_a(slot(B));
    let d = decide(&want(B, Staged, false), &locked, &staging, now());
    assert_eq!(d.phase, Phase::Staged);
    // Staging another image: the unlocked B is not ours to wait for; unapproved, it is
    // locked.
    let other = Memory {
        enforced: None,
        staging: Some(pin(C)),
        ..Memory::default()
    };
    let d = decide(&want(B, Staged, false), &half, &other, now());
    assert_eq!((d.phase, d.action), (Phase::Staging, lock()));
    // No staging running (an unlocked deployment bootc staged on its own, or one left
    // by a `switch` whose agent or host went away): without an approval an unplanned
    // reboot would apply it, so it is locked (`upgrade --download-only`, never a second
    // `switch --download-only`, which bootc answers "Image specification is unchanged"
    // and leaves unlocked: bootc #2425), after a failure's backoff; with an approval,
    // the reboot goes into it as is.
    for (state, holds_slot) in [(Staged, false), (Booted, false)] {
        let d = decide(
            &want(B, state, holds_slot),
            &half,
            &Memory::default(),
            now(),
        );
        assert_eq!((d.phase, &d.action), (Phase::Staging, &lock()), "{state:?}");
    }
    let failed = Memory {
        enforced: None,
        failure: Some(Failure {
            image: pin(B),
            message: "`bootc upgrade --download-only` failed (exit status 219)".into(),
            attempts: 1,
            at: now(),
            reason: None,
        }),
        ..Memory::default()
    };
    let d = decide(&want(B, Staged, false), &half, &failed, now());
    assert_eq!((d.phase, &d.action), (Phase::Staging, &HostAction::Wait));
    assert!(d.degraded.is_some() && d.retry_after.is_some(), "{d:?}");
    let later = now() + chrono::TimeDelta::seconds(11);
    let d = decide(&want(B, Staged, false), &half, &failed, later);
    assert_eq!((d.phase, &d.action), (Phase::Staging, &lock()));
    let d = decide(&want(B, Booted, true), &half, &Memory::default(), now());
    assert!(matches!(
        d.action,
        HostAction::Reboot {
            unlock: Unlock::AlreadyUnlocked,
            ..
        }
    ));
}

#[test]
fn a_refused_pull_reads_as_registry_auth_failed_with_bootcs_own_words() {
    // As bootc 1.16.9 failed against a registry with htpasswd auth and a wrong password,
    // through the agent's fallback unit.
    let real = "`/usr/bin/bootc switch 127.0.0.1:38689/node@sha256:490d`, then \
                `/usr/bin/bootc upgrade --download-only` failed (job failed, result \
                exit-code, exit status 1): error: Switching: Switching (ostree): Preparing \
                import: Fetching manifest: failed to invoke method OpenImage: reading \
                manifest sha256:490d in 127.0.0.1:38689/node: unauthorized: \
                authentication required";
    let (reason, message) = crate::machine::failure_condition(real);
    assert_eq!(reason, node_degraded::REGISTRY_AUTH_FAILED);
    assert!(!message.contains("exit status"), "{message}");
    assert!(
        message.ends_with(
            "error: Switching: Switching (ostree): Preparing import: Fetching manifest: \
             failed to invoke method OpenImage: reading manifest sha256:490d in \
             127.0.0.1:38689/node: unauthorized: authentication required"
        ),
        "{message}"
    );
    // Anything else stays `Error`, whole.
    let other = "`/usr/bin/bootc switch x` failed (exit status 1): error: Switching: boom";
    assert_eq!(
        crate::machine::failure_condition(other),
        (node_degraded::ERROR, other.to_owned())
    );
}

#[test]
fn a_failure_is_over_once_the_host_shows_the_image_staged_locked_or_booted() {
    let memory = Memory {
        enforced: None,
        staging: None,
        last_reboot: None,
        failure: Some(Failure {
            image: pin(B),
            message: "error: pulling image: 401 Unauthorized".into(),
            attempts: 1,
            at: now(),
            reason: None,
        }),
    };
    // Staged unlocked (a `switch` without the lock yet): still the failure.
    let mut h = host(A);
    h.staged = Some(unlocked(B));
    assert!(
        decide(&want(B, Staged, false), &h, &memory, now())
            .degraded
            .is_some()
    );
    // Staged and locked: over, whatever the memory says.
    h.staged = Some(slot(B));
    let d = decide(&want(B, Staged, false), &h, &memory, now());
    assert_eq!((d.phase, d.degraded), (Phase::Staged, None));
    // Booted: over.
    let d = decide(&want(B, Booted, false), &host(B), &memory, now());
    assert_eq!(d.degraded, None);
}

#[test]
fn a_refusal_of_the_signature_policy_reads_as_such_with_bootcs_own_words() {
    // As bootc 1.16.9 refused on a node whose policy accepts anything by default,
    // through the agent's fallback unit.
    let real = "`/usr/bin/bootc switch --enforce-container-sigpolicy \
                127.0.0.1:35735/node@sha256:4f1c`, then `/usr/bin/bootc upgrade \
                --download-only` failed (job failed, result exit-code, exit status 1): \
                error: Switching: Switching (ostree): Preparing import: Fetching manifest: \
                containers-policy.json specifies a default of `insecureAcceptAnything`; \
                refusing usage";
    assert_eq!(
        crate::machine::failure_condition(real),
        (node_degraded::SIGNATURE_POLICY_REJECTED, real.to_owned())
    );
    for words in [
        "error: Switching: Switching (ostree): Preparing import: Fetching manifest: \
         Resolving containers policy path: No containers policy.json found; checked \
         $CONTAINERS_POLICY_JSON, user config dir, and system paths",
        "error: Creating importer: Failed to invoke skopeo proxy method OpenImage: remote \
         error: Running image docker://q.io/os@sha256:4f1c is rejected by policy.",
        "error: Fetching manifest: A signature was required, but no signature exists",
        "error: remote error: cryptographic signature verification failed: invalid signature",
    ] {
        assert_eq!(
            crate::machine::failure_condition(words).0,
            node_degraded::SIGNATURE_POLICY_REJECTED,
            "{words}"
        );
    }
    // Other failures keep their reasons.
    assert_eq!(
        crate::machine::failure_condition("error: pulling image: manifest unknown").0,
        node_degraded::IMAGE_NOT_FOUND
    );
}

fn enforced(digest: &str, state: DesiredImageState, holds_slot: bool) -> Desired {
    Desired {
        signature_policy: SignaturePolicy::Enforce,
        ..want(digest, state, holds_slot)
    }
}

fn stage_enforced() -> HostAction {
    HostAction::Stage {
        image: pin(B),
        policy: SignaturePolicy::Enforce,
    }
}

#[test]
fn enforce_stages_under_the_policy_and_never_boots_what_was_staged_without_it() {
    let none = Memory::default();
    // Nothing staged: stage, with the policy.
    let d = decide(&enforced(B, Staged, false), &host(A), &none, now());
    assert_eq!((d.phase, &d.action), (Phase::Staging, &stage_enforced()));

    // B staged without the check (before the pool asked for it): staged again under it,
    // even with a reboot approved.
    let unchecked = staged_on_a(slot(B));
    for desired in [enforced(B, Staged, false), enforced(B, Booted, true)] {
        let d = decide(&desired, &unchecked, &none, now());
        assert_eq!((d.phase, &d.action), (Phase::Staging, &stage_enforced()));
    }
    // Without Enforce the same deployment is staged as asked.
    let d = decide(&want(B, Staged, false), &unchecked, &none, now());
    assert_eq!((d.phase, &d.action), (Phase::Staged, &HostAction::Wait));

    // Staged under the policy (bootc shows `signature: containerPolicy`): staged, and
    // booted once approved.
    let checked = HostFacts {
        staged: Some(Slot {
            policy_checked: true,
            ..slot(B)
        }),
        ..host(A)
    };
    let d = decide(&enforced(B, Staged, false), &checked, &none, now());
    assert_eq!((d.phase, &d.action), (Phase::Staged, &HostAction::Wait));
    let d = decide(&enforced(B, Booted, true), &checked, &none, now());
    assert!(
        matches!(
            d.action,
            HostAction::Reboot {
                unlock: Unlock::FromDownloaded,
                ..
            }
        ),
        "{d:?}"
    );

    // The agent's own successful staging under the policy counts too, so a bootc that
    // does not show the signature is not asked again and again.
    let mine = Memory {
        enforced: Some(pin(B)),
        ..Memory::default()
    };
    let d = decide(&enforced(B, Staged, false), &unchecked, &mine, now());
    assert_eq!((d.phase, &d.action), (Phase::Staged, &HostAction::Wait));
    let other = Memory {
        enforced: Some(pin(C)),
        ..Memory::default()
    };
    let d = decide(&enforced(B, Staged, false), &unchecked, &other, now());
    assert_eq!(d.action, stage_enforced());
}

#[test]
fn a_deployment_staged_unlocked_by_hand_is_locked_and_staged_only_once_locked() {
    // bootc #2425: a hand-made `bootc switch` staged B unlocked; nothing approves a
    // reboot. The agent locks it and never asks bootc to stage it again.
    let unlocked = staged_on_a(unlocked(B));
    for state in [Staged, Booted] {
        let d = decide(&want(B, state, false), &unlocked, &Memory::default(), now());
        assert_eq!(
            (d.phase, &d.action, &d.degraded),
            (Phase::Staging, &lock(), &None),
            "{state:?}"
        );
    }
    // The lock did not take (the status after it still shows B unlocked): Degraded
    // with the agent's own reason, no action until the backoff ends, then lock again.
    let memory = Memory {
        failure: Some(Failure {
            image: pin(B),
            message: "locking of B succeeded, but bootc status shows it staged unlocked".into(),
            attempts: 1,
            at: now(),
            reason: Some(node_degraded::STAGING_NOT_LOCKED),
        }),
        ..Memory::default()
    };
    let d = decide(&want(B, Staged, false), &unlocked, &memory, now());
    assert_eq!((d.phase, &d.action), (Phase::Staging, &HostAction::Wait));
    assert_eq!(
        d.degraded.as_ref().map(|(r, _)| *r),
        Some(node_degraded::STAGING_NOT_LOCKED)
    );
    assert!(d.retry_after.is_some());
    let later = now() + chrono::TimeDelta::seconds(11);
    let d = decide(&want(B, Staged, false), &unlocked, &memory, later);
    assert_eq!((d.phase, &d.action), (Phase::Staging, &lock()));
    // Locked: Staged, healthy.
    let locked = staged_on_a(slot(B));
    let d = decide(&want(B, Staged, false), &locked, &memory, later);
    assert_eq!(
        (d.phase, d.action, d.degraded),
        (Phase::Staged, HostAction::Wait, None)
    );
}

/// A failed staging as the agent reports it: its account of the unit, then bootc's stderr.
fn failed_staging(stderr: &str) -> String {
    format!(
        "`/usr/bin/bootc switch 127.0.0.1:38689/node@sha256:490d`, then `/usr/bin/bootc \
         upgrade --download-only` failed (job failed, result exit-code, exit status 1): {stderr}"
    )
}

#[test]
fn a_failed_staging_is_named_by_its_cause_in_bootcs_words() {
    let cases = [
        // bootc 1.16.9 on a real node whose ostree free-space floor is above what its
        // disk has: bootc's own check before it pulls, counting the floor.
        (
            "error: Switching: Switching (ostree): Insufficient free space for \
             127.0.0.1:38639/node@sha256:4f1cb404cde8 (available: 0 bytes required: 322 bytes)",
            node_degraded::INSUFFICIENT_SPACE,
        ),
        // ostree's own refusal to write below its floor.
        (
            "error: Switching: Pulling: Importing: min-free-space-size 256MB would be \
             exceeded, at least 156.6 MB requested",
            node_degraded::INSUFFICIENT_SPACE,
        ),
        (
            "error: Upgrading: Writing content object: min-free-space-percent '3%' would be \
             exceeded, at least 13 bytes requested",
            node_degraded::INSUFFICIENT_SPACE,
        ),
        (
            "error: Switching: Importing: writing object: No space left on device (os error 28)",
            node_degraded::INSUFFICIENT_SPACE,
        ),
        // containers-image through bootc: no such digest, no such repository.
        (
            "error: Switching: Switching (ostree): Preparing import: Fetching manifest: failed \
             to invoke method OpenImage: reading manifest sha256:490d in 127.0.0.1:38689/node: \
             manifest unknown",
            node_degraded::IMAGE_NOT_FOUND,
        ),
        (
            "error: Fetching manifest: failed to invoke method OpenImage: reading manifest \
             sha256:490d in 127.0.0.1:38689/nothing: name unknown: repository name not known \
             to registry",
            node_degraded::IMAGE_NOT_FOUND,
        ),
        // The stand-in's words for the same.
        (
            "error: pulling image 127.0.0.1:38689/node@sha256:490d: manifest_unknown: manifest \
             unknown (HTTP 404 Not Found)",
            node_degraded::IMAGE_NOT_FOUND,
        ),
        // Go's net errors through containers-image: refused, no DNS, timeout.
        (
            "error: Fetching manifest: failed to invoke method OpenImage: pinging container \
             registry 127.0.0.1:1: Get \"https://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: \
             connect: connection refused",
            node_degraded::REGISTRY_UNREACHABLE,
        ),
        (
            "error: Fetching manifest: failed to invoke method OpenImage: pinging container \
             registry registry.invalid: Get \"https://registry.invalid/v2/\": dial tcp: lookup \
             registry.invalid on 10.0.0.10:53: no such host",
            node_degraded::REGISTRY_UNREACHABLE,
        ),
        (
            "error: Fetching manifest: failed to invoke method OpenImage: pinging container \
             registry 10.9.9.9:5000: Get \"https://10.9.9.9:5000/v2/\": dial tcp \
             10.9.9.9:5000: i/o timeout",
            node_degraded::REGISTRY_UNREACHABLE,
        ),
        (
            "error: Fetching manifest: reading manifest sha256:490d in 127.0.0.1:38689/node: \
             unauthorized: authentication required",
            node_degraded::REGISTRY_AUTH_FAILED,
        ),
    ];
    for (stderr, expected) in cases {
        let (reason, message) = crate::machine::failure_condition(&failed_staging(stderr));
        assert_eq!(reason, expected, "{stderr}");
        assert!(message.ends_with(stderr), "bootc's own line: {message}");
        assert!(!message.contains("exit status"), "{message}");
    }
}
