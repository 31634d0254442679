use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::api::CRDS;
use super::display::short;
use super::processes::controller_binary;

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
    if let Err(e) = controller_binary() {
        assert!(e.contains("cargo build -p bootc-pool-controller"), "{e}");
    }
}
