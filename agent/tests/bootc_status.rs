//! bootc's status output (`bootc status --format=json --format-version=1`): bootc's own fixtures and schemas, digest matching, the agent's report, and bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bootc_status_common;

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as _;

use bootc_crds::Digest;
use bootc_crds::node::BootcNodeStatus;
use bootc_node_agent::bootc_status::{
    BootEntry, BootOrder, BootcHost, ImageReference, ImageSignature, StatusError, parse,
};
use bootc_status_common::{
    SCHEMA, SCHEMA_2025_03, fixture_bytes, fixture_json, fixture_names, pointers, pruned, replaced,
    schema, schema_declares, schema_errors, validator, without, yaml_to_json,
};
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const L: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

fn digest(s: &str) -> Digest {
    s.parse().unwrap()
}

fn parse_value(doc: &Value) -> Result<BootcHost, StatusError> {
    parse(&serde_json::to_vec(doc).unwrap())
}

/// A v1 document around `status`.
fn doc(status: Value) -> Value {
    json!({
        "apiVersion": "org.containers.bootc/v1",
        "kind": "BootcHost",
        "metadata": {"name": "host"},
        "spec": {"image": {"image": "quay.io/example/os:1", "transport": "registry"}, "bootOrder": "default"},
        "status": status,
    })
}

/// An image-based boot entry tracking `reference`, fetched as `image_digest`.
fn entry(reference: &str, image_digest: &str) -> Value {
    json!({
        "image": {
            "image": {"image": reference, "transport": "registry", "signature": "insecure"},
            "architecture": "amd64",
            "version": "42.1",
            "timestamp": "2026-01-02T03:04:05Z",
            "imageDigest": image_digest,
        },
        "cachedUpdate": null,
        "incompatible": false,
        "pinned": false,
        "downloadOnly": false,
        "softRebootCapable": false,
        "ostree": {"checksum": "0123", "deploySerial": 0, "stateroot": "default"},
    })
}

/// A plain ostree boot entry (no image).
fn ostree_entry() -> Value {
    json!({
        "image": null,
        "incompatible": false,
        "pinned": false,
        "ostree": {"checksum": "4567", "deploySerial": 1, "stateroot": "default"},
    })
}

/// The facts of a parsed document that the expectations below spell out, flattened to
/// strings so that one table holds them all and any difference shows up by name.
fn summary(host: &BootcHost) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        s.insert(k.to_string(), v);
    };
    put("apiVersion", host.api_version.clone());
    if let Some(img) = &host.spec.image {
        put("spec.image", format!("{}:{}", img.transport, img.image));
        if let Some(sig) = &img.signature {
            put("spec.signature", sig.to_string());
        }
    }
    if let Some(o) = &host.spec.boot_order {
        put("spec.bootOrder", o.as_str().to_string());
    }
    for (slot, entry) in [
        ("booted", &host.status.booted),
        ("staged", &host.status.staged),
        ("rollback", &host.status.rollback),
    ] {
        let Some(e) = entry else { continue };
        let k = |f: &str| format!("{slot}.{f}");
        match &e.image {
            None => put(slot, "ostree-only".into()),
            Some(i) => {
                put(slot, format!("{}:{}", i.image.transport, i.image.image));
                put(&k("imageDigest"), i.image_digest.to_string());
                if let Some(v) = &i.version {
                    put(&k("version"), v.clone());
                }
                if let Some(v) = &i.timestamp {
                    put(&k("timestamp"), v.clone());
                }
                if let Some(v) = &i.architecture {
                    put(&k("architecture"), v.clone());
                }
                if let Some(v) = &i.image.signature {
                    put(&k("signature"), v.to_string());
                }
            }
        }
        if let Some(c) = &e.cached_update {
            put(
                &k("cachedUpdate"),
                format!("{} {}", c.image_digest, c.version.as_deref().unwrap_or("-")),
            );
        }
        put(&k("incompatible"), e.incompatible.to_string());
        put(&k("pinned"), e.pinned.to_string());
        if let Some(v) = e.download_only {
            put(&k("downloadOnly"), v.to_string());
        }
        if let Some(v) = e.soft_reboot_capable {
            put(&k("softRebootCapable"), v.to_string());
        }
        if let Some(v) = &e.store {
            put(&k("store"), v.clone());
        }
        if let Some(o) = &e.ostree {
            put(
                &k("ostree"),
                format!(
                    "{}.{} {}",
                    &o.checksum[..12],
                    o.deploy_serial,
                    o.stateroot.as_deref().unwrap_or("-")
                ),
            );
        }
    }
    if !host.status.other_deployments.is_empty() {
        put(
            "otherDeployments",
            host.status.other_deployments.len().to_string(),
        );
    }
    put("rollbackQueued", host.status.rollback_queued.to_string());
    if let Some(t) = &host.status.host_type {
        put("type", t.clone());
    }
    if let Some(o) = &host.status.usr_overlay {
        put("usrOverlay", format!("{}/{}", o.access_mode, o.persistence));
    }
    let extra: Vec<String> = host
        .status
        .extra
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !extra.is_empty() {
        put("status.extra", extra.join(","));
    }
    put(
        "staged_download_only()",
        host.staged_download_only().to_string(),
    );
    put(
        "soft_reboot_capable_staged()",
        host.soft_reboot_capable_staged().to_string(),
    );
    s
}

/// The image of a boot entry, as `summary` spells it.
#[derive(Clone, Copy)]
struct Image {
    /// `transport:image`.
    reference: &'static str,
    digest: &'static str,
    architecture: Option<&'static str>,
    version: Option<&'static str>,
    timestamp: Option<&'static str>,
    signature: Option<&'static str>,
}

/// A boot entry, as `summary` spells it.
#[derive(Clone, Copy)]
struct Slot {
    /// `None` for a plain ostree entry.
    image: Option<Image>,
    /// `digest version`, with `-` for no version.
    cached_update: Option<&'static str>,
    incompatible: bool,
    pinned: bool,
    download_only: Option<bool>,
    store: Option<&'static str>,
    /// `checksum prefix.deploySerial stateroot`.
    ostree: &'static str,
}

