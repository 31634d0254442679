//! The workspace's `rust-version` is the newest any dependency declares: an older one
//! would promise a toolchain the build cannot use, a newer one would ask for more than is
//! needed. Read from `cargo metadata`.

use std::path::Path;
use std::process::Command;

/// A `major.minor[.patch]` version as numbers (patch 0 when absent).
fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The newest `rust_version` among the packages of `metadata` that are not workspace
/// members, with the package that declares it; and the workspace's own.
pub fn newest_needed(
    metadata: &serde_json::Value,
) -> Result<(Option<(String, String)>, String), String> {
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .ok_or("no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut own = None;
    let mut newest: Option<((u64, u64, u64), String, String)> = None;
    for package in metadata["packages"].as_array().ok_or("no packages")? {
        let Some(declared) = package["rust_version"].as_str() else {
            continue;
        };
        let id = package["id"].as_str().unwrap_or_default();
        if members.contains(&id) {
            own = Some(declared.to_owned());
            continue;
        }
        let Some(v) = parse(declared) else { continue };
        if newest.as_ref().is_none_or(|(n, ..)| v > *n) {
            let name = package["name"].as_str().unwrap_or_default().to_owned();
            newest = Some((v, name, declared.to_owned()));
        }
    }
    let own = own.ok_or("the workspace declares no rust-version")?;
    Ok((newest.map(|(_, name, v)| (name, v)), own))
}

/// Fails unless the workspace's `rust-version` equals the newest a dependency needs.
pub fn check(root: &Path) -> Result<(), String> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let (newest, own) = newest_needed(&metadata)?;
    let Some((name, needed)) = newest else {
        return Ok(());
    };
    if parse(&own).map(|(a, b, _)| (a, b)) == parse(&needed).map(|(a, b, _)| (a, b)) {
        Ok(())
    } else {
        Err(format!(
            "rust-version is {own} in Cargo.toml, but the newest a dependency needs is {needed} ({name}): set it to {needed}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_dependency_version_is_found_and_members_are_ours() {
        let metadata = json!({
            "workspace_members": ["ours 0.1.0"],
            "packages": [
                {"id": "ours 0.1.0", "name": "ours", "rust_version": "1.80"},
                {"id": "a 1", "name": "a", "rust_version": "1.89.0"},
                {"id": "b 1", "name": "b", "rust_version": "1.9"},
                {"id": "c 1", "name": "c", "rust_version": null},
            ],
        });
        let (newest, own) = newest_needed(&metadata).unwrap();
        assert_eq!(newest, Some(("a".to_owned(), "1.89.0".to_owned())));
        assert_eq!(own, "1.80");
    }
}
