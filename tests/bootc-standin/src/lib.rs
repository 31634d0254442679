//! A bootc stand-in for simulated nodes (test infrastructure, never shipped).
//!
//! It keeps a host's deployments (booted, staged, rollback) in a state directory
//! (`/var/lib/bootc-standin`, or `$BOOTC_STANDIN_STATE_DIR`) and behaves like bootc where
//! the agent can see it: `bootc status --format=json --format-version=1` prints bootc's
//! `BootcHost` document, `switch`, `upgrade` and `rollback` change the deployments the
//! way bootc does, "pulling" really asks a loopback registry (with the credentials of
//! `/run/ostree/auth.json`, `/etc/ostree/auth.json` or `/usr/lib/ostree/auth.json`), and
//! the hidden `bootc internal-finalize-boot`, run by a unit at every boot, does what
//! bootc's finalize step does. Failures are injected through `<state dir>/faults.json`
//! (see [`faults::Faults`]).
//!
//! The library is usable in-process: [`State`] holds the transitions, [`ImageResolver`]
//! (with [`HttpResolver`]) the pulling, [`seed`] gives a node its first image, and
//! [`cli::main_with`] runs the command line against an [`cli::Env`].
//!
//! The modules:
//!
//! - [`calls`]: which commands ran, counted from the state directory;
//! - [`cli`]: the `bootc` command line over [`State`] and a [`ImageResolver`];
//! - [`faults`]: failures injected through `faults.json`;
//! - [`http`]: a tiny HTTP/1.1 client and base64 for basic auth;
//! - [`policy`]: the host's container signature policy, for `--enforce-container-sigpolicy`;
//! - [`reference`]: image references and what the stand-in accepts of them;
//! - [`resolver`]: pulling from a loopback registry with bootc's credentials;
//! - [`state`]: the deployments and their transitions;
//! - [`version`]: which bootc it plays (1.16.9 by default, or 1.16.10 and later).

pub mod calls;
pub mod cli;
pub mod faults;
pub mod http;
pub mod policy;
pub mod progress;
pub mod reference;
pub mod resolver;
pub mod state;
pub mod version;

use std::path::PathBuf;

pub use cli::{Env, main_with};
pub use faults::Faults;
pub use policy::Policy;
pub use reference::Reference;
pub use resolver::{HttpResolver, ImageInfo, ImageResolver};
pub use state::{Deployment, Outcome, State, seed};
pub use version::Version;

/// Why a stand-in command failed (the CLI prints `error: <this>` and exits 1).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference is malformed or unsafe.
    #[error("Invalid image reference {reference:?}: {reason}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Pulling the image from the registry failed.
    #[error("Pulling {image}: {message}")]
    Pull {
        /// The reference being pulled.
        image: String,
        /// What went wrong (includes the HTTP status when the registry answered).
        message: String,
    },
    /// A mutating command run without uid 0.
    #[error("This command requires root privileges")]
    NotRoot,
    /// A mutating command run inside a container.
    #[error("This command must be executed on the host system, not in a container (detected {0})")]
    InContainer(String),
    /// The host has no booted deployment (the state was never seeded).
    #[error("Not a bootc host: no booted deployment")]
    NotBootcHost,
    /// No state file in the state directory.
    #[error("Not a bootc host: no stand-in state in {}", .0.display())]
    NotSeeded(PathBuf),
    /// `upgrade` with no tracked image.
    #[error("No image source specified")]
    NoImageSource,
    /// `upgrade --from-downloaded` with nothing staged.
    #[error("No staged deployment found; run `bootc upgrade --download-only` first")]
    NoStaged,
    /// `rollback` with no rollback deployment.
    #[error("No rollback available")]
    NoRollback,
    /// A `--transport` other than `registry`.
    #[error("Unsupported transport {0:?}: the bootc stand-in only knows \"registry\"")]
    UnsupportedTransport(String),
    /// The host's container signature policy refused the image (or is unusable).
    #[error("{0}")]
    SignaturePolicy(String),
    /// A failure injected through `faults.json`.
    #[error("{0}")]
    Injected(String),
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}
