//! Holds every API request the project's components made while a test suite ran to the
//! roles in `deploy/install.yaml`.
//!
//! Run the suite with `KUBE_EMULATOR_AUDIT_DIR=DIR`: every API emulator the tests start
//! writes the distinct requests it served to DIR. Then `rbac-audit DIR` assigns each
//! request to a service account by its User-Agent (the controller's or the agent's),
//! checks it against the roles, prints what each account did and which grants went
//! unused and what each account's token can read, and exits 1 when any request is outside
//! the roles, when any ClusterRole grants Secrets (a node's token must read no Secret
//! but the pull Secrets' copies in the install's namespace), or when the directory holds
//! no request of the controller or of the agent (the audit would prove nothing).

use std::path::PathBuf;
use std::process::ExitCode;

use deploy_check::{
    AGENT_SA, Audit, Authorizer, CONTROLLER_SA, INSTALL, NAMESPACE, Request,
    cluster_roles_granting, documents,
};

const USAGE: &str = "usage: rbac-audit DIR\n\nChecks the requests the API emulators wrote to DIR (KUBE_EMULATOR_AUDIT_DIR) against the roles in deploy/install.yaml.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = match args.as_slice() {
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => {
            eprintln!("error: expected one directory\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&dir) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> Result<bool, String> {
    let path = deploy_check::repo_root().join(INSTALL);
    let install = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let docs = documents(&install)?;
    let authorizer = Authorizer::new(&docs);
    let entries = kube_emulator::audit::read_dir(dir)?;
    let audit = Audit::of(
        &authorizer,
        entries.iter().map(|e| {
            (
                e.request.user_agent.as_str(),
                Request::from(&e.request),
                e.count,
            )
        }),
    );

    let mut ok = true;
    for subject in [CONTROLLER_SA, AGENT_SA] {
        let total = audit.total(subject);
        let distinct = audit.checked.get(subject).map_or(0, |r| r.len());
        println!("{subject}: {total} requests ({distinct} distinct) checked against the roles");
        let mut by_kind: std::collections::BTreeMap<String, u64> = Default::default();
        for (r, n) in audit.checked.get(subject).into_iter().flatten() {
            *by_kind
                .entry(format!("{} {}/{}", r.verb, r.group, r.full_resource()))
                .or_default() += n;
        }
        for (kind, n) in by_kind {
            println!("  {n:>8}  {kind}");
        }
        let unused = audit.unused_grants(&authorizer, subject);
        if !unused.is_empty() {
            println!("  granted but not used: {}", unused.join(", "));
        }
        println!("  its token can read:");
        for line in authorizer.reads(NAMESPACE, subject) {
            println!("    {line}");
        }
        if total == 0 {
            eprintln!("error: no request of {subject} in {}", dir.display());
            ok = false;
        }
    }
    println!(
        "other clients' requests (not ours, not checked): {}",
        audit.others
    );
    let granting = cluster_roles_granting(&docs, "", "secrets");
    for role in &granting {
        eprintln!("error: {role} grants Secrets; only Roles in the install's namespace may");
        ok = false;
    }
    if granting.is_empty() {
        println!("no ClusterRole grants Secrets");
    }
    for (subject, request, count) in &audit.denied {
        eprintln!("denied: {subject}: {request} ({count}×)");
        ok = false;
    }
    if audit.denied.is_empty() {
        println!("no request outside the roles");
    }
    Ok(ok)
}
