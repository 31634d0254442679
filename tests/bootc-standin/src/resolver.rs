//! "Pulling": asking a real (loopback, plain-HTTP) registry what an image reference
//! points at, with the credentials bootc would use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;
use crate::http::{self, Response};
use crate::reference::{ImageRef, is_sha256_digest};

/// The label whose value becomes the image's version (as bootc reads it).
pub const VERSION_LABEL: &str = "org.opencontainers.image.version";
/// The label that names a simulated image's kernel; equal kernels allow a soft reboot.
pub const KERNEL_LABEL: &str = "dev.bootc-pool.sim.kernel";

/// Where bootc looks for registry credentials, in order, relative to the root; the
/// first that exists is used.
pub const AUTH_PATHS: [&str; 3] = [
    "run/ostree/auth.json",
    "etc/ostree/auth.json",
    "usr/lib/ostree/auth.json",
];

const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// What a pull learned about an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    /// The reference as given to `switch` (tag or digest form); bootc tracks it as is.
    pub image: String,
    /// The per-architecture manifest digest (`sha256:<hex>`).
    pub digest: String,
    /// The `org.opencontainers.image.version` label.
    #[serde(default)]
    pub version: Option<String>,
    /// The config's `created` time (RFC 3339).
    #[serde(default)]
    pub created: Option<String>,
    /// The config's architecture (`amd64`, `arm64`, …).
    pub architecture: String,
    /// The `dev.bootc-pool.sim.kernel` label.
    #[serde(default)]
    pub kernel: Option<String>,
}

/// Finds out what an image reference points at.
pub trait Resolver {
    /// Resolves `image` (a `registry` transport reference) to its per-architecture
    /// manifest and config.
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error>;
}

/// The architecture name the OCI image spec uses for this machine.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Asks the registry over plain HTTP (loopback registries only), with the credentials
/// of the first existing auth file of [`AUTH_PATHS`] under `root`.
#[derive(Debug, Clone)]
pub struct HttpResolver {
    root: PathBuf,
    timeout: Duration,
    architecture: String,
}

impl HttpResolver {
    /// A resolver reading credentials under `root` (`/` on a real host) and picking this
    /// machine's architecture from manifest lists.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HttpResolver {
            root: root.into(),
            timeout: Duration::from_secs(30),
            architecture: host_architecture().to_owned(),
        }
    }

    /// Changes the per-request timeout (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Changes which architecture is picked from a manifest list.
    pub fn with_architecture(mut self, architecture: &str) -> Self {
        architecture.clone_into(&mut self.architecture);
        self
    }
}

/// Credentials for one registry, and the file they came from.
#[derive(Debug, Clone)]
struct Credentials {
    user_pass: String,
    source: PathBuf,
}

/// The auth file bootc would use under `root`, if any exists.
pub fn auth_file(root: &Path) -> Option<PathBuf> {
    AUTH_PATHS.iter().map(|p| root.join(p)).find(|p| p.exists())
}

fn credentials(root: &Path, registry: &str, image: &str) -> Result<Option<Credentials>, Error> {
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
    Ok(Some(Credentials {
        user_pass,
        source: path,
    }))
}

/// One conversation with one registry, remembering a bearer token once it has one.
struct Session<'a> {
    image: &'a str,
    authority: String,
    creds: Option<Credentials>,
    auth_header: Option<String>,
    timeout: Duration,
}

