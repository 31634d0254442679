//! The `bootc` binary against a real registry (test-registry): pulls by tag and by
//! digest, manifest lists, credentials from auth.json, and the errors of a registry that
//! says no (401, 404) or is down.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Host;
use serde_json::Value;
use test_registry::Registry;

const VERSION: &str = "org.opencontainers.image.version";
const KERNEL: &str = "dev.bootc-pool.sim.kernel";

/// A host seeded (through the hidden `internal-seed`) with `image`.
fn seeded(image: &str) -> Host {
    let host = Host::new();
    host.ok(&["internal-seed", image]);
    host
}

#[test]
fn switch_by_tag_and_by_digest_then_boot() {
    let reg = Registry::start().unwrap();
    let d1 = reg
        .push("os/node", "v1", &[(VERSION, "1.0"), (KERNEL, "6.1")])
        .unwrap();
    let d2 = reg
        .push("os/node", "v2", &[(VERSION, "2.0"), (KERNEL, "6.1")])
        .unwrap();
    let d3 = reg
        .push("os/node", "v3", &[(VERSION, "3.0"), (KERNEL, "6.12")])
        .unwrap();
    let host = seeded(&reg.image("os/node", "v1"));
    let (doc, _) = host.status();
    assert_eq!(doc["status"]["booted"]["image"]["imageDigest"], d1.as_str());
    assert_eq!(doc["status"]["booted"]["image"]["version"], "1.0");
    assert_eq!(
        doc["status"]["booted"]["image"]["architecture"],
        test_registry::host_architecture()
    );
    assert!(doc["status"]["booted"]["image"]["timestamp"].is_string());

    // By tag, download only.
    let v2 = reg.image("os/node", "v2");
    host.ok(&["switch", "--download-only", &v2]);
    let (doc, parsed) = host.status();
    assert_eq!(doc["spec"]["image"]["image"], v2.as_str());
    assert_eq!(doc["status"]["staged"]["image"]["imageDigest"], d2.as_str());
    assert_eq!(doc["status"]["staged"]["image"]["version"], "2.0");
    assert!(parsed.staged_download_only());
    assert!(parsed.soft_reboot_capable_staged(), "same kernel label");
    host.ok(&["upgrade", "--from-downloaded"]);
    host.ok(&["internal-finalize-boot"]);
    let (doc, _) = host.status();
    assert_eq!(doc["status"]["booted"]["image"]["imageDigest"], d2.as_str());
    assert_eq!(
        doc["status"]["rollback"]["image"]["imageDigest"],
        d1.as_str()
    );

    // By digest: the tracked reference is the digest reference.
    let by_digest = format!("{}/os/node@{d3}", reg.host());
    host.ok(&["switch", "--download-only", &by_digest]);
    let (doc, parsed) = host.status();
    assert_eq!(
        doc["status"]["staged"]["image"]["image"]["image"],
        by_digest.as_str()
    );
    assert_eq!(doc["status"]["staged"]["image"]["imageDigest"], d3.as_str());
    assert!(!parsed.soft_reboot_capable_staged(), "other kernel");
    // An unexpected reboot discards the locked deployment.
    host.ok(&["internal-finalize-boot"]);
    let (doc, _) = host.status();
    assert_eq!(doc["status"]["staged"], Value::Null);
    assert_eq!(doc["status"]["booted"]["image"]["imageDigest"], d2.as_str());
}

#[test]
fn upgrade_follows_a_moving_tag() {
    let reg = Registry::start().unwrap();
    let d1 = reg.push("os", "stable", &[(VERSION, "1")]).unwrap();
    let host = seeded(&reg.image("os", "stable"));
    let out = host.ok(&["upgrade", "--download-only"]);
    assert!(out.contains("No update available"), "{out}");
    assert!(host.ok(&["upgrade", "--check"]).contains("No changes"));
    let d2 = reg.push("os", "stable", &[(VERSION, "2")]).unwrap();
    assert!(host.ok(&["upgrade", "--check"]).contains(&d2));
    host.ok(&["upgrade", "--download-only"]);
    let (doc, _) = host.status();
    assert_eq!(doc["status"]["booted"]["image"]["imageDigest"], d1.as_str());
    assert_eq!(doc["status"]["staged"]["image"]["imageDigest"], d2.as_str());
    assert_eq!(doc["status"]["staged"]["downloadOnly"], true);
}

