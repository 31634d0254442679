//! Property tests of the bootc status parser: it never panics, whatever bytes it is given.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bootc_status_common;

use std::sync::OnceLock;

use bootc_crds::Digest;
use bootc_node_agent::bootc_status::{BootEntry, BootcHost, parse};
use bootc_status_common::{fixture_json, fixture_names, pointers};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

/// bootc's fixtures as JSON documents, read once.
fn fixtures() -> &'static [Value] {
    static FIXTURES: OnceLock<Vec<Value>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        fixture_names()
            .iter()
            .map(|name| fixture_json(name).0)
            .collect()
    })
}

/// Runs everything the agent does with a parse result; a parsed host re-serialises and
/// parses back to itself.
fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(host) = parse(bytes) else {
        return Ok(());
    };
    let _ = host.report();
    let _ = host.staged_download_only();
    let _ = host.soft_reboot_capable_staged();
    let probe: Digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        .parse()
        .unwrap();
    let entries = [
        &host.status.booted,
        &host.status.staged,
        &host.status.rollback,
    ];
    for entry in entries.into_iter().flatten() {
        let _ = entry.matches(&probe);
        if let Some(d) = entry.image_digest() {
            prop_assert!(entry.matches(d));
        }
        prop_assert_eq!(entry.to_image_status().is_some(), entry.image.is_some());
    }
    for entry in &host.status.other_deployments {
        let _ = BootEntry::to_image_status(entry);
    }
    let again = serde_json::to_vec(&host).unwrap();
    let back: BootcHost = parse(&again).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    prop_assert_eq!(back, host);
    Ok(())
}

/// Any JSON value, a few levels deep, with strings that look like what bootc writes.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "sha256:[0-9a-f]{64}".prop_map(Value::String),
        "[a-z.]{1,12}/[a-z]{1,8}(:[a-z0-9]{1,5})?(@sha256:[0-9a-f]{0,64})?".prop_map(Value::String),
        "(insecure|containerPolicy|default|rollback|bootcHost|org.containers.bootc/v1|BootcHost)"
            .prop_map(Value::String),
        "\\PC{0,16}".prop_map(Value::String),
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})"
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                "(image|imageDigest|ostreeRemote|incompatible|pinned|[a-zA-Z]{1,8})",
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&bytes)?;
    }

    #[test]
    fn arbitrary_json(doc in arb_json()) {
        exercise(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn fixtures_with_bytes_changed(
        which in any::<Index>(),
        edits in prop::collection::vec((any::<Index>(), any::<u8>(), 0u8..4), 1..8),
    ) {
        let docs = fixtures();
        let mut bytes = serde_json::to_vec(which.get(docs)).unwrap();
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                2 => { bytes.remove(i); }
                _ => bytes.truncate(i),
            }
        }
        exercise(&bytes)?;
    }

    #[test]
    fn fixtures_with_a_node_replaced(
        which in any::<Index>(),
        at in any::<Index>(),
        with in arb_json(),
    ) {
        let mut doc = which.get(fixtures()).clone();
        let all = pointers(&doc);
        let pointer: &String = at.get(&all);
        *doc.pointer_mut(pointer).unwrap() = with;
        exercise(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn fixtures_with_a_node_removed(which in any::<Index>(), at in any::<Index>()) {
        let doc = which.get(fixtures());
        let all = pointers(doc);
        let doc = bootc_status_common::without(doc, at.get::<String>(&all));
        exercise(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn truncated_fixtures_are_refused(which in any::<Index>(), cut in any::<Index>()) {
        let bytes = serde_json::to_vec(which.get(fixtures())).unwrap();
        let cut = cut.index(bytes.len());
        prop_assert!(parse(&bytes[..cut]).is_err());
    }
}
