//! The emulator held to kube-rs, a real client nobody here wrote: watches that resume or
//! restart, conflicts, status subresources and generation, schema refusals, garbage
//! collection, finalizers, pagination, evictions and injected faults.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bootc_crds::{BootcNode, BootcNodePool};
use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kube_emulator::{Emulator, FaultConfig};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn pool(name: &str) -> BootcNodePool {
    serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": {"pool": name}}, "image": {"ref": "quay.io/example/os:stable"}}
    }))
    .unwrap()
}

/// An emulator with the project's CRDs, a client for pools, and pool `name` as created.
async fn with_pool(name: &str) -> (Emulator, Api<BootcNodePool>, BootcNodePool) {
    let (emulator, client) = with_crds().await;
    let api: Api<BootcNodePool> = Api::all(client);
    let created = api
        .create(&PostParams::default(), &pool(name))
        .await
        .unwrap();
    (emulator, api, created)
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "0"}})).unwrap()
}

/// What a kube-rs watcher delivered: applied (not initial-list) deliveries per
/// (name, resourceVersion), the latest version seen per name, and how often it listed.
#[derive(Default)]
struct Observed {
    applied: BTreeMap<(String, String), usize>,
    latest: BTreeMap<String, String>,
    relists: usize,
}

impl Observed {
    fn take(&mut self, rx: &mut Deliveries) {
        while let Ok(event) = rx.try_recv() {
            match event {
                watcher::Event::Apply(o) => {
                    let rv = o.resource_version().unwrap();
                    *self.applied.entry((o.name_any(), rv.clone())).or_default() += 1;
                    self.latest.insert(o.name_any(), rv);
                }
                watcher::Event::InitApply(o) => {
                    self.latest
                        .insert(o.name_any(), o.resource_version().unwrap());
                }
                watcher::Event::Init => self.relists += 1,
                watcher::Event::InitDone | watcher::Event::Delete(_) => {}
            }
        }
    }

    /// Takes deliveries until `done` holds, or panics naming `what`.
    async fn until(&mut self, rx: &mut Deliveries, what: &str, done: impl Fn(&Observed) -> bool) {
        eventually(WAIT, what, || {
            self.take(rx);
            let ok = done(self);
            async move { ok.then_some(()) }
        })
        .await;
    }
}

type Deliveries = tokio::sync::mpsc::UnboundedReceiver<watcher::Event<ConfigMap>>;

/// A kube-rs watcher of `api`'s ConfigMaps, run until aborted: what it delivers.
fn follow(api: &Api<ConfigMap>) -> (tokio::task::JoinHandle<()>, Deliveries) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stream_api = api.clone();
    let task = tokio::spawn(async move {
        let mut stream = watcher(stream_api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            if let Ok(event) = event
                && tx.send(event).is_err()
            {
                return;
            }
        }
    });
    (task, rx)
}

/// Creates c0..c9; returns each one's resourceVersion.
async fn create_all(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    let mut written = BTreeMap::new();
    for i in 0..10 {
        let o = api
            .create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
        written.insert(o.name_any(), o.resource_version().unwrap());
    }
    written
}

/// Sets `data.v` on c0..c9; returns each object's new resourceVersion.
async fn patch_all(api: &Api<ConfigMap>, v: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..10 {
        let name = format!("c{i}");
        let patch = Patch::Merge(json!({"data": {"v": v}}));
        let o = api
            .patch(&name, &PatchParams::default(), &patch)
            .await
            .unwrap();
        out.push((name, o.resource_version().unwrap()));
    }
    out
}

