//! `kubectl-bootc`: run as `kubectl bootc …` (see the library for the commands).

fn main() -> std::process::ExitCode {
    kubectl_bootc::commands::main()
}
