use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::api::CRDS;
use super::display::{health_note, short};
use super::processes::controller_binary_beside;

#[test]
fn short_digests() {
    assert_eq!(
        short(&format!("sha256:{}", "ab".repeat(32))),
        "abababababab"
    );
    assert_eq!(short("x"), "x");
}

#[test]
fn the_crds_parse() {
    for (_, yaml) in CRDS {
        assert!(serde_yaml_ng::from_str::<CustomResourceDefinition>(yaml).is_ok());
    }
}

#[test]
fn the_controller_is_looked_up_beside_this_executable() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("bootc-sim");
    let e = controller_binary_beside(&exe).unwrap_err();
    assert!(e.contains("cargo build -p bootc-pool-controller"), "{e}");
    assert!(e.contains(&dir.path().display().to_string()), "{e}");
    let binary = dir.path().join("bootc-pool-controller");
    std::fs::write(&binary, b"").unwrap();
    assert_eq!(controller_binary_beside(&exe).unwrap(), binary);
    assert!(controller_binary_beside(std::path::Path::new("/")).is_err());
}

#[test]
fn the_header_shows_a_canary_not_yet_complete_and_a_closed_gate() {
    let digest = format!("sha256:{}", "2".repeat(64));
    let pool = |phase: &str, canary_digest: &str, gate: &str| {
        serde_json::json!({
            "spec": {"rollout": {"canary": {"nodes": 2, "soakSeconds": 10}}},
            "status": {
                "targetDigest": digest,
                "canary": {"digest": canary_digest, "phase": phase, "nodes": 2},
                "alertGate": {"state": gate},
            },
        })
    };
    assert_eq!(
        health_note(&pool("Soaking", &digest, "Open")),
        ", canary soaking: 2 nodes, soak 10 s"
    );
    assert_eq!(
        health_note(&pool("Updating", &digest, "Firing")),
        ", canary updating: 2 nodes, soak 10 s, alert gate Firing"
    );
    assert_eq!(health_note(&pool("Complete", &digest, "Open")), "");
    // The canary of an earlier target is not shown.
    assert_eq!(health_note(&pool("Soaking", "sha256:1", "Open")), "");
    assert_eq!(health_note(&serde_json::Value::Null), "");
}
