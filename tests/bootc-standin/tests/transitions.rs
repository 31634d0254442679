//! The stand-in's state transitions, in-process: what bootc does on switch, upgrade,
//! rollback and at boot, and that the status document is bootc's in every state.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_standin::{Error, Outcome, State};
use common::{FakeResolver, check_status, digest, info};
use serde_json::Value;

const A: &str = "127.0.0.1:5000/os:a";
const B: &str = "127.0.0.1:5000/os:b";
const C: &str = "127.0.0.1:5000/os:c";

fn resolver() -> FakeResolver {
    FakeResolver::default()
        .with(info(A, 'a', "1", Some("6.1")))
        .with(info(B, 'b', "2", Some("6.1")))
        .with(info(C, 'c', "3", Some("6.12")))
}

/// What a state looks like, slot by slot: (image, locked) of staged, booted image,
/// rollback image, rollbackQueued.
type Shape<'a> = (Option<(&'a str, bool)>, &'a str, Option<&'a str>, bool);

fn shape(st: &State) -> Shape<'_> {
    (
        st.staged
            .as_ref()
            .map(|d| (d.info.image.as_str(), d.locked)),
        st.booted.as_ref().map(|d| d.info.image.as_str()).unwrap(),
        st.rollback.as_ref().map(|d| d.info.image.as_str()),
        st.rollback_queued,
    )
}

/// Checks the status document of `st` (schema + agent parser) and that it says what the
/// state says.
fn check(st: &State) -> Value {
    let doc = st.status();
    let host = check_status(&doc);
    let (booted, staged, rollback) = host.report();
    let booted = booted.unwrap();
    assert_eq!(
        booted.image.image_digest,
        st.booted.as_ref().unwrap().info.digest
    );
    assert!(booted.image.timestamp.is_some(), "timestamp must parse");
    assert_eq!(
        staged
            .as_ref()
            .map(|s| (s.image.image_digest.clone(), s.download_only)),
        st.staged
            .as_ref()
            .map(|d| (d.info.digest.clone(), d.locked))
    );
    assert_eq!(
        rollback.map(|r| r.image_digest),
        st.rollback.as_ref().map(|d| d.info.digest.clone())
    );
    assert_eq!(host.status.rollback_queued, st.rollback_queued);
    assert_eq!(
        host.spec.image.as_ref().map(|i| i.image.as_str()),
        st.spec_image()
    );
    assert_eq!(doc["status"]["type"], "bootcHost");
    assert_eq!(
        doc["spec"]["bootOrder"],
        if st.rollback_queued {
            "rollback"
        } else {
            "default"
        }
    );
    doc
}

#[test]
fn transition_table() {
    let r = resolver();
    let mut st = State::new(info(A, 'a', "1", Some("6.1")));
    check(&st);
    assert_eq!(shape(&st), (None, A, None, false));

    // switch → staged, unlocked; boot → applied.
    let out = st.switch_with(&r, B, false).unwrap();
    assert!(matches!(out, Outcome::Staged { locked: false, .. }));
    check(&st);
    assert_eq!(shape(&st), (Some((B, false)), A, None, false));
    assert_eq!(st.finalize_boot(), Outcome::AppliedStaged);
    check(&st);
    assert_eq!(shape(&st), (None, B, Some(A), false));

    // switch --download-only → locked; boot → discarded.
    st.switch_with(&r, C, true).unwrap();
    check(&st);
    assert_eq!(shape(&st), (Some((C, true)), B, Some(A), false));
    assert_eq!(st.finalize_boot(), Outcome::DiscardedLocked);
    check(&st);
    assert_eq!(shape(&st), (None, B, Some(A), false));

    // Old bootc path: switch, then upgrade --download-only locks it.
    st.switch_with(&r, C, false).unwrap();
    let out = st.upgrade_with(&r, true).unwrap();
    assert!(
        matches!(out, Outcome::Staged { locked: true, .. }),
        "{out:?}"
    );
    check(&st);
    assert_eq!(shape(&st), (Some((C, true)), B, Some(A), false));
    // Again: already staged.
    assert_eq!(st.upgrade_with(&r, true).unwrap(), Outcome::AlreadyStaged);

    // --from-downloaded unlocks; boot applies.
    assert_eq!(st.from_downloaded().unwrap(), Outcome::Unlocked);
    check(&st);
    assert_eq!(shape(&st), (Some((C, false)), B, Some(A), false));
    assert_eq!(st.finalize_boot(), Outcome::AppliedStaged);
    check(&st);
    assert_eq!(shape(&st), (None, C, Some(B), false));

    // rollback queues; boot swaps.
    assert_eq!(st.rollback().unwrap(), Outcome::RollbackQueued);
    check(&st);
    assert_eq!(shape(&st), (None, C, Some(B), true));
    assert_eq!(st.finalize_boot(), Outcome::AppliedRollback);
    check(&st);
    assert_eq!(shape(&st), (None, B, Some(C), false));

    // rollback twice toggles back.
    assert_eq!(st.rollback().unwrap(), Outcome::RollbackQueued);
    assert_eq!(st.rollback().unwrap(), Outcome::RollbackUnqueued);
    check(&st);
    assert_eq!(st.finalize_boot(), Outcome::Nothing);
    assert_eq!(shape(&st), (None, B, Some(C), false));

    // rollback discards a staged deployment.
    st.switch_with(&r, A, true).unwrap();
    assert_eq!(st.rollback().unwrap(), Outcome::RollbackQueued);
    check(&st);
    assert_eq!(shape(&st), (None, B, Some(C), true));
    // Staging again un-queues the rollback.
    st.switch_with(&r, A, false).unwrap();
    check(&st);
    assert_eq!(shape(&st), (Some((A, false)), B, Some(C), false));
}

