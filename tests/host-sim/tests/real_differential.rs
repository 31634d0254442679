//! The bootc stand-in held to the real bootc 1.16.9: one scripted sequence of bootc
//! commands and reboots, played on a stand-in node and on a real-bootc node with the
//! same v1 and v2 images from the same registry, and `bootc status --format=json
//! --format-version=1` compared field by field after every step.
//!
//! Values that cannot be equal (the ostree commit, which the stand-in makes from the
//! digest; the stateroot, which the harness names) are normalised, each checked for
//! consistency on its own side. Every other difference must be one of [`ALLOWED`], a
//! named and explained list (docs/testing.md, "The stand-in held to the real bootc"):
//! a new difference fails the test, and so does an allowance that no longer occurs.
//!
//! Commands run inside the node as the agent runs them: a transient unit started over
//! the node's system bus. Skipped, with a message, only when the real-bootc archive
//! directory is absent; real nodes run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bootc_standin::{HttpResolver, ImageResolver};
use host_sim::Node;
use host_sim::real::{LoggedRegistry, REPOSITORY, RealImage, RealNode, RealNodeOptions};
use serde_json::Value;
use zbus::proxy::CacheProperties;
use zbus::{OwnedObjectPath, Variant};

/// How long one bootc command may take (a real pull on a busy machine).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
const BOOT: Duration = Duration::from_secs(120);