/// Every change reaches a kube-rs watcher exactly once across a dropped stream, and after
/// a forced 410 the watcher lists again and still ends with every object's latest version.
#[tokio::test]
async fn watcher_survives_dropped_streams_and_410() {
    let emulator = Emulator::start().await.unwrap();
    let handle = emulator.handle();
    let client = emulator.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (task, mut rx) = follow(&api);
    let mut seen = Observed::default();
    // The first list is done before anything is written.
    seen.until(&mut rx, "the first list", |o| o.relists == 1)
        .await;

    let mut written = create_all(&api).await;
    let mut all_rvs: Vec<(String, String)> = written.clone().into_iter().collect();
    seen.until(&mut rx, "the creations", |o| o.latest == written)
        .await;

    // Phase 2: the stream drops; changes made meanwhile are replayed from history.
    handle.cut_watches();
    let changed = patch_all(&api, "1").await;
    written.extend(changed.iter().cloned());
    all_rvs.extend(changed);
    seen.until(&mut rx, "the changes made while the stream was down", |o| {
        o.latest == written
    })
    .await;
    assert_eq!(
        seen.relists, 1,
        "a dropped stream resumes without listing again"
    );
    for key in &all_rvs {
        assert_eq!(seen.applied.get(key), Some(&1), "{key:?} delivered once");
    }

    // Phase 3: history expires; the resuming watch gets 410 and lists again.
    let lists_before = handle.counters().by_verb.get("list").copied().unwrap_or(0);
    handle.expire_history();
    written.extend(patch_all(&api, "2").await);
    seen.until(&mut rx, "the state after the 410", |o| {
        o.latest == written && o.relists == 2
    })
    .await;
    let lists_after = handle.counters().by_verb.get("list").copied().unwrap_or(0);
    assert!(
        lists_after > lists_before,
        "the watcher listed again after 410"
    );
    assert!(
        seen.applied.values().all(|n| *n == 1),
        "no change was delivered twice: {:?}",
        seen.applied
    );
    task.abort();
}

/// A held watch sends nothing, also after it is cut and resumed, while another resource's
/// watch goes on; released, it sends every change made meanwhile once, in order.
#[tokio::test]
async fn a_held_watch_sends_its_changes_only_when_released() {
    let emulator = Emulator::start().await.unwrap();
    let handle = emulator.handle();
    let client = emulator.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (task, mut rx) = follow(&api);
    let namespaces: Api<Namespace> = Api::all(client);
    let mut other = watcher(namespaces.clone(), watcher::Config::default()).boxed();
    tokio::time::timeout(WAIT, async {
        while let Some(event) = other.next().await {
            if matches!(event, Ok(watcher::Event::InitDone)) {
                return;
            }
        }
    })
    .await
    .expect("the namespaces' first list");
    let mut seen = Observed::default();
    seen.until(&mut rx, "the first list", |o| o.relists == 1)
        .await;
    let mut written = create_all(&api).await;
    seen.until(&mut rx, "the creations", |o| o.latest == written)
        .await;

    handle.hold_watches("configmaps");
    let before = seen.latest.clone();
    let changed = patch_all(&api, "1").await;
    handle.cut_watches();
    let changed_again = patch_all(&api, "2").await;
    // A change of another resource, made after them, reaches its own watch.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    tokio::time::timeout(WAIT, async {
        while let Some(event) = other.next().await {
            if let Ok(watcher::Event::Apply(n)) = event
                && n.name_any() == "later"
            {
                return;
            }
        }
        panic!("the namespace's watch ended");
    })
    .await
    .expect("the namespace's watch");
    seen.take(&mut rx);
    assert_eq!(seen.latest, before, "nothing sent while held");
    for key in changed.iter().chain(&changed_again) {
        assert_eq!(seen.applied.get(key), None, "{key:?} sent while held");
    }

    handle.release_watches("configmaps");
    written.extend(changed_again.iter().cloned());
    seen.until(&mut rx, "the changes made while held", |o| {
        o.latest == written
    })
    .await;
    assert_eq!(seen.relists, 1, "resumed, not listed again");
    for key in changed.iter().chain(&changed_again) {
        assert_eq!(seen.applied.get(key), Some(&1), "{key:?} delivered once");
    }
    task.abort();
}

#[tokio::test]
async fn stale_replace_conflicts() {
    let emulator = Emulator::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(emulator.client().unwrap(), "default");
    let created = api.create(&PostParams::default(), &cm("x")).await.unwrap();
    let mut first = created.clone();
    first.data = Some(BTreeMap::from([("v".into(), "first".into())]));
    let replaced = api
        .replace("x", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version(), created.resource_version());
    let mut stale = created.clone();
    stale.data = Some(BTreeMap::from([("v".into(), "stale".into())]));
    assert_refused(
        api.replace("x", &PostParams::default(), &stale).await,
        409,
        "the object has been modified",
    );
    assert_eq!(api.get("x").await.unwrap().data.unwrap()["v"], "first");
    // Creating twice is a conflict too; getting what is not there is 404.
    refused(api.create(&PostParams::default(), &cm("x")).await, 409);
    refused(api.get("nope").await, 404);
}

