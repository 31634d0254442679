//! A binary's life from `main`: a refused configuration exits 2, a failure after start
//! exits 1 with the reason logged, a clean stop exits 0.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

use tracing::error;

/// The exit code for a configuration refused before anything started.
pub const EXIT_INVALID_CONFIGURATION: u8 = 2;

/// Says why the configuration is refused, on standard error (logging is not set up yet),
/// and gives the exit code for it.
pub fn invalid_configuration(program: &str, error: &dyn Display) -> ExitCode {
    eprintln!("{program}: invalid configuration: {error}");
    ExitCode::from(EXIT_INVALID_CONFIGURATION)
}

/// Which Tokio runtime a binary runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// One thread: a node agent that mostly waits.
    CurrentThread,
    /// A worker per core: the controller.
    MultiThread,
}

/// Runs `main` to completion on a new runtime: success exits 0; an error (one line,
/// logged) or a runtime that cannot start exits 1. Call after logging is set up.
pub fn run<F>(runtime: Runtime, main: F) -> ExitCode
where
    F: Future<Output = Result<(), String>>,
{
    let mut builder = match runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Runtime::MultiThread => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_is_the_exit_code() {
        for runtime in [Runtime::CurrentThread, Runtime::MultiThread] {
            assert_eq!(run(runtime, async { Ok(()) }), ExitCode::SUCCESS);
            assert_eq!(
                run(runtime, async { Err("broken".to_owned()) }),
                ExitCode::FAILURE
            );
        }
        assert_eq!(
            invalid_configuration("test", &"--flag is wrong"),
            ExitCode::from(2)
        );
    }
}
