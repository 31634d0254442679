//! The Containerfile's text: its one build step is the release build (the builder's
//! `RUN` line equals `deploy_check::RELEASE_BUILD`), which CI runs by building the image
//! (the project's test script runs `scripts/image` before the tests); what it copies exists and holds every workspace member; the final
//! stage runs as a non-root user. `image.rs` builds it for real with `scripts/image`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use deploy_check::{RELEASE_BUILD, repo_root};

fn containerfile() -> String {
    std::fs::read_to_string(repo_root().join("Containerfile")).unwrap()
}

/// Instructions, with line continuations joined and comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (op, rest) = current.split_once(' ').unwrap_or((&current, ""));
        out.push((op.to_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    out
}

#[test]
fn the_build_step_is_the_command_ci_runs() {
    let text = containerfile();
    let runs: Vec<String> = instructions(&text)
        .into_iter()
        .filter(|(op, _)| op == "RUN")
        .map(|(_, cmd)| cmd)
        .collect();
    assert_eq!(
        runs,
        [RELEASE_BUILD],
        "the only RUN step is the release build"
    );
    let script = std::fs::read_to_string(repo_root().join("scripts/test")).unwrap();
    assert!(
        script.lines().any(|l| l.trim() == "bash scripts/image"),
        "scripts/test must build the image (`bash scripts/image`) so that CI proves the \
         Containerfile's build step"
    );
}

#[test]
fn the_image_holds_both_binaries_and_runs_as_non_root() {
    let steps = instructions(&containerfile());
    let froms: Vec<&String> = steps
        .iter()
        .filter(|(op, _)| op == "FROM")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(froms.len(), 2, "a builder and a final stage: {froms:?}");
    assert!(froms[0].ends_with(" AS builder"), "{}", froms[0]);
    let final_stage: Vec<&(String, String)> = steps
        .iter()
        .skip_while(|(op, a)| !(op == "FROM" && a == froms[1]))
        .collect();
    for binary in ["bootc-pool-controller", "bootc-node-agent"] {
        let copy = format!("--from=builder /src/target/release/{binary} /usr/bin/{binary}");
        assert!(
            final_stage.iter().any(|(op, a)| op == "COPY" && *a == copy),
            "{binary} is not copied to /usr/bin"
        );
        assert!(RELEASE_BUILD.contains(&format!("-p {binary}")));
    }
    let user = final_stage
        .iter()
        .rev()
        .find(|(op, _)| op == "USER")
        .map(|(_, a)| a.clone())
        .expect("a USER in the final stage");
    let uid = user.split(':').next().unwrap();
    assert!(uid != "0" && uid != "root", "USER {user}");
    // The deployment's controller runs as the image's user.
    let deploy =
        std::fs::read_to_string(repo_root().join("deploy/manifests/40-controller.yaml")).unwrap();
    assert!(
        deploy.contains(&format!("runAsUser: {uid}")),
        "the controller runs as {uid}"
    );
}

#[test]
fn the_builder_copies_every_workspace_member() {
    let steps = instructions(&containerfile());
    let copied: Vec<String> = steps
        .iter()
        .filter(|(op, a)| op == "COPY" && !a.starts_with("--from"))
        .flat_map(|(_, a)| {
            let parts: Vec<&str> = a.split_whitespace().collect();
            parts[..parts.len() - 1]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    for path in &copied {
        assert!(repo_root().join(path).exists(), "COPY {path}: no such path");
    }
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap();
    for member in members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
    {
        assert!(
            copied
                .iter()
                .any(|c| member == c || member.starts_with(&format!("{c}/"))),
            "workspace member {member} is not copied into the builder"
        );
    }
    for file in ["Cargo.toml", "Cargo.lock"] {
        assert!(copied.iter().any(|c| c == file), "{file}");
    }
}
