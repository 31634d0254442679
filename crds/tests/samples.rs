//! Every sample parses into the Rust types, passes validate(), and is stored by the
//! committed CRD without losing a field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bootc_crds::node::DesiredImageState;
use bootc_crds::pool::RebootPolicy;
use bootc_crds::{BootcNode, BootcNodePool};
use common::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const POOL_SAMPLES: [&str; 5] = [
    "samples/pool-minimal.yaml",
    "samples/pool-pinned.yaml",
    "samples/pool-full.yaml",
    "samples/pool-bootc-operator.yaml",
    "samples/pool-health-gated.yaml",
];

#[test]
fn the_samples_directory_holds_what_is_tested() {
    let mut found: Vec<String> = std::fs::read_dir(crate_dir().join("samples"))
        .unwrap()
        .map(|e| format!("samples/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    found.sort();
    let mut tested: Vec<String> = POOL_SAMPLES.iter().map(|s| s.to_string()).collect();
    tested.push("samples/bootcnode.yaml".into());
    tested.sort();
    assert_eq!(found, tested, "a sample was added without a test");
}

#[test]
fn pool_samples_parse_validate_and_are_stored_whole() {
    for sample in POOL_SAMPLES {
        let object = load_yaml(sample);
        let pool: BootcNodePool =
            serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{sample}: {e}"));
        pool.spec
            .validate()
            .unwrap_or_else(|e| panic!("{sample}: {e}"));
        assert_eq!(
            pruned("bootcnodepools", &object),
            Vec::<String>::new(),
            "{sample}: fields unknown to the CRD"
        );
        let stored =
            admit("bootcnodepools", &object).unwrap_or_else(|e| panic!("{sample} refused: {e:?}"));
        // What the server stores (defaults filled in) means the same as what serde reads.
        let stored: BootcNodePool =
            serde_json::from_value(stored).unwrap_or_else(|e| panic!("{sample}: {e}"));
        assert_eq!(
            stored.spec, pool.spec,
            "{sample}: schema defaults and serde defaults differ"
        );
    }
}

#[test]
fn a_bootc_operator_pool_keeps_its_meaning() {
    let object = load_yaml("samples/pool-bootc-operator.yaml");
    let stored = admit("bootcnodepools", &object).expect("accepted unchanged");
    // Nothing the admin wrote was changed, only defaults added.
    for path in [
        "nodeSelector",
        "image",
        "rollout",
        "disruption",
        "pullSecretRef",
    ] {
        for (key, value) in object["spec"][path].as_object().unwrap() {
            assert_eq!(stored["spec"][path][key], *value, "spec.{path}.{key}");
        }
    }
    let pool: BootcNodePool = serde_json::from_value(stored).unwrap();
    assert_eq!(
        pool.spec.rollout.max_unavailable,
        IntOrString::String("25%".into())
    );
    assert!(pool.spec.rollout.paused);
    assert_eq!(pool.spec.rollout.drain_timeout_seconds, Some(300));
    assert_eq!(
        pool.spec.disruption.reboot_policy,
        RebootPolicy::AllowSoftReboot
    );
    let secret = pool.spec.pull_secret_ref.unwrap();
    assert_eq!(
        (secret.name.as_str(), secret.namespace.as_str()),
        ("my-pull-secret", "bootc-operator")
    );
}

#[test]
fn bootc_operator_edge_values_are_accepted() {
    // bootc-operator allows drainTimeoutSeconds: 0 and an empty selector; so do we.
    let mut object = load_yaml("samples/pool-bootc-operator.yaml");
    set(
        &mut object,
        "spec.rollout.drainTimeoutSeconds",
        serde_json::json!(0),
    );
    set(&mut object, "spec.nodeSelector", serde_json::json!({}));
    set(
        &mut object,
        "spec.rollout.maxUnavailable",
        serde_json::json!(3),
    );
    let stored = admit("bootcnodepools", &object).expect("accepted");
    let pool: BootcNodePool = serde_json::from_value(stored).unwrap();
    pool.spec.validate().expect("valid");
}

#[test]
fn minimal_pool_gets_every_default() {
    let stored = admit("bootcnodepools", &load_yaml("samples/pool-minimal.yaml")).unwrap();
    let spec = &stored["spec"];
    assert_eq!(spec["image"]["resolveIntervalSeconds"], 300);
    assert_eq!(spec["rollout"]["maxUnavailable"], 1);
    assert_eq!(spec["rollout"]["paused"], false);
    assert_eq!(spec["rollout"]["rebootTimeoutSeconds"], 1800);
    assert_eq!(spec["rollout"]["haltAfterUnhealthy"], 2);
    assert_eq!(spec["rollout"]["postRebootDelaySeconds"], 0);
    assert_eq!(spec["disruption"]["rebootPolicy"], "RebootOnly");
    assert_eq!(spec["disruption"]["drain"]["deleteEmptyDirData"], true);
    assert_eq!(spec["disruption"]["drain"]["force"], false);
    assert_eq!(spec["history"]["limit"], 5);
    assert!(
        spec["rollout"].get("maxStaging").is_none(),
        "maxStaging stays unset (unlimited)"
    );
}

#[test]
fn bootcnode_sample() {
    let object = load_yaml("samples/bootcnode.yaml");
    let node: BootcNode = serde_json::from_value(object.clone()).unwrap();
    node.spec.validate().unwrap();
    assert_eq!(node.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(pruned("bootcnodes", &object), Vec::<String>::new());
    admit("bootcnodes", &object).unwrap();
}
