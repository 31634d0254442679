//! The controller run as its Deployment says, the way a kubelet would run it: the install
//! applied with `kubectl apply -k` (an overlay pointing the image at a given ref, as an
//! admin would), the Deployment read back from the API, and each replica's pod template
//! run with in-cluster configuration only (the service account's token, `ca.crt` and
//! `namespace` at the standard path, `KUBERNETES_SERVICE_HOST`/`_PORT`) against the API
//! emulator over TLS, probed as declared. Of the two replicas exactly one leads, and
//! killing the leader's container hands the Lease to the other.
//!
//! Twice: with the controller binary from the cargo target directory as a plain process
//! (runs as root: a private mount namespace per pod puts the service account at the
//! standard path; the binary must be built, `cargo build -p bootc-pool-controller`), and
//! with the image `scripts/image` builds from this checkout, run by podman under the
//! template's security context (user, read-only root, capabilities, seccomp, memory
//! limit). Without podman the second fails, unless `BOOTC_SKIP_IMAGE=1` asks to skip it
//! (never under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod install;
mod podman;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use deploy_check::{CONTROLLER_SA, NAMESPACE};
use host_sim::pods::spec::{PodIdentity, container_run};
use host_sim::pods::{Pod, Runtime, http_get, until};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube_emulator::Emulator;

const DEPLOYMENT: &str = "bootc-pool-controller";
const LEASE: &str = "bootc-pool-controller";
const TEST_IMAGE: &str = "registry.test/bootc-pool/bootc-pool:ship-check";

/// `target/<profile>`, beside this test executable (in `target/<profile>/deps`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    deps.parent().unwrap().to_path_buf()
}

/// The install applied through an overlay pointing at `image`, and the Deployment read
/// back.
async fn install(emulator: &Emulator, dir: &Path, image: &str) -> Deployment {
    let client = install::apply(emulator, dir, image).await;
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    sa.get(CONTROLLER_SA)
        .await
        .expect("the install made the controller's service account");
    let deployments: Api<Deployment> = Api::namespaced(client, NAMESPACE);
    deployments.get(DEPLOYMENT).await.unwrap()
}

/// The pods of the Deployment, each run from its template.
async fn run_replicas(emulator: &Emulator, deployment: &Deployment, runtime: &Runtime) -> Vec<Pod> {
    let spec = deployment.spec.as_ref().unwrap();
    let template = &spec.template;
    let pod_spec = template.spec.as_ref().unwrap();
    let service_account = pod_spec.service_account_name.clone().unwrap_or_default();
    assert_eq!(service_account, CONTROLLER_SA);
    let service = host_sim::pods::service_env(emulator);
    let files = host_sim::pods::service_account_files(emulator, NAMESPACE, &service_account);
    let mut pods = Vec::new();
    for i in 0..spec.replicas.unwrap_or(1) {
        let pod = PodIdentity {
            name: format!("{DEPLOYMENT}-5c7d9f8b6-r{i}x7q"),
            namespace: NAMESPACE.to_owned(),
            service_account: service_account.clone(),
            node_name: None,
        };
        let run = container_run(template, &pod, &service).unwrap();
        pods.push(Pod::start(runtime, &pod.name, run, &files).await.unwrap());
    }
    pods
}

/// What `/metrics` says of `bootc_pool_leader` (`None` when it does not answer).
async fn leads(pod: &Pod) -> Option<bool> {
    let (code, body) = http_get(pod.port("metrics")?, "/metrics", Duration::from_secs(2)).await?;
    (code == 200).then_some(())?;
    let line = body.lines().find(|l| l.starts_with("bootc_pool_leader "))?;
    Some(line.ends_with(" 1"))
}

async fn holder(emulator: &Emulator) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(emulator.client().ok()?, NAMESPACE);
    leases.get_opt(LEASE).await.ok()??.spec?.holder_identity
}

/// The index of the one pod that leads, once the Lease and every pod's metrics agree.
async fn the_leader(emulator: &Emulator, pods: &[&Pod]) -> Option<usize> {
    let holder = holder(emulator).await?;
    let mut leaders = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        if leads(pod).await? {
            leaders.push(i);
        }
    }
    match leaders.as_slice() {
        [i] if pods[*i].name == holder => Some(*i),
        _ => None,
    }
}

fn all_logs(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| format!("--- {} ---\n{}", p.name, p.logs()))
        .collect()
}

async fn two_replicas_elect_a_leader_and_hand_over(runtime: Runtime, image: &str) {
    let (emulator, dir) = install::tls_emulator().await;
    let deployment = install(&emulator, dir.path(), image).await;
    let template = &deployment.spec.as_ref().unwrap().template;
    assert_eq!(
        template.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some(image)
    );
    let mut pods = run_replicas(&emulator, &deployment, &runtime).await;
    assert_eq!(pods.len(), 2, "the Deployment asks for two replicas");

    // Both become ready by their declared readiness probes.
    let all = &pods;
    let ready = until(Duration::from_secs(90), || async move {
        all.iter().all(|p| p.probes().ready).then_some(())
    })
    .await;
    assert!(ready.is_some(), "both pods ready:\n{}", all_logs(&pods));

    let refs: Vec<&Pod> = pods.iter().collect();
    let first = until(Duration::from_secs(60), || the_leader(&emulator, &refs)).await;
    let first = first.unwrap_or_else(|| panic!("exactly one leader:\n{}", all_logs(&pods)));
    let other = 1 - first;
    let requests = emulator.handle().requests();
    assert!(
        requests
            .iter()
            .any(|r| r.user_agent.starts_with("bootc-pool-controller/")),
        "the controllers reached the API with their in-cluster configuration"
    );
    eprintln!("leader: {}", pods[first].name);

    let killed = Instant::now();
    pods[first].kill().await;
    let survivor = [&pods[other]];
    let next = until(Duration::from_secs(60), || the_leader(&emulator, &survivor)).await;
    assert_eq!(
        next,
        Some(0),
        "the other replica takes over:\n{}",
        all_logs(&pods)
    );
    eprintln!(
        "handover to {} after {:.1?}",
        pods[other].name,
        killed.elapsed()
    );
    let probes = pods[other].probes();
    assert!(probes.ready && !probes.liveness_tripped, "{probes:?}");
    assert!(
        probes.liveness_successes > 0,
        "the liveness probe ran: {probes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployments_pods_run_in_cluster_as_processes_and_elect_one_leader() {
    let bin_dir = profile_dir();
    two_replicas_elect_a_leader_and_hand_over(Runtime::Process { bin_dir }, TEST_IMAGE).await;
}

/// The image the pods of the next test run, built by `scripts/image` from this checkout.
const BUILT_IMAGE: &str = "localhost/bootc-pool:pod-check";

/// Removes the test's tag of the image (its layers stay in the cache), also on failure.
struct Untag;

impl Drop for Untag {
    fn drop(&mut self) {
        let _ = podman::podman(&["rmi", "--ignore", BUILT_IMAGE]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployments_pods_run_from_the_image_and_elect_one_leader() {
    let test = "the_deployments_pods_run_from_the_image_and_elect_one_leader";
    let Some(()) = podman::podman_for_test(test) else {
        return;
    };
    let _untag = Untag;
    let out = podman::run("scripts/image", &["--tag", BUILT_IMAGE]);
    assert!(
        out.status.success(),
        "scripts/image --tag {BUILT_IMAGE}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runtime = Runtime::Podman {
        podman: podman::podman_command(),
    };
    two_replicas_elect_a_leader_and_hand_over(runtime, BUILT_IMAGE).await;
}
