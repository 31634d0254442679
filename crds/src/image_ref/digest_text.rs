//! Finding and matching digests as text: what a host reports against a target, without
//! parsing whole references or allocating.

use super::{Digest, SHA256_HEX_LEN};

/// The digest inside an image reference (`repo@sha256:…`), if it carries one. A
/// reference that does not parse as a whole still gives the digest after its last `@`
/// (bootc may report references this grammar refuses, such as an `oci:` path).
pub fn digest_in(reference: &str) -> Option<Digest> {
    digest_text_in(reference).and_then(|digest| digest.parse::<Digest>().ok())
}

/// [`digest_in`] as the text it reads, without parsing or allocating: the digest after
/// the reference's last `@`, when it is one.
pub fn digest_text_in(reference: &str) -> Option<&str> {
    // A reference that parses has at most one `@`, its digest after it; one that does
    // not is read the same way. So the name needs no parsing.
    digest_tail(reference).filter(|digest| is_digest(digest))
}

/// The length of `sha256:` and its hex.
const DIGEST_TEXT_LEN: usize = "sha256:".len() + SHA256_HEX_LEN;

/// The text after the reference's last `@` when it is as long as a digest: a digest
/// has one length and no `@`, so it can only be the text after an `@` that many bytes
/// from the end, which is found without searching the reference for its last `@` (that
/// search was most of matching a host's image against a target).
fn digest_tail(reference: &str) -> Option<&str> {
    let at = reference.len().checked_sub(DIGEST_TEXT_LEN + 1)?;
    // `@` is one byte: the text after it starts on a character.
    (reference.as_bytes()[at] == b'@').then(|| &reference[at + 1..])
}

/// Whether `s` parses as a [`Digest`] (`sha256:` and 64 lowercase hex characters),
/// without allocating.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == SHA256_HEX_LEN && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The one matching rule between what a host runs and a target digest: the host runs
/// `target` when its per-architecture `image_digest` is `target`, or when the reference
/// it tracks carries `@target` (a manifest-list digest, whose per-architecture digest
/// differs). Controller and agent both decide "is this node on the target" by it.
pub fn runs_digest(reference: &str, image_digest: &str, target: &Digest) -> bool {
    target.is(image_digest) || digest_tail(reference).is_some_and(|digest| target.is(digest))
}
