//! The API: the emulator in this process, its kubeconfig in the work directory, the CRDs
//! and the controller's namespace.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::processes::Parts;
use super::{LEASE_NAMESPACE, step};

/// The CRDs, as `crds/` holds them.
pub(super) const CRDS: [(&str, &str); 2] = [
    (
        "bootcnodepools",
        include_str!("../../../../crds/node.bootc.dev_bootcnodepools.yaml"),
    ),
    (
        "bootcnodes",
        include_str!("../../../../crds/node.bootc.dev_bootcnodes.yaml"),
    ),
];

/// The API as the demo uses it.
pub(super) struct ApiServer {
    pub(super) client: Client,
    pub(super) handle: kube_emulator::Handle,
    pub(super) kubeconfig: PathBuf,
}

/// Starts the emulator (kept in `parts`), writes its kubeconfig to `dir`, registers the
/// CRDs and creates the controller's namespace. `for_install`: over TLS (pods use
/// in-cluster configuration), and empty (the install brings the CRDs and namespace).
pub(super) async fn start(
    parts: &mut Parts,
    started: Instant,
    dir: &Path,
    for_install: bool,
) -> Result<ApiServer, String> {
    let options = kube_emulator::EmulatorOptions {
        tls: for_install,
        ..Default::default()
    };
    let emulator = kube_emulator::Emulator::start_with(options)
        .await
        .map_err(|e| format!("cannot start the API emulator: {e}"))?;
    let kubeconfig = dir.join("kubeconfig");
    emulator
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| format!("cannot write the kubeconfig: {e}"))?;
    let client = emulator
        .client()
        .map_err(|e| format!("cannot make a client: {e}"))?;
    let handle = emulator.handle();
    parts.emulator = Some(emulator);
    if !for_install {
        register_crds(&client).await?;
        create_namespace(&client, LEASE_NAMESPACE).await?;
    }
    step(
        started,
        &format!(
            "API emulator up; try: kubectl --kubeconfig {} get bootcnodepools,bootcnodes",
            kubeconfig.display()
        ),
    );
    Ok(ApiServer {
        client,
        handle,
        kubeconfig,
    })
}

async fn create_namespace(client: &Client, name: &str) -> Result<(), String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
        .map_err(|e| format!("namespace {name}: {e}"))?;
    api.create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| format!("cannot create the namespace {name}: {e}"))?;
    Ok(())
}

async fn register_crds(client: &Client) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (plural, yaml) in CRDS {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml)
            .map_err(|e| format!("crds/node.bootc.dev_{plural}.yaml: {e}"))?;
        api.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| format!("cannot register the {plural} CRD: {e}"))?;
    }
    Ok(())
}
