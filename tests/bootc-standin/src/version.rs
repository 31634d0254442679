//! Which bootc the stand-in plays: 1.16.9, as measured on the real binary (the default),
//! or a bootc of 1.16.10 or later, which added `switch --download-only` and `switch
//! --from-downloaded` (bootc PR #2342).
//!
//! Chosen by `BOOTC_STANDIN_VERSION` (`1.16.9`, `1.16.10`, or any later version), else
//! by the file `<state dir>/version` holding the same (a node's transient units do not
//! inherit the harness's environment; the state directory survives reboots), else
//! 1.16.9.

use std::path::Path;

use crate::Error;

/// The environment variable that chooses the version.
pub const VERSION_ENV: &str = "BOOTC_STANDIN_VERSION";
/// The file in the state directory that chooses it when the variable is unset.
pub const VERSION_FILE: &str = "version";

/// The bootc the stand-in plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Version {
    /// bootc 1.16.9, as measured: no `switch --download-only`; `upgrade
    /// --download-only` and `upgrade --from-downloaded` lock and unlock.
    #[default]
    V1_16_9,
    /// bootc 1.16.10 and later: `switch --download-only` and `switch
    /// --from-downloaded [--apply]` besides; `switch --download-only` of the image
    /// already tracked is "Image specification is unchanged" and changes nothing, even
    /// when its deployment is staged unlocked (bootc issue #2425).
    V1_16_10,
}

impl Version {
    /// `1.16.9` → [`Version::V1_16_9`]; `1.16.10` and any later version →
    /// [`Version::V1_16_10`]; anything else is refused.
    pub fn parse(text: &str) -> Result<Version, Error> {
        let text = text.trim();
        let refused = || {
            Error::Other(format!(
                "{VERSION_ENV} (or the state directory's `{VERSION_FILE}`) is {text:?}: \
                 the stand-in plays bootc 1.16.9 or 1.16.10 and later"
            ))
        };
        let numbers: Vec<u64> = text
            .split('.')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| refused())?;
        match numbers.as_slice() {
            [1, 16, 9] => Ok(Version::V1_16_9),
            [major, minor, patch] if (*major, *minor, *patch) >= (1, 16, 10) => {
                Ok(Version::V1_16_10)
            }
            _ => Err(refused()),
        }
    }

    /// The version from `variable` (the environment's), else from `<state_dir>/version`,
    /// else 1.16.9.
    pub fn choose(variable: Option<&str>, state_dir: &Path) -> Result<Version, Error> {
        if let Some(v) = variable {
            return Version::parse(v);
        }
        let path = state_dir.join(VERSION_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Version::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Version::default()),
            Err(source) => Err(Error::Io {
                what: format!("reading {}", path.display()),
                source,
            }),
        }
    }

    /// What `bootc --version` prints after `bootc `.
    pub fn shown(self) -> &'static str {
        match self {
            Version::V1_16_9 => "1.16.9-standin",
            Version::V1_16_10 => "1.16.10-standin",
        }
    }

    /// The version number it plays, as `BOOTC_STANDIN_VERSION` takes it.
    pub fn number(self) -> &'static str {
        match self {
            Version::V1_16_9 => "1.16.9",
            Version::V1_16_10 => "1.16.10",
        }
    }

    /// Whether `switch` has `--download-only` and `--from-downloaded`.
    pub fn switch_download_only(self) -> bool {
        match self {
            Version::V1_16_9 => false,
            Version::V1_16_10 => true,
        }
    }

    /// Writes `<state_dir>/version` (for harnesses that start nodes).
    pub fn save(self, state_dir: &Path) -> Result<(), Error> {
        let path = state_dir.join(VERSION_FILE);
        std::fs::create_dir_all(state_dir)
            .and_then(|()| std::fs::write(&path, self.number()))
            .map_err(|source| Error::Io {
                what: format!("writing {}", path.display()),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn versions_parse_and_the_default_is_1_16_9() {
        assert_eq!(Version::parse("1.16.9").unwrap(), Version::V1_16_9);
        assert_eq!(Version::parse("1.16.10\n").unwrap(), Version::V1_16_10);
        assert_eq!(Version::parse("1.17.0").unwrap(), Version::V1_16_10);
        for bad in ["1.16.8", "1.16", "latest", ""] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Version::choose(None, dir.path()).unwrap(), Version::V1_16_9);
        Version::V1_16_10.save(dir.path()).unwrap();
        assert_eq!(
            Version::choose(None, dir.path()).unwrap(),
            Version::V1_16_10
        );
        assert_eq!(
            Version::choose(Some("1.16.9"), dir.path()).unwrap(),
            Version::V1_16_9
        );
    }
}
