//! The registry on loopback and the images pushed to `os:stable`.

use test_registry::Registry;
use tokio::time::Instant;

use super::processes::Parts;
use super::{KERNEL_LABEL, VERSION_LABEL, step};

/// Starts the registry (kept in `parts`) and pushes v1 to `os:stable`; returns the
/// registry's `host:port` and v1's digest.
pub(super) fn start_with_v1(
    parts: &mut Parts,
    started: Instant,
) -> Result<(String, String), String> {
    let registry = Registry::start().map_err(|e| {
        format!("cannot start docker-registry (Debian package docker-registry): {e}")
    })?;
    let host = registry.host();
    let v1 = registry
        .push(
            "os",
            "stable",
            &[(VERSION_LABEL, "1.0"), (KERNEL_LABEL, "k1")],
        )
        .map_err(|e| format!("cannot build and push v1 (umoci, skopeo): {e}"))?;
    parts.registry = Some(registry);
    step(
        started,
        &format!("registry on {host}; v1 pushed to {host}/os:stable ({v1})"),
    );
    Ok((host, v1))
}

/// Pushes v2 to the same tag; returns its digest.
pub(super) fn push_v2(parts: &Parts, started: Instant) -> Result<String, String> {
    let registry = parts.registry.as_ref().ok_or("the registry is gone")?;
    let host = registry.host();
    let v2 = registry
        .push(
            "os",
            "stable",
            &[(VERSION_LABEL, "2.0"), (KERNEL_LABEL, "k2")],
        )
        .map_err(|e| format!("cannot build and push v2: {e}"))?;
    step(
        started,
        &format!(
            "v2 pushed to {host}/os:stable ({v2}); the controller picks it up within 30 s (its resolve interval)"
        ),
    );
    Ok(v2)
}