#[test]
fn errors_when_nothing_to_act_on() {
    let mut st = State::new(info(A, 'a', "1", None));
    assert!(matches!(st.from_downloaded(), Err(Error::NoStaged)));
    assert!(matches!(st.rollback(), Err(Error::NoRollback)));
    assert_eq!(st, State::new(info(A, 'a', "1", None)));
    let mut empty = State::default();
    check_status(&empty.status());
    assert!(matches!(
        empty.switch_with(&resolver(), B, false),
        Err(Error::NotBootcHost)
    ));
    assert!(matches!(empty.rollback(), Err(Error::NotBootcHost)));
    assert_eq!(empty.finalize_boot(), Outcome::Nothing);
    // A failed pull changes nothing.
    let r = resolver();
    let before = st.clone();
    assert!(matches!(
        st.switch_with(&r, "127.0.0.1:5000/os:missing", true),
        Err(Error::Pull { .. })
    ));
    assert_eq!(st, before);
}

#[test]
fn switch_to_the_tracked_image_pulls_nothing() {
    let r = resolver();
    let mut st = State::new(info(A, 'a', "1", None));
    assert_eq!(st.switch_with(&r, A, true).unwrap(), Outcome::SpecUnchanged);
    assert_eq!(r.calls.get(), 0);
    st.switch_with(&r, B, true).unwrap();
    assert_eq!(
        st.switch_with(&r, B, false).unwrap(),
        Outcome::SpecUnchanged
    );
    assert_eq!(r.calls.get(), 1);
    assert!(st.staged.as_ref().unwrap().locked);
}

#[test]
fn upgrade_follows_the_tag() {
    let mut r = resolver();
    let mut st = State::new(info(A, 'a', "1", None));
    assert_eq!(st.upgrade_with(&r, false).unwrap(), Outcome::NoUpdate);
    assert_eq!(st.check_with(&r).unwrap(), None);
    // The tag moves.
    r.images.insert(A.to_owned(), info(A, 'd', "1.1", None));
    assert_eq!(st.check_with(&r).unwrap().unwrap().digest, digest('d'));
    let out = st.upgrade_with(&r, true).unwrap();
    assert!(matches!(out, Outcome::Staged { locked: true, .. }));
    let doc = check(&st);
    assert_eq!(doc["status"]["staged"]["image"]["imageDigest"], digest('d'));
    assert_eq!(doc["status"]["staged"]["image"]["image"]["image"], A);
    assert_eq!(doc["status"]["staged"]["image"]["version"], "1.1");
    assert_eq!(st.check_with(&r).unwrap(), None);
    // Plain upgrade of the same digest unlocks it.
    let out = st.upgrade_with(&r, false).unwrap();
    assert!(matches!(out, Outcome::Staged { locked: false, .. }));
}

#[test]
fn soft_reboot_capable_follows_the_kernel_label() {
    let r = FakeResolver::default()
        .with(info(A, 'a', "1", Some("6.1")))
        .with(info(B, 'b', "2", Some("6.1")))
        .with(info(C, 'c', "3", Some("6.12")));
    let mut st = State::new(info(A, 'a', "1", Some("6.1")));
    st.switch_with(&r, B, false).unwrap();
    let host = check_status(&st.status());
    assert!(host.soft_reboot_capable_staged());
    assert_eq!(st.status()["status"]["booted"]["softRebootCapable"], false);
    st.switch_with(&r, C, true).unwrap();
    let host = check_status(&st.status());
    assert!(!host.soft_reboot_capable_staged());
    assert!(host.staged_download_only());

    // Rollback entry: capable only when queued and same kernel.
    st.finalize_boot(); // discards locked C
    st.switch_with(&r, B, false).unwrap();
    st.finalize_boot(); // booted B (6.1), rollback A (6.1)
    assert_eq!(
        st.status()["status"]["rollback"]["softRebootCapable"],
        false
    );
    st.rollback().unwrap();
    assert_eq!(st.status()["status"]["rollback"]["softRebootCapable"], true);

    // Both absent counts as equal.
    let r = FakeResolver::default()
        .with(info(A, 'a', "1", None))
        .with(info(B, 'b', "2", None));
    let mut st = State::new(info(A, 'a', "1", None));
    st.switch_with(&r, B, false).unwrap();
    assert!(check_status(&st.status()).soft_reboot_capable_staged());
}

