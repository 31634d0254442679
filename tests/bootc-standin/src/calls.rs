//! Which commands ran on a host: every subcommand the stand-in parses appends its name,
//! one a line, to [`CALLS_FILE`] in the state directory (which survives reboots). A test
//! counts what the host's user did with it instead of waiting out a span of time: the
//! agent reads `bootc status` once per pass, so "N more passes" is "N more `status`
//! lines".

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use crate::Error;

/// The call log inside the state directory.
pub const CALLS_FILE: &str = "calls";

/// Appends `sub` to the state directory's call log. A state directory that does not
/// exist (a host never seeded) records nothing; any other failure is the command's.
pub fn record(state_dir: &Path, sub: &str) -> Result<(), Error> {
    if !state_dir.is_dir() {
        return Ok(());
    }
    let path = state_dir.join(CALLS_FILE);
    let io = |source| Error::Io {
        what: format!("recording the call in {}", path.display()),
        source,
    };
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io)?;
    // One write of a short line to a file opened for appending: concurrent commands
    // never interleave within a line.
    file.write_all(format!("{sub}\n").as_bytes()).map_err(io)
}

/// How many times `sub` ran on the host whose state directory is `state_dir` (0 before
/// any command ran).
pub fn count(state_dir: &Path, sub: &str) -> Result<u64, Error> {
    let path = state_dir.join(CALLS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(Error::Io {
                what: format!("reading {}", path.display()),
                source,
            });
        }
    };
    Ok(text.lines().filter(|l| *l == sub).count() as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn calls_are_counted_per_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(count(dir.path(), "status").unwrap(), 0);
        for sub in ["status", "switch", "status"] {
            record(dir.path(), sub).unwrap();
        }
        assert_eq!(count(dir.path(), "status").unwrap(), 2);
        assert_eq!(count(dir.path(), "switch").unwrap(), 1);
        assert_eq!(count(dir.path(), "upgrade").unwrap(), 0);
        // No state directory: nothing recorded, nothing failed.
        let missing = dir.path().join("missing");
        record(&missing, "status").unwrap();
        assert!(!missing.exists());
    }
}