/// An entry that is neither pinned, incompatible, download-only nor holding an update.
const fn slot(image: Option<Image>, ostree: &'static str) -> Slot {
    Slot {
        image,
        cached_update: None,
        incompatible: false,
        pinned: false,
        download_only: Some(false),
        store: None,
        ostree,
    }
}

/// A whole document, as `summary` spells it.
struct Host {
    api_version: &'static str,
    spec_image: Option<&'static str>,
    spec_signature: Option<&'static str>,
    boot_order: Option<&'static str>,
    booted: Option<Slot>,
    staged: Option<Slot>,
    rollback: Option<Slot>,
    other_deployments: usize,
    rollback_queued: bool,
    host_type: Option<&'static str>,
    usr_overlay: Option<&'static str>,
    /// `key=value` of the unknown status keys.
    extra: Option<&'static str>,
    staged_download_only: bool,
    soft_reboot_capable_staged: bool,
}

fn put(facts: &mut BTreeMap<String, String>, key: impl Into<String>, value: Option<impl ToString>) {
    if let Some(v) = value {
        facts.insert(key.into(), v.to_string());
    }
}

impl Host {
    /// The facts `summary` must find in the document.
    fn facts(&self) -> BTreeMap<String, String> {
        let mut f = BTreeMap::new();
        put(&mut f, "apiVersion", Some(self.api_version));
        put(&mut f, "spec.image", self.spec_image);
        put(&mut f, "spec.signature", self.spec_signature);
        put(&mut f, "spec.bootOrder", self.boot_order);
        for (name, slot) in [
            ("booted", self.booted),
            ("staged", self.staged),
            ("rollback", self.rollback),
        ] {
            let Some(slot) = slot else { continue };
            let k = |field: &str| format!("{name}.{field}");
            match slot.image {
                None => put(&mut f, name, Some("ostree-only")),
                Some(i) => {
                    put(&mut f, name, Some(i.reference));
                    put(&mut f, k("imageDigest"), Some(i.digest));
                    put(&mut f, k("architecture"), i.architecture);
                    put(&mut f, k("version"), i.version);
                    put(&mut f, k("timestamp"), i.timestamp);
                    put(&mut f, k("signature"), i.signature);
                }
            }
            put(&mut f, k("cachedUpdate"), slot.cached_update);
            put(&mut f, k("incompatible"), Some(slot.incompatible));
            put(&mut f, k("pinned"), Some(slot.pinned));
            put(&mut f, k("downloadOnly"), slot.download_only);
            put(&mut f, k("store"), slot.store);
            put(&mut f, k("ostree"), Some(slot.ostree));
        }
        let others = self.other_deployments;
        put(&mut f, "otherDeployments", (others > 0).then_some(others));
        put(&mut f, "rollbackQueued", Some(self.rollback_queued));
        put(&mut f, "type", self.host_type);
        put(&mut f, "usrOverlay", self.usr_overlay);
        put(&mut f, "status.extra", self.extra);
        put(
            &mut f,
            "staged_download_only()",
            Some(self.staged_download_only),
        );
        let soft = self.soft_reboot_capable_staged;
        put(&mut f, "soft_reboot_capable_staged()", Some(soft));
        f
    }
}

/// A v1alpha1 document with an empty spec and status.
const BARE: Host = Host {
    api_version: "org.containers.bootc/v1alpha1",
    spec_image: None,
    spec_signature: None,
    boot_order: None,
    booted: None,
    staged: None,
    rollback: None,
    other_deployments: 0,
    rollback_queued: false,
    host_type: None,
    usr_overlay: None,
    extra: None,
    staged_download_only: false,
    soft_reboot_capable_staged: false,
};

const CENTOS: &str = "registry:quay.io/centos-bootc/centos-bootc:stream9";
const CENTOS_STREAM9: Image = Image {
    reference: CENTOS,
    digest: "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38",
    architecture: Some("arm64"),
    version: Some("stream9.20240807.0"),
    timestamp: None,
    signature: None,
};
const CENTOS_BOOTED: Slot = slot(Some(CENTOS_STREAM9), "439f6bd2e236.0 default");
/// A bootc host that runs CentOS stream 9 and has nothing staged.
const CENTOS_HOST: Host = Host {
    spec_image: Some(CENTOS),
    boot_order: Some("default"),
    booted: Some(CENTOS_BOOTED),
    host_type: Some("bootcHost"),
    ..BARE
};

const SOMEIMAGE: &str = "registry:quay.io/example/someimage:latest";
const NIGHTLY: Image = Image {
    reference: SOMEIMAGE,
    digest: "sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34",
    architecture: Some("arm64"),
    version: Some("nightly"),
    timestamp: Some("2023-09-30T19:22:16Z"),
    signature: Some("insecure"),
};
/// The nightly after `NIGHTLY`.
const NIGHTLY_UPDATE: Image = Image {
    digest: "sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566",
    timestamp: Some("2023-10-14T19:22:15.42Z"),
    ..NIGHTLY
};
const NIGHTLY_OSTREE: &str = "26836632adf6.0 default";
const NIGHTLY_UPDATE_OSTREE: &str = "3c6dad657109.0 default";
/// A host that runs `NIGHTLY`, with no signature policy.
const NIGHTLY_HOST: Host = Host {
    spec_image: Some(SOMEIMAGE),
    spec_signature: Some("insecure"),
    booted: Some(slot(Some(NIGHTLY), NIGHTLY_OSTREE)),
    extra: Some("isContainer=false"),
    ..BARE
};

const OTHERIMAGE: Image = Image {
    reference: "registry:quay.io/otherexample/otherimage:latest",
    digest: "sha256:b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c",
    architecture: Some("arm64"),
    version: Some("20231230.1"),
    timestamp: Some("2023-12-30T16:10:11Z"),
    signature: None,
};
const OTHERIMAGE_OSTREE: &str = "41af286dc0b1.0 default";

