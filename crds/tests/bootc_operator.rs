//! One test per row of `docs/compatibility.md`: a pool as bootc-operator reads it and as
//! bootc-pool does, on bootc-operator's own sample and CRD (`tests/data/bootc-operator/`,
//! whose README names the commits they were taken from). Where the two differ, the test
//! pins the difference, so that the table cannot drift from the code unnoticed.
//!
//! What bootc-operator does is taken from its files; where a row needs its runtime
//! behaviour (how it rounds a percentage, the label names its controller writes), the
//! value is written here with the file it comes from.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use bootc_crds::budget::Budget;
use bootc_crds::conditions::{idle, node_degraded, pool_degraded, up_to_date};
use bootc_crds::validate::NO_SLOTS_HINT;
use bootc_crds::{BootcNode, BootcNodePool};
use common::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

const THEIR_SAMPLE: &str = "tests/data/bootc-operator/bootc_v1alpha1_bootcnodepool.yaml";
const THEIR_CRD: &str = "tests/data/bootc-operator/node.bootc.dev_bootcnodepools.yaml";

fn their_sample() -> Value {
    load_yaml(THEIR_SAMPLE)
}

fn their_schema() -> Value {
    load_yaml(THEIR_CRD)["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// What bootc-operator's CRD would store, or its field errors.
fn their_admit(object: &Value) -> Result<Value, Vec<String>> {
    apischema::admit(&their_schema(), object, None)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

/// Their sample with `value` at `path`.
fn their_sample_with(path: &str, value: Value) -> Value {
    let mut object = their_sample();
    set(&mut object, path, value);
    object
}

/// Both CRDs' answers to one object: (theirs accepts, ours accepts, our errors).
fn both_admit(object: &Value) -> (bool, bool, Vec<String>) {
    let ours = admit("bootcnodepools", object);
    (
        their_admit(object).is_ok(),
        ours.is_ok(),
        ours.err().unwrap_or_default(),
    )
}

fn validate_message(object: &Value) -> Option<String> {
    let pool: BootcNodePool = serde_json::from_value(object.clone()).unwrap();
    pool.spec.validate().err().map(|e| e.to_string())
}

/// Every property path under `schema` (dotted, `spec.rollout.paused`), with its `type`.
fn property_paths(schema: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, sub) in properties {
            let path = format!("{prefix}{name}");
            out.push((path.clone(), sub["type"].clone()));
            property_paths(sub, &format!("{path}."), out);
        }
    }
    if schema["items"].is_object() {
        property_paths(&schema["items"], &format!("{prefix}[]."), out);
    }
}

fn paths_of(schema: &Value, root: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    property_paths(&schema["properties"][root], &format!("{root}."), &mut out);
    out
}

#[test]
fn the_sample_and_crd_are_theirs() {
    // The copied sample is valid under the copied CRD, and nothing of it is unknown there:
    // the test data is consistent before it is used against ours.
    let sample = their_sample();
    assert_eq!(
        apischema::prune(&their_schema(), &sample).1,
        Vec::<String>::new()
    );
    their_admit(&sample).expect("their CRD accepts their sample");
    assert_eq!(
        load_yaml(THEIR_CRD)["metadata"]["name"],
        "bootcnodepools.node.bootc.dev"
    );
}

/// Row "their sample, as it is".
#[test]
fn their_sample_is_accepted_as_it_is() {
    let sample = their_sample();
    let pool: BootcNodePool = serde_json::from_value(sample.clone()).unwrap();
    pool.spec
        .validate()
        .expect("validate() accepts their sample");
    assert_eq!(pruned("bootcnodepools", &sample), Vec::<String>::new());
    let stored = admit("bootcnodepools", &sample).expect("our CRD accepts their sample");
    for path in ["nodeSelector", "image"] {
        for (key, value) in sample["spec"][path].as_object().unwrap() {
            assert_eq!(stored["spec"][path][key], *value, "spec.{path}.{key} kept");
        }
    }
}

/// Row "their sample's optional fields": the values its comments show, uncommented.
#[test]
fn their_sample_with_its_optional_fields_is_accepted() {
    let mut object = their_sample();
    set(
        &mut object,
        "spec.rollout",
        json!({"maxUnavailable": 1, "paused": false, "drainTimeoutSeconds": 300}),
    );
    set(
        &mut object,
        "spec.disruption",
        json!({"rebootPolicy": "AllowSoftReboot"}),
    );
    set(
        &mut object,
        "spec.pullSecretRef",
        json!({"name": "my-pull-secret", "namespace": "bootc-operator"}),
    );
    their_admit(&object).expect("theirs accepts it");
    assert_eq!(pruned("bootcnodepools", &object), Vec::<String>::new());
    let stored = admit("bootcnodepools", &object).expect("ours accepts it");
    for path in ["rollout", "disruption", "pullSecretRef"] {
        for (key, value) in object["spec"][path].as_object().unwrap() {
            assert_eq!(stored["spec"][path][key], *value, "spec.{path}.{key} kept");
        }
    }
    let pool: BootcNodePool = serde_json::from_value(stored).unwrap();
    pool.spec.validate().expect("valid");
}

/// Row "spec field names": every spec field of their CRD is one of ours, of the same type.
#[test]
fn every_spec_field_of_theirs_is_a_spec_field_of_ours() {
    let ours: std::collections::BTreeMap<String, Value> =
        paths_of(&committed_schema("bootcnodepools"), "spec")
            .into_iter()
            .collect();
    let theirs = paths_of(&their_schema(), "spec");
    assert!(theirs.len() >= 15, "their spec was read: {theirs:?}");
    for (path, their_type) in theirs {
        let our_type = ours
            .get(&path)
            .unwrap_or_else(|| panic!("{path}: theirs, not ours"));
        if !their_type.is_null() {
            assert_eq!(*our_type, their_type, "{path}: type");
        }
    }
}

/// Row "defaults": what an unset field means.
#[test]
fn unset_fields_default_as_theirs_do() {
    let stored = admit("bootcnodepools", &their_sample()).unwrap();
    let pool: BootcNodePool = serde_json::from_value(stored.clone()).unwrap();
    let rollout = &pool.spec.rollout;
    // bootc-operator: maxUnavailable unset resolves to 1 (resolveMaxUnavailable), paused
    // false, rebootPolicy RebootOnly (schema default), no drain timeout, no pull Secret.
    assert_eq!(stored["spec"]["rollout"]["maxUnavailable"], 1);
    assert_eq!(
        Budget::parse(&rollout.max_unavailable).unwrap().resolve(10),
        1
    );
    assert!(!rollout.paused);
    assert_eq!(stored["spec"]["disruption"]["rebootPolicy"], "RebootOnly");
    assert_eq!(rollout.drain_timeout_seconds, None);
    assert_eq!(pool.spec.pull_secret_ref, None);
}

/// Row "unhealthy nodes that halt the rollout": theirs is fixed at 2
/// (`unhealthySlotHaltThreshold`, internal/controller/rollout.go); ours defaults to 2.
#[test]
fn the_halt_threshold_defaults_to_theirs() {
    const THEIRS: i64 = 2;
    let stored = admit("bootcnodepools", &their_sample()).unwrap();
    assert_eq!(stored["spec"]["rollout"]["haltAfterUnhealthy"], THEIRS);
}

/// Theirs accepts `object`; ours refuses it, naming `field`.
fn only_ours_refuses(object: &Value, field: &str) {
    let (theirs, ours, errors) = both_admit(object);
    assert!(theirs, "theirs accepts it");
    assert!(!ours, "ours refuses it");
    assert!(errors.iter().any(|e| e.starts_with(field)), "{errors:?}");
}

/// Row "rebootTimeoutSeconds": theirs unset waits forever and allows 0; ours defaults to
/// 1800 and refuses 0.
#[test]
fn reboot_timeout_defaults_to_30_minutes_and_0_is_refused() {
    let stored = admit("bootcnodepools", &their_sample()).unwrap();
    assert_eq!(stored["spec"]["rollout"]["rebootTimeoutSeconds"], 1800);
    let their_stored = their_admit(&their_sample()).unwrap();
    assert!(
        their_stored["spec"].get("rollout").is_none(),
        "theirs: unset"
    );

    let zero = their_sample_with("spec.rollout.rebootTimeoutSeconds", json!(0));
    only_ours_refuses(&zero, "spec.rollout.rebootTimeoutSeconds");
    let long = their_sample_with("spec.rollout.rebootTimeoutSeconds", json!(86_400));
    assert!(both_admit(&long).1, "a long timeout is accepted");
}

/// Row "maxUnavailable: 0": theirs grants no reboot slot (resolveMaxUnavailable: "a
/// value of 0 is allowed and means no reboot slots"); ours refuses it, in the schema and
/// in validate(), whose message says to use paused.
#[test]
fn max_unavailable_0_is_refused_with_a_pointer_to_paused() {
    let object = their_sample_with("spec.rollout.maxUnavailable", json!(0));
    only_ours_refuses(&object, "spec.rollout.maxUnavailable");
    // A pool stored with 0 before our CRD was installed reaches validate(), which the
    // controller runs before acting (InvalidSpec: nothing is done).
    let message = validate_message(&object).expect("validate() refuses 0");
    assert!(
        message.starts_with("spec.rollout.maxUnavailable: "),
        "{message}"
    );
    assert!(message.contains(NO_SLOTS_HINT), "{message}");
    assert!(NO_SLOTS_HINT.contains("paused: true"));
}

/// Row "maxUnavailable: a negative integer or 0%": the same as 0 on both sides.
#[test]
fn negative_and_zero_percent_budgets_are_refused_with_the_same_pointer() {
    for value in [json!(-1), json!("0%")] {
        let object = their_sample_with("spec.rollout.maxUnavailable", value.clone());
        let (theirs, ours, _) = both_admit(&object);
        assert!(theirs && !ours, "{value}: theirs accepts, ours refuses");
        let message = validate_message(&object).expect("refused");
        assert!(message.contains(NO_SLOTS_HINT), "{value}: {message}");
    }
    // A budget refused for another reason does not get the pointer.
    let object = their_sample_with("spec.rollout.maxUnavailable", json!("150%"));
    let message = validate_message(&object).expect("refused");
    assert!(!message.contains(NO_SLOTS_HINT), "{message}");
}

/// What bootc-operator computes for a percentage: `intstr.GetScaledValueFromIntOrPercent`
/// with roundUp true (internal/controller/rollout.go, resolveMaxUnavailable), that is
/// ceil(percent × nodes / 100).
fn theirs_rounds_up(percent: u32, nodes: u32) -> u32 {
    (percent * nodes).div_ceil(100)
}

/// Row "percentages": theirs round up, ours round down but never below one node.
#[test]
fn percentages_round_down_where_theirs_round_up() {
    // (percent, nodes, bootc-operator, bootc-pool)
    let table: [(u32, u32, u32, u32); 10] = [
        (25, 10, 3, 2),
        (50, 5, 3, 2),
        (75, 3, 3, 2),
        (25, 3, 1, 1),
        (10, 9, 1, 1),
        (10, 20, 2, 2),
        (30, 10, 3, 3),
        (33, 100, 33, 33),
        (1, 99, 1, 1),
        (100, 7, 7, 7),
    ];
    for (percent, nodes, theirs, ours) in table {
        let value = IntOrString::String(format!("{percent}%"));
        assert_eq!(
            theirs_rounds_up(percent, nodes),
            theirs,
            "{percent}% of {nodes}: theirs"
        );
        let budget = Budget::parse(&value).unwrap();
        assert_eq!(budget.resolve(nodes), ours, "{percent}% of {nodes}: ours");
    }
    // The same percentage, written in their sample, is accepted by both schemas.
    let object = their_sample_with("spec.rollout.maxUnavailable", json!("25%"));
    assert_eq!(both_admit(&object), (true, true, vec![]));
}

/// Row "percentages above 100%": theirs accepted (every node), ours refused.
#[test]
fn percentages_above_100_are_refused() {
    assert_eq!(theirs_rounds_up(150, 10), 15);
    let object = their_sample_with("spec.rollout.maxUnavailable", json!("150%"));
    let (theirs, ours, errors) = both_admit(&object);
    assert!(theirs && !ours, "{errors:?}");
    assert!(validate_message(&object).is_some());
}

/// Row "a budget string that is not a percentage": their schema takes any string and the
/// controller then reports InvalidSpec; ours refuses it on write. Neither rolls out.
#[test]
fn a_budget_string_without_a_percent_sign_is_refused_on_write() {
    let object = their_sample_with("spec.rollout.maxUnavailable", json!("25"));
    let (theirs, ours, errors) = both_admit(&object);
    assert!(theirs && !ours, "{errors:?}");
    assert!(validate_message(&object).is_some());
}

/// Row "drainTimeoutSeconds: 0": no timeout on both sides (theirs hands 0 to kubectl's
/// drain helper, where 0 means none).
#[test]
fn drain_timeout_0_is_accepted() {
    let object = their_sample_with("spec.rollout.drainTimeoutSeconds", json!(0));
    assert_eq!(both_admit(&object), (true, true, vec![]));
    assert_eq!(validate_message(&object), None);
}

/// Row "pods no controller manages": theirs always drains with Force (and
/// DeleteEmptyDirData); ours deletes emptyDir data by default but evicts unmanaged pods
/// only with disruption.drain.force.
#[test]
fn unmanaged_pods_are_evicted_only_with_force() {
    let stored = admit("bootcnodepools", &their_sample()).unwrap();
    assert_eq!(stored["spec"]["disruption"]["drain"]["force"], false);
    assert_eq!(
        stored["spec"]["disruption"]["drain"]["deleteEmptyDirData"],
        true
    );
    let object = their_sample_with("spec.disruption.drain", json!({"force": true}));
    let stored = admit("bootcnodepools", &object).expect("force: true accepted");
    assert_eq!(stored["spec"]["disruption"]["drain"]["force"], true);
    // Their CRD has no such field: a pool that sets it is pruned there.
    assert_eq!(
        apischema::prune(&their_schema(), &object).1.len(),
        1,
        "theirs drops disruption.drain"
    );
}

/// Row "image.ref": their schema takes any non-empty string and the controller parses it
/// later; ours checks the reference grammar on write. Their documented references pass.
#[test]
fn their_image_references_are_accepted_and_bad_ones_refused_on_write() {
    let digest = format!("quay.io/example/myos@sha256:{HEX}");
    for reference in [
        "ghcr.io/bootc-dev/bink/node:latest",
        "registry.example.com/my-org/node:latest",
        "quay.io/example/myos:latest",
        digest.as_str(),
    ] {
        let object = their_sample_with("spec.image.ref", json!(reference));
        assert_eq!(both_admit(&object), (true, true, vec![]), "{reference}");
        assert_eq!(validate_message(&object), None, "{reference}");
    }
    // Their docs' short example digest is no digest: theirs fails at runtime, ours on write.
    let object = their_sample_with(
        "spec.image.ref",
        json!("quay.io/example/myos@sha256:abc123"),
    );
    let (theirs, ours, _) = both_admit(&object);
    assert!(theirs && !ours);
}

/// Row "status fields": what their controller writes. Shared names are kept (and ours
/// overwrites them); theirs alone are pruned.
#[test]
fn their_status_fields_are_kept_or_pruned() {
    // Built from BootcNodePoolStatus's JSON names (api/v1alpha1/bootcnodepool_types.go).
    let mut object = their_sample();
    let digest = format!("sha256:{HEX}");
    set(
        &mut object,
        "status",
        json!({
            "observedGeneration": 4,
            "targetDigest": digest,
            "nextTagResolutionTime": "2025-01-01T00:05:00Z",
            "deployedDigest": digest,
            "updateAvailable": false,
            "nodeCount": 3,
            "updatedCount": 3,
            "updatingCount": 0,
            "degradedCount": 0,
            "conditions": [
                {"type": "UpToDate", "status": "True", "reason": "AllUpdated", "message": "",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "Degraded", "status": "False", "reason": "Healthy", "message": "",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        }),
    );
    their_admit(&object).expect("their CRD stores it");
    let mut gone = pruned("bootcnodepools", &object);
    gone.sort();
    assert_eq!(
        gone,
        [
            "status.deployedDigest",
            "status.nextTagResolutionTime",
            "status.updateAvailable"
        ]
    );
    let stored = admit("bootcnodepools", &object).expect("our CRD stores the rest");
    for field in [
        "observedGeneration",
        "targetDigest",
        "nodeCount",
        "updatedCount",
        "updatingCount",
        "degradedCount",
        "conditions",
    ] {
        assert_eq!(
            stored["status"][field], object["status"][field],
            "status.{field}"
        );
    }
    let pool: BootcNodePool = serde_json::from_value(stored).unwrap();
    assert_eq!(pool.status.unwrap().node_count, 3);

    // The same list, from their CRD: every status field of theirs is ours but these.
    let ours: BTreeSet<String> = paths_of(&committed_schema("bootcnodepools"), "status")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let theirs_only: Vec<String> = paths_of(&their_schema(), "status")
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !ours.contains(p))
        .collect();
    assert_eq!(theirs_only, gone);
}

/// Row "condition types and reasons": theirs (bootcnodepool_types.go, bootcnode_types.go,
/// rollout.go; SecretError in docs/src/operations/pool.md) against ours.
#[test]
fn their_condition_reasons_are_ours_but_secret_error() {
    let ours_pool: BTreeSet<&str> = [
        up_to_date::ALL_UPDATED,
        up_to_date::ROLLOUT_IN_PROGRESS,
        up_to_date::PAUSED,
    ]
    .into_iter()
    .chain(pool_degraded::PRECEDENCE)
    .chain([pool_degraded::HEALTHY])
    .collect();
    let theirs_pool = [
        "AllUpdated",
        "RolloutInProgress",
        "Paused",
        "NodeConflict",
        "NodeDegraded",
        "InvalidSpec",
        "TagResolutionError",
        "RolloutHalted",
        "Healthy",
        "SecretError",
    ];
    let missing: Vec<&str> = theirs_pool
        .into_iter()
        .filter(|r| !ours_pool.contains(r))
        .collect();
    assert_eq!(missing, ["SecretError"]);

    let ours_node: BTreeSet<&str> = [
        idle::IDLE,
        idle::STAGING,
        idle::STAGED,
        idle::REBOOTING,
        node_degraded::ERROR,
        node_degraded::HEALTHY,
    ]
    .into_iter()
    .collect();
    for reason in ["Idle", "Staging", "Staged", "Rebooting", "Error", "Healthy"] {
        assert!(ours_node.contains(reason), "node reason {reason}");
    }
    assert_eq!(bootc_crds::conditions::UP_TO_DATE, "UpToDate");
    assert_eq!(bootc_crds::conditions::DEGRADED, "Degraded");
    assert_eq!(bootc_crds::conditions::IDLE, "Idle");
}

/// Row "one cluster": both projects define the same two CRDs (same names, group, version,
/// kind, scope), so only one of them can be installed.
#[test]
fn both_projects_define_the_same_crds() {
    let theirs = load_yaml(THEIR_CRD);
    let ours = load_yaml("node.bootc.dev_bootcnodepools.yaml");
    for field in ["group", "scope", "names"] {
        let (a, b) = (&theirs["spec"][field], &ours["spec"][field]);
        if field == "names" {
            for key in ["kind", "plural", "singular"] {
                assert_eq!(a[key], b[key], "names.{key}");
            }
            // Ours leaves listKind to kube-apiserver's default, kind + "List": theirs.
            let default_list_kind = format!("{}List", b["kind"].as_str().unwrap());
            assert_eq!(a["listKind"], json!(default_list_kind), "names.listKind");
            assert!(b.get("listKind").is_none_or(|k| *k == a["listKind"]));
            assert_eq!(a["shortNames"][0], b["shortNames"][0], "short name");
        } else {
            assert_eq!(a, b, "{field}");
        }
    }
    assert_eq!(theirs["metadata"]["name"], ours["metadata"]["name"]);
    assert_eq!(
        theirs["spec"]["versions"][0]["name"],
        ours["spec"]["versions"][0]["name"]
    );
    // BootcNode (config/crd/bases/node.bootc.dev_bootcnodes.yaml): the same name too.
    let ours = load_yaml("node.bootc.dev_bootcnodes.yaml");
    assert_eq!(ours["metadata"]["name"], "bootcnodes.node.bootc.dev");
    assert_eq!(ours["spec"]["names"]["shortNames"][0], "bn");
    // Their third kind has no counterpart here.
    let kinds: Vec<Value> = bootc_crds::crdgen::crds()
        .unwrap()
        .iter()
        .map(|crd| crd["spec"]["names"]["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("BootcNodePool"), json!("BootcNode")]);
}

/// Row "printer columns": their columns are ours.
#[test]
fn their_printer_columns_are_ours() {
    let theirs = load_yaml(THEIR_CRD)["spec"]["versions"][0]["additionalPrinterColumns"].clone();
    let ours = load_yaml("node.bootc.dev_bootcnodepools.yaml")["spec"]["versions"][0]
        ["additionalPrinterColumns"]
        .clone();
    let theirs = theirs.as_array().unwrap();
    assert_eq!(theirs.len(), 4);
    for column in theirs {
        assert!(
            ours.as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == column["name"]
                    && c["jsonPath"] == column["jsonPath"]
                    && c["type"] == column["type"]),
            "{column}"
        );
    }
}

/// Row "BootcNode fields": a BootcNode as their controller and daemon write it (from
/// BootcNodeSpec, BootcNodeStatus and ImageInfo, api/v1alpha1/bootcnode_types.go) is read
/// by ours without losing a field.
#[test]
fn their_bootc_node_fields_are_ours() {
    let image = |c: char| {
        json!({
            "image": format!("quay.io/example/myos@sha256:{}", c.to_string().repeat(64)),
            "imageDigest": format!("sha256:{}", c.to_string().repeat(64)),
            "version": "42.1",
            "timestamp": "2025-01-01T00:00:00Z",
            "architecture": "amd64",
            "softRebootCapable": true,
            "incompatible": false
        })
    };
    let object = json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {"name": "worker-0"},
        "spec": {
            "desiredImage": format!("quay.io/example/myos@sha256:{}", "b".repeat(64)),
            "desiredImageState": "Staged",
            "pullSecretRef": {"name": "my-pull-secret", "namespace": "bootc-operator"},
            "pullSecretHash": "0123abcd",
            "rebootPolicy": "AllowSoftReboot"
        },
        "status": {
            "observedGeneration": 2,
            "booted": image('a'),
            "staged": image('b'),
            "rollback": image('c'),
            "conditions": [
                {"type": "Idle", "status": "False", "reason": "Staged", "message": "",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "Degraded", "status": "False", "reason": "Healthy", "message": "",
                 "lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        }
    });
    assert_eq!(pruned("bootcnodes", &object), Vec::<String>::new());
    let stored = admit("bootcnodes", &object).expect("accepted");
    let node: BootcNode = serde_json::from_value(stored).unwrap();
    node.spec.validate().expect("valid");
    let status = node.status.unwrap();
    assert_eq!(
        status.booted.unwrap().image.architecture.as_deref(),
        Some("amd64")
    );
    assert!(status.staged.unwrap().image.soft_reboot_capable);
}

/// bootc-operator's label, annotation and finalizer names (api/v1alpha1/constants.go),
/// each with the name bootc-pool uses for the same purpose, if any.
const NAMES: [(&str, Option<&str>); 9] = [
    ("bootc.dev/managed", Some(bootc_crds::MANAGED_LABEL)),
    (
        "bootc.dev/in-reboot-slot",
        Some(bootc_crds::REBOOT_SLOT_ANNOTATION),
    ),
    (
        "bootc.dev/was-cordoned",
        Some(bootc_crds::WAS_CORDONED_ANNOTATION),
    ),
    ("bootc.dev/pool-cleanup", Some("node.bootc.dev/cleanup")),
    ("bootc.dev/last-observed-state", None),
    ("bootc.dev/owns-karpenter-do-not-repair", None),
    ("bootc.dev/owns-karpenter-do-not-disrupt", None),
    ("karpenter.sh/do-not-disrupt", None),
    ("karpenter.sh/do-not-repair", None),
];

/// Row "labels, annotations and finalizers": none of theirs is ours. Ours are read from
/// docs/reference.md, which is generated from the code and lists every one we use.
#[test]
fn their_label_annotation_and_finalizer_names_are_not_ours() {
    let path = crate_dir().join("../docs/reference.md");
    let reference = std::fs::read_to_string(&path).unwrap();
    let section = reference
        .split("## Labels, annotations and finalizers")
        .nth(1)
        .expect("the reference has the section");
    let ours: BTreeSet<&str> = section
        .lines()
        .filter(|l| {
            l.starts_with("| label")
                || l.starts_with("| annotation")
                || l.starts_with("| finalizer")
        })
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert!(ours.len() >= 8, "{ours:?}");
    for (theirs, mine) in NAMES {
        assert!(!ours.contains(theirs), "{theirs} is not ours");
        if let Some(mine) = mine {
            assert!(ours.contains(mine), "{mine} is ours");
            assert_ne!(theirs, mine);
        }
    }
    assert_eq!(bootc_crds::MANAGED_LABEL, "node.bootc.dev/managed");
}

/// Row "namespace, RBAC and pull Secrets": ours installs into bootc-system, its
/// cluster-wide objects are named bootc-pool-* or bootc-node-*, and it reads pull Secrets
/// only in its own namespace by default; their docs keep the pull Secret in
/// bootc-operator.
#[test]
fn their_pull_secret_namespace_is_not_read_by_default() {
    let path = crate_dir().join("../deploy/install.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut namespaces = Vec::new();
    let mut secret_role_namespaces = Vec::new();
    let mut cluster_names = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let object: Value = serde::Deserialize::deserialize(document).unwrap();
        if object.is_null() {
            continue;
        }
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        match object["kind"].as_str().unwrap() {
            "Namespace" => namespaces.push(name),
            "Role" => {
                let reads_secrets = object["rules"].as_array().unwrap().iter().any(|r| {
                    r["resources"]
                        .as_array()
                        .unwrap()
                        .contains(&json!("secrets"))
                });
                if reads_secrets {
                    secret_role_namespaces.push(
                        object["metadata"]["namespace"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    );
                }
            }
            "ClusterRole"
            | "ClusterRoleBinding"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding" => cluster_names.push(name),
            _ => {}
        }
    }
    assert_eq!(namespaces, ["bootc-system"]);
    assert!(!secret_role_namespaces.is_empty());
    assert!(secret_role_namespaces.iter().all(|n| n == "bootc-system"));
    let sample_namespace = "bootc-operator"; // their sample's and docs' pullSecretRef
    assert!(!secret_role_namespaces.iter().any(|n| n == sample_namespace));
    assert!(cluster_names.len() >= 4);
    for name in cluster_names {
        assert!(
            name.starts_with("bootc-pool-") || name.starts_with("bootc-node-"),
            "{name}"
        );
    }
}

/// Row "operator settings": their BootcOperatorConfig's tag period (default 300 s,
/// DefaultTagResolutionPeriodSeconds) is per pool here, image.resolveIntervalSeconds,
/// with the same default and a minimum of 30.
#[test]
fn the_tag_resolution_period_is_per_pool_with_their_default() {
    const THEIR_DEFAULT: i64 = 300;
    let stored = admit("bootcnodepools", &their_sample()).unwrap();
    assert_eq!(
        stored["spec"]["image"]["resolveIntervalSeconds"],
        THEIR_DEFAULT
    );
    let object = their_sample_with("spec.image.resolveIntervalSeconds", json!(29));
    let (theirs, ours, _) = both_admit(&object);
    assert!(
        theirs && !ours,
        "theirs prunes the field, ours refuses below 30"
    );
}
