//! The stand-in's state read and rewritten from outside the node: its call log (what the
//! node's bootc was asked, counted), and failure injection (a node that comes back on its
//! old image).

use std::fs::OpenOptions;
use std::path::Path;

use crate::error::{Result, SimError};

/// Rewrites the stand-in's state so that the staged deployment (and a queued rollback) is
/// gone, under the stand-in's own lock.
pub fn discard_staged(state_dir: &Path) -> Result<()> {
    use nix::fcntl::{Flock, FlockArg};
    let lock_path = state_dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| SimError::io("opening the stand-in's lock", &lock_path, e))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| {
        SimError::io(
            "locking the stand-in's state",
            &lock_path,
            std::io::Error::from(errno),
        )
    })?;
    let path = state_dir.join("state.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| SimError::io("reading the stand-in's state", &path, e))?;
    let mut state: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        SimError::io(
            "parsing the stand-in's state",
            &path,
            std::io::Error::other(e),
        )
    })?;
    if let Some(obj) = state.as_object_mut() {
        obj.insert("staged".into(), serde_json::Value::Null);
        obj.insert("rollbackQueued".into(), serde_json::Value::Bool(false));
    }
    let body = serde_json::to_vec_pretty(&state).map_err(|e| {
        SimError::io(
            "writing the stand-in's state",
            &path,
            std::io::Error::other(e),
        )
    })?;
    let tmp = state_dir.join(".state.json.host-sim.tmp");
    std::fs::write(&tmp, body)
        .map_err(|e| SimError::io("writing the stand-in's state", &tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| SimError::io("writing the stand-in's state", &path, e))
}

/// How many times the node's `bootc SUB` ran, over all its boots: the stand-in's call log
/// in its state directory ([`bootc_standin::calls`]).
pub fn standin_calls(state_dir: &Path, sub: &str) -> Result<u64> {
    bootc_standin::calls::count(state_dir, sub).map_err(|e| {
        SimError::io(
            "reading the stand-in's call log",
            state_dir.join(bootc_standin::calls::CALLS_FILE),
            std::io::Error::other(e.to_string()),
        )
    })
}