const OSTREE_ONLY_BOOTED: Slot = slot(None, "f9fa3a553cea.0 default");

/// What each of bootc's fixtures says, read off the YAML by hand. Every fixture in the
/// directory must be here: a new one fails the test until its expectations are written.
const EXPECTED: &[(&str, Host)] = &[
    (
        "spec-booted-pinned.yaml",
        Host {
            booted: Some(Slot {
                pinned: true,
                ..CENTOS_BOOTED
            }),
            other_deployments: 1,
            ..CENTOS_HOST
        },
    ),
    (
        "spec-booted-update-same-digest.yaml",
        Host {
            booted: Some(Slot {
                cached_update: Some(
                    "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38 stream9.20240807.0",
                ),
                ..CENTOS_BOOTED
            }),
            ..CENTOS_HOST
        },
    ),
    (
        "spec-booted-usroverlay.yaml",
        Host {
            booted: Some(slot(
                Some(Image {
                    signature: None,
                    ..NIGHTLY
                }),
                NIGHTLY_OSTREE,
            )),
            usr_overlay: Some("readWrite/transient"),
            ..NIGHTLY_HOST
        },
    ),
    (
        "spec-booted-with-update-no-version.yaml",
        Host {
            booted: Some(Slot {
                cached_update: Some(
                    "sha256:b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1 -",
                ),
                ..CENTOS_BOOTED
            }),
            ..CENTOS_HOST
        },
    ),
    (
        "spec-booted-with-update.yaml",
        Host {
            booted: Some(Slot {
                image: Some(Image {
                    timestamp: Some("2024-08-07T12:00:00Z"),
                    ..CENTOS_STREAM9
                }),
                cached_update: Some(
                    "sha256:a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0 stream9.20240901.0",
                ),
                ..CENTOS_BOOTED
            }),
            ..CENTOS_HOST
        },
    ),
    ("spec-only-booted.yaml", CENTOS_HOST),
    (
        "spec-ostree-remote.yaml",
        Host {
            spec_image: Some("registry:quay.io/fedora/fedora-coreos:stable"),
            spec_signature: Some("ostreeRemote:fedora"),
            booted: Some(slot(Some(OTHERIMAGE), OTHERIMAGE_OSTREE)),
            extra: Some("isContainer=false"),
            ..BARE
        },
    ),
    (
        "spec-ostree-to-bootc.yaml",
        Host {
            spec_image: Some(CENTOS),
            boot_order: Some("default"),
            booted: Some(OSTREE_ONLY_BOOTED),
            staged: Some(Slot {
                store: Some("ostreeContainer"),
                ..slot(
                    Some(Image {
                        architecture: Some("s390x"),
                        ..CENTOS_STREAM9
                    }),
                    "05cbf6dcae32.0 default",
                )
            }),
            ..BARE
        },
    ),
    (
        "spec-rfe-ostree-deployment.yaml",
        Host {
            boot_order: Some("default"),
            booted: Some(OSTREE_ONLY_BOOTED),
            staged: Some(Slot {
                incompatible: true,
                ..slot(None, "1c24260fdd1b.0 default")
            }),
            ..BARE
        },
    ),
    (
        "spec-staged-booted.yaml",
        Host {
            staged: Some(slot(Some(NIGHTLY_UPDATE), NIGHTLY_UPDATE_OSTREE)),
            ..NIGHTLY_HOST
        },
    ),
    (
        "spec-staged-download-only.yaml",
        Host {
            booted: Some(Slot {
                download_only: None,
                ..slot(Some(NIGHTLY), NIGHTLY_OSTREE)
            }),
            staged: Some(Slot {
                download_only: Some(true),
                ..slot(Some(NIGHTLY_UPDATE), NIGHTLY_UPDATE_OSTREE)
            }),
            staged_download_only: true,
            ..NIGHTLY_HOST
        },
    ),
    (
        "spec-staged-rollback.yaml",
        Host {
            booted: None,
            staged: Some(slot(
                Some(Image {
                    architecture: Some("s390x"),
                    timestamp: Some("2023-10-14T19:22:15Z"),
                    ..NIGHTLY_UPDATE
                }),
                NIGHTLY_UPDATE_OSTREE,
            )),
            rollback: Some(slot(
                Some(Image {
                    architecture: Some("s390x"),
                    ..NIGHTLY
                }),
                NIGHTLY_OSTREE,
            )),
            ..NIGHTLY_HOST
        },
    ),
    (
        "spec-v1-null.json",
        Host {
            api_version: "org.containers.bootc/v1",
            boot_order: Some("default"),
            ..BARE
        },
    ),
    (
        "spec-v1a1-orig.yaml",
        Host {
            booted: Some(slot(
                Some(Image {
                    architecture: Some("amd64"),
                    ..NIGHTLY
                }),
                NIGHTLY_OSTREE,
            )),
            staged: Some(slot(
                Some(Image {
                    architecture: Some("amd64"),
                    timestamp: Some("2023-10-14T19:22:15Z"),
                    ..NIGHTLY_UPDATE
                }),
                NIGHTLY_UPDATE_OSTREE,
            )),
            ..NIGHTLY_HOST
        },
    ),
    (
        "spec-v1a1.yaml",
        Host {
            spec_image: Some(OTHERIMAGE.reference),
            booted: Some(slot(
                Some(Image {
                    architecture: Some("s390x"),
                    ..OTHERIMAGE
                }),
                OTHERIMAGE_OSTREE,
            )),
            extra: Some("isContainer=false"),
            ..BARE
        },
    ),
    (
        "spec-via-local-oci.yaml",
        Host {
            spec_image: Some("oci:/var/mnt/osupdate:latest"),
            booted: Some(Slot {
                image: Some(Image {
                    reference: "oci:/var/mnt/osupdate",
                    architecture: Some("amd64"),
                    ..CENTOS_STREAM9
                }),
                ..CENTOS_BOOTED
            }),
            ..CENTOS_HOST
        },
    ),
];

