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
    reference
        .rsplit_once('@')
        .map(|(_, digest)| digest)
        .filter(|digest| is_digest(digest))
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
    target.is(image_digest)
        || reference
            .rsplit_once('@')
            .is_some_and(|(_, digest)| target.is(digest))
}
