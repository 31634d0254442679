//! What the real bootc 1.16.9 printed on a simulated node (`tests/fixtures/bootc-1.16.9/`, see its README): every status document parsed, and each fact the agent acts on checked against what the file says.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bootc_status_common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use bootc_crds::Digest;
use bootc_node_agent::bootc_status::{BootEntry, BootOrder, BootcHost, parse};
use bootc_node_agent::host::BootIdentity;
use bootc_node_agent::host::dbus::parse_bootc_version;
use bootc_node_agent::machine::Slot;
use bootc_node_agent::run::facts;
use bootc_status_common::{SCHEMA, pruned, schema_errors, validator};
use serde_json::{Value, json};

/// The fixtures of this file, in the repository.
fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bootc-1.16.9"
    ))
}

fn read(name: &str) -> Vec<u8> {
    let path = dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn host(name: &str) -> BootcHost {
    parse(&read(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// The two images of the recorded sequence, as bootc reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Image {
    V1,
    V2,
}

impl Image {
    fn reference(self) -> &'static str {
        match self {
            Image::V1 => "127.0.0.1:5000/node:v1",
            Image::V2 => "127.0.0.1:5000/node:v2",
        }
    }

    fn digest(self) -> &'static str {
        match self {
            Image::V1 => "sha256:6f0f3660b853aec7b4b1ed0cca185abb5591c18611f40277ff7b9c3ac6837b66",
            Image::V2 => "sha256:0eb9416aa4c515138c2643d9cee72b2550a31d3c0b5a2abb3d3310125789cae6",
        }
    }

    fn other(self) -> Image {
        match self {
            Image::V1 => Image::V2,
            Image::V2 => Image::V1,
        }
    }

    /// The build time as bootc wrote it (nanoseconds).
    fn timestamp(self) -> &'static str {
        match self {
            Image::V1 => "2026-11-24T09:06:55.303100191Z",
            Image::V2 => "2026-11-24T09:07:09.687100705Z",
        }
    }

    /// The build time as the agent reports it (to the second).
    fn reported_timestamp(self) -> &'static str {
        match self {
            Image::V1 => "2026-11-24T09:06:55Z",
            Image::V2 => "2026-11-24T09:07:09Z",
        }
    }

    /// The ostree commit of its deployment.
    fn commit(self) -> &'static str {
        match self {
            Image::V1 => "db7cb0a21c5edbcb7d34645d9ac8f8870a5fe9d899c2cd7ca17c037fc3014044",
            Image::V2 => "597e321be95e62329d871bcb8f825b93aedd35093f63bffb05ee96b26326ec43",
        }
    }
}

/// What one status file says, read off it by hand.
struct Expected {
    spec: Image,
    boot_order: &'static str,
    booted: Image,
    /// The staged image and its `downloadOnly`.
    staged: Option<(Image, bool)>,
    rollback: Option<Image>,
    rollback_queued: bool,
}

/// Booted from v1 with nothing staged, and v1 asked for.
const ON_V1: Expected = Expected {
    spec: Image::V1,
    boot_order: "default",
    booted: Image::V1,
    staged: None,
    rollback: None,
    rollback_queued: false,
};

/// Still on v1, with v2 asked for and staged.
const V2_STAGED: Expected = Expected {
    spec: Image::V2,
    staged: Some((Image::V2, false)),
    ..ON_V1
};

/// Still on v1, with v2 asked for and downloaded only.
const V2_DOWNLOADED: Expected = Expected {
    staged: Some((Image::V2, true)),
    ..V2_STAGED
};

/// Booted from v2, with v1 left to roll back to.
const ON_V2: Expected = Expected {
    spec: Image::V2,
    booted: Image::V2,
    rollback: Some(Image::V1),
    ..ON_V1
};

/// Each status file of the recorded sequence, in order.
const EXPECTED: &[(&str, Expected)] = &[
    ("01-booted-only.json", ON_V1),
    ("02-staged-download-only.json", V2_DOWNLOADED),
    ("03-after-unapproved-reboot.json", ON_V1),
    ("04-switch-staged-unlocked.json", V2_STAGED),
    ("05-switch-then-download-only.json", V2_DOWNLOADED),
    ("06-from-downloaded.json", V2_STAGED),
    ("07-booted-v2-rollback-v1.json", ON_V2),
    (
        "08-rollback-queued.json",
        Expected {
            boot_order: "rollback",
            rollback_queued: true,
            ..ON_V2
        },
    ),
    (
        "09-after-rollback.json",
        Expected {
            rollback: Some(Image::V2),
            ..ON_V1
        },
    ),
    (
        "10-upgrade-when-spec-is-v2.json",
        Expected {
            rollback: Some(Image::V2),
            ..ON_V1
        },
    ),
];