#[tokio::test]
async fn custom_resources_replace_with_their_resource_version_only() {
    let (_emulator, api, created) = with_pool("p").await;
    let mut current = created.clone();
    current.spec.rollout.paused = true;
    let replaced = api
        .replace("p", &PostParams::default(), &current)
        .await
        .unwrap();
    assert!(replaced.spec.rollout.paused);
    assert_eq!(replaced.metadata.generation, Some(2));
    // The old version conflicts; no version at all is invalid for a custom resource.
    refused(
        api.replace("p", &PostParams::default(), &created).await,
        409,
    );
    let mut unversioned = replaced.clone();
    unversioned.metadata.resource_version = None;
    assert_refused(
        api.replace("p", &PostParams::default(), &unversioned).await,
        422,
        "must be specified for an update",
    );
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let (_emulator, api, created) = with_pool("p").await;
    assert_eq!(created.metadata.generation, Some(1));
    // Server-side defaults were applied.
    assert_eq!(created.spec.history.limit, 5);

    let merge = async |status: bool, body: serde_json::Value| {
        let patch = Patch::Merge(body);
        let params = PatchParams::default();
        let patched = if status {
            api.patch_status("p", &params, &patch).await
        } else {
            api.patch("p", &params, &patch).await
        };
        patched.unwrap()
    };

    // A status patch changes status only, even when it carries spec, and not generation.
    let p = merge(
        true,
        json!({"spec": {"rollout": {"paused": true}}, "status": {"nodeCount": 3}}),
    )
    .await;
    assert_eq!(p.status.as_ref().unwrap().node_count, 3);
    assert!(!p.spec.rollout.paused, "spec untouched by a status write");
    assert_eq!(p.metadata.generation, Some(1));

    // A spec patch bumps generation and leaves status alone, even when it carries status.
    let p = merge(
        false,
        json!({"spec": {"rollout": {"paused": true}}, "status": {"nodeCount": 99}}),
    )
    .await;
    assert!(p.spec.rollout.paused);
    assert_eq!(p.metadata.generation, Some(2));
    assert_eq!(p.status.as_ref().unwrap().node_count, 3);

    // Metadata-only changes do not bump generation; a no-op patch does not even bump the version.
    let p = merge(false, json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(p.metadata.generation, Some(2));
    let again = merge(false, json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(again.resource_version(), p.resource_version());

    // Status given at create is dropped (the status subresource owns it).
    let mut with_status = pool("q");
    with_status.status = Some(Default::default());
    with_status.status.as_mut().unwrap().node_count = 7;
    let q = api
        .create(&PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(q.status.is_none());
}

#[tokio::test]
async fn schema_violations_are_refused_with_the_field_named() {
    let (_emulator, client) = with_crds().await;
    let api: Api<kube::api::DynamicObject> =
        Api::all_with(client, &kube::api::ApiResource::erase::<BootcNodePool>(&()));
    let base = json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": "bad"},
        "spec": {"nodeSelector": {}, "image": {"ref": "quay.io/example/os:1"}}
    });
    let cases = [
        (json!({"rollout": {"paused": "yes"}}), "spec.rollout.paused"),
        (
            json!({"disruption": {"rebootPolicy": "Sometimes"}}),
            "spec.disruption.rebootPolicy",
        ),
        (json!({"history": {"limit": 50}}), "spec.history.limit"),
        (
            json!({"rollout": {"maxUnavailable": "0%"}}),
            "spec.rollout.maxUnavailable",
        ),
        (json!({"image": {"ref": "--apply"}}), "spec.image.ref"),
        (json!({"image": {}}), "spec.image.ref"),
    ];
    for (spec, field) in cases {
        let mut object = base.clone();
        for (k, v) in spec.as_object().unwrap() {
            object["spec"][k] = v.clone();
        }
        let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
        let err = api
            .create(&PostParams::default(), &object)
            .await
            .unwrap_err();
        assert_eq!(code(&err), 422, "{field}: {err}");
        let msg = message(&err);
        assert!(msg.contains(field), "{field}: {msg}");
        assert!(
            msg.starts_with("BootcNodePool.node.bootc.dev \"bad\" is invalid"),
            "{msg}"
        );
    }
}

/// With a tenth of writes failing, the request log shows exactly what was sent and what
/// was refused, and the store holds exactly what succeeded.
#[tokio::test]
async fn injected_faults_are_counted_exactly() {
    let emulator = Emulator::start().await.unwrap();
    let handle = emulator.handle();
    let api: Api<ConfigMap> = Api::namespaced(emulator.client().unwrap(), "default");
    handle.set_faults(FaultConfig {
        error_rate: 0.1,
        error_codes: vec![500, 409, 429],
        writes_only: true,
        seed: 42,
        ..Default::default()
    });
    handle.clear_requests();
    let mut succeeded = BTreeSet::new();
    let mut failed = BTreeMap::<u16, usize>::new();
    for i in 0..300 {
        match api
            .create(&PostParams::default(), &cm(&format!("f{i}")))
            .await
        {
            Ok(o) => {
                succeeded.insert(o.name_any());
            }
            Err(e) => *failed.entry(code(&e)).or_default() += 1,
        }
    }
    // Reads are not failed.
    let listed = api.list(&ListParams::default()).await.unwrap();
    handle.clear_faults();
    let failures: usize = failed.values().sum();
    assert!(
        (5..=60).contains(&failures),
        "some writes failed: {failed:?}"
    );
    // kube-rs retries 429 answers itself, so the server saw more creates than were made:
    // every logged create either succeeded or was refused by an injected fault.
    let log: Vec<_> = handle
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .collect();
    let injected = |code: u16| log.iter().filter(|r| r.injected && r.code == code).count();
    assert_eq!(
        log.len(),
        succeeded.len() + log.iter().filter(|r| r.injected).count()
    );
    assert!(log.iter().all(|r| r.injected || r.code == 201));
    assert_eq!(failed.get(&500).copied().unwrap_or(0), injected(500));
    assert_eq!(failed.get(&409).copied().unwrap_or(0), injected(409));
    let retried = log.len() - 300;
    assert_eq!(
        injected(429),
        retried + failed.get(&429).copied().unwrap_or(0)
    );
    assert!(injected(429) > 0 && injected(500) > 0 && injected(409) > 0);
    let counters = handle.counters();
    assert_eq!(
        counters.by_verb_resource["create configmaps"] as usize,
        log.len()
    );
    assert_eq!(
        counters.injected as usize,
        log.iter().filter(|r| r.injected).count()
    );
    assert_eq!(counters.by_verb["list"], 1, "reads were not failed");
    let stored: BTreeSet<String> = listed.items.iter().map(|o| o.name_any()).collect();
    assert_eq!(stored, succeeded);
}

#[tokio::test]
async fn owners_finalizers_and_namespaces() {
    let (emulator, client) = with_crds().await;
    let handle = emulator.handle();
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let nodes: Api<BootcNode> = Api::all(client.clone());
    let owner = pools
        .create(&PostParams::default(), &pool("owner"))
        .await
        .unwrap();
    let owner_ref = OwnerReference {
        api_version: "node.bootc.dev/v1alpha1".into(),
        kind: "BootcNodePool".into(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let hex = "0123456789abcdef".repeat(4);
    for name in ["n1", "n2"] {
        let mut node: BootcNode = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode", "metadata": {"name": name},
            "spec": {"desiredImage": format!("quay.io/example/os@sha256:{hex}")}
        }))
        .unwrap();
        node.meta_mut().owner_references = Some(vec![owner_ref.clone()]);
        if name == "n2" {
            node.meta_mut().finalizers = Some(vec!["example.com/hold".into()]);
        }
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    pools
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    // n1 is collected; n2 waits for its finalizer with a deletionTimestamp.
    eventually(WAIT, "garbage collection", || {
        let nodes = nodes.clone();
        async move {
            let n1_gone = matches!(nodes.get("n1").await, Err(e) if code(&e) == 404);
            let n2 = nodes.get("n2").await.ok()?;
            (n1_gone && n2.metadata.deletion_timestamp.is_some()).then_some(())
        }
    })
    .await;
    nodes
        .patch(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    refused(nodes.get("n2").await, 404);

    // Deleting a namespace deletes what is in it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "scratch"}})).unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "scratch");
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    namespaces
        .delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    assert!(handle.get("", "configmaps", "scratch", "a").is_none());
    assert!(handle.get("", "namespaces", "", "scratch").is_none());
    // Creating in a namespace that does not exist is refused.
    refused(cms.create(&PostParams::default(), &cm("b")).await, 404);
}

#[tokio::test]
async fn selectors_pagination_and_generate_name() {
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..25 {
        let mut c = cm(&format!("p{i:02}"));
        c.metadata.labels = Some(BTreeMap::from([(
            "parity".into(),
            if i % 2 == 0 { "even" } else { "odd" }.into(),
        )]));
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let even = api
        .list(&ListParams::default().labels("parity=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 13);
    let not_even = api
        .list(&ListParams::default().labels("parity!=even"))
        .await
        .unwrap();
    assert_eq!(not_even.items.len(), 12);
    let one = api
        .list(&ListParams::default().fields("metadata.name=p07"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    // Pages of 10: 10, 10, 5, every object once, in order.
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(10);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|o| o.name_any()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = params.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    assert_eq!(names, expected);
    // Unsupported field selectors are refused as kube-apiserver refuses them.
    refused(
        api.list(&ListParams::default().fields("data.v=1")).await,
        400,
    );
    // generateName.
    let generated = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap(),
        )
        .await
        .unwrap();
    assert!(generated.name_any().starts_with("gen-") && generated.name_any().len() == 9);
    // Pods by node, as kubectl drain and the controller ask for them.
    let in_default: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c", "n1")] {
        let pod = json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}});
        in_default
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::all(client);
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(
        on_n1.items.iter().map(|p| p.name_any()).collect::<Vec<_>>(),
        ["a", "c"]
    );
}

#[tokio::test]
async fn evictions_honour_disruption_budgets() {
    let emulator = Emulator::start().await.unwrap();
    // kube-rs retries 429 answers for minutes by default; see the refusal at once.
    let mut config = emulator.config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["w1", "w2"] {
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})).unwrap(),
        )
        .await
        .unwrap();
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})).unwrap(),
    )
    .await
    .unwrap();
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (2, 2, 0)
    );
    assert_refused(
        pods.evict("w1", &EvictParams::default()).await,
        429,
        "disruption budget",
    );
    assert!(pods.get("w1").await.is_ok());
    // Loosen the budget: one eviction is allowed, the second is not.
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .unwrap();
    pods.evict("w1", &EvictParams::default()).await.unwrap();
    refused(pods.get("w1").await, 404);
    refused(pods.evict("w2", &EvictParams::default()).await, 429);
    assert_eq!(
        pdbs.get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        0
    );
    // Nodes keep the status they register with.
    let nodes: Api<Node> = Api::all(client);
    let n = nodes
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})).unwrap())
        .await
        .unwrap();
    assert!(n.status.unwrap().conditions.is_some());
}

