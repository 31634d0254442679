//! Readiness: the agent is ready once it has reported its node's status for the first
//! time (it has read the host and the BootcNode holds what it saw). The run loop then
//! writes a marker naming this very process (its PID and its start time since boot, from
//! `/proc`); `bootc-node-agent --check-ready`, the DaemonSet's readiness probe, exits 0
//! only when the marker names a process that is still running. A marker left by an
//! earlier process, a restarted container's PID 1 included, names another start time
//! and reads as not ready.

use std::path::{Path, PathBuf};

/// The marker's file name in the agent's work directory.
pub const READY_FILE: &str = "ready";

/// The work directory `work_dir` (as the host sees it) under `host_root`, where the
/// agent sees it.
pub fn dir(host_root: &Path, work_dir: &Path) -> PathBuf {
    host_root.join(work_dir.strip_prefix("/").unwrap_or(work_dir))
}

/// Where the marker lives for the work directory `dir`.
pub fn marker(dir: &Path) -> PathBuf {
    dir.join(READY_FILE)
}

/// This process's identity: `PID START` (start time in clock ticks since boot).
fn identity(pid: u32) -> Result<String, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("process {pid} is not running ({e})"))?;
    let start = start_time(&stat).ok_or_else(|| format!("cannot read /proc/{pid}/stat"))?;
    Ok(format!("{pid} {start}"))
}

/// Field 22 of `/proc/PID/stat` (the start time); the command name, field 2, is in
/// parentheses and may hold spaces or parentheses itself, so fields are counted after
/// the last `)`.
pub fn start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Removes a marker left by an earlier process (at start, before anything is reported).
pub fn clear(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(marker(dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes the marker for this process (through a temporary file and a rename).
pub fn mark(dir: &Path) -> Result<(), String> {
    let me = identity(std::process::id())?;
    let path = marker(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".{READY_FILE}.tmp"));
    std::fs::write(&tmp, format!("{me}\n"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Ok when the marker names a running process with the start time it recorded.
pub fn check(dir: &Path) -> Result<(), String> {
    let path = marker(dir);
    let recorded = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "not ready: no first status reported ({}: {e})",
            path.display()
        )
    })?;
    let recorded = recorded.trim();
    let pid: u32 = recorded
        .split(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("not ready: {} holds {recorded:?}", path.display()))?;
    match identity(pid) {
        Ok(now) if now == recorded => Ok(()),
        _ => Err(format!(
            "not ready: {} was written by a process that is gone",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_after_the_last_parenthesis() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 50";
        assert_eq!(start_time(stat), Some(123_456));
        assert_eq!(start_time("42 (x) S"), None);
        assert_eq!(start_time("garbage"), None);
    }

    #[test]
    fn ready_only_with_this_processes_own_marker() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path()).unwrap_err().contains("no first status"));
        mark(dir.path()).unwrap();
        check(dir.path()).unwrap();
        // A marker naming the same PID with another start time (a restarted PID 1).
        let pid = std::process::id();
        std::fs::write(marker(dir.path()), format!("{pid} 1\n")).unwrap();
        assert!(check(dir.path()).unwrap_err().contains("gone"));
        std::fs::write(marker(dir.path()), "not a pid\n").unwrap();
        assert!(check(dir.path()).is_err());
        clear(dir.path()).unwrap();
        clear(dir.path()).unwrap();
        assert!(check(dir.path()).is_err());
    }
}
