//! Who asked for what, kept across test processes: when `KUBE_EMULATOR_AUDIT_DIR` names a
//! directory, every emulator writes the distinct requests it served there (one JSON line
//! per distinct User-Agent, verb and object, with a count) when it is dropped and before
//! its request log is cleared. A whole test suite run with the variable set leaves a
//! record that a check can hold against the shipped RBAC roles afterwards.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::faults::RequestRecord;

/// The environment variable naming the directory the audit files go to.
pub const AUDIT_DIR_ENV: &str = "KUBE_EMULATOR_AUDIT_DIR";

/// Distinct requests of one client on one object, as an authorizer sees them: a logged
/// request with what does not matter to an authorizer cleared (`seq`, `code`, `injected`,
/// `dryRun`, `path`), and how often it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The request (user agent, verb, group, resource, subresource, namespace, name).
    #[serde(flatten)]
    pub request: RequestRecord,
    /// How many such requests there were.
    pub count: u64,
}

/// Collapses `records` into distinct entries, in a stable order.
pub fn entries(records: &[RequestRecord]) -> Vec<AuditEntry> {
    let mut counts: BTreeMap<RequestRecord, u64> = BTreeMap::new();
    for r in records {
        let key = RequestRecord {
            seq: 0,
            code: 0,
            injected: false,
            dry_run: false,
            path: String::new(),
            ..r.clone()
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(request, count)| AuditEntry { request, count })
        .collect()
}

/// The audit directory, when the environment names one.
pub fn dir_from_env() -> Option<PathBuf> {
    std::env::var_os(AUDIT_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Writes the distinct requests of `records` to a new file in `dir` (created if missing).
/// Nothing is written for no records.
pub fn write(dir: &Path, records: &[RequestRecord]) -> std::io::Result<Option<PathBuf>> {
    static FILES: AtomicU64 = AtomicU64::new(0);
    if records.is_empty() {
        return Ok(None);
    }
    std::fs::create_dir_all(dir)?;
    let n = FILES.fetch_add(1, Ordering::SeqCst);
    let path = dir.join(format!("requests-{}-{n}.jsonl", std::process::id()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for entry in entries(records) {
        serde_json::to_writer(&mut out, &entry)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(Some(path))
}

/// Every entry of every `*.jsonl` file in `dir`, with the file each came from on errors.
pub fn read_dir(dir: &Path) -> Result<Vec<AuditEntry>, String> {
    let listing = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = listing
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    let mut all = Vec::new();
    for path in paths {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            let entry: AuditEntry = serde_json::from_str(line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
            all.push(entry);
        }
    }
    Ok(all)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record(user_agent: &str, verb: &str, name: &str) -> RequestRecord {
        RequestRecord {
            seq: 0,
            verb: verb.into(),
            group: "node.bootc.dev".into(),
            resource: "bootcnodes".into(),
            subresource: "status".into(),
            namespace: String::new(),
            name: name.into(),
            user_agent: user_agent.into(),
            code: 200,
            injected: false,
            dry_run: false,
            path: String::new(),
        }
    }

    #[test]
    fn distinct_requests_are_counted_and_survive_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let records = vec![
            record("agent", "patch", "n1"),
            record("agent", "patch", "n1"),
            record("agent", "patch", "n2"),
            record("controller", "get", "n1"),
        ];
        let written = write(dir.path(), &records).unwrap().unwrap();
        assert!(written.starts_with(dir.path()));
        assert_eq!(write(dir.path(), &[]).unwrap(), None);
        let read = read_dir(dir.path()).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read, entries(&records));
        let n1 = read
            .iter()
            .find(|e| e.request.user_agent == "agent" && e.request.name == "n1")
            .unwrap();
        assert_eq!((n1.request.verb.as_str(), n1.count), ("patch", 2));
    }

    #[test]
    fn a_broken_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.jsonl"), "{\"verb\":1}\n").unwrap();
        let error = read_dir(dir.path()).unwrap_err();
        assert!(error.contains("x.jsonl line 1"), "{error}");
    }
}