#[tokio::test]
async fn bookmarks_and_initial_events() {
    let emulator = Emulator::start_with(kube_emulator::EmulatorOptions {
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = emulator.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("b1")).await.unwrap();
    // A streaming-list watcher (sendInitialEvents) sees the object, then keeps going.
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api.clone(), config).boxed();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match event {
            watcher::Event::Init => "init".to_string(),
            watcher::Event::InitApply(o) => format!("initapply {}", o.name_any()),
            watcher::Event::InitDone => "initdone".to_string(),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(seen, ["init", "initapply b1", "initdone"]);
    api.create(&PostParams::default(), &cm("b2")).await.unwrap();
    let event = tokio::time::timeout(WAIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(event, watcher::Event::Apply(o) if o.name_any() == "b2"));
}

/// A CEL transition rule (`self == oldSelf`) refuses an update that changes its field and
/// lets others through; a rule that does not read `oldSelf` judges the new value alone.
/// The emulator prepares the stored object for the rules only when some rule reads it.
#[tokio::test]
async fn transition_rules_see_the_stored_object() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::core::{ApiResource, DynamicObject};
    let emulator = Emulator::start().await.unwrap();
    let client = emulator.client().unwrap();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "class": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable"}]},
                    "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self <= 3", "message": "at most 3"}]}
                }}}}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let thing: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"class": "gpu", "size": 1}})).unwrap();
    api.create(&PostParams::default(), &thing).await.unwrap();
    let patch = |spec| Patch::Merge(json!({ "spec": spec }));
    let params = PatchParams::default();
    api.patch("t", &params, &patch(json!({"size": 2})))
        .await
        .expect("the class kept: accepted");
    assert_refused(
        api.patch("t", &params, &patch(json!({"class": "cpu"})))
            .await,
        422,
        "is immutable",
    );
    assert_refused(
        api.patch("t", &params, &patch(json!({"size": 4}))).await,
        422,
        "at most 3",
    );
    let stored = api.get("t").await.unwrap();
    assert_eq!(stored.data["spec"], json!({"class": "gpu", "size": 2}));
}