fn digest(image: Image) -> Digest {
    image.digest().parse().unwrap()
}

/// Every field of one deployment as bootc 1.16.9 wrote it on this node.
fn check_entry(name: &str, slot: &str, entry: &BootEntry, image: Image, download_only: bool) {
    let at = format!("{name} {slot}");
    let img = entry
        .image
        .as_ref()
        .unwrap_or_else(|| panic!("{at}: no image"));
    assert_eq!(img.image.image, image.reference(), "{at}");
    assert_eq!(img.image.transport, "registry", "{at}");
    assert_eq!(img.image.signature, None, "{at}");
    assert_eq!(img.image_digest.to_string(), image.digest(), "{at}");
    assert_eq!(img.version, None, "{at}");
    assert_eq!(img.timestamp.as_deref(), Some(image.timestamp()), "{at}");
    assert_eq!(img.architecture.as_deref(), Some("amd64"), "{at}");
    assert!(
        img.extra.is_empty(),
        "{at}: unknown image keys {:?}",
        img.extra
    );
    assert_eq!(entry.cached_update, None, "{at}");
    assert!(!entry.incompatible, "{at}");
    assert!(!entry.pinned, "{at}");
    assert_eq!(entry.soft_reboot_capable, Some(false), "{at}");
    assert_eq!(entry.download_only, Some(download_only), "{at}");
    assert_eq!(entry.store.as_deref(), Some("ostreeContainer"), "{at}");
    assert_eq!(entry.composefs, None, "{at}");
    let ostree = entry
        .ostree
        .as_ref()
        .unwrap_or_else(|| panic!("{at}: no ostree"));
    assert_eq!(ostree.checksum, image.commit(), "{at}");
    assert_eq!(ostree.deploy_serial, 0, "{at}");
    assert_eq!(ostree.stateroot.as_deref(), Some("debian"), "{at}");
    assert!(ostree.extra.is_empty(), "{at}: {:?}", ostree.extra);
    assert!(
        entry.extra.is_empty(),
        "{at}: unknown keys {:?}",
        entry.extra
    );
    // The digest-matching rule: this deployment runs its own digest and not the other's.
    assert!(entry.matches(&digest(image)), "{at}");
    assert!(!entry.matches(&digest(image.other())), "{at}");
}

#[test]
fn every_status_file_is_in_the_table() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let listed: BTreeSet<String> = EXPECTED.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(on_disk, listed, "status files on disk and the table differ");
    assert_eq!(listed.len(), 10);
}

#[test]
fn every_status_file_parses_to_what_it_says() {
    for (name, e) in EXPECTED {
        let h = host(name);
        assert_eq!(h.api_version, "org.containers.bootc/v1", "{name}");
        assert_eq!(h.kind, "BootcHost", "{name}");
        assert_eq!(h.metadata.name.as_deref(), Some("host"), "{name}");
        assert!(h.extra.is_empty(), "{name}: {:?}", h.extra);

        let spec = h.spec.image.as_ref().unwrap();
        assert_eq!(spec.image, e.spec.reference(), "{name}");
        assert_eq!(spec.transport, "registry", "{name}");
        let order = h.spec.boot_order.as_ref().unwrap();
        assert_eq!(order.as_str(), e.boot_order, "{name}");
        assert!(!matches!(order, BootOrder::Other(_)), "{name}: {order:?}");
        assert!(h.spec.extra.is_empty(), "{name}: {:?}", h.spec.extra);

        let s = &h.status;
        check_entry(name, "booted", s.booted.as_ref().unwrap(), e.booted, false);
        match (&s.staged, e.staged) {
            (None, None) => {}
            (Some(entry), Some((image, locked))) => {
                check_entry(name, "staged", entry, image, locked);
            }
            (got, want) => panic!("{name}: staged {got:?}, expected {want:?}"),
        }
        match (&s.rollback, e.rollback) {
            (None, None) => {}
            (Some(entry), Some(image)) => check_entry(name, "rollback", entry, image, false),
            (got, want) => panic!("{name}: rollback {got:?}, expected {want:?}"),
        }
        assert_eq!(s.rollback_queued, e.rollback_queued, "{name}");
        assert!(s.other_deployments.is_empty(), "{name}");
        assert_eq!(s.host_type.as_deref(), Some("bootcHost"), "{name}");
        assert_eq!(s.usr_overlay, None, "{name}");
        assert_eq!(s.read_only, Some(false), "{name}");
        assert!(s.extra.is_empty(), "{name}: unknown keys {:?}", s.extra);

        assert_eq!(
            h.staged_download_only(),
            e.staged.is_some_and(|(_, locked)| locked),
            "{name}"
        );
        assert!(!h.soft_reboot_capable_staged(), "{name}");
    }
}