/// Parameters of a `WWW-Authenticate` challenge.
fn challenge_param(challenge: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=\"");
    let start = challenge.find(&pat)? + pat.len();
    let end = challenge[start..].find('"')? + start;
    Some(challenge[start..end].to_owned())
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The registry's own error text (`{"errors":[{"code","message"}]}`), if any.
fn registry_message(resp: &Response) -> String {
    serde_json::from_slice::<Value>(&resp.body)
        .ok()
        .and_then(|v| {
            let e = v.get("errors")?.get(0)?;
            let code = e.get("code").and_then(Value::as_str).unwrap_or_default();
            let msg = e.get("message").and_then(Value::as_str).unwrap_or_default();
            Some(format!("{}: {msg}", code.to_ascii_lowercase()))
        })
        .unwrap_or_default()
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

impl Session<'_> {
    fn err(&self, message: String) -> Error {
        Error::Pull {
            image: self.image.to_owned(),
            message,
        }
    }

    fn send(&self, authority: &str, path: &str, accept: &str) -> Result<Response, Error> {
        let mut headers = vec![("Accept", accept.to_owned())];
        if let Some(a) = &self.auth_header {
            headers.push(("Authorization", a.clone()));
        }
        http::request("GET", authority, path, &headers, self.timeout).map_err(|e| {
            self.err(format!(
                "pinging container registry {authority}: Get \"http://{authority}{path}\": {e}"
            ))
        })
    }

    /// GET `path`, answering one authentication challenge and following redirects to
    /// loopback hosts.
    fn get(&mut self, path: &str, accept: &str, what: &str) -> Result<Response, Error> {
        let mut resp = self.send(&self.authority.clone(), path, accept)?;
        if resp.status == 401 && self.auth_header.is_none() {
            let challenge = resp
                .header("www-authenticate")
                .unwrap_or_default()
                .to_owned();
            if let Some(creds) = self.creds.clone() {
                let lower = challenge.to_ascii_lowercase();
                if lower.starts_with("basic") {
                    self.auth_header = Some(format!(
                        "Basic {}",
                        http::base64_encode(creds.user_pass.as_bytes())
                    ));
                } else if lower.starts_with("bearer") {
                    self.auth_header = Some(self.bearer(&challenge, &creds)?);
                }
                if self.auth_header.is_some() {
                    resp = self.send(&self.authority.clone(), path, accept)?;
                }
            }
        }
        let mut hops = 0;
        while matches!(resp.status, 301 | 302 | 303 | 307 | 308) && hops < 5 {
            hops += 1;
            let location = resp.header("location").unwrap_or_default().to_owned();
            if let Some(rest) = location.strip_prefix("http://") {
                let (authority, p) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let r = ImageRef {
                    registry: authority.to_owned(),
                    repository: "x".into(),
                    tag: None,
                    digest: None,
                };
                if !r.is_loopback() {
                    return Err(self.err(format!(
                        "{what}: redirected to {location}, which is not a loopback address"
                    )));
                }
                let p = if p.is_empty() { "/" } else { p };
                resp = self.send(authority, p, accept)?;
            } else if location.starts_with('/') {
                resp = self.send(&self.authority.clone(), &location, accept)?;
            } else {
                return Err(self.err(format!("{what}: cannot follow redirect to {location:?}")));
            }
        }
        if resp.status == 200 {
            return Ok(resp);
        }
        let mut message = format!("{what}: ");
        let reg = registry_message(&resp);
        if reg.is_empty() {
            message.push_str(match resp.status {
                401 => "unauthorized: authentication required",
                404 => "not found",
                429 => "toomanyrequests: too many requests",
                _ => "unexpected answer",
            });
        } else {
            message.push_str(&reg);
        }
        message.push_str(&format!(" (HTTP {} {})", resp.status, reason(resp.status)));
        if resp.status == 401 {
            match &self.creds {
                None => message.push_str(&format!(
                    "; no credentials for {} in /run/ostree/auth.json, /etc/ostree/auth.json or /usr/lib/ostree/auth.json",
                    self.authority
                )),
                Some(c) => message.push_str(&format!(
                    "; the registry refused the credentials from {}",
                    c.source.display()
                )),
            }
        }
        Err(self.err(message))
    }

    fn bearer(&self, challenge: &str, creds: &Credentials) -> Result<String, Error> {
        let realm = challenge_param(challenge, "realm")
            .ok_or_else(|| self.err(format!("bearer challenge without realm: {challenge}")))?;
        let rest = realm.strip_prefix("http://").ok_or_else(|| {
            self.err(format!("token realm {realm} is not plain HTTP on loopback"))
        })?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut query = Vec::new();
        for key in ["service", "scope"] {
            if let Some(v) = challenge_param(challenge, key) {
                query.push(format!("{key}={}", percent_encode(&v)));
            }
        }
        let path = if query.is_empty() {
            path.to_owned()
        } else {
            format!(
                "{}?{}",
                if path.is_empty() { "/" } else { path },
                query.join("&")
            )
        };
        let basic = format!("Basic {}", http::base64_encode(creds.user_pass.as_bytes()));
        let resp = http::request(
            "GET",
            authority,
            &path,
            &[("Authorization", basic)],
            self.timeout,
        )
        .map_err(|e| self.err(format!("fetching a token from {realm}: {e}")))?;
        if resp.status != 200 {
            return Err(self.err(format!(
                "fetching a token from {realm}: HTTP {} {}",
                resp.status,
                reason(resp.status)
            )));
        }
        let v: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| self.err(format!("token answer from {realm}: {e}")))?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(Value::as_str)
            .ok_or_else(|| self.err(format!("token answer from {realm} has no token")))?;
        Ok(format!("Bearer {token}"))
    }
}

fn is_index(media_type: &str, doc: &Value) -> bool {
    media_type.contains("index")
        || media_type.contains("manifest.list")
        || doc.get("manifests").is_some()
}

