//! Writes `deploy/install.yaml` from `deploy/manifests/` and the CRDs in `crds/`, or with
//! `--check` fails when the committed file differs.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: render-install [--check]\n\nWrites deploy/install.yaml from deploy/manifests/ and the CRDs in crds/.\n--check compares instead of writing and exits 1 on a difference."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("error: unknown argument {other:?}\nusage: render-install [--check]");
                return ExitCode::from(2);
            }
        }
    }
    let root = deploy_check::repo_root();
    let rendered = match deploy_check::render(&root) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot render {}: {e}", deploy_check::INSTALL);
            return ExitCode::FAILURE;
        }
    };
    let path = root.join(deploy_check::INSTALL);
    if check {
        if std::fs::read_to_string(&path).ok().as_deref() == Some(rendered.as_str()) {
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "{} is out of date: run `cargo run -p deploy-check --bin render-install`",
            deploy_check::INSTALL
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(&path, rendered) {
        Ok(()) => {
            println!("wrote {}", deploy_check::INSTALL);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
