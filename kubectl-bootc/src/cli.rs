//! The command line, as kubectl's own commands take theirs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::client::Target;
use crate::output::Output;

/// Bootc node pools from kubectl: where they stand, why they wait, and the admin's
/// levers (pause, resume, rollback, hold, release).
#[derive(Debug, Parser)]
#[command(
    name = "kubectl bootc",
    bin_name = "kubectl bootc",
    version,
    about,
    arg_required_else_help = true,
    after_help = "BootcNodePools and BootcNodes are cluster-scoped: -n/--namespace is accepted (so that a habitual -n does no harm) and ignored. Put --kubeconfig, --context and -n after `bootc`: kubectl refuses flags placed before a plugin's name."
)]
pub struct Cli {
    /// Where the cluster is.
    #[command(flatten)]
    pub global: Global,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags.
#[derive(Debug, Args)]
pub struct Global {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// Ignored: pools and BootcNodes are cluster-scoped.
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl Global {
    /// The cluster these flags name.
    pub fn target(&self) -> Target {
        Target {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pools (target, counts, reboot slots, state) and their nodes (state, booted, staged
    /// and target digests, time in state, progress).
    Status {
        /// Only this pool and its nodes.
        pool: Option<String>,
        /// Print the objects instead of tables.
        #[arg(short = 'o', long)]
        output: Option<Output>,
        /// Watch: print again whenever a pool, BootcNode or Node changes, until Ctrl-C.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// The pool's deployHistory: every digest its nodes booted, newest first.
    History {
        /// The pool.
        pool: String,
    },
    /// Approve no new reboots in the pool (spec.rollout.paused: true).
    Pause {
        /// The pool.
        pool: String,
    },
    /// Approve reboots in the pool again (spec.rollout.paused: false).
    Resume {
        /// The pool.
        pool: String,
    },
    /// Pin the pool to the previous digest it targeted, from its deployHistory (shown,
    /// then confirmed).
    Rollback {
        /// The pool.
        pool: String,
        /// The digest to go back to: in full, or a unique prefix of at least 7 hex
        /// characters (default: the newest entry the pool targeted in its repository that
        /// is not the current target). Digests only nodes reported are refused.
        #[arg(long, value_name = "DIGEST")]
        to: Option<String>,
        /// Roll back without asking (needed when stdin is not a terminal).
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Keep a node where it is: label it node.bootc.dev/hold=true.
    Hold {
        /// The node.
        node: String,
    },
    /// Let a held node move again: remove its node.bootc.dev/hold label.
    Release {
        /// The node.
        node: String,
    },
    /// Why a node or a pool is not progressing.
    Why {
        /// A node or a pool.
        name: String,
    },
}
