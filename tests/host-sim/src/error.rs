//! The harness's error type.

use std::path::PathBuf;
use std::time::Duration;

/// Why the host simulator could not do something.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The simulator needs root (debootstrap, systemd-nspawn, bind mounts).
    #[error("the nspawn host simulator must run as root (uid 0); this process runs as uid {uid}")]
    NotRoot {
        /// The effective uid of this process.
        uid: u32,
    },
    /// A program the simulator runs is not installed.
    #[error("`{program}` is not installed (install the Debian package `{package}`)")]
    MissingTool {
        /// The program looked for on the PATH.
        program: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// A file system operation failed.
    #[error("{context}: {path}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A program the simulator ran failed.
    #[error("`{command}` failed ({status}){details}")]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// Where to look (a log file) or its standard error.
        details: String,
    },
    /// The bootc stand-in binary was not found or could not be built.
    #[error("bootc stand-in binary unavailable: {0}")]
    Standin(String),
    /// Something did not happen in time.
    #[error("{what} did not happen within {timeout:?}{details}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long it was waited for.
        timeout: Duration,
        /// The last observation, or where to look.
        details: String,
    },
    /// The node is stopped and will not come back.
    #[error("node `{node}` is stopped{details}")]
    Stopped {
        /// The node's name.
        node: String,
        /// How it ended.
        details: String,
    },
    /// A call on a node's bus failed.
    #[error("D-Bus {call} on node `{node}` failed")]
    Bus {
        /// The node's name.
        node: String,
        /// What was called.
        call: &'static str,
        /// The cause.
        #[source]
        source: zbus::Error,
    },
    /// A call to the Kubernetes API failed.
    #[error("Kubernetes API {call} failed")]
    Kube {
        /// What was called.
        call: &'static str,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The node's options are unusable.
    #[error("invalid node options: {0}")]
    InvalidOptions(String),
}

impl SimError {
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        SimError::Io {
            context,
            path: path.into(),
            source,
        }
    }
}

/// The simulator's result type.
pub type Result<T, E = SimError> = std::result::Result<T, E>;