#[test]
fn every_fixture_parses_to_what_it_says() {
    let listed: BTreeSet<String> = fixture_names().into_iter().collect();
    let expected: BTreeSet<String> = EXPECTED.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        listed, expected,
        "the fixtures on disk and the expectation table differ"
    );
    for (name, expected) in EXPECTED {
        let host = parse(&fixture_bytes(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(summary(&host), expected.facts(), "{name}");
    }
}

#[test]
fn the_named_fixtures_hold_the_facts_the_agent_acts_on() {
    let host = |name: &str| parse(&fixture_bytes(name)).unwrap();

    let h = host("spec-staged-download-only.yaml");
    assert!(h.staged_download_only());
    assert!(!h.soft_reboot_capable_staged());
    assert_eq!(h.status.booted.as_ref().unwrap().download_only, None);
    assert!(h.status.staged.as_ref().unwrap().matches(&digest(
        "sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566"
    )));

    let h = host("spec-staged-booted.yaml");
    assert!(!h.staged_download_only());
    assert_eq!(
        h.spec.image.as_ref().unwrap().signature,
        Some(ImageSignature::Insecure)
    );
    assert_eq!(h.spec.boot_order, None);

    let h = host("spec-booted-with-update.yaml");
    let booted = h.status.booted.as_ref().unwrap();
    let cached = booted.cached_update.as_ref().unwrap();
    // The fetched-but-not-deployed update is not what the host runs.
    assert!(!booted.matches(&cached.image_digest));
    assert!(booted.matches(&digest(
        "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38"
    )));
    assert_eq!(h.spec.boot_order, Some(BootOrder::Default));

    let h = host("spec-only-booted.yaml");
    assert!(h.status.staged.is_none() && h.status.rollback.is_none());
    assert_eq!(h.status.host_type.as_deref(), Some("bootcHost"));

    let h = host("spec-ostree-remote.yaml");
    assert_eq!(
        h.spec.image.as_ref().unwrap().signature,
        Some(ImageSignature::OstreeRemote("fedora".into()))
    );
    assert_eq!(h.status.extra.get("isContainer"), Some(&json!(false)));

    let h = host("spec-v1-null.json");
    assert_eq!(h.api_version, "org.containers.bootc/v1");
    assert_eq!(h.spec.image, None);
    assert_eq!(h.report(), (None, None, None));

    let h = host("spec-via-local-oci.yaml");
    let booted = h.status.booted.as_ref().unwrap();
    assert_eq!(booted.image_ref(), Some("/var/mnt/osupdate"));
    assert_eq!(booted.image.as_ref().unwrap().image.transport, "oci");

    let h = host("spec-booted-pinned.yaml");
    let other = &h.status.other_deployments[0];
    assert!(other.pinned);
    assert_eq!(
        other.image_digest().unwrap().to_string(),
        "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b37"
    );
    assert!(
        !h.status
            .booted
            .as_ref()
            .unwrap()
            .matches(other.image_digest().unwrap())
    );

    for name in [
        "spec-ostree-to-bootc.yaml",
        "spec-rfe-ostree-deployment.yaml",
    ] {
        let h = host(name);
        let booted = h.status.booted.as_ref().unwrap();
        assert!(booted.image.is_none(), "{name}");
        assert_eq!(booted.to_image_status(), None, "{name}");
        assert!(booted.ostree.is_some(), "{name}");
    }
}

#[test]
fn every_fixture_validates_against_the_current_schema() {
    let current = schema(SCHEMA);
    assert!(jsonschema::meta::is_valid(&current), "{SCHEMA} itself");
    let v = validator(SCHEMA);
    for name in fixture_names() {
        let (doc, _) = fixture_json(&name);
        assert_eq!(schema_errors(&v, &doc), Vec::<String>::new(), "{name}");
    }
}

#[test]
fn every_fixture_validates_against_the_2025_03_schema_too() {
    let old = schema(SCHEMA_2025_03);
    assert!(jsonschema::meta::is_valid(&old), "{SCHEMA_2025_03} itself");
    let v = validator(SCHEMA_2025_03);
    let failing: Vec<(String, Vec<String>)> = fixture_names()
        .into_iter()
        .map(|name| {
            let (doc, _) = fixture_json(&name);
            let errors = schema_errors(&v, &doc);
            (name, errors)
        })
        .filter(|(_, errors)| !errors.is_empty())
        .collect();
    // The old schema lacks the newer properties but forbids no unknown ones, so today's
    // fixtures (downloadOnly, usrOverlay, stateroot, architecture) pass it.
    assert_eq!(failing, Vec::new());
}

#[test]
fn yaml_scalars_are_read_as_the_schema_types_them() {
    // bootc's tests load the YAML into its structs, so `version: 20231230.1` is the string
    // "20231230.1"; a plain YAML-to-JSON conversion makes it a number, which the schema
    // (and this parser) refuses. Exactly these fixtures need that reading.
    let mut needing: Vec<(String, Vec<String>)> = Vec::new();
    for name in fixture_names() {
        let (_, coerced) = fixture_json(&name);
        if !coerced.is_empty() {
            needing.push((name, coerced));
        }
    }
    let path = vec!["/status/booted/image/version".to_string()];
    assert_eq!(
        needing,
        vec![
            ("spec-ostree-remote.yaml".to_string(), path.clone()),
            ("spec-v1a1.yaml".to_string(), path),
        ]
    );
    let text = std::fs::read_to_string(
        bootc_status_common::reference_dir().join("fixtures/spec-v1a1.yaml"),
    )
    .unwrap();
    let raw = yaml_to_json(&text).unwrap();
    assert!(raw["status"]["booted"]["image"]["version"].is_number());
    assert!(!schema_errors(&validator(SCHEMA), &raw).is_empty());
    let err = parse_value(&raw).unwrap_err();
    assert!(
        matches!(&err, StatusError::DecodeField { path, .. } if path == "status.booted.image"),
        "{err:?}"
    );
}

#[test]
fn the_schema_check_can_fail() {
    // Guards the validation tests above against a validator that accepts everything.
    let v = validator(SCHEMA);
    let (good, _) = fixture_json("spec-staged-booted.yaml");
    assert!(schema_errors(&v, &good).is_empty());
    for (pointer, with) in [
        ("/status/booted/image/imageDigest", None),
        ("/status/booted/pinned", None),
        ("/status/staged/image/timestamp", Some(json!("yesterday"))),
        ("/status/booted", Some(json!("yes"))),
        ("/spec/image/signature", Some(json!({"ostreeRemote": 1}))),
    ] {
        let bad = match with {
            None => without(&good, pointer),
            Some(v) => replaced(&good, pointer, v),
        };
        assert!(!schema_errors(&v, &bad).is_empty(), "{pointer}");
    }
}

#[test]
fn output_of_bootc_before_architecture_and_stateroot_parses() {
    // bootc < 1.1.7 wrote no `architecture`, < 1.3 no `stateroot`: the 2025-03 schema
    // accepts that, today's schema requires both, the parser accepts it.
    let (good, _) = fixture_json("spec-staged-booted.yaml");
    let mut old = good.clone();
    for slot in ["booted", "staged"] {
        old = without(&old, &format!("/status/{slot}/image/architecture"));
        old = without(&old, &format!("/status/{slot}/ostree/stateroot"));
        old = without(&old, &format!("/status/{slot}/downloadOnly"));
    }
    assert!(!schema_errors(&validator(SCHEMA), &old).is_empty());
    assert!(schema_errors(&validator(SCHEMA_2025_03), &old).is_empty());
    let host = parse_value(&old).unwrap();
    let staged = host.status.staged.as_ref().unwrap();
    assert_eq!(staged.image.as_ref().unwrap().architecture, None);
    assert_eq!(staged.ostree.as_ref().unwrap().stateroot, None);
    assert!(!host.staged_download_only());
    let (_, staged, _) = host.report();
    let staged = staged.unwrap();
    assert_eq!(staged.image.architecture, None);
    assert!(!staged.download_only);
}

#[test]
fn whatever_either_schema_accepts_parses() {
    // Remove each node of each fixture, or set it to null, in turn: when the result is
    // still valid under the current schema, or under the 2025-03 one at a key that schema
    // declares (it lets keys it does not know hold anything, but the bootc of that time
    // never wrote them), a bootc could print it, and the parser must take it.
    let current = validator(SCHEMA);
    let old = validator(SCHEMA_2025_03);
    let old_schema = schema(SCHEMA_2025_03);
    let (mut accepted, mut refused) = (0, 0);
    for name in fixture_names() {
        let (doc, _) = fixture_json(&name);
        for pointer in pointers(&doc) {
            for mutated in [
                without(&doc, &pointer),
                replaced(&doc, &pointer, Value::Null),
            ] {
                let valid = current.is_valid(&mutated)
                    || (old.is_valid(&mutated) && schema_declares(&old_schema, &pointer));
                match parse_value(&mutated) {
                    Ok(_) => accepted += 1,
                    Err(e) => {
                        assert!(!valid, "{name} {pointer}: schema-valid but refused: {e:?}");
                        refused += 1;
                    }
                }
            }
        }
    }
    assert!(
        accepted > 600 && refused > 400,
        "{accepted} accepted, {refused} refused"
    );
}

/// Removes nulls and `rollbackQueued: false` (the forms a parsed and re-serialised
/// document may write differently: absent and null are both `None`).
fn normalise(v: &Value) -> Value {
    pruned(v, &|k, v| {
        v.is_null() || (k == "rollbackQueued" && *v == json!(false))
    })
}

#[test]
fn fixtures_round_trip_without_loss_and_stay_valid() {
    let v = validator(SCHEMA);
    for name in fixture_names() {
        let (original, _) = fixture_json(&name);
        let host = parse_value(&original).unwrap();
        let again = serde_json::to_value(&host).unwrap();
        assert_eq!(schema_errors(&v, &again), Vec::<String>::new(), "{name}");
        assert_eq!(normalise(&again), normalise(&original), "{name}");
        assert_eq!(parse_value(&again).unwrap(), host, "{name}");
    }
}

#[test]
fn unknown_keys_are_kept_everywhere() {
    let mut e = entry("quay.io/example/os:1", A);
    e["futureEntryField"] = json!({"x": 1});
    e["image"]["futureImageField"] = json!([1, 2]);
    e["image"]["image"]["futureRefField"] = json!("r");
    e["ostree"]["futureOstreeField"] = json!(true);
    let mut d = doc(json!({"booted": e, "futureStatusField": 7}));
    d["futureTopField"] = json!("t");
    d["spec"]["futureSpecField"] = json!(null);
    d["metadata"]["uid"] = json!("u");
    let host = parse_value(&d).unwrap();
    assert_eq!(host.extra["futureTopField"], json!("t"));
    assert_eq!(host.status.extra["futureStatusField"], json!(7));
    let booted = host.status.booted.as_ref().unwrap();
    assert_eq!(booted.extra["futureEntryField"], json!({"x": 1}));
    assert_eq!(
        booted.image.as_ref().unwrap().extra["futureImageField"],
        json!([1, 2])
    );
    assert_eq!(
        normalise(&serde_json::to_value(&host).unwrap()),
        normalise(&d)
    );
    assert!(schema_errors(&validator(SCHEMA), &d).is_empty());
}

#[test]
fn null_and_absent_sections_parse() {
    for d in [
        json!({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost"}),
        json!({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": null, "spec": null, "status": null}),
        json!({"apiVersion": "org.containers.bootc/v1alpha1", "kind": "BootcHost", "spec": {}, "status": {}}),
        json!({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "status": {"booted": null, "staged": null, "rollback": null, "type": null, "usrOverlay": null}}),
    ] {
        let host = parse_value(&d).unwrap_or_else(|e| panic!("{d}: {e:?}"));
        assert_eq!(host.report(), (None, None, None), "{d}");
        assert!(!host.staged_download_only() && !host.soft_reboot_capable_staged());
    }
}

#[test]
fn signatures_in_every_form() {
    let cases: &[(Value, Option<ImageSignature>)] = &[
        (json!("insecure"), Some(ImageSignature::Insecure)),
        (
            json!("containerPolicy"),
            Some(ImageSignature::ContainerPolicy),
        ),
        (
            json!({"ostreeRemote": "fedora"}),
            Some(ImageSignature::OstreeRemote("fedora".into())),
        ),
        (Value::Null, None),
        (
            json!("sigstore"),
            Some(ImageSignature::Other(json!("sigstore"))),
        ),
        (
            json!({"ostreeRemote": "fedora", "keys": 1}),
            Some(ImageSignature::Other(
                json!({"ostreeRemote": "fedora", "keys": 1}),
            )),
        ),
        (
            json!({"ostreeRemote": 5}),
            Some(ImageSignature::Other(json!({"ostreeRemote": 5}))),
        ),
    ];
    for (written, want) in cases {
        let mut e = entry("quay.io/example/os:1", A);
        e["image"]["image"]["signature"] = written.clone();
        let host = parse_value(&doc(json!({"booted": e}))).unwrap();
        let got = &host
            .status
            .booted
            .as_ref()
            .unwrap()
            .image
            .as_ref()
            .unwrap()
            .image
            .signature;
        assert_eq!(got, want, "{written}");
        // Re-serialised, the signature reads back the same.
        let again = serde_json::to_value(&host).unwrap();
        let back = &again["status"]["booted"]["image"]["image"];
        match want {
            None => assert!(back.get("signature").is_none()),
            Some(_) => assert_eq!(&back["signature"], written),
        }
    }
    // And without the key at all.
    let mut e = entry("quay.io/example/os:1", A);
    e["image"]["image"]
        .as_object_mut()
        .unwrap()
        .remove("signature");
    let host = parse_value(&doc(json!({"booted": e}))).unwrap();
    assert_eq!(
        host.status.booted.unwrap().image.unwrap().image.signature,
        None
    );
}

#[test]
fn digest_inside_the_reference() {
    let cases: &[(&str, Option<&str>)] = &[
        ("quay.io/a/b:1", None),
        (
            "quay.io/a/b@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            Some(L),
        ),
        (
            "quay.io/a/b:1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            Some(L),
        ),
        (
            "localhost:5000/a@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            Some(L),
        ),
        ("quay.io/a/b@sha256:bbbb", None),
        (
            "quay.io/a/b@sha512:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            None,
        ),
        (
            "quay.io/a/b@sha256:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
            None,
        ),
        ("quay.io/a/b@", None),
        ("/var/mnt/osupdate", None),
    ];
    for (image, want) in cases {
        let r = ImageReference {
            image: image.to_string(),
            transport: "registry".into(),
            signature: None,
            extra: Default::default(),
        };
        assert_eq!(r.digest(), want.map(digest), "{image}");
    }
}

#[test]
fn matching_a_target_digest() {
    let by_ref = |tail: &str| format!("quay.io/example/os{tail}");
    let list_pin = by_ref(&format!("@{L}"));
    let tag_and_list = by_ref(&format!(":1@{L}"));
    let mut with_cached = entry(&by_ref(":1"), A);
    with_cached["cachedUpdate"] = entry(&by_ref(":1"), C)["image"].clone();
    let cases: Vec<(&str, Value, &str, bool)> = vec![
        ("per-arch digest", entry(&by_ref(":1"), A), A, true),
        ("tag only, other digest", entry(&by_ref(":1"), A), C, false),
        (
            "manifest-list digest in the reference",
            entry(&list_pin, A),
            L,
            true,
        ),
        (
            "per-arch digest of a list pin",
            entry(&list_pin, A),
            A,
            true,
        ),
        (
            "tag and list digest in the reference",
            entry(&tag_and_list, A),
            L,
            true,
        ),
        ("neither", entry(&list_pin, A), C, false),
        (
            "malformed digest in the reference",
            entry(&by_ref("@sha256:bbbb"), A),
            C,
            false,
        ),
        ("ostree-only", ostree_entry(), A, false),
        ("only the cached update has it", with_cached, C, false),
    ];
    for (what, e, target, want) in cases {
        let entry: BootEntry = serde_json::from_value(e).unwrap();
        assert_eq!(entry.matches(&digest(target)), want, "{what}");
    }
}

/// The node status holding the agent's report of `host`, as it is written to the API.
fn reported(host: &BootcHost) -> Value {
    let (booted, staged, rollback) = host.report();
    let status = BootcNodeStatus {
        booted,
        staged,
        rollback,
        ..BootcNodeStatus::default()
    };
    serde_json::to_value(&status).unwrap()
}

#[test]
fn report_conversion() {
    let mut staged = entry(&format!("quay.io/example/os@{L}"), A);
    staged["downloadOnly"] = json!(true);
    staged["softRebootCapable"] = json!(true);
    staged["image"]["timestamp"] = json!("2026-01-02T05:04:05.123+02:00");
    let mut booted = entry("quay.io/example/os:1", C);
    booted["incompatible"] = json!(true);
    booted["image"]["version"] = Value::Null;
    booted["image"]["timestamp"] = Value::Null;
    booted["image"]
        .as_object_mut()
        .unwrap()
        .remove("architecture");
    let mut rollback = entry("quay.io/example/os:0", L);
    rollback["image"]["timestamp"] = json!("not a time");
    rollback["softRebootCapable"] = json!(true);
    let host = parse_value(&doc(json!({
        "booted": booted, "staged": staged, "rollback": rollback,
    })))
    .unwrap();
    assert!(host.staged_download_only());
    assert!(host.soft_reboot_capable_staged());

    assert_eq!(
        reported(&host),
        json!({
            "booted": {
                "image": "quay.io/example/os:1",
                "imageDigest": C,
                "shortDigest": "cccccccccccc",
                "softRebootCapable": false,
                "incompatible": true,
            },
            "staged": {
                "image": format!("quay.io/example/os@{L}"),
                "imageDigest": A,
                "shortDigest": "aaaaaaaaaaaa",
                "version": "42.1",
                "timestamp": "2026-01-02T03:04:05Z",
                "architecture": "amd64",
                "softRebootCapable": true,
                "incompatible": false,
                "downloadOnly": true,
            },
            "rollback": {
                "image": "quay.io/example/os:0",
                "imageDigest": L,
                "shortDigest": &L[7..19],
                "version": "42.1",
                "architecture": "amd64",
                "softRebootCapable": true,
                "incompatible": false,
            },
        })
    );
    assert_eq!(host.report().0.unwrap().since, None);
}

#[test]
fn reported_timestamps_are_whole_seconds() {
    // The API server keeps whole seconds; a sub-second value would make the status the
    // agent computes differ from the one it reads back, and be rewritten forever.
    let at = |ts: &str| {
        let mut e = entry("quay.io/example/os:1", A);
        e["image"]["timestamp"] = json!(ts);
        serde_json::from_value::<BootEntry>(e)
            .unwrap()
            .to_image_status()
            .unwrap()
            .timestamp
    };
    let whole = at("2023-10-14T19:22:15Z");
    assert!(whole.is_some());
    assert_eq!(at("2023-10-14T19:22:15.42Z"), whole);
    assert_eq!(at("2023-10-14T21:22:15.999999999+02:00"), whole);
    assert_ne!(at("2023-10-14T19:22:16Z"), whole);
    for bad in [
        "",
        "yesterday",
        "2023-10-14",
        "2023-13-14T19:22:15Z",
        "2023-10-14 19:22:15",
    ] {
        assert_eq!(at(bad), None, "{bad:?}");
    }
}

#[test]
fn report_of_fixtures() {
    let host = parse(&fixture_bytes("spec-staged-download-only.yaml")).unwrap();
    assert_eq!(
        reported(&host),
        json!({
            "booted": {
                "image": "quay.io/example/someimage:latest",
                "imageDigest": "sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34",
                "shortDigest": "736b359467c9",
                "version": "nightly",
                "timestamp": "2023-09-30T19:22:16Z",
                "architecture": "arm64",
                "softRebootCapable": false,
                "incompatible": false,
            },
            "staged": {
                "image": "quay.io/example/someimage:latest",
                "imageDigest": "sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566",
                "shortDigest": "16dc2b6256b4",
                "version": "nightly",
                "timestamp": "2023-10-14T19:22:15Z",
                "architecture": "arm64",
                "softRebootCapable": false,
                "incompatible": false,
                "downloadOnly": true,
            },
        })
    );

    // Slots without an image are not reported; the one with an image is.
    let host = parse(&fixture_bytes("spec-ostree-to-bootc.yaml")).unwrap();
    let (booted, staged, rollback) = host.report();
    assert_eq!(booted, None);
    assert_eq!(rollback, None);
    let staged = staged.unwrap();
    assert_eq!(
        staged.image.image,
        "quay.io/centos-bootc/centos-bootc:stream9"
    );
    assert_eq!(staged.image.architecture.as_deref(), Some("s390x"));
    assert!(!staged.download_only);

    let host = parse(&fixture_bytes("spec-staged-rollback.yaml")).unwrap();
    let (booted, staged, rollback) = host.report();
    assert_eq!(booted, None);
    assert!(staged.is_some());
    assert_eq!(
        rollback.unwrap().image_digest,
        "sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34"
    );

    // For every fixture, each reported slot is the entry it came from, as read by hand
    // from the fixture's own document (not through the agent's conversion).
    for name in fixture_names() {
        let raw = fixture_json(&name).0;
        let host = parse(&fixture_bytes(&name)).unwrap();
        let (booted, staged, rollback) = host.report();
        let pairs = [
            ("booted", booted.map(|b| b.image)),
            ("staged", staged.map(|s| s.image)),
            ("rollback", rollback),
        ];
        for (slot, reported) in pairs {
            let reported = reported.map(|r| (r.image, r.image_digest, r.version, r.architecture));
            let by_hand = slot_by_hand(&raw["status"][slot]);
            assert_eq!(reported, by_hand, "{name} {slot}");
        }
    }
}

/// One slot of a bootc status document read by hand, a second reading independent of
/// the agent's: (reference, digest, version, architecture), or `None` when the slot holds
/// no image.
fn slot_by_hand(slot: &Value) -> Option<(String, String, Option<String>, Option<String>)> {
    let image = slot.get("image").filter(|i| !i.is_null())?;
    let text = |v: &Value| v.as_str().map(str::to_owned);
    Some((
        text(&image["image"]["image"])?,
        text(&image["imageDigest"])?,
        text(&image["version"]),
        text(&image["architecture"]),
    ))
}

/// The error of `parse` on `doc`, after checking that its message does not repeat its cause.
fn error_of(bytes: &[u8]) -> StatusError {
    let err = parse(bytes).expect_err("must be refused");
    if let Some(source) = err.source() {
        assert!(
            !err.to_string().contains(&source.to_string()),
            "message repeats the cause: {err}"
        );
    }
    err
}

fn decode_error(d: &Value) -> (String, String) {
    match error_of(&serde_json::to_vec(d).unwrap()) {
        StatusError::DecodeField { path, source } => (path, source.to_string()),
        other => panic!("expected DecodeField, got {other:?}"),
    }
}

#[test]
fn not_json() {
    for bytes in [
        &b""[..],
        b"   ",
        b"{",
        b"{\"apiVersion\": ",
        b"\xff\xfe{}",
        b"{} {}",
        b"NaN",
    ] {
        let err = error_of(bytes);
        assert!(
            matches!(err, StatusError::ParseJson(_)),
            "{bytes:?}: {err:?}"
        );
        assert_eq!(err.to_string(), "bootc status output is not valid JSON");
    }
    // Every proper prefix of a real output is refused, never half-read.
    let full = fixture_bytes("spec-staged-download-only.yaml");
    for cut in 0..full.len() {
        assert!(
            matches!(parse(&full[..cut]), Err(StatusError::ParseJson(_))),
            "prefix of {cut} bytes"
        );
    }
    assert!(parse(&full).is_ok());
    // Nesting past serde_json's recursion limit is an error, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(matches!(
        error_of(deep.as_bytes()),
        StatusError::ParseJson(_)
    ));
}

#[test]
fn not_an_object() {
    for (text, found) in [
        ("[]", "array"),
        ("null", "null"),
        ("42", "number"),
        ("\"BootcHost\"", "string"),
        ("true", "boolean"),
    ] {
        match error_of(text.as_bytes()) {
            StatusError::NotAnObject { found: f } => assert_eq!(f, found, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn wrong_kind_or_api_version() {
    let base = doc(json!({}));
    let cases: Vec<(Value, &str)> = vec![
        (replaced(&base, "/kind", json!("Pod")), "kind \"Pod\""),
        (replaced(&base, "/kind", json!(5)), "kind 5"),
        (
            replaced(&base, "/kind", json!("bootchost")),
            "kind \"bootchost\"",
        ),
        (without(&base, "/kind"), "no `kind`"),
        (
            replaced(&base, "/apiVersion", json!("org.containers.bootc/v2")),
            "apiVersion \"org.containers.bootc/v2\"",
        ),
        (
            replaced(&base, "/apiVersion", json!("v1")),
            "apiVersion \"v1\"",
        ),
        (
            replaced(&base, "/apiVersion", Value::Null),
            "apiVersion null",
        ),
        (without(&base, "/apiVersion"), "no `apiVersion`"),
    ];
    for (d, says) in cases {
        let err = error_of(&serde_json::to_vec(&d).unwrap());
        assert!(
            matches!(
                err,
                StatusError::WrongKind { .. }
                    | StatusError::UnsupportedApiVersion { .. }
                    | StatusError::MissingField { .. }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(says), "{err} should say {says}");
    }
    for v in ["org.containers.bootc/v1", "org.containers.bootc/v1alpha1"] {
        assert!(parse_value(&replaced(&base, "/apiVersion", json!(v))).is_ok());
    }
}

#[test]
fn wrong_shapes_name_where_they_are() {
    let good = entry("quay.io/example/os:1", A);
    let with = |pointer: &str, v: Value| doc(json!({"booted": replaced(&good, pointer, v)}));
    let without_in = |pointer: &str| doc(json!({"booted": without(&good, pointer)}));
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            doc(json!({"booted": "yes"})),
            "status.booted",
            "invalid type: string \"yes\"",
        ),
        (
            doc(json!({"booted": [good.clone()]})),
            "status.booted",
            "invalid type: sequence",
        ),
        (
            doc(json!({"staged": 7})),
            "status.staged",
            "invalid type: integer",
        ),
        (
            doc(json!({"rollback": true})),
            "status.rollback",
            "invalid type: boolean",
        ),
        (
            with(
                "/image/imageDigest",
                json!(
                    "sha512:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                ),
            ),
            "status.booted.image",
            "sha512",
        ),
        (
            with("/image/imageDigest", json!("sha256:abc")),
            "status.booted.image",
            "3 hex characters",
        ),
        (
            with("/image/imageDigest", json!("md5")),
            "status.booted.image",
            "imageDigest \"md5\"",
        ),
        (
            with("/image/imageDigest", json!(17)),
            "status.booted.image",
            "invalid type: integer",
        ),
        (
            without_in("/image/imageDigest"),
            "status.booted.image",
            "missing field `imageDigest`",
        ),
        (
            without_in("/image/image/transport"),
            "status.booted.image",
            "missing field `transport`",
        ),
        (
            with("/image/version", json!(1.5)),
            "status.booted.image",
            "invalid type: floating point",
        ),
        (
            without_in("/pinned"),
            "status.booted",
            "missing field `pinned`",
        ),
        (
            without_in("/incompatible"),
            "status.booted",
            "missing field `incompatible`",
        ),
        (
            with("/downloadOnly", json!("yes")),
            "status.booted",
            "invalid type: string",
        ),
        (
            with("/ostree/deploySerial", json!(-1)),
            "status.booted",
            "invalid value: integer `-1`",
        ),
        (
            without_in("/ostree/checksum"),
            "status.booted",
            "missing field `checksum`",
        ),
        (
            doc(
                json!({"booted": replaced(&entry("q.io/a:1", A), "/cachedUpdate", json!({"image": {"image": "q", "transport": "registry"}, "imageDigest": "x"}))}),
            ),
            "status.booted.cachedUpdate",
            "imageDigest \"x\"",
        ),
        (
            doc(json!({"otherDeployments": [good.clone(), {"pinned": true}]})),
            "status.otherDeployments[1]",
            "missing field `incompatible`",
        ),
        (
            doc(json!({"rollbackQueued": "no"})),
            "status",
            "invalid type: string",
        ),
        (
            doc(json!({"usrOverlay": {"accessMode": "readOnly"}})),
            "status",
            "missing field `persistence`",
        ),
        (doc(json!("booted")), "status", "invalid type: string"),
        (
            replaced(&doc(json!({})), "/spec/image", json!({"image": "q"})),
            "spec.image",
            "missing field `transport`",
        ),
        (
            replaced(&doc(json!({})), "/spec/bootOrder", json!(1)),
            "spec",
            "invalid type: integer",
        ),
        (
            replaced(&doc(json!({})), "/metadata", json!(5)),
            "metadata",
            "invalid type: integer",
        ),
        (
            replaced(&doc(json!({})), "/metadata", json!({"labels": {"a": 1}})),
            "metadata",
            "invalid type: integer",
        ),
    ];
    for (d, want_path, says) in cases {
        let (path, source) = decode_error(&d);
        assert_eq!(path, want_path, "{source}");
        assert!(
            source.contains(says),
            "{want_path}: {source:?} should say {says:?}"
        );
    }
}

#[test]
fn decode_error_message_names_the_path() {
    let d = doc(json!({"booted": "yes"}));
    let err = parse_value(&d).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bootc status output: `status.booted` does not match bootc's status schema"
    );
}
