//! What the host must show after the agent staged or locked the desired image, and
//! right before it unlocks it: checks on `bootc status` that do not trust a command's
//! exit status alone (bootc answers some requests it does not carry out with exit 0,
//! e.g. `switch --download-only` of an image already staged unlocked: bootc issue
//! #2425).

use bootc_crds::image_ref::Digest;

use super::Slot;

/// How a slot reads in a message: its image and digest, or "nothing".
fn shown(slot: Option<&Slot>) -> String {
    slot.map_or_else(
        || "nothing".to_owned(),
        |s| format!("{} ({})", s.image, s.image_digest),
    )
}

/// After `what` (the staging or locking of `image`, whose digest is `target`) succeeded:
/// `Ok` when the staged deployment is `target` and locked (`downloadOnly`), else the
/// message of `Degraded/StagingNotLocked`, saying what the status showed.
pub fn check_locked(
    staged: Option<&Slot>,
    image: &str,
    target: &Digest,
    what: &str,
) -> Result<(), String> {
    match staged {
        Some(s) if s.is(target) && s.download_only => Ok(()),
        Some(s) if s.is(target) => Err(format!(
            "{what} of {image} succeeded, but bootc status shows it staged unlocked \
             (downloadOnly false): an unplanned reboot would apply it; will lock it again"
        )),
        other => Err(format!(
            "{what} of {image} succeeded, but bootc status shows {} staged instead",
            shown(other)
        )),
    }
}

/// Right before the staged deployment is unlocked (`upgrade --from-downloaded`): `Ok`
/// when it is still `target`, else the message of `Degraded/StagingNotLocked` (nothing
/// is unlocked, no reboot).
pub fn check_unlockable(staged: Option<&Slot>, image: &str, target: &Digest) -> Result<(), String> {
    match staged {
        Some(s) if s.is(target) => Ok(()),
        other => Err(format!(
            "right before unlocking {image}, bootc status shows {} staged instead; \
             nothing was unlocked and the host was not rebooted",
            shown(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn slot(digest: &str, locked: bool) -> Slot {
        Slot {
            image: format!("quay.io/example/os@{digest}"),
            image_digest: digest.to_owned(),
            download_only: locked,
            ..Slot::default()
        }
    }

    fn target(digest: &str) -> Digest {
        digest.parse().unwrap()
    }

    #[test]
    fn only_the_desired_image_staged_and_locked_passes_after_staging() {
        let image = format!("quay.io/example/os@{A}");
        let t = target(A);
        check_locked(Some(&slot(A, true)), &image, &t, "locking").unwrap();
        let unlocked = check_locked(Some(&slot(A, false)), &image, &t, "locking").unwrap_err();
        assert!(
            unlocked.contains("staged unlocked (downloadOnly false)"),
            "{unlocked}"
        );
        let other = check_locked(Some(&slot(B, true)), &image, &t, "staging").unwrap_err();
        assert!(other.contains(B) && other.contains("instead"), "{other}");
        let none = check_locked(None, &image, &t, "staging").unwrap_err();
        assert!(none.contains("shows nothing staged"), "{none}");
    }

    #[test]
    fn unlocking_needs_the_desired_digest_still_staged() {
        let image = format!("quay.io/example/os@{A}");
        let t = target(A);
        check_unlockable(Some(&slot(A, true)), &image, &t).unwrap();
        let other = check_unlockable(Some(&slot(B, true)), &image, &t).unwrap_err();
        assert!(
            other.contains(B) && other.contains("nothing was unlocked"),
            "{other}"
        );
        assert!(check_unlockable(None, &image, &t).is_err());
    }
}