#[test]
fn manifest_list_picks_this_architecture() {
    let reg = Registry::start().unwrap();
    let base = reg.push("os", "base", &[]).unwrap();
    let pushed = reg.push_index("os", "multi", &[(VERSION, "9")]).unwrap();
    let host = seeded(&format!("{}/os@{base}", reg.host()));
    let by_index = format!("{}/os@{}", reg.host(), pushed.index);
    host.ok(&["switch", &by_index]);
    let (doc, parsed) = host.status();
    let mine = if test_registry::host_architecture() == "arm64" {
        &pushed.arm64
    } else {
        &pushed.amd64
    };
    assert_eq!(
        doc["status"]["staged"]["image"]["imageDigest"],
        mine.as_str()
    );
    assert_eq!(
        doc["status"]["staged"]["image"]["image"]["image"],
        by_index.as_str()
    );
    assert_eq!(doc["status"]["staged"]["image"]["version"], "9");
    // The agent matches the deployment by the index digest too.
    let staged = parsed.status.staged.as_ref().unwrap();
    assert!(staged.matches(&pushed.index.parse().unwrap()));
    assert!(staged.matches(&mine.parse().unwrap()));
}

#[test]
fn credentials_come_from_auth_json() {
    let reg = Registry::start_with_auth("node", "pull-secret").unwrap();
    let d1 = reg.push("os", "v1", &[]).unwrap();
    let d2 = reg.push("os", "v2", &[]).unwrap();
    let host = Host::new();
    // No auth file: 401.
    let err = host.fails(&["internal-seed", &reg.image("os", "v1")]);
    assert!(
        err.contains("401") && err.contains("authentication required"),
        "{err}"
    );
    assert!(err.contains("no credentials"), "{err}");

    // The lowest-priority path is used when it is the only one.
    host.write_root_file("usr/lib/ostree/auth.json", &reg.auth_json());
    host.ok(&["internal-seed", &reg.image("os", "v1")]);
    assert_eq!(
        host.status().0["status"]["booted"]["image"]["imageDigest"],
        d1.as_str()
    );

    // /run/ostree/auth.json wins; wrong credentials there are refused.
    let wrong = format!(
        "{{\"auths\":{{\"{}\":{{\"auth\":\"{}\"}}}}}}",
        reg.host(),
        test_registry::base64(b"node:wrong")
    );
    host.write_root_file("run/ostree/auth.json", &wrong);
    let err = host.fails(&["switch", &reg.image("os", "v2")]);
    assert!(
        err.contains("401") && err.contains("run/ostree/auth.json"),
        "{err}"
    );
    assert_eq!(host.status().0["status"]["staged"], Value::Null);
    // Rotated secret: the right one in /run.
    host.write_root_file("run/ostree/auth.json", &reg.auth_json());
    host.ok(&["switch", &reg.image("os", "v2")]);
    assert_eq!(
        host.status().0["status"]["staged"]["image"]["imageDigest"],
        d2.as_str()
    );
    // /etc/ostree is used when /run has none.
    std::fs::remove_file(host.root().join("run/ostree/auth.json")).unwrap();
    std::fs::remove_file(host.root().join("usr/lib/ostree/auth.json")).unwrap();
    host.write_root_file("etc/ostree/auth.json", &reg.auth_json());
    host.ok(&[
        "switch",
        "--download-only",
        &format!("{}/os@{d1}", reg.host()),
    ]);
}

#[test]
fn registry_errors_are_clear() {
    let mut reg = Registry::start().unwrap();
    reg.push("os", "v1", &[]).unwrap();
    let host = seeded(&reg.image("os", "v1"));
    let before = host.status().0;

    let missing = format!("{}/os@sha256:{}", reg.host(), "0".repeat(64));
    let err = host.fails(&["switch", &missing]);
    assert!(
        err.contains("404") && err.contains("manifest unknown"),
        "{err}"
    );
    let err = host.fails(&["switch", &reg.image("os", "nope")]);
    assert!(err.contains("404"), "{err}");
    let err = host.fails(&["switch", &reg.image("other", "v1")]);
    assert!(err.contains("404"), "{err}");
    let err = host.fails(&["switch", "quay.io/example/os:1"]);
    assert!(err.contains("not on loopback"), "{err}");

    reg.stop();
    let err = host.fails(&["switch", &reg.image("os", "v2")]);
    assert!(
        err.contains(&reg.host()) && err.to_lowercase().contains("refused"),
        "{err}"
    );
    let err = host.fails(&["upgrade", "--download-only"]);
    assert!(err.contains("refused"), "{err}");
    // --from-downloaded needs no network (and fails only because nothing is staged).
    let err = host.fails(&["upgrade", "--from-downloaded"]);
    assert!(err.contains("No staged deployment"), "{err}");
    assert_eq!(host.status().0, before);

    reg.restart().unwrap();
    host.ok(&["switch", "--download-only", &reg.image("os", "v1")]);
    // Same spec as booted: unchanged, nothing staged.
    assert_eq!(host.status().0["status"]["staged"], Value::Null);
    host.ok(&["upgrade", "--download-only"]);
}