#[test]
fn what_the_agent_reports_and_decides_on() {
    let identity = BootIdentity {
        boot_id: "0123456789abcdef0123456789abcdef".into(),
        soft_reboots: 0,
        can_soft_reboot: false,
    };
    let slot = |image: Image, download_only: bool| Slot {
        image: image.reference().to_string(),
        image_digest: image.digest().to_string(),
        soft_reboot_capable: false,
        download_only,
        policy_checked: false,
    };
    let reported = |image: Image| {
        json!({
            "image": image.reference(),
            "imageDigest": image.digest(),
            "shortDigest": &image.digest()["sha256:".len()..][..12],
            "timestamp": image.reported_timestamp(),
            "architecture": "amd64",
            "softRebootCapable": false,
            "incompatible": false,
        })
    };
    for (name, e) in EXPECTED {
        let h = host(name);

        let f = facts(&h, &identity);
        assert_eq!(f.booted, Some(slot(e.booted, false)), "{name}");
        assert_eq!(
            f.staged,
            e.staged.map(|(image, locked)| slot(image, locked)),
            "{name}"
        );
        assert_eq!(f.rollback, e.rollback.map(|i| slot(i, false)), "{name}");
        assert_eq!(f.rollback_queued, e.rollback_queued, "{name}");
        assert!(f.booted.as_ref().unwrap().is(&digest(e.booted)), "{name}");

        let (booted, staged, rollback) = h.report();
        let booted = booted.unwrap();
        assert_eq!(booted.since, None, "{name}");
        assert_eq!(
            serde_json::to_value(&booted.image).unwrap(),
            reported(e.booted),
            "{name}"
        );
        match (staged, e.staged) {
            (None, None) => {}
            (Some(staged), Some((image, locked))) => {
                assert_eq!(staged.download_only, locked, "{name}");
                assert_eq!(
                    serde_json::to_value(&staged.image).unwrap(),
                    reported(image),
                    "{name}"
                );
            }
            (got, want) => panic!("{name}: reported staged {got:?}, expected {want:?}"),
        }
        assert_eq!(
            rollback.map(|r| serde_json::to_value(&r).unwrap()),
            e.rollback.map(reported),
            "{name}"
        );
    }
}

/// A copy of `v` without the object keys whose value is `null`.
fn without_nulls(v: &Value) -> Value {
    pruned(v, &|_, v| v.is_null())
}

#[test]
fn every_status_file_re_serialises_without_loss() {
    for (name, _) in EXPECTED {
        let original: Value = serde_json::from_slice(&read(name)).unwrap();
        let h = host(name);
        let again = serde_json::to_value(&h).unwrap();
        // The parser leaves out optional keys it holds as `None`; everything else must
        // come back as bootc wrote it.
        assert_eq!(without_nulls(&again), without_nulls(&original), "{name}");
        assert_eq!(parse(&serde_json::to_vec(&again).unwrap()).unwrap(), h);
    }
}

#[test]
fn every_status_file_validates_against_the_current_schema() {
    let v = validator(SCHEMA);
    for (name, _) in EXPECTED {
        let doc: Value = serde_json::from_slice(&read(name)).unwrap();
        assert_eq!(schema_errors(&v, &doc), Vec::<String>::new(), "{name}");
    }
}

#[test]
fn the_version_and_the_help_the_agent_reads() {
    let version = String::from_utf8(read("version.txt")).unwrap();
    assert_eq!(parse_bootc_version(&version).as_deref(), Some("1.16.9"));

    // The agent looks for `--download-only` in `bootc switch --help` to choose between
    // `switch --download-only` and its fallback; 1.16.9 has it only on `upgrade`.
    let switch = String::from_utf8(read("help-switch.txt")).unwrap();
    let upgrade = String::from_utf8(read("help-upgrade.txt")).unwrap();
    assert!(switch.starts_with("Target a new container image reference to boot."));
    assert!(!switch.contains("--download-only"));
    assert!(upgrade.contains("--download-only"));
    assert!(upgrade.contains("--from-downloaded"));
}
