//! Pull secrets: the credentials of a `kubernetes.io/dockerconfigjson` Secret by registry,
//! and the hash that tells a node its pool's secret changed.
//!
//! [`parse_pull_secret`] reads a `.dockerconfigjson`; [`RegistryCredentials::for_registry`]
//! gives the [`Credentials`] for one registry (keys normalised by [`normalize_registry`]:
//! scheme and path dropped, Docker Hub's aliases folded into `docker.io`);
//! [`secret_hash`] is what `BootcNode.spec.pullSecretHash` carries.
//!
//! Credentials never appear in errors or `Debug` output.

use std::collections::HashMap;
use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use sha2::{Digest as _, Sha256};

/// How registry keys name Docker Hub once normalised (the `DEFAULT_REGISTRY` of image
/// references).
pub const DOCKER_HUB: &str = "docker.io";

/// A user name and password for one registry, from a pull secret.
///
/// `Debug` shows the user name and the secret's name, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
    source: Option<String>,
}

impl Credentials {
    /// Credentials not tied to a named Secret.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            username: username.into(),
            password: password.into(),
            source: None,
        }
    }

    /// Names the Secret these came from (`namespace/name`), for error messages.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password. Never log it.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The Secret these came from (`namespace/name`), if known.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// A fingerprint of user and password (sha256 hex), for cache keys: equal credentials
    /// give equal fingerprints, and the password cannot be read back from it.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.username.as_bytes());
        h.update([0u8]);
        h.update(self.password.as_bytes());
        hex(&h.finalize())
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("source", &self.source)
            .finish()
    }
}

/// The credentials of a `kubernetes.io/dockerconfigjson` Secret, by registry.
///
/// `Debug` redacts every password (through [`Credentials`]' `Debug`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryCredentials {
    by_registry: HashMap<String, Credentials>,
}

impl RegistryCredentials {
    /// Names the Secret (`namespace/name`) in every entry, for error messages.
    pub fn with_source(mut self, namespace: &str, name: &str) -> Self {
        let source = format!("{namespace}/{name}");
        for c in self.by_registry.values_mut() {
            c.source = Some(source.clone());
        }
        self
    }

    /// The credentials for `registry` (`host[:port]` as an image reference names it;
    /// docker.io aliases are understood).
    pub fn for_registry(&self, registry: &str) -> Option<Credentials> {
        self.by_registry.get(&normalize_registry(registry)).cloned()
    }

    /// The registries this secret has credentials for (normalised, docker.io for Docker
    /// Hub).
    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.by_registry.keys().map(String::as_str)
    }

    /// True when the secret has no credentials at all.
    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

/// Why a pull secret's `.dockerconfigjson` is unusable. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not parseable as JSON (the message gives the position only).
    #[error(".dockerconfigjson is not JSON: {0}")]
    NotJson(String),
    /// No `auths` object at the top level.
    #[error(".dockerconfigjson has no auths object")]
    NoAuths,
    /// An `auths` entry that is not an object.
    #[error("the auths entry for {registry} is not an object")]
    EntryNotObject {
        /// The key as written.
        registry: String,
    },
    /// `auth` that is not base64 of `user:pass`.
    #[error("auth for {registry} is not base64 user:pass")]
    InvalidAuth {
        /// The key as written.
        registry: String,
    },
    /// An entry with neither `auth` nor `username`/`password`.
    #[error(
        "the auths entry for {registry} has neither auth nor username/password (identity tokens are not supported)"
    )]
    NoCredentials {
        /// The key as written.
        registry: String,
    },
}

/// Parses the content of a `.dockerconfigjson` key:
/// `{"auths": {"HOST[:PORT]": {"auth": "base64(user:pass)"} | {"username", "password"}}}`.
///
/// Keys are normalised (scheme and path dropped; `index.docker.io`,
/// `https://index.docker.io/v1/` and `registry-1.docker.io` become `docker.io`).
pub fn parse_pull_secret(data: &[u8]) -> Result<RegistryCredentials, SecretError> {
    // Parsed as an untyped value: serde_json's syntax errors give a position, never the
    // offending content, so nothing secret ends up in the message.
    let value: serde_json::Value = serde_json::from_slice(data)
        .map_err(|e| SecretError::NotJson(format!("line {} column {}", e.line(), e.column())))?;
    let auths = value
        .get("auths")
        .and_then(serde_json::Value::as_object)
        .ok_or(SecretError::NoAuths)?;
    let mut by_registry = HashMap::new();
    for (key, entry) in auths {
        let creds = entry_credentials(key, entry)?;
        by_registry.insert(normalize_registry(key), creds);
    }
    Ok(RegistryCredentials { by_registry })
}

/// The credentials of one `auths` entry: `username` and `password` when both are set,
/// else `auth`.
fn entry_credentials(key: &str, entry: &serde_json::Value) -> Result<Credentials, SecretError> {
    let entry = entry
        .as_object()
        .ok_or_else(|| SecretError::EntryNotObject {
            registry: key.to_owned(),
        })?;
    let field = |name: &str| {
        entry
            .get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match (field("auth"), field("username"), field("password")) {
        (_, Some(u), Some(p)) => Ok(Credentials::new(u, p)),
        (Some(auth), _, _) => {
            let invalid = || SecretError::InvalidAuth {
                registry: key.to_owned(),
            };
            let decoded = decode_base64(auth).ok_or_else(invalid)?;
            let decoded = String::from_utf8(decoded).map_err(|_| invalid())?;
            let (u, p) = decoded.split_once(':').ok_or_else(invalid)?;
            if u.is_empty() {
                return Err(invalid());
            }
            Ok(Credentials::new(u, p))
        }
        _ => Err(SecretError::NoCredentials {
            registry: key.to_owned(),
        }),
    }
}

/// The `.dockerconfigjson` bytes of Secret `namespace/name`, or why there are none: it
/// cannot be read, does not exist, or has no such key. The message names the Secret and
/// never its content. The controller and the agent read pull Secrets through this.
pub async fn read_docker_config(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<u8>, String> {
    let what = format!("pull Secret {namespace}/{name}");
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Err(e) => Err(format!("cannot read the {what}: {}", crate::error_chain(&e))),
        Ok(None) => Err(format!("the {what} does not exist")),
        Ok(Some(secret)) => secret
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .map(|bytes| bytes.0.clone())
            .ok_or_else(|| {
                format!(
                    "the {what} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                )
            }),
    }
}

/// `sha256:<hex>` of a Secret's content, for `BootcNode.spec.pullSecretHash` (71 characters).
pub fn secret_hash(data: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(data)))
}

/// A registry key as a registry: `https://index.docker.io/v1/` → `docker.io`,
/// `http://host:5000/x` → `host:5000`, lowercase.
pub fn normalize_registry(key: &str) -> String {
    let s = key.trim();
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or(s).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_owned()
        }
        _ => host,
    }
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The standard alphabet, without padding (it is trimmed first), ignoring the unused bits
/// of the last character as lenient encoders expect.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Base64 as `auth` fields are written in the wild: padding optional, the standard and
/// the URL-safe alphabet both accepted, surrounding white space ignored.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let unpadded = s.trim().trim_end_matches('=');
    // The URL-safe alphabet differs in two characters only.
    let standard: String = unpadded
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    LENIENT_BASE64.decode(standard).ok()
}

#[cfg(test)]
mod tests;
