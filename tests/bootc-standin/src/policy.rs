//! The host's container signature policy (`/etc/containers/policy.json`), as bootc's
//! `--enforce-container-sigpolicy` has it applied: bootc refuses a policy that accepts
//! anything by default, and containers-image refuses an image the policy rejects before
//! anything is fetched. The stand-in verifies no signature: a requirement for one
//! (`signedBy`, `sigstoreSigned`) is never met, as for an unsigned image.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// Where the policy is read, under the host root.
pub const POLICY_FILE: &str = "etc/containers/policy.json";

/// A parsed `policy.json`: its default requirements and those of the `docker`
/// transport's scopes.
#[derive(Debug, Clone, Deserialize)]
pub struct Policy {
    #[serde(default)]
    default: Vec<Value>,
    #[serde(default)]
    transports: BTreeMap<String, BTreeMap<String, Vec<Value>>>,
}

impl Policy {
    /// Reads `<root>/etc/containers/policy.json` and refuses it, as bootc does, when
    /// its default is to accept anything.
    pub fn load(root: &Path) -> Result<Policy, Error> {
        let path = root.join(POLICY_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::SignaturePolicy(
                    "Resolving containers policy path: No containers policy.json found; \
                     checked $CONTAINERS_POLICY_JSON, user config dir, and system paths"
                        .to_owned(),
                ));
            }
            Err(source) => {
                return Err(Error::Io {
                    what: format!("reading {}", Path::new("/").join(POLICY_FILE).display()),
                    source,
                });
            }
        };
        let policy = Policy::parse(&text)?;
        if policy.default_insecure() {
            return Err(Error::SignaturePolicy(
                "containers-policy.json specifies a default of `insecureAcceptAnything`; \
                 refusing usage"
                    .to_owned(),
            ));
        }
        Ok(policy)
    }

    /// Parses a policy document.
    pub fn parse(text: &str) -> Result<Policy, Error> {
        serde_json::from_str(text)
            .map_err(|e| Error::SignaturePolicy(format!("invalid policy.json: {e}")))
    }

    /// The default is exactly one `insecureAcceptAnything` (bootc's test).
    fn default_insecure(&self) -> bool {
        matches!(self.default.as_slice(), [only] if kind(only) == "insecureAcceptAnything")
    }

    /// The requirements for `image` (`host/path@sha256:…` or `host/path:tag`): the most
    /// specific `docker` scope that matches it (the whole reference, then each
    /// enclosing namespace up to the host), else the transport's default scope (`""`),
    /// else the policy's default.
    fn requirements(&self, image: &str) -> &[Value] {
        let scopes = self.transports.get("docker");
        let mut candidates = vec![image.to_owned()];
        let repo = image.split_once('@').map_or(image, |(r, _)| r).to_owned();
        let repo = match repo.rsplit_once(':') {
            Some((r, tag)) if !tag.contains('/') => r.to_owned(),
            _ => repo,
        };
        let mut namespace = repo.as_str();
        loop {
            candidates.push(namespace.to_owned());
            match namespace.rsplit_once('/') {
                Some((parent, _)) => namespace = parent,
                None => break,
            }
        }
        candidates.push(String::new());
        candidates
            .iter()
            .find_map(|scope| scopes.and_then(|s| s.get(scope)))
            .map_or(self.default.as_slice(), Vec::as_slice)
    }

    /// Whether the policy admits `image`; the refusal in containers-image's words.
    pub fn admit(&self, image: &str) -> Result<(), Error> {
        for requirement in self.requirements(image) {
            match kind(requirement) {
                "insecureAcceptAnything" => {}
                "reject" => {
                    return Err(Error::SignaturePolicy(format!(
                        "Running image docker://{image} is rejected by policy."
                    )));
                }
                "signedBy" | "sigstoreSigned" => {
                    return Err(Error::SignaturePolicy(
                        "A signature was required, but no signature exists".to_owned(),
                    ));
                }
                other => {
                    return Err(Error::SignaturePolicy(format!(
                        "invalid policy.json: unknown policy requirement type {other:?}"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn kind(requirement: &Value) -> &str {
    requirement["type"].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "127.0.0.1:5000/node@sha256:0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn the_most_specific_scope_decides() {
        let reject_all = Policy::parse(r#"{"default":[{"type":"reject"}]}"#).unwrap();
        let err = reject_all.admit(IMAGE).unwrap_err().to_string();
        assert!(err.contains("is rejected by policy"), "{err}");
        let host_ok = Policy::parse(
            r#"{"default":[{"type":"reject"}],
                "transports":{"docker":{"127.0.0.1:5000":[{"type":"insecureAcceptAnything"}]}}}"#,
        )
        .unwrap();
        host_ok.admit(IMAGE).unwrap();
        let repo_signed = Policy::parse(
            r#"{"default":[{"type":"insecureAcceptAnything"}],
                "transports":{"docker":{
                  "127.0.0.1:5000":[{"type":"insecureAcceptAnything"}],
                  "127.0.0.1:5000/node":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k"}]}}}"#,
        )
        .unwrap();
        let err = repo_signed.admit(IMAGE).unwrap_err().to_string();
        assert!(err.contains("no signature exists"), "{err}");
        assert!(repo_signed.default_insecure());
        assert!(!host_ok.default_insecure());
    }
}
