//! Writes the generated CRD YAML into a directory (default: the `crds/` directory of this
//! checkout), or with `--check` fails when the files there differ from the types.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut check = false;
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--out" => match args.next() {
                Some(d) => dir = PathBuf::from(d),
                None => return usage("--out needs a directory"),
            },
            "-h" | "--help" => {
                println!(
                    "usage: bootc-crdgen [--check] [--out DIR]\n\nWrites the CRD YAML generated from the API types into DIR (default: the crds/ directory).\n--check compares instead of writing and exits 1 on a difference."
                );
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let files = match bootc_crds::crdgen::render() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: cannot render the CRDs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = false;
    for (name, yaml) in files {
        let path = dir.join(&name);
        if check {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(yaml.as_str()) {
                eprintln!(
                    "{} is out of date: run `cargo run -p bootc-crds --bin bootc-crdgen`",
                    path.display()
                );
                stale = true;
            }
        } else if let Err(e) = std::fs::write(&path, yaml) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            println!("wrote {}", path.display());
        }
    }
    if stale {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}\nusage: bootc-crdgen [--check] [--out DIR]");
    ExitCode::from(2)
}
