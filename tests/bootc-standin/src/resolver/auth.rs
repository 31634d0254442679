//! Registry credentials as bootc finds them: the first existing auth file of
//! [`AUTH_PATHS`].

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;
use crate::http;

/// Where bootc looks for registry credentials, in order, relative to the root; the
/// first that exists is used.
pub const AUTH_PATHS: [&str; 3] = [
    "run/ostree/auth.json",
    "etc/ostree/auth.json",
    "usr/lib/ostree/auth.json",
];

/// BasicAuth for one registry, and the file they came from.
#[derive(Debug, Clone)]
pub(super) struct BasicAuth {
    pub(super) user_pass: String,
    pub(super) source: PathBuf,
}

/// The auth file bootc would use under `root`, if any exists.
pub fn auth_file(root: &Path) -> Option<PathBuf> {
    AUTH_PATHS.iter().map(|p| root.join(p)).find(|p| p.exists())
}

pub(super) fn credentials(
    root: &Path,
    registry: &str,
    image: &str,
) -> Result<Option<BasicAuth>, Error> {
    let Some(path) = auth_file(root) else {
        return Ok(None);
    };
    let pull_err = |message: String| Error::Pull {
        image: image.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| pull_err(format!("reading {}: {e}", path.display())))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| pull_err(format!("parsing {}: {e}", path.display())))?;
    let Some(auths) = doc.get("auths").and_then(Value::as_object) else {
        return Ok(None);
    };
    let entry = auths.iter().find_map(|(key, v)| {
        let k = key
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        let k = k.split('/').next().unwrap_or(k);
        (k == registry).then_some(v)
    });
    let Some(entry) = entry else {
        return Ok(None);
    };
    let user_pass = if let Some(auth) = entry.get("auth").and_then(Value::as_str) {
        let bytes = http::base64_decode(auth)
            .ok_or_else(|| pull_err(format!("{}: bad base64 in auth", path.display())))?;
        String::from_utf8(bytes)
            .map_err(|_| pull_err(format!("{}: auth is not UTF-8", path.display())))?
    } else if let (Some(u), Some(p)) = (
        entry.get("username").and_then(Value::as_str),
        entry.get("password").and_then(Value::as_str),
    ) {
        format!("{u}:{p}")
    } else {
        return Ok(None);
    };
    Ok(Some(BasicAuth {
        user_pass,
        source: path,
    }))
}
