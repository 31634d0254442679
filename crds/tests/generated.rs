//! The committed CRD YAML is exactly what the types generate, and carries what admins and
//! kubectl rely on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

#[test]
fn committed_crds_equal_the_generated_ones() {
    let files = bootc_crds::crdgen::render().expect("render");
    assert_eq!(files.len(), 2);
    for (name, generated) in files {
        let path = crate_dir().join(&name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} differs from what the types generate: run `cargo xtask gen` and commit the result",
            path.display()
        );
    }
}

fn committed(plural: &str) -> CustomResourceDefinition {
    let text =
        std::fs::read_to_string(crate_dir().join(format!("node.bootc.dev_{plural}.yaml"))).unwrap();
    serde_yaml_ng::from_str(&text).expect("the committed YAML is a CustomResourceDefinition")
}

#[test]
fn crds_are_cluster_scoped_with_status_and_columns() {
    let cases = [
        (
            "bootcnodepools",
            "BootcNodePool",
            "bnp",
            vec![
                "Target", "Nodes", "Updated", "Updating", "Staging", "Pulled", "Degraded",
                "UpToDate", "Age",
            ],
        ),
        (
            "bootcnodes",
            "BootcNode",
            "bn",
            vec![
                "Booted",
                "Version",
                "State",
                "Progress",
                "Degraded",
                "Age",
                "Staged",
                "Desired Image",
                "Booted Image",
            ],
        ),
    ];
    for (plural, kind, short, columns) in cases {
        let crd = committed(plural);
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{plural}.node.bootc.dev").as_str())
        );
        assert_eq!(crd.spec.group, "node.bootc.dev");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&[short.to_string()][..])
        );
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["bootc".to_string()][..])
        );
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(
            (version.name.as_str(), version.served, version.storage),
            ("v1alpha1", true, true)
        );
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{plural}: status subresource"
        );
        let names: Vec<&str> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, columns, "{plural}: printer columns");
    }
}

/// Every property of both schemas has a description, so `kubectl explain` reads well.
#[test]
fn every_field_is_described() {
    fn walk(schema: &Value, path: &str, missing: &mut Vec<String>) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let here = format!("{path}.{name}");
                let described = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.trim().is_empty());
                // apiVersion/kind/metadata are described by Kubernetes itself.
                if !described && !matches!(path, "") {
                    missing.push(here.clone());
                }
                walk(prop, &here, missing);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(sub) = schema.get(key) {
                walk(sub, &format!("{path}[]"), missing);
            }
        }
    }
    for plural in ["bootcnodepools", "bootcnodes"] {
        let schema = committed_schema(plural);
        let mut missing = Vec::new();
        for top in ["spec", "status"] {
            assert!(
                schema["properties"][top]["description"].is_string(),
                "{plural}.{top}"
            );
            walk(&schema["properties"][top], top, &mut missing);
        }
        assert!(
            missing.is_empty(),
            "{plural}: fields without a description: {missing:?}"
        );
    }
}

#[test]
fn defaults_are_in_the_schema() {
    let schema = committed_schema("bootcnodepools");
    let spec = &schema["properties"]["spec"]["properties"];
    let rollout = &spec["rollout"]["properties"];
    let cases = [
        (
            &spec["image"]["properties"]["resolveIntervalSeconds"],
            serde_json::json!(300),
        ),
        (&rollout["maxUnavailable"], serde_json::json!(1)),
        (&rollout["paused"], serde_json::json!(false)),
        (&rollout["rebootTimeoutSeconds"], serde_json::json!(1800)),
        (&rollout["haltAfterUnhealthy"], serde_json::json!(2)),
        (&rollout["postRebootDelaySeconds"], serde_json::json!(0)),
        (
            &spec["disruption"]["properties"]["rebootPolicy"],
            serde_json::json!("RebootOnly"),
        ),
        (
            &spec["disruption"]["properties"]["drain"]["properties"]["deleteEmptyDirData"],
            serde_json::json!(true),
        ),
        (
            &spec["disruption"]["properties"]["drain"]["properties"]["force"],
            serde_json::json!(false),
        ),
        (
            &spec["history"]["properties"]["limit"],
            serde_json::json!(5),
        ),
        (
            &rollout["maintenanceWindows"]["items"]["properties"]["timeZone"],
            serde_json::json!("UTC"),
        ),
    ];
    for (prop, want) in cases {
        assert_eq!(prop["default"], want, "{prop}");
    }
    let node = committed_schema("bootcnodes");
    assert_eq!(
        node["properties"]["spec"]["properties"]["desiredImageState"]["default"],
        "Staged"
    );
}

#[test]
fn no_field_is_nullable() {
    for plural in ["bootcnodepools", "bootcnodes"] {
        let text = serde_json::to_string(&committed_schema(plural)).unwrap();
        assert!(!text.contains("\"nullable\""), "{plural}");
    }
}

/// kube-apiserver refuses a CRD whose schema is not structural: every version of both is.
#[test]
fn schemas_are_structural() {
    for crd in bootc_crds::crdgen::crds().expect("render") {
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_owned();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let schema = &version["schema"]["openAPIV3Schema"];
            assert_eq!(
                apischema::structural_errors(schema),
                Vec::<String>::new(),
                "{plural}/{}",
                version["name"]
            );
        }
    }
}
