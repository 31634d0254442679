//! `kubectl bootc why NODE|POOL`: why a node or a pool is not progressing, read only from
//! what the controller and the agents wrote: the pool's conditions and gate verdicts
//! (`status.gates`), the BootcNodes' conditions, annotations and `drainBlocked`.
//!
//! - `gates`: the gates the controller found closed (`status.gates`), worded, and the
//!   pool's `Degraded` condition;
//! - `problems`: what a health-gated rollout adds (an alert gate failing open, a failed
//!   target, health units);
//! - `pool`: a pool's reasons;
//! - `node`: a node's reasons;
//! - `reasons`: degraded nodes by reason, and what each reason asks of an admin.

use std::fmt::Write as _;

use crate::error::{CliError, Result};
use crate::objects::Cluster;

mod gates;
mod node;
mod pool;
mod problems;
mod reasons;

pub use node::why_node;
pub use pool::why_pool;
pub use reasons::drift;

/// What `why` found about one pool or node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    /// `bootcnodepool/NAME` or `node/NAME`.
    pub subject: String,
    /// What keeps it from progressing; empty when nothing does.
    pub blocked: Vec<String>,
    /// What is going on that is not a problem (staging, rebooting, waiting its turn).
    pub progressing: Vec<String>,
    /// The one line said when it is up to date (only when both lists are empty).
    pub up_to_date: String,
    /// What is worth knowing that neither blocks nor progresses (drift), said last.
    pub notes: Vec<String>,
}

impl Why {
    /// A finding about `subject` with nothing found yet.
    pub fn new(subject: String) -> Self {
        Why {
            subject,
            blocked: Vec::new(),
            progressing: Vec::new(),
            up_to_date: "up to date".to_owned(),
            notes: Vec::new(),
        }
    }

    /// The finding as text: what blocks it, else what it is doing, else that it is up
    /// to date.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (head, items) = if !self.blocked.is_empty() {
            ("is not progressing", &self.blocked)
        } else if !self.progressing.is_empty() {
            ("is progressing", &self.progressing)
        } else {
            let _ = writeln!(out, "{}: {}", self.subject, self.up_to_date);
            self.render_notes(&mut out);
            return out;
        };
        let _ = writeln!(out, "{} {head}:", self.subject);
        for item in items {
            let _ = writeln!(out, "  - {item}");
        }
        if !self.blocked.is_empty() && !self.progressing.is_empty() {
            let _ = writeln!(out, "  meanwhile:");
            for item in &self.progressing {
                let _ = writeln!(out, "  - {item}");
            }
        }
        self.render_notes(&mut out);
        out
    }

    fn render_notes(&self, out: &mut String) {
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
}

/// The findings for `name`: the pool, the node, or both when a pool and a Node share the
/// name (said first); an error when neither exists.
pub fn why(cluster: &Cluster, name: &str) -> Result<String> {
    let pool = cluster.pool(name);
    let node = cluster.node(name).is_some() || cluster.bootc_node(name).is_some();
    let mut out = String::new();
    if pool.is_some() && node {
        let _ = writeln!(
            out,
            "{name:?} is both a BootcNodePool and a node; both follow.\n"
        );
    }
    if let Some(pool) = pool {
        out.push_str(&why_pool(cluster, &pool.typed).render());
    }
    if node {
        if pool.is_some() {
            out.push('\n');
        }
        out.push_str(&why_node(cluster, name).render());
    }
    if out.is_empty() {
        return Err(CliError::msg(format!(
            "{name:?} is neither a BootcNodePool nor a node (no BootcNodePool, Node or BootcNode has that name)"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
