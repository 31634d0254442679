//! `cargo xtask gen | check | limits`: see the library's documentation.

use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <gen|check|limits>

  gen     write the CRDs (crds/*.yaml), deploy/install.yaml, the kustomize base's files,
          the monitoring overlay's PrometheusRule and docs/reference.md from their sources
  check   fail when a generated file is stale, a source breaks the size limits,
          rust-version is not the newest the dependencies need, or a test holds a hollow
          assertion, an early return or a negative check after a sleep
  limits  print every source file and function over the size limits";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = xtask::install::repo_root();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["gen"] => report(generate(&root, Mode::Write)),
        ["check"] => {
            let generated = generate(&root, Mode::Check);
            let limits = limits(&root);
            let msrv = xtask::msrv::check(&root);
            let guard = test_guard(&root);
            report(generated.and(limits).and(msrv).and(guard))
        }
        ["limits"] => report(limits(&root)),
        ["-h" | "--help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("error: unknown arguments {args:?}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Write,
    Check,
}

fn report(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes (or compares) the CRDs first, then `install.yaml`, which copies them.
fn generate(root: &Path, mode: Mode) -> Result<(), String> {
    let mut files = bootc_crds::crdgen::render()
        .map_err(|e| format!("cannot render the CRDs: {e}"))?
        .into_iter()
        .map(|(name, yaml)| (format!("crds/{name}"), yaml))
        .collect::<Vec<_>>();
    let mut stale = Vec::new();
    for (name, text) in files.drain(..) {
        write_or_compare(root, &name, &text, mode, &mut stale)?;
    }
    let install = xtask::install::render(root)
        .map_err(|e| format!("cannot render {}: {e}", xtask::install::INSTALL))?;
    write_or_compare(root, xtask::install::INSTALL, &install, mode, &mut stale)?;
    let kustomize = xtask::kustomize::render_all(root)
        .map_err(|e| format!("cannot render the kustomize files: {e}"))?;
    for (name, text) in kustomize {
        write_or_compare(root, &name, &text, mode, &mut stale)?;
    }
    let reference = xtask::reference::render(root)
        .map_err(|e| format!("cannot render {}: {e}", xtask::reference::REFERENCE))?;
    write_or_compare(
        root,
        xtask::reference::REFERENCE,
        &reference,
        mode,
        &mut stale,
    )?;
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "out of date: {}; run `cargo xtask gen` and commit the result",
            stale.join(", ")
        ))
    }
}

fn write_or_compare(
    root: &Path,
    name: &str,
    text: &str,
    mode: Mode,
    stale: &mut Vec<String>,
) -> Result<(), String> {
    let path = root.join(name);
    match mode {
        Mode::Check => {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
                stale.push(name.to_string());
            }
            Ok(())
        }
        Mode::Write => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {name}'s directory: {e}"))?;
            }
            std::fs::write(&path, text).map_err(|e| format!("cannot write {name}: {e}"))?;
            println!("wrote {name}");
            Ok(())
        }
    }
}

fn limits(root: &Path) -> Result<(), String> {
    let breaches =
        xtask::limits::check(root).map_err(|e| format!("cannot read the sources: {e}"))?;
    print_findings(&breaches, |n| {
        format!(
            "{n} places break the size limits (file {} lines, function {} lines, {} arguments)",
            xtask::limits::MAX_FILE_LINES,
            xtask::limits::MAX_FN_LINES,
            xtask::limits::MAX_FN_ARGS
        )
    })
}

fn test_guard(root: &Path) -> Result<(), String> {
    let found =
        xtask::test_guard::check(root).map_err(|e| format!("cannot read the tests: {e}"))?;
    print_findings(&found, |n| {
        format!("{n} places in tests prove nothing (see xtask/src/test_guard.rs)")
    })
}

/// Prints every finding; with any, fails with `summary` of how many there are.
fn print_findings(
    found: &[xtask::limits::Breach],
    summary: impl FnOnce(usize) -> String,
) -> Result<(), String> {
    for f in found {
        println!("{f}");
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(summary(found.len()))
    }
}
