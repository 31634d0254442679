//! A failed host command named by its cause: `Degraded`'s reason read from what bootc
//! (through ostree and containers-image) said, in their own words.

use bootc_crds::conditions::node_degraded;

/// What the registry answers, in bootc's words (through containers-image), when it refuses
/// the credentials or asks for some. Lowercase.
const AUTH_REFUSED: [&str; 3] = [
    "unauthorized: ",
    "authentication required",
    "401 unauthorized",
];

/// What bootc says, under `--enforce-container-sigpolicy`, when it refuses the host's
/// container signature policy (one that accepts anything by default, or none at all;
/// bootc 1.16.9's words), and what containers-image says when the policy refuses the
/// image (a `reject` scope, a signature missing or not verified). Lowercase.
const SIGNATURE_POLICY_REFUSED: [&str; 5] = [
    "containers-policy.json specifies a default of `insecureacceptanything`",
    "no containers policy.json found",
    "is rejected by policy",
    "a signature was required, but no signature exists",
    "signature verification failed",
];

/// Out of disk: bootc's own check before it pulls, which counts ostree's free-space floor
/// (1.14 and later; bootc 1.16.9: `Switching (ostree): Insufficient free space for IMAGE
/// (available: 0 bytes required: 322 bytes)`), ostree refusing to write below that floor
/// (`min-free-space-size 256MB would be exceeded, at least 12 kB requested`, or
/// `-percent`), and the kernel's `ENOSPC`. Lowercase.
const NO_SPACE: [&str; 4] = [
    "min-free-space-size",
    "min-free-space-percent",
    "insufficient free space",
    "no space left on device",
];

/// The registry has no such image: the distribution API's `MANIFEST_UNKNOWN` and
/// `NAME_UNKNOWN`, as containers-image prints them (`reading manifest sha256:… in
/// HOST/REPO: manifest unknown`), and a bare 404. Lowercase.
const NOT_FOUND: [&str; 5] = [
    "manifest unknown",
    "manifest_unknown",
    "name unknown",
    "name_unknown",
    "(http 404",
];

/// The registry cannot be reached: Go's `net` errors as containers-image passes them on
/// (`dial tcp HOST:PORT: connect: connection refused`, `lookup HOST: no such host`, `i/o
/// timeout`, …) and the same causes in Rust's words. Lowercase.
const UNREACHABLE: [&str; 9] = [
    "connection refused",
    "no such host",
    "i/o timeout",
    "network is unreachable",
    "no route to host",
    "tls handshake timeout",
    "temporary failure in name resolution",
    "server misbehaving",
    "connection reset by peer",
];

/// `Degraded`'s reason and message for a failed host command, by its cause (first match
/// wins): `SignaturePolicyRejected` with the whole message; `InsufficientSpace`,
/// `RegistryAuthFailed`, `ImageNotFound` and `RegistryUnreachable` with what it means and
/// bootc's own `error:` line; else `Error` with the whole message.
pub fn failure_condition(message: &str) -> (&'static str, String) {
    let lower = message.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if says(&SIGNATURE_POLICY_REFUSED) {
        return (node_degraded::SIGNATURE_POLICY_REJECTED, message.to_owned());
    }
    let (reason, meaning) = if says(&NO_SPACE) {
        (
            node_degraded::INSUFFICIENT_SPACE,
            "the host has too little free disk space to stage the image (free space under /sysroot)",
        )
    } else if says(&AUTH_REFUSED) {
        (
            node_degraded::REGISTRY_AUTH_FAILED,
            "the registry refused the pull credentials (check the pull Secret)",
        )
    } else if says(&NOT_FOUND) {
        (
            node_degraded::IMAGE_NOT_FOUND,
            "the registry has no such image (check the pool's image and that it was pushed)",
        )
    } else if says(&UNREACHABLE) {
        (
            node_degraded::REGISTRY_UNREACHABLE,
            "the registry cannot be reached from the node",
        )
    } else {
        return (node_degraded::ERROR, message.to_owned());
    };
    (reason, format!("{meaning}: {}", error_line(message)))
}

/// bootc's own `error:` line (without the agent's account of the unit that ran it), or
/// the first line of `message` when it has none.
fn error_line(message: &str) -> &str {
    message
        .find("error: ")
        .map_or(message, |at| &message[at..])
        .lines()
        .next()
        .unwrap_or(message)
}