/// One real node at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------
// Running a command inside a node: a transient unit over the node's system bus.

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
trait Manager {
    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, Variant<'_>)],
        aux: &[(&str, &[(&str, Variant<'_>)])],
    ) -> zbus::Result<OwnedObjectPath>;

    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
trait Unit {
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1"
)]
trait Service {
    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;
}

/// How a command ended.
#[derive(Debug, Clone)]
struct Ran {
    exit: i32,
    stdout: String,
    stderr: String,
}

/// Runs `/usr/bin/bootc ARGS` in node `node` as a oneshot transient unit (which, unlike
/// a process entered from outside, does not inherit nspawn's `container` variable), and
/// waits for it with a deadline.
async fn bootc(node: &Node, args: &[&str]) -> Ran {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let unit = format!("bootc-differential-{}-{n}.service", std::process::id());
    let out = format!("/run/{unit}.out");
    let err = format!("/run/{unit}.err");
    let conn = node.connect().await.expect("the node's bus");
    let manager = ManagerProxy::new(&conn).await.unwrap();
    let mut argv = vec!["/usr/bin/bootc".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let exec = vec![(argv[0].clone(), argv, false)];
    let properties: Vec<(&str, Variant<'_>)> = vec![
        (
            "Description",
            Variant::from(format!("differential test: bootc {}", args.join(" "))),
        ),
        ("Type", Variant::from("oneshot")),
        ("RemainAfterExit", Variant::from(true)),
        ("ExecStart", Variant::from(exec)),
        ("StandardOutputFile", Variant::from(out.clone())),
        ("StandardErrorFile", Variant::from(err.clone())),
    ];
    manager
        .start_transient_unit(&unit, "fail", &properties, &[])
        .await
        .unwrap_or_else(|e| panic!("starting bootc {args:?}: {e}"));
    let path = manager.get_unit(&unit).await.unwrap();
    let unit_proxy = UnitProxy::builder(&conn)
        .path(path.clone())
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .unwrap();
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    loop {
        let state = unit_proxy.active_state().await.unwrap();
        if state == "active" || state == "failed" {
            break;
        }
        if Instant::now() > deadline {
            let _ = manager.stop_unit(&unit, "replace").await;
            panic!("bootc {args:?} still {state} after {COMMAND_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let service = ServiceProxy::builder(&conn)
        .path(path)
        .cache_properties(CacheProperties::No)
        .build()
        .await
        .unwrap();
    let exit = service.exec_main_status().await.unwrap();
    let _ = manager.stop_unit(&unit, "replace").await;
    let _ = manager.reset_failed_unit(&unit).await;
    let root = node.root_path().unwrap();
    let read = |p: &str| {
        let local = root.join(p.trim_start_matches('/'));
        let text = std::fs::read_to_string(&local).unwrap_or_default();
        let _ = std::fs::remove_file(&local);
        text
    };
    Ran {
        exit,
        stdout: read(&out),
        stderr: read(&err),
    }
}

// ---------------------------------------------------------------------------------------
// The scripted sequence.

/// What happens in one step, before the status is read.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// `bootc ARGS`; `V2` in the arguments stands for v2's pin.
    Bootc(&'static [&'static str]),
    /// A reboot through the node's logind, and the next boot.
    Reboot,
}

/// The sequence of the recorded reference run, with the agent's pins instead of tags.
const STEPS: &[(&str, &[Action])] = &[
    ("booted only", &[]),
    (
        "switch --download-only (1.16.9 has no such flag)",
        &[Action::Bootc(&["switch", "--download-only", "V2"])],
    ),
    (
        "switch: staged, unlocked",
        &[Action::Bootc(&["switch", "V2"])],
    ),
    (
        "switch again to the image staged unlocked: unchanged, still unlocked (bootc #2425)",
        &[Action::Bootc(&["switch", "V2"])],
    ),
    (
        "then upgrade --download-only: locked",
        &[Action::Bootc(&["upgrade", "--download-only"])],
    ),
    ("after an unapproved reboot", &[Action::Reboot]),
    (
        "the fallback again: switch, upgrade --download-only",
        &[
            Action::Bootc(&["switch", "V2"]),
            Action::Bootc(&["upgrade", "--download-only"]),
        ],
    ),
    (
        "upgrade --from-downloaded",
        &[Action::Bootc(&["upgrade", "--from-downloaded"])],
    ),
    ("after the reboot: v2 booted", &[Action::Reboot]),
    ("rollback queued", &[Action::Bootc(&["rollback"])]),
    ("after the rollback", &[Action::Reboot]),
    (
        "upgrade --download-only with nothing new",
        &[Action::Bootc(&["upgrade", "--download-only"])],
    ),
];

/// One step as one side saw it.
#[derive(Debug)]
struct Seen {
    step: &'static str,
    /// `(command, exit status, first line of stderr when it failed)`.
    commands: Vec<(String, i32, String)>,
    status: Value,
}

/// Plays [`STEPS`] on `node`; `v2` is v2's pin.
async fn play(side: &str, node: &Node, v2: &str) -> Vec<Seen> {
    let mut seen = Vec::new();
    for (step, actions) in STEPS {
        let started = Instant::now();
        let mut commands = Vec::new();
        for action in *actions {
            match action {
                Action::Bootc(args) => {
                    let args: Vec<&str> = args
                        .iter()
                        .map(|a| if *a == "V2" { v2 } else { *a })
                        .collect();
                    let ran = bootc(node, &args).await;
                    let first_err = if ran.exit == 0 {
                        String::new()
                    } else {
                        ran.stderr.lines().next().unwrap_or_default().to_owned()
                    };
                    let shown = args
                        .iter()
                        .map(|a| if *a == v2 { "V2" } else { a })
                        .collect::<Vec<_>>()
                        .join(" ");
                    eprintln!(
                        "{side}: bootc {shown}: exit {}\n  stdout: {:?}\n  stderr: {:?}",
                        ran.exit, ran.stdout, ran.stderr
                    );
                    commands.push((shown, ran.exit, first_err));
                }
                Action::Reboot => {
                    let boots = node.status().boots;
                    node.reboot(false).await.unwrap();
                    node.wait_booted(boots, BOOT).await.unwrap();
                    commands.push(("reboot".to_owned(), 0, String::new()));
                }
            }
        }
        let ran = bootc(node, &["status", "--format=json", "--format-version=1"]).await;
        assert_eq!(ran.exit, 0, "{side}: status after {step:?}: {}", ran.stderr);
        let status: Value = serde_json::from_str(&ran.stdout)
            .unwrap_or_else(|e| panic!("{side}: status after {step:?}: {e}: {}", ran.stdout));
        eprintln!("{side}: {step} ({:?})", started.elapsed());
        seen.push(Seen {
            step,
            commands,
            status,
        });
    }
    seen
}

// ---------------------------------------------------------------------------------------
// Normalising and comparing.

const SLOTS: [&str; 3] = ["booted", "staged", "rollback"];

/// Replaces what can never be equal between the two sides, after checking it is
/// consistent on this side: `ostree.checksum` (an ostree commit for the real bootc, the
/// digest's hex for the stand-in) must be one per image digest across the whole run;
/// `ostree.stateroot` (the installer's choice: `debian` on real nodes, bootc's
/// `default` on the stand-in) one for the whole run.
fn normalise(side: &str, seen: &mut [Seen]) {
    let mut commits: BTreeMap<String, String> = BTreeMap::new();
    let mut stateroots: Vec<String> = Vec::new();
    for s in seen.iter_mut() {
        for slot in SLOTS {
            let Some(entry) = s.status["status"].get_mut(slot) else {
                continue;
            };
            if entry.is_null() {
                continue;
            }
            let digest = entry["image"]["imageDigest"]
                .as_str()
                .unwrap_or_else(|| panic!("{side} {}: {slot} has no imageDigest", s.step))
                .to_owned();
            let ostree = entry
                .get_mut("ostree")
                .and_then(Value::as_object_mut)
                .unwrap_or_else(|| panic!("{side} {}: {slot} has no ostree", s.step));
            if let Some(Value::String(commit)) = ostree.get("checksum") {
                let known = commits
                    .entry(commit.clone())
                    .or_insert_with(|| digest.clone());
                assert_eq!(
                    *known, digest,
                    "{side} {}: commit {commit} serves two images",
                    s.step
                );
                ostree.insert(
                    "checksum".into(),
                    Value::String(format!("<commit of {digest}>")),
                );
            }
            if let Some(Value::String(root)) = ostree.get("stateroot") {
                if !stateroots.contains(root) {
                    stateroots.push(root.clone());
                }
                ostree.insert("stateroot".into(), Value::String("<stateroot>".into()));
            }
        }
    }
    let digests: std::collections::BTreeSet<&String> = commits.values().collect();
    assert_eq!(
        digests.len(),
        commits.len(),
        "{side}: an image got two commits: {commits:?}"
    );
    assert!(stateroots.len() <= 1, "{side}: stateroots {stateroots:?}");
}

/// One place where the stand-in's output differs from the real bootc's.
#[derive(Debug, Clone, PartialEq)]
struct Difference {
    step: &'static str,
    /// A JSON pointer into the status document, or `command N` for a command's outcome.
    at: String,
    standin: Option<Value>,
    real: Option<Value>,
}

/// Every difference between `a` (stand-in) and `b` (real) under `at`; a key missing on
/// one side is `None` there.
fn diff(
    step: &'static str,
    at: &str,
    a: Option<&Value>,
    b: Option<&Value>,
    out: &mut Vec<Difference>,
) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(step, &format!("{at}/{k}"), x.get(k), y.get(k), out);
            }
        }
        (x, y) if x == y => {}
        (x, y) => out.push(Difference {
            step,
            at: at.to_owned(),
            standin: x.cloned(),
            real: y.cloned(),
        }),
    }
}

/// A difference the stand-in is allowed to have, and why (docs/testing.md, "The
/// stand-in held to the real bootc").
struct Allowed {
    name: &'static str,
    matches: fn(&Difference) -> bool,
}

/// The allowed differences. Each must still occur in the run, so that a fixed one is
/// taken off the list.
const ALLOWED: &[Allowed] = &[Allowed {
    name: "softRebootCapable of a staged or queued rollback deployment: true on the \
           stand-in's nodes (systemd 257, equal kernel labels), false on the real ones \
           (bookworm's systemd 252 has no soft reboot)",
    matches: |d| {
        matches!(
            d.at.as_str(),
            "/status/staged/softRebootCapable" | "/status/rollback/softRebootCapable"
        ) && d.standin == Some(Value::Bool(true))
            && d.real == Some(Value::Bool(false))
    },
}];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standin_and_the_real_bootc_print_the_same_status_through_one_sequence() {
    let Some(archive) = common::real_archive() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    host_sim::image::require_root().unwrap();
    let image = RealImage::shared(&archive)
        .await
        .expect("the real-bootc node image");
    let dir = common::test_dir("differential");
    let registry = LoggedRegistry::start(dir.path()).unwrap();
    let (v1, v2) = registry.push_v1_v2(&image.layout(), REPOSITORY).unwrap();
    let digest_of = |pin: &str| pin.rsplit_once('@').unwrap().1.to_owned();
    let (d1, d2) = (digest_of(&v1), digest_of(&v2));

    // The stand-in node in its default mode, bootc 1.16.9 (no `switch
    // --download-only`), no fault injected, booted on v1 as the stand-in itself pulls it.
    let started = Instant::now();
    let standin_dir = dir.path().join("standin");
    std::fs::create_dir_all(&standin_dir).unwrap();
    let mut options = common::options("diff-standin", &standin_dir);
    options.bootc_version = None;
    std::fs::create_dir_all(&options.state_dir).unwrap();
    let first = v1.clone();
    let info = tokio::task::spawn_blocking(move || HttpResolver::new("/").resolve(&first))
        .await
        .unwrap()
        .expect("the stand-in resolving v1");
    bootc_standin::seed(&options.state_dir, info).unwrap();
    let node = Node::start(options).await.expect("the stand-in node");
    let mut standin = play("stand-in", &node, &v2).await;
    node.stop().await.unwrap();
    drop(node);
    eprintln!("stand-in: the sequence took {:?}", started.elapsed());

    // The real node, v1 deployed by bootc itself by pin.
    let started = Instant::now();
    let options = RealNodeOptions {
        name: "diff-real".to_owned(),
        dir: dir.path().join("real"),
        image: v1.clone(),
        boot_timeout: BOOT,
        kube: None,
        etc: Vec::new(),
    };
    let node = RealNode::start(&image, options)
        .await
        .expect("the real node");
    let mut real = play("real", &node, &v2).await;
    node.stop().await.unwrap();
    drop(node);
    eprintln!("real: the sequence took {:?}", started.elapsed());

    // Both really went through the sequence: v1 booted at first, v2 after the
    // from-downloaded reboot, v1 after the rollback.
    for (side, seen) in [("stand-in", &standin), ("real", &real)] {
        let booted = |i: usize| seen[i].status["status"]["booted"]["image"]["imageDigest"].clone();
        assert_eq!(booted(0), Value::String(d1.clone()), "{side}");
        assert_eq!(booted(8), Value::String(d2.clone()), "{side}");
        assert_eq!(booted(10), Value::String(d1.clone()), "{side}");
        // The second `switch` of the staged image changed nothing: still unlocked.
        let staged = &seen[3].status["status"]["staged"];
        assert_eq!(staged["downloadOnly"], Value::Bool(false), "{side}");
        assert_eq!(
            staged["image"]["imageDigest"],
            Value::String(d2.clone()),
            "{side}"
        );
    }

    normalise("stand-in", &mut standin);
    normalise("real", &mut real);
    let mut differences = Vec::new();
    for (s, r) in standin.iter().zip(&real) {
        assert_eq!(s.step, r.step);
        let commands = |seen: &Seen| {
            Value::Array(
                seen.commands
                    .iter()
                    .map(|(c, exit, err)| serde_json::json!([c, exit, err]))
                    .collect(),
            )
        };
        diff(
            s.step,
            "commands",
            Some(&commands(s)),
            Some(&commands(r)),
            &mut differences,
        );
        diff(
            s.step,
            "",
            Some(&s.status),
            Some(&r.status),
            &mut differences,
        );
    }
    let mut used = vec![0usize; ALLOWED.len()];
    let mut unexplained = Vec::new();
    for d in &differences {
        match ALLOWED.iter().position(|a| (a.matches)(d)) {
            Some(i) => used[i] += 1,
            None => unexplained.push(d),
        }
    }
    for (a, n) in ALLOWED.iter().zip(&used) {
        eprintln!("allowed difference {:?}: {n} occurrences", a.name);
    }
    assert!(
        unexplained.is_empty(),
        "the stand-in differs from the real bootc {} times:\n{}",
        unexplained.len(),
        unexplained
            .iter()
            .map(|d| format!(
                "  [{}] {}: stand-in {} | real {}",
                d.step,
                d.at,
                d.standin
                    .as_ref()
                    .map_or("(absent)".into(), Value::to_string),
                d.real.as_ref().map_or("(absent)".into(), Value::to_string)
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let unused: Vec<&str> = ALLOWED
        .iter()
        .zip(&used)
        .filter(|(_, n)| **n == 0)
        .map(|(a, _)| a.name)
        .collect();
    assert!(
        unused.is_empty(),
        "allowed differences that no longer occur (take them off the list): {unused:?}"
    );
}
