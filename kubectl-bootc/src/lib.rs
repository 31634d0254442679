//! `kubectl bootc`: a kubectl plugin for bootc node pools. kubectl runs any
//! `kubectl-bootc` on the PATH as `kubectl bootc …`.
//!
//! Module map:
//!
//! - [`cli`]: the command line;
//! - [`client`]: the API client, found as kubectl finds its cluster;
//! - [`commands`]: the exit code, and each command's reads and writes;
//! - [`output`]: `-o json|yaml`, what `status` prints, and stdout;
//! - [`objects`]: pools, BootcNodes and Nodes as read, raw and typed;
//! - [`status`], [`history`]: the tables, from objects only;
//! - [`rollback`]: which digest a rollback goes to, and what it says;
//! - [`why`]: why a node or a pool is not progressing;
//! - [`watch`]: `status -w`;
//! - [`table`]: kubectl-style tables, ages and sizes;
//! - [`error`]: the one error type.
//!
//! Everything that decides what to print or write is a pure function of the objects
//! (and the time), tested without a cluster.

pub mod cli;
pub mod client;
pub mod commands;
pub mod error;
pub mod history;
pub mod objects;
pub mod output;
pub mod rollback;
pub mod status;
pub mod table;
pub mod watch;
pub mod why;

#[cfg(test)]
mod tests;
