use std::time::Duration;

use bootc_crds::BootcNodePoolSpec;
use bootc_crds::pool::DrainSpec;
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod, PodSpec, PodStatus, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::Selector;

use super::eviction::eviction;
use super::pods::{PodVerdict, classify};
use super::*;

fn pod(owner: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            owner_references: owner.map(|kind| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: "o".into(),
                    uid: "u".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[test]
fn a_zero_drain_timeout_waits_forever_like_kubectl() {
    let drain = DrainSpec::default();
    assert_eq!(DrainOptions::from_spec(&drain, None).timeout, None);
    assert_eq!(DrainOptions::from_spec(&drain, Some(0)).timeout, None);
    assert_eq!(
        DrainOptions::from_spec(&drain, Some(90)).timeout,
        Some(Duration::from_secs(90))
    );
}

#[test]
fn classification() {
    let opts = DrainOptions::default();
    assert_eq!(
        classify(&pod(Some("ReplicaSet")), &opts, None),
        PodVerdict::Evict
    );
    assert_eq!(
        classify(&pod(Some("DaemonSet")), &opts, None),
        PodVerdict::Skip("DaemonSet pod")
    );
    assert_eq!(
        classify(&pod(None), &opts, None),
        PodVerdict::Refuse {
            unmanaged: true,
            empty_dir: false
        }
    );
    let forced = DrainOptions {
        force: true,
        ..DrainOptions::default()
    };
    assert_eq!(classify(&pod(None), &forced, None), PodVerdict::Evict);

    let mut mirror = pod(None);
    mirror.metadata.annotations = Some([(MIRROR_ANNOTATION.to_string(), "x".into())].into());
    assert_eq!(
        classify(&mirror, &opts, None),
        PodVerdict::Skip("mirror pod")
    );

    let mut done = pod(Some("ReplicaSet"));
    done.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..PodStatus::default()
    });
    assert_eq!(
        classify(&done, &opts, None),
        PodVerdict::Skip("terminated pod")
    );

    let mut scratch = pod(Some("ReplicaSet"));
    scratch.spec = Some(PodSpec {
        volumes: Some(vec![Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    });
    assert_eq!(classify(&scratch, &opts, None), PodVerdict::Evict);
    let keep_data = DrainOptions {
        delete_empty_dir_data: false,
        ..DrainOptions::default()
    };
    assert_eq!(
        classify(&scratch, &keep_data, None),
        PodVerdict::Refuse {
            unmanaged: false,
            empty_dir: true
        }
    );

    let other: Selector = [("app", "db")].into_iter().collect();
    assert_eq!(
        classify(&pod(None), &opts, Some(&other)),
        PodVerdict::Skip("not selected by podSelector")
    );
}

#[test]
fn eviction_body_carries_the_grace_period() {
    assert_eq!(
        serde_json::to_value(eviction("ns", "p", Some(7))).unwrap(),
        serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "ns"},
            "deleteOptions": {"gracePeriodSeconds": 7}
        })
    );
    let plain = serde_json::to_value(eviction("ns", "p", None)).unwrap();
    assert!(plain.get("deleteOptions").is_none(), "{plain}");
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let opts = DrainOptions::default();
    assert_eq!(opts.backoff, DEFAULT_BACKOFF);
    let seen: Vec<u64> = (1..=6).map(|n| opts.delay(n).as_secs()).collect();
    assert_eq!(seen, [1, 2, 4, 8, 10, 10]);
    // A ceiling below the first step leaves every delay at the first step.
    let odd = DrainOptions {
        backoff: Backoff::new(Duration::from_secs(3), Duration::from_secs(2)),
        ..DrainOptions::default()
    };
    let seen: Vec<u64> = (1..=3).map(|n| odd.delay(n).as_secs()).collect();
    assert_eq!(seen, [3, 3, 3]);
}

#[test]
fn options_from_a_pool() {
    let spec: BootcNodePoolSpec = serde_json::from_value(serde_json::json!({
        "nodeSelector": {},
        "image": {"ref": "quay.io/x/y:1"},
        "rollout": {"drainTimeoutSeconds": 600},
        "disruption": {"drain": {"gracePeriodSeconds": 30, "force": true,
            "podSelector": {"matchLabels": {"a": "b"}}}}
    }))
    .unwrap();
    let opts = DrainOptions::from_pool(&spec);
    assert_eq!(opts.grace_period_seconds, Some(30));
    assert!(opts.force);
    assert!(opts.delete_empty_dir_data);
    assert_eq!(opts.timeout, Some(Duration::from_secs(600)));
    assert!(opts.pod_selector.is_some());
    assert_eq!(DrainOptions::default().timeout, None);
}