impl Resolver for HttpResolver {
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error> {
        let r = ImageRef::parse(image)?;
        let pull_err = |message: String| Error::Pull {
            image: image.to_owned(),
            message,
        };
        if !r.is_loopback() {
            return Err(pull_err(format!(
                "registry {} is not on loopback: the bootc stand-in pulls over plain HTTP from 127.0.0.1, localhost or [::1] only",
                r.registry
            )));
        }
        let mut session = Session {
            image,
            authority: r.registry.clone(),
            creds: credentials(&self.root, &r.registry, image)?,
            auth_header: None,
            timeout: self.timeout,
        };
        let reference = r.manifest_reference().to_owned();
        let what = format!(
            "reading manifest {reference} in {}/{}",
            r.registry, r.repository
        );
        let resp = session.get(
            &format!("/v2/{}/manifests/{reference}", r.repository),
            ACCEPT,
            &what,
        )?;
        let mut doc: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| pull_err(format!("{what}: manifest is not JSON: {e}")))?;
        let media_type = resp
            .header("content-type")
            .map(str::to_owned)
            .or_else(|| {
                doc.get("mediaType")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let mut digest = resp
            .header("docker-content-digest")
            .map(str::to_owned)
            .or_else(|| r.digest.clone());
        if is_index(&media_type, &doc) {
            let manifests = doc
                .get("manifests")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let chosen = manifests
                .iter()
                .find(|m| {
                    let p = m.get("platform");
                    p.and_then(|p| p.get("os")).and_then(Value::as_str) == Some("linux")
                        && p.and_then(|p| p.get("architecture"))
                            .and_then(Value::as_str)
                            == Some(self.architecture.as_str())
                })
                .and_then(|m| m.get("digest").and_then(Value::as_str))
                .ok_or_else(|| {
                    pull_err(format!(
                        "{what}: no image found in manifest list for architecture {}, OS linux",
                        self.architecture
                    ))
                })?
                .to_owned();
            let what = format!(
                "reading manifest {chosen} in {}/{}",
                r.registry, r.repository
            );
            let resp = session.get(
                &format!("/v2/{}/manifests/{chosen}", r.repository),
                ACCEPT,
                &what,
            )?;
            doc = serde_json::from_slice(&resp.body)
                .map_err(|e| pull_err(format!("{what}: manifest is not JSON: {e}")))?;
            digest = Some(chosen);
        }
        let digest = digest
            .filter(|d| is_sha256_digest(d))
            .ok_or_else(|| pull_err(format!("{what}: the registry sent no sha256 digest")))?;
        let config_digest = doc
            .get("config")
            .and_then(|c| c.get("digest"))
            .and_then(Value::as_str)
            .filter(|d| is_sha256_digest(d))
            .ok_or_else(|| pull_err(format!("{what}: manifest has no config digest")))?
            .to_owned();
        let what = format!(
            "reading blob {config_digest} in {}/{}",
            r.registry, r.repository
        );
        let resp = session.get(
            &format!("/v2/{}/blobs/{config_digest}", r.repository),
            "application/vnd.oci.image.config.v1+json, application/json, */*",
            &what,
        )?;
        let config: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| pull_err(format!("{what}: image config is not JSON: {e}")))?;
        let label = |k: &str| {
            config
                .get("config")
                .and_then(|c| c.get("Labels"))
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let created = config
            .get("created")
            .and_then(Value::as_str)
            .filter(|c| chrono::DateTime::parse_from_rfc3339(c).is_ok())
            .map(str::to_owned);
        Ok(ImageInfo {
            image: image.to_owned(),
            digest,
            version: label(VERSION_LABEL),
            created,
            architecture: config
                .get("architecture")
                .and_then(Value::as_str)
                .unwrap_or(host_architecture())
                .to_owned(),
            kernel: label(KERNEL_LABEL),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auth_files_in_bootc_order() {
        let root = tempfile::tempdir().unwrap();
        assert!(
            credentials(root.path(), "127.0.0.1:5000", "x")
                .unwrap()
                .is_none()
        );
        let write = |rel: &str, body: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        write(
            "usr/lib/ostree/auth.json",
            r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#,
        );
        let c = credentials(root.path(), "127.0.0.1:5000", "x")
            .unwrap()
            .unwrap();
        assert_eq!(c.user_pass, "u1:p1");
        write(
            "run/ostree/auth.json",
            r#"{"auths":{"http://127.0.0.1:5000":{"username":"u2","password":"p2"}}}"#,
        );
        let c = credentials(root.path(), "127.0.0.1:5000", "x")
            .unwrap()
            .unwrap();
        assert_eq!(c.user_pass, "u2:p2");
        assert!(
            credentials(root.path(), "127.0.0.1:5001", "x")
                .unwrap()
                .is_none()
        );
        write("run/ostree/auth.json", "{not json");
        assert!(credentials(root.path(), "127.0.0.1:5000", "x").is_err());
    }

    #[test]
    fn refuses_non_loopback_registries() {
        let err = HttpResolver::new("/nonexistent")
            .resolve("quay.io/example/os:1")
            .unwrap_err();
        assert!(err.to_string().contains("not on loopback"), "{err}");
    }

    #[test]
    fn challenge_params() {
        let c =
            r#"Bearer realm="http://127.0.0.1:1/token",service="reg",scope="repository:a/b:pull""#;
        assert_eq!(
            challenge_param(c, "realm").unwrap(),
            "http://127.0.0.1:1/token"
        );
        assert_eq!(challenge_param(c, "scope").unwrap(), "repository:a/b:pull");
        assert_eq!(
            percent_encode("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }
}
