#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use chrono::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use proptest::prelude::*;

use super::OtherSelectors;
use crate::plan::world::{PoolView, Snapshot};

const KEYS: [&str; 3] = ["role", "zone", "tier"];
const VALUES: [&str; 3] = ["a", "b", "c"];

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        0..3,
    )
}

fn requirement() -> impl Strategy<Value = LabelSelectorRequirement> {
    let ops = vec!["In", "NotIn", "Exists", "DoesNotExist", "Bogus"];
    (
        prop::sample::select(KEYS.to_vec()),
        prop::sample::select(ops),
        prop::collection::vec(prop::sample::select(VALUES.to_vec()), 0..3),
    )
        .prop_map(|(key, op, values)| LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: Some(values.into_iter().map(str::to_owned).collect()),
        })
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    (
        prop::option::of(labels()),
        prop::option::of(prop::collection::vec(requirement(), 0..2)),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

/// A snapshot of pool "p0" with `selectors` as every pool's (its own first).
fn snapshot(selectors: Vec<LabelSelector>) -> Snapshot {
    let spec = serde_json::from_value(serde_json::json!({
        "image": {"ref": "registry.test/os:1"},
        "nodeSelector": {},
    }))
    .unwrap();
    let pool = PoolView {
        name: "p0".into(),
        generation: Some(1),
        spec,
        status: None,
        deleting: false,
        finalized: true,
    };
    let now = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut snap = Snapshot::of(pool, Vec::new(), now);
    snap.pool_selectors = std::sync::Arc::new(
        selectors
            .into_iter()
            .enumerate()
            .map(|(i, s)| (format!("p{i}"), s))
            .collect(),
    );
    snap
}

proptest! {
    /// The filed selectors give what matching the labels against every other pool's
    /// selector gives (the plan's way before they were filed), in the same order.
    #[test]
    fn filed_selectors_select_what_every_selector_matched(
        selectors in prop::collection::vec(selector(), 1..8),
        node in labels(),
    ) {
        let snap = snapshot(selectors);
        let every: Vec<&str> = snap
            .pool_selectors
            .iter()
            .skip(1)
            .filter(|(_, s)| bootc_crds::selector::matches(s, &node))
            .map(|(name, _)| name.as_str())
            .collect();
        let filed = OtherSelectors::of(&snap);
        prop_assert_eq!(filed.selecting(Some(&node)), every);
        prop_assert!(filed.selecting(None).is_empty());
    }
}
