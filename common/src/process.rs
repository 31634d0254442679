//! A binary's life from `main`: a refused configuration exits 2, a failure after start
//! exits 1 with the reason logged, a clean stop exits 0.

use std::fmt::Display;
use std::future::Future;
use std::num::NonZeroUsize;
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
    /// One thread, for a process that mostly waits: the node agent.
    CurrentThread,
    /// Worker threads: this many, or one per core (`None`).
    MultiThread(Option<NonZeroUsize>),
}

impl Runtime {
    /// `threads` threads, one per core when `None`: one is [`Runtime::CurrentThread`]
    /// (no wake-ups between threads), more a runtime with that many workers.
    pub fn threads(threads: Option<NonZeroUsize>) -> Runtime {
        match threads {
            Some(n) if n.get() == 1 => Runtime::CurrentThread,
            other => Runtime::MultiThread(other),
        }
    }
}

/// Runs `main` to completion on a new runtime: success exits 0; an error (one line,
/// logged) or a runtime that cannot start exits 1. Call after logging is set up.
///
/// With worker threads, `main` runs as a task on them (a panic in it is logged and
/// exits 1); on one thread, on the calling thread.
pub fn run<F>(runtime: Runtime, main: F) -> ExitCode
where
    F: Future<Output = Result<(), String>> + Send + 'static,
{
    let mut builder = match runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Runtime::MultiThread(workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(workers) = workers {
                builder.worker_threads(workers.get());
            }
            builder
        }
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match runtime {
        Runtime::CurrentThread => rt.block_on(main),
        // On the workers, not on this thread: `block_on` polls its future here, outside
        // the pool, so every wake-up from a socket would cross between threads.
        Runtime::MultiThread(_) => rt
            .block_on(rt.spawn(main))
            .unwrap_or_else(|e| Err(format!("the main task ended abnormally: {e}"))),
    };
    match outcome {
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
    fn a_multi_threaded_main_task_runs_on_a_worker_and_a_single_threaded_one_here() {
        let caller = std::thread::current().id();
        let on_caller = move || std::thread::current().id() == caller;
        let two = Runtime::threads(NonZeroUsize::new(2));
        let workers = run(two, async move {
            if on_caller() {
                Err("polled on the calling thread".to_owned())
            } else {
                Ok(())
            }
        });
        assert_eq!(
            workers,
            ExitCode::SUCCESS,
            "the main task ran outside the pool"
        );
        let one = run(Runtime::CurrentThread, async move {
            if on_caller() {
                Ok(())
            } else {
                Err("polled on another thread".to_owned())
            }
        });
        assert_eq!(one, ExitCode::SUCCESS);
    }

    #[test]
    fn the_outcome_is_the_exit_code() {
        let two = Runtime::threads(NonZeroUsize::new(2));
        for runtime in [Runtime::CurrentThread, two, Runtime::threads(None)] {
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

    #[test]
    fn one_thread_is_the_current_thread_runtime_and_more_are_workers() {
        let n = |n| NonZeroUsize::new(n).unwrap();
        assert_eq!(Runtime::threads(Some(n(1))), Runtime::CurrentThread);
        assert_eq!(
            Runtime::threads(Some(n(4))),
            Runtime::MultiThread(Some(n(4)))
        );
        assert_eq!(Runtime::threads(None), Runtime::MultiThread(None));
        // The workers asked for are the workers the runtime has.
        let workers = run(Runtime::MultiThread(Some(n(3))), async {
            let m = tokio::runtime::Handle::current().metrics();
            if m.num_workers() == 3 {
                Ok(())
            } else {
                Err(format!("{} workers", m.num_workers()))
            }
        });
        assert_eq!(workers, ExitCode::SUCCESS);
        let flavor = run(Runtime::CurrentThread, async {
            match tokio::runtime::Handle::current().runtime_flavor() {
                tokio::runtime::RuntimeFlavor::CurrentThread => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        assert_eq!(flavor, ExitCode::SUCCESS);
    }
}
