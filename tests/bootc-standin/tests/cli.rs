//! The `bootc` command line: in-process through `main_with` (privileges, faults, usage
//! errors, bad references) and as a process (hang, `--version`, finalize at boot).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use bootc_standin::{Env, Faults, State, main_with, seed};
use common::{ChildGuard, FakeResolver, Host, check_status, info, wait_until};
use serde_json::Value;

const A: &str = "127.0.0.1:5000/os:a";
const B: &str = "127.0.0.1:5000/os:b";

struct Run {
    code: i32,
    out: String,
    err: String,
}

fn env(dir: &Path) -> Env {
    Env {
        state_dir: dir.join("state"),
        root: dir.join("root"),
        allow_container: false,
        container_var: None,
        uid: Some(0),
        version: Some("1.16.10".to_owned()),
    }
}

fn resolver() -> FakeResolver {
    FakeResolver::default()
        .with(info(A, 'a', "1", None))
        .with(info(B, 'b', "2", None))
}

fn run(env: &Env, r: &FakeResolver, args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = main_with(&args, env, r, &mut out, &mut err);
    Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

fn seeded() -> (tempfile::TempDir, Env) {
    let dir = tempfile::tempdir().unwrap();
    let e = env(dir.path());
    seed(&e.state_dir, info(A, 'a', "1", None)).unwrap();
    (dir, e)
}

fn status(e: &Env, r: &FakeResolver) -> Value {
    let out = run(e, r, &["status", "--format=json", "--format-version=1"]);
    assert_eq!(out.code, 0, "{}", out.err);
    let doc: Value = serde_json::from_str(&out.out).unwrap();
    check_status(&doc);
    doc
}

#[test]
fn status_formats() {
    let (_d, e) = seeded();
    let r = resolver();
    let doc = status(&e, &r);
    assert_eq!(doc, State::load(&e.state_dir).unwrap().status());
    let json = run(&e, &r, &["status", "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&json.out).unwrap(), doc);
    let human = run(&e, &r, &["status"]);
    assert_eq!(human.code, 0);
    assert!(
        human.out.contains("Booted image: 127.0.0.1:5000/os:a"),
        "{}",
        human.out
    );
    // An unseeded host prints bootc's document for a non-bootc host.
    let dir = tempfile::tempdir().unwrap();
    let empty = status(&env(dir.path()), &r);
    assert_eq!(empty["status"]["booted"], Value::Null);
    assert_eq!(empty["spec"]["image"], Value::Null);
    // Status works without root.
    let mut user = e.clone();
    user.uid = Some(1000);
    assert_eq!(run(&user, &r, &["status", "--json"]).code, 0);
}

#[test]
fn cli_drives_the_transitions_and_touches_the_marker() {
    let (_d, e) = seeded();
    let r = resolver();
    let marker = e.root.join("ostree/bootc");
    assert!(!marker.exists());
    let out = run(
        &e,
        &r,
        &[
            "switch",
            "--download-only",
            "--retain",
            "--transport",
            "registry",
            B,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(marker.exists());
    let doc = status(&e, &r);
    assert_eq!(doc["status"]["staged"]["downloadOnly"], true);
    assert_eq!(doc["spec"]["image"]["image"], B);

    std::fs::remove_file(&marker).unwrap();
    let out = run(&e, &r, &["upgrade", "--from-downloaded", "--quiet"]);
    assert_eq!((out.code, out.out.as_str()), (0, ""), "{}", out.err);
    assert!(marker.exists());
    assert_eq!(status(&e, &r)["status"]["staged"]["downloadOnly"], false);

    // --apply does not reboot.
    let out = run(&e, &r, &["upgrade", "--apply", "--soft-reboot=auto"]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out.out.contains("does not reboot"), "{}", out.out);
    assert_eq!(
        status(&e, &r)["status"]["booted"]["image"]["image"]["image"],
        A
    );

    let out = run(&e, &r, &["internal-finalize-boot"]);
    assert_eq!(out.code, 0, "{}", out.err);
    let doc = status(&e, &r);
    assert_eq!(doc["status"]["booted"]["image"]["image"]["image"], B);
    assert_eq!(doc["status"]["rollback"]["image"]["image"]["image"], A);

    let out = run(&e, &r, &["rollback"]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out.out.contains("Next boot: rollback deployment"));
    assert_eq!(status(&e, &r)["status"]["rollbackQueued"], true);
    run(&e, &r, &["internal-finalize-boot"]);
    assert_eq!(
        status(&e, &r)["status"]["booted"]["image"]["image"]["image"],
        A
    );

    // Switching to the tracked image: nothing pulled, exit 0.
    let calls = r.calls.get();
    let out = run(&e, &r, &["switch", A]);
    assert_eq!(out.code, 0);
    assert!(out.out.contains("Image specification is unchanged."));
    assert_eq!(r.calls.get(), calls);

    // upgrade --check reports without changing anything.
    let out = run(&e, &r, &["upgrade", "--check"]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out.out.contains("No changes in"), "{}", out.out);
}

#[test]
fn failures_exit_1_like_bootc() {
    let (_d, e) = seeded();
    let r = resolver();
    let fails = |e: &Env, args: &[&str], needle: &str| {
        let out = run(e, &r, args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.err);
        assert!(out.err.starts_with("error: "), "{}", out.err);
        assert!(
            out.err.contains(needle),
            "{args:?}: {} lacks {needle}",
            out.err
        );
    };
    fails(
        &e,
        &["upgrade", "--from-downloaded"],
        "No staged deployment",
    );
    fails(&e, &["rollback"], "No rollback available");
    fails(&e, &["switch", "127.0.0.1:5000/os:missing"], "HTTP 404");
    fails(
        &e,
        &["switch", "--transport", "oci", B],
        "Unsupported transport",
    );

    let mut user = e.clone();
    user.uid = Some(1000);
    for args in [
        &["switch", B][..],
        &["upgrade"],
        &["rollback"],
        &["internal-finalize-boot"],
    ] {
        fails(&user, args, "requires root");
    }
    let mut boxed = e.clone();
    boxed.container_var = Some("podman".into());
    fails(&boxed, &["switch", B], "container");
    boxed.allow_container = true;
    assert_eq!(run(&boxed, &r, &["switch", "--quiet", B]).code, 0);
    let mut envfile = e.clone();
    std::fs::create_dir_all(envfile.root.join("run")).unwrap();
    std::fs::write(envfile.root.join("run/.containerenv"), "").unwrap();
    fails(&envfile, &["upgrade"], "/run/.containerenv");
    envfile.allow_container = true;
    assert_eq!(run(&envfile, &r, &["upgrade", "--quiet"]).code, 0);

    let dir = tempfile::tempdir().unwrap();
    fails(&env(dir.path()), &["switch", B], "Not a bootc host");
}

#[test]
fn bad_references_and_usage_errors() {
    let (_d, e) = seeded();
    let r = resolver();
    let before = State::load(&e.state_dir).unwrap();
    for bad in [
        "-x",
        "127.0.0.1:5000/os: b",
        "127.0.0.1:5000/os:b\n",
        "127.0.0.1:5000/os\u{7}:b",
        "127.0.0.1:5000/OS:b",
        "127.0.0.1:5000/os@sha256:1234",
    ] {
        let out = run(&e, &r, &["switch", "--", bad]);
        assert_eq!(out.code, 1, "{bad:?}: {}", out.err);
        assert!(out.err.contains("Invalid image reference"), "{}", out.err);
    }
    assert_eq!(r.calls.get(), 0, "a bad reference must never be pulled");
    // clap's usage errors: exit 2.
    for args in [
        &["switch"][..],
        &["switch", "--bogus", B],
        &["switch", "-x"],
        &["upgrade", "--download-only", "--from-downloaded"],
        &["upgrade", "--soft-reboot=never"],
        &["frobnicate"],
        &[],
    ] {
        let out = run(&e, &r, args);
        assert_eq!(out.code, 2, "{args:?}: {} {}", out.out, out.err);
        assert!(
            out.err.starts_with("error: ") || (args.is_empty() && out.err.contains("Usage:")),
            "{args:?}: {}",
            out.err
        );
    }
    assert_eq!(State::load(&e.state_dir).unwrap(), before);
}

#[test]
fn help_and_version() {
    let (_d, e) = seeded();
    let r = resolver();
    let out = run(&e, &r, &["switch", "--help"]);
    assert_eq!(out.code, 0);
    assert!(out.out.contains("--download-only"));
    let out = run(&e, &r, &["upgrade", "--help"]);
    assert!(out.out.contains("--from-downloaded") && out.out.contains("--download-only"));
    let out = run(&e, &r, &["--help"]);
    assert_eq!(out.code, 0);
    assert!(out.out.contains("switch") && !out.out.contains("internal-finalize-boot"));
    let out = run(&e, &r, &["--version"]);
    assert_eq!((out.code, out.out.trim()), (0, "bootc 1.16.10-standin"));
}

#[test]
fn by_default_it_plays_the_measured_1_16_9_without_switch_download_only() {
    let (_d, mut e) = seeded();
    e.version = None;
    let r = resolver();
    let out = run(&e, &r, &["--version"]);
    assert_eq!((out.code, out.out.trim()), (0, "bootc 1.16.9-standin"));
    let out = run(&e, &r, &["switch", "--help"]);
    assert!(!out.out.contains("--download-only"), "{}", out.out);
    assert!(!out.out.contains("--from-downloaded"), "{}", out.out);
    // As the real 1.16.9 (reference: switch-download-only.stderr): clap's usage error.
    for args in [
        &["switch", "--download-only", B][..],
        &["switch", "--from-downloaded"][..],
    ] {
        let out = run(&e, &r, args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.err);
        assert!(
            out.err.starts_with("error: unexpected argument '--"),
            "{}",
            out.err
        );
    }
    // The version file in the state directory chooses too; the variable wins over it.
    bootc_standin::Version::V1_16_10.save(&e.state_dir).unwrap();
    assert_eq!(
        run(&e, &r, &["--version"]).out.trim(),
        "bootc 1.16.10-standin"
    );
    e.version = Some("1.16.9".to_owned());
    assert_eq!(
        run(&e, &r, &["--version"]).out.trim(),
        "bootc 1.16.9-standin"
    );
    e.version = Some("1.15.0".to_owned());
    let out = run(&e, &r, &["status", "--json"]);
    assert_eq!(out.code, 1);
    assert!(out.err.contains("BOOTC_STANDIN_VERSION"), "{}", out.err);
}

#[test]
fn as_1_16_10_switch_download_only_of_an_image_staged_unlocked_changes_nothing() {
    let (_d, e) = seeded();
    let r = resolver();
    let staged = |e: &Env| {
        let s = status(e, &r)["status"]["staged"].clone();
        (s["imageDigest"].clone(), s["downloadOnly"].clone())
    };
    let out = run(&e, &r, &["switch", "--help"]);
    assert!(out.out.contains("--download-only") && out.out.contains("--from-downloaded"));
    // bootc #2425: a hand-made `switch` stages B unlocked; `switch --download-only B`
    // then says the spec is unchanged, exits 0, and leaves it unlocked.
    assert_eq!(run(&e, &r, &["switch", B]).code, 0);
    let unlocked = status(&e, &r)["status"]["staged"]["downloadOnly"].clone();
    assert_eq!(unlocked, Value::Bool(false));
    let out = run(&e, &r, &["switch", "--download-only", B]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(
        out.out.contains("Image specification is unchanged"),
        "{}",
        out.out
    );
    assert_eq!(status(&e, &r)["status"]["staged"]["downloadOnly"], false);
    // `upgrade --download-only` locks it (as on the real 1.16.9: reference 05).
    assert_eq!(run(&e, &r, &["upgrade", "--download-only"]).code, 0);
    assert_eq!(status(&e, &r)["status"]["staged"]["downloadOnly"], true);
    // `switch --from-downloaded [--apply]` unlocks it, without a target.
    let out = run(&e, &r, &["switch", "--from-downloaded", "--apply"]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out.out.contains("--apply"), "{}", out.out);
    assert_eq!(status(&e, &r)["status"]["staged"]["downloadOnly"], false);
    let out = run(&e, &r, &["switch", "--from-downloaded", B]);
    assert_eq!(out.code, 2, "a target with --from-downloaded: {}", out.err);
    // Nothing staged: `switch --from-downloaded` fails as `upgrade --from-downloaded`.
    let (_d2, fresh) = seeded();
    let out = run(&fresh, &r, &["switch", "--from-downloaded"]);
    assert_eq!(out.code, 1, "{}", out.err);
    // `switch --download-only` of a new image stages it locked.
    let (_d3, other) = seeded();
    assert_eq!(run(&other, &r, &["switch", "--download-only", B]).code, 0);
    assert_eq!(staged(&other).1, Value::Bool(true));
}

#[test]
fn injected_faults() {
    let (_d, e) = seeded();
    let r = resolver();
    let mut faults = Faults::default();
    faults
        .fail
        .insert("switch".into(), "simulated pull failure".into());
    faults
        .fail
        .insert("upgrade --from-downloaded".into(), "cannot unlock".into());
    faults.save(&e.state_dir).unwrap();
    let out = run(&e, &r, &["switch", B]);
    assert_eq!(
        (out.code, out.err.as_str()),
        (1, "error: simulated pull failure\n")
    );
    let out = run(&e, &r, &["upgrade", "--from-downloaded"]);
    assert_eq!((out.code, out.err.as_str()), (1, "error: cannot unlock\n"));
    assert_eq!(run(&e, &r, &["upgrade", "--quiet"]).code, 0);
    assert_eq!(r.calls.get(), 1, "only the plain upgrade pulled");

    // An old bootc without `switch --download-only`.
    let faults = Faults {
        switch_help_without_download_only: true,
        ..Faults::default()
    };
    faults.save(&e.state_dir).unwrap();
    let out = run(&e, &r, &["switch", "--help"]);
    assert_eq!(out.code, 0);
    assert!(!out.out.contains("--download-only"), "{}", out.out);
    let out = run(&e, &r, &["switch", "--download-only", B]);
    assert_eq!(out.code, 2);
    assert!(
        out.err.contains("unexpected argument '--download-only'"),
        "{}",
        out.err
    );
    // The fallback works: switch, then upgrade --download-only.
    assert_eq!(run(&e, &r, &["switch", B]).code, 0);
    assert_eq!(run(&e, &r, &["upgrade", "--download-only"]).code, 0);
    assert_eq!(status(&e, &r)["status"]["staged"]["downloadOnly"], true);

    // A malformed fault file fails every command.
    std::fs::write(e.state_dir.join("faults.json"), "{\"fail\": 3}").unwrap();
    let out = run(&e, &r, &["status", "--json"]);
    assert_eq!(out.code, 1);
    assert!(out.err.contains("faults.json"), "{}", out.err);
}

#[test]
fn process_hangs_when_asked_and_is_killed() {
    let host = Host::new();
    seed(&host.state_dir(), info(A, 'a', "1", None)).unwrap();
    std::fs::write(
        host.state_dir().join("faults.json"),
        r#"{"hang": ["upgrade"]}"#,
    )
    .unwrap();
    let mut child = ChildGuard(host.command(&["upgrade"]).spawn().unwrap());
    // Still running after a while (a deadline on the condition "it exited").
    let exited = wait_until(Duration::from_millis(500), || {
        child.0.try_wait().unwrap().is_some()
    });
    assert!(!exited, "a hanging upgrade exited");
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert!(!status.success());
    // Other commands still work.
    host.status();
}

#[test]
fn process_cli_basics() {
    let host = Host::new();
    assert_eq!(host.ok(&["--version"]).trim(), "bootc 1.16.10-standin");
    assert!(host.ok(&["switch", "--help"]).contains("--download-only"));
    let (doc, _) = host.status();
    assert_eq!(doc["status"]["booted"], Value::Null);
    seed(&host.state_dir(), info(A, 'a', "1", None)).unwrap();
    let err = host.fails(&["rollback"]);
    assert!(err.contains("No rollback available"), "{err}");
    let out = host.run(&["switch", "--bogus", A]);
    assert_eq!(out.status.code(), Some(2));
    // `container` set and no override → refused.
    let out = host
        .command(&["rollback"])
        .env_remove("BOOTC_STANDIN_ALLOW_CONTAINER")
        .env("container", "podman")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("container"));
    // finalize with nothing to do succeeds and changes nothing.
    let before = State::load(&host.state_dir()).unwrap();
    host.ok(&["internal-finalize-boot"]);
    assert_eq!(State::load(&host.state_dir()).unwrap(), before);
}

/// `(type, task)` of a progress line.
type Kind = (String, String);

/// The kinds in a stream of progress lines, each run of equal ones once, and the keys
/// each event type carries.
fn shape(lines: &[Value]) -> (Vec<Kind>, Vec<(String, Vec<String>)>) {
    let mut kinds: Vec<Kind> = Vec::new();
    let mut keys: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        let kind = (
            line["type"].as_str().unwrap_or_default().to_owned(),
            line["task"].as_str().unwrap_or_default().to_owned(),
        );
        if kinds.last() != Some(&kind) {
            kinds.push(kind.clone());
        }
        let mut k: Vec<String> = line.as_object().unwrap().keys().cloned().collect();
        k.sort();
        let entry = (kind.0, k);
        if !keys.contains(&entry) {
            keys.push(entry);
        }
    }
    keys.sort();
    (kinds, keys)
}

#[test]
fn progress_fd_writes_the_real_bootcs_events_to_a_pipe() {
    use std::io::{BufRead, Write};
    use std::os::fd::AsRawFd;
    let (dir, e) = seeded();
    let fifo = dir.path().join("progress");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let fd = pipe.as_raw_fd().to_string();
    let mut image = info(B, 'b', "2", None);
    image.layers = vec![1000, 3001];
    let r = FakeResolver::default().with(image);
    let done = run(
        &e,
        &r,
        &["switch", "--download-only", "--progress-fd", &fd, B],
    );
    assert_eq!(done.code, 0, "{}", done.err);
    writeln!(pipe, "END").unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(&pipe).lines() {
        let line = line.unwrap();
        if line == "END" {
            break;
        }
        lines.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let bytes: Vec<u64> = lines.iter().filter_map(|l| l["bytes"].as_u64()).collect();
    assert_eq!(
        bytes,
        [500, 1000, 2500, 4001],
        "bytes grow to the layers' total"
    );
    assert!(
        lines
            .iter()
            .all(|l| l["bytesTotal"].as_u64().is_none_or(|t| t == 4001))
    );

    let real_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../agent/tests/fixtures/bootc-1.16.9/progress-upgrade-download-only.jsonl");
    let real: Vec<Value> = std::fs::read_to_string(real_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        shape(&lines),
        shape(&real),
        "same events, order and keys as bootc 1.16.9"
    );
}

#[test]
fn progress_fd_refuses_what_bootc_refuses() {
    let (_dir, e) = seeded();
    let r = FakeResolver::default().with(info(B, 'b', "2", None));
    for fd in ["0", "1", "2"] {
        let refused = run(&e, &r, &["switch", "--progress-fd", fd, B]);
        assert_eq!(refused.code, 2);
        assert!(
            refused
                .err
                .contains(&format!("Cannot use fd {fd} for progress JSON")),
            "{}",
            refused.err
        );
    }
    let file = tempfile::tempfile().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file).to_string();
    let not_a_pipe = run(
        &e,
        &r,
        &["upgrade", "--download-only", "--progress-fd", &fd],
    );
    assert_eq!(not_a_pipe.code, 1);
    assert!(not_a_pipe.err.contains("not a pipe"), "{}", not_a_pipe.err);
}

#[test]
fn enforce_container_sigpolicy_lets_the_hosts_policy_decide_as_bootc_does() {
    let (_d, e) = seeded();
    let r = resolver();
    let policy = e.root.join("etc/containers/policy.json");
    let enforce = ["switch", "--enforce-container-sigpolicy", B];
    let refused = |out: &Run, words: &str| {
        assert_eq!(out.code, 1, "{}", out.out);
        assert!(
            out.err.starts_with(
                "error: Switching: Switching (ostree): Preparing import: Fetching manifest: "
            ),
            "{}",
            out.err
        );
        assert!(out.err.contains(words), "{}", out.err);
    };
    // No policy, and one that accepts anything by default: bootc 1.16.9's refusals.
    refused(&run(&e, &r, &enforce), "No containers policy.json found");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    refused(
        &run(&e, &r, &enforce),
        "containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage",
    );
    // A policy that rejects the image.
    std::fs::write(&policy, r#"{"default":[{"type":"reject"}]}"#).unwrap();
    refused(&run(&e, &r, &enforce), "is rejected by policy");
    assert!(
        status(&e, &r)["status"]["staged"].is_null(),
        "nothing staged"
    );
    // `upgrade` takes no such flag (exit 2, as 1.16.9).
    let out = run(&e, &r, &["upgrade", "--enforce-container-sigpolicy"]);
    assert_eq!(out.code, 2, "{}", out.err);

    // Without the flag the policy is not consulted.
    let out = run(&e, &r, &["switch", B]);
    assert_eq!(out.code, 0, "{}", out.err);
    let doc = status(&e, &r);
    assert!(
        doc["status"]["staged"]["image"]["image"]
            .get("signature")
            .is_none()
    );

    // A policy that admits the registry: staged under it (`signature: containerPolicy`,
    // not unchanged although the image is the tracked one), and `upgrade
    // --download-only` keeps it, pulling under the policy again.
    std::fs::write(
        &policy,
        r#"{"default":[{"type":"reject"}],
            "transports":{"docker":{"127.0.0.1:5000":[{"type":"insecureAcceptAnything"}]}}}"#,
    )
    .unwrap();
    let out = run(&e, &r, &enforce);
    assert_eq!(out.code, 0, "{}", out.err);
    let out = run(&e, &r, &["upgrade", "--download-only"]);
    assert_eq!(out.code, 0, "{}", out.err);
    let doc = status(&e, &r);
    assert_eq!(doc["spec"]["image"]["signature"], "containerPolicy");
    assert_eq!(
        doc["status"]["staged"]["image"]["image"]["signature"],
        "containerPolicy"
    );
    assert_eq!(doc["status"]["staged"]["downloadOnly"], true);
    // The policy tightened: the tracked image is pulled under it, and refused.
    std::fs::write(&policy, r#"{"default":[{"type":"reject"}]}"#).unwrap();
    let out = run(&e, &r, &["upgrade", "--download-only"]);
    assert_eq!(out.code, 1, "{}", out.out);
    assert!(out.err.contains("is rejected by policy"), "{}", out.err);
}
