//! Failure injection: `<state dir>/faults.json`.
//!
//! ```json
//! {
//!   "fail": {"switch": "simulated pull failure", "upgrade --from-downloaded": "boom"},
//!   "hang": ["upgrade"],
//!   "switchHelpWithoutDownloadOnly": true
//! }
//! ```
//!
//! - `fail`: a command matching a key exits 1 with `error: <value>` (before doing anything);
//! - `hang`: a command matching an entry sleeps until killed (before doing anything);
//! - `switchHelpWithoutDownloadOnly`: `switch` behaves like a bootc older than
//!   `switch --download-only`: the flag is missing from `bootc switch --help` and
//!   `bootc switch --download-only` fails with clap's unknown-argument error (exit 2).
//!   The stand-in's default mode, bootc 1.16.9 ([`crate::version`]), is such a bootc
//!   already; the fault takes the flags away in its 1.16.10 mode too.
//!
//! A key matches a command when it is the subcommand's name (`status`, `switch`,
//! `upgrade`, `rollback`, `internal-finalize-boot`), or the name followed by one
//! space and one of the arguments given, exactly as given (`upgrade --from-downloaded`,
//! `upgrade --download-only`, `switch --download-only`). The file is read on every
//! command, so tests can change it between commands. A file that is absent means no
//! faults; a malformed one makes every command fail (exit 1).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The fault file inside the state directory.
pub const FAULTS_FILE: &str = "faults.json";

/// The injected failures (see the module docs for the file format).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    /// Command key → error message.
    #[serde(default)]
    pub fail: BTreeMap<String, String>,
    /// Command keys that hang.
    #[serde(default)]
    pub hang: Vec<String>,
    /// Act like a bootc whose `switch` has no `--download-only`.
    #[serde(default)]
    pub switch_help_without_download_only: bool,
}

fn matches(key: &str, subcommand: &str, args: &[String]) -> bool {
    key == subcommand
        || key
            .strip_prefix(subcommand)
            .and_then(|rest| rest.strip_prefix(' '))
            .is_some_and(|arg| args.iter().any(|a| a == arg))
}

impl Faults {
    /// Reads `<dir>/faults.json`; no faults when it does not exist.
    pub fn load(dir: &Path) -> Result<Faults, Error> {
        let path = dir.join(FAULTS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| Error::Other(format!("parsing {}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Faults::default()),
            Err(source) => Err(Error::Io {
                what: format!("reading {}", path.display()),
                source,
            }),
        }
    }

    /// Writes these faults to `<dir>/faults.json` (for tests).
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        let path = dir.join(FAULTS_FILE);
        let body = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Other(format!("serialising faults: {e}")))?;
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, body))
            .map_err(|source| Error::Io {
                what: format!("writing {}", path.display()),
                source,
            })
    }

    /// The injected error message for this command, if any.
    pub fn failure(&self, subcommand: &str, args: &[String]) -> Option<&str> {
        self.fail
            .iter()
            .find(|(k, _)| matches(k, subcommand, args))
            .map(|(_, v)| v.as_str())
    }

    /// True when this command must hang.
    pub fn hangs(&self, subcommand: &str, args: &[String]) -> bool {
        self.hang.iter().any(|k| matches(k, subcommand, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_subcommand_or_subcommand_and_argument() {
        let f: Faults = serde_json::from_str(
            r#"{"fail":{"upgrade --from-downloaded":"boom"},"hang":["switch"]}"#,
        )
        .unwrap();
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            f.failure("upgrade", &args(&["upgrade", "--from-downloaded"])),
            Some("boom")
        );
        assert_eq!(
            f.failure("upgrade", &args(&["upgrade", "--download-only"])),
            None
        );
        assert!(f.hangs("switch", &args(&["switch", "x"])));
        assert!(!f.hangs("switcheroo", &args(&[])));
        assert!(serde_json::from_str::<Faults>(r#"{"fial":{}}"#).is_err());
    }
}
