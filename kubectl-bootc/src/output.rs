//! What the commands print and how: `-o json|yaml`, the `status` output, and stdout.

use std::io::Write;

use clap::ValueEnum;
use serde_json::{Value, json};

use crate::error::{CliError, Result};
use crate::objects::Cluster;
use crate::status;

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The objects as a JSON `List`.
    Json,
    /// The objects as a YAML `List`.
    Yaml,
}

/// Writes to stdout; a reader that went away (`| head`) ends the output quietly.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::msg(format!("cannot write to stdout: {e}"))),
    }
}

/// What `status` prints: the tables, or the objects as a `List`.
pub fn show(cluster: &Cluster, pool: Option<&str>, output: Option<Output>) -> Result<String> {
    let Some(output) = output else {
        return status::render(cluster, pool);
    };
    let (pools, nodes) = status::select(cluster, pool)?;
    let items: Vec<Value> = pools
        .iter()
        .map(|p| p.raw.clone())
        .chain(nodes.iter().map(|n| n.raw.clone()))
        .collect();
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items,
    });
    match output {
        Output::Json => serde_json::to_string_pretty(&list)
            .map(|s| s + "\n")
            .map_err(|e| CliError::msg(format!("cannot write JSON: {e}"))),
        Output::Yaml => serde_yaml_ng::to_string(&list)
            .map_err(|e| CliError::msg(format!("cannot write YAML: {e}"))),
    }
}