#[test]
fn status_shape_matches_bootc() {
    let r = resolver();
    let mut st = State::new(info(A, 'a', "1", Some("6.1")));
    st.switch_with(&r, B, true).unwrap();
    let doc = check(&st);
    assert_eq!(doc["apiVersion"], "org.containers.bootc/v1");
    assert_eq!(doc["kind"], "BootcHost");
    assert_eq!(doc["metadata"]["name"], "host");
    assert_eq!(doc["spec"]["image"]["image"], B);
    assert_eq!(doc["spec"]["image"]["transport"], "registry");
    let staged = &doc["status"]["staged"];
    assert_eq!(staged["downloadOnly"], true);
    assert_eq!(staged["store"], "ostreeContainer");
    assert_eq!(staged["cachedUpdate"], Value::Null);
    assert_eq!(staged["incompatible"], false);
    assert_eq!(staged["pinned"], false);
    assert_eq!(staged["ostree"]["stateroot"], "default");
    assert_eq!(staged["ostree"]["checksum"], "b".repeat(64));
    assert_eq!(staged["image"]["architecture"], "amd64");
    assert_eq!(
        staged["image"]["timestamp"],
        "2026-01-02T03:04:05.123456789Z"
    );
    assert_eq!(doc["status"]["booted"]["downloadOnly"], false);
    assert_eq!(doc["status"]["rollback"], Value::Null);
    // Keys bootc 1.16.9 prints even when they are null or false.
    assert_eq!(staged.get("composefs"), Some(&Value::Null));
    assert_eq!(doc["status"].get("usrOverlay"), Some(&Value::Null));
    assert_eq!(doc["status"].get("readOnly"), Some(&Value::Bool(false)));

    // The same commit deployed again gets the next serial.
    let digest_ref = format!("127.0.0.1:5000/os@{}", digest('a'));
    let r = r.with(info(&digest_ref, 'a', "1", Some("6.1")));
    st.switch_with(&r, &digest_ref, false).unwrap();
    let doc = check(&st);
    assert_eq!(doc["status"]["staged"]["ostree"]["deploySerial"], 1);
    assert_eq!(
        doc["status"]["staged"]["image"]["image"]["image"],
        digest_ref
    );
}

#[test]
fn state_round_trips_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver();
    assert!(State::load_optional(dir.path()).unwrap().is_none());
    assert!(matches!(State::load(dir.path()), Err(Error::NotSeeded(_))));
    bootc_standin::seed(dir.path(), info(A, 'a', "1", None)).unwrap();
    let mut st = State::load(dir.path()).unwrap();
    st.switch_with(&r, B, true).unwrap();
    st.save(dir.path()).unwrap();
    assert_eq!(State::load(dir.path()).unwrap(), st);
    // No temporary files left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "lock")
        .collect();
    assert_eq!(names, vec!["state.json".to_owned()]);
}

/// As ostree allocates serials: a locked deployment discarded at boot leaves its
/// directory, so the same image staged again gets the next serial (bootc 1.16.9 shows
/// `deploySerial: 1` there), which it keeps once booted; the next deployment made
/// cleans the leftover up.
#[test]
fn a_discarded_locked_deployment_still_counts_for_the_next_serial() {
    let r = resolver();
    let serial = |d: &Option<bootc_standin::Deployment>| d.as_ref().unwrap().deploy_serial;
    let mut st = State::new(info(A, 'a', "1", Some("6.1")));
    st.switch_with(&r, B, false).unwrap();
    st.upgrade_with(&r, true).unwrap();
    assert_eq!(serial(&st.staged), 0);
    assert_eq!(st.finalize_boot(), Outcome::DiscardedLocked);
    assert_eq!(st.leftovers.len(), 1);
    st.switch_with(&r, B, false).unwrap();
    assert_eq!(serial(&st.staged), 1);
    assert!(st.leftovers.is_empty(), "cleaned up by the deployment");
    assert_eq!(check(&st)["status"]["staged"]["ostree"]["deploySerial"], 1);
    assert_eq!(st.finalize_boot(), Outcome::AppliedStaged);
    assert_eq!(serial(&st.booted), 1);
    // A deployment of another image after that starts at 0 again.
    st.switch_with(&r, C, false).unwrap();
    assert_eq!(serial(&st.staged), 0);
    // Kept on disk, and absent from state.json while empty.
    let dir = tempfile::tempdir().unwrap();
    st.save(dir.path()).unwrap();
    let text = std::fs::read_to_string(State::path(dir.path())).unwrap();
    assert!(!text.contains("leftovers"), "{text}");
    st.switch_with(&r, A, true).unwrap();
    st.finalize_boot();
    st.save(dir.path()).unwrap();
    assert_eq!(State::load(dir.path()).unwrap(), st);
    assert_eq!(st.leftovers.len(), 1);
}
