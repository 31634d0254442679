//! Container image references (`HOST[:PORT]/REPO[:TAG][@sha256:HEX]`), checked before use.

use std::fmt;

use crate::Error;

/// A parsed registry image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]` of the registry (`docker.io` when the reference names none).
    pub registry: String,
    /// The repository path inside the registry (`library/foo` on docker.io).
    pub repository: String,
    /// The tag, if the reference has one (`latest` when it has neither tag nor digest).
    pub tag: Option<String>,
    /// The digest (`sha256:<64 hex>`), if the reference has one.
    pub digest: Option<String>,
}

fn invalid(reference: &str, reason: impl Into<String>) -> Error {
    Error::InvalidReference {
        reference: reference.to_owned(),
        reason: reason.into(),
    }
}

/// Checks that `s` is `sha256:` followed by 64 lowercase hex digits.
pub fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn valid_repo_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    !c.is_empty()
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn valid_tag(t: &str) -> bool {
    let bytes = t.as_bytes();
    !t.is_empty()
        && t.len() <= 128
        && bytes
            .first()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn valid_registry(r: &str) -> bool {
    if let Some(rest) = r.strip_prefix('[') {
        // [v6]:port or [v6]
        let Some((addr, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        return !addr.is_empty()
            && addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')
            && port_ok;
    }
    let (host, port) = match r.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (r, None),
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && port
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Rejects what must never reach a command line or a URL: an empty reference, a leading
/// `-`, whitespace or control characters, or an absurd length.
pub fn check_safe(reference: &str) -> Result<(), Error> {
    if reference.is_empty() {
        return Err(invalid(reference, "empty image reference"));
    }
    if reference.starts_with('-') {
        return Err(invalid(
            reference,
            "an image reference must not start with '-'",
        ));
    }
    if reference
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(invalid(
            reference,
            "an image reference must not contain whitespace or control characters",
        ));
    }
    if reference.len() > 4096 {
        return Err(invalid(reference, "image reference too long"));
    }
    Ok(())
}

impl Reference {
    /// Parses and validates a reference in docker syntax (the `registry` transport).
    pub fn parse(reference: &str) -> Result<Reference, Error> {
        check_safe(reference)?;
        let (name_tag, digest) = match reference.rsplit_once('@') {
            Some((n, d)) => {
                if !is_sha256_digest(d) {
                    return Err(invalid(
                        reference,
                        format!("digest {d:?} is not sha256:<64 lowercase hex digits>"),
                    ));
                }
                (n, Some(d.to_owned()))
            }
            None => (reference, None),
        };
        let (registry, rest) = match name_tag.split_once('/') {
            Some((first, rest))
                if first.contains('.')
                    || first.contains(':')
                    || first.starts_with('[')
                    || first == "localhost" =>
            {
                (first.to_owned(), rest)
            }
            _ => ("docker.io".to_owned(), name_tag),
        };
        if !valid_registry(&registry) {
            return Err(invalid(
                reference,
                format!("bad registry host {registry:?}"),
            ));
        }
        let (repo, tag) = match rest.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_owned())),
            _ => (rest, None),
        };
        if repo.is_empty() || !repo.split('/').all(valid_repo_component) {
            return Err(invalid(
                reference,
                format!(
                    "bad repository name {repo:?} (lowercase letters, digits, '.', '_', '-', '/')"
                ),
            ));
        }
        if let Some(t) = &tag
            && !valid_tag(t)
        {
            return Err(invalid(reference, format!("bad tag {t:?}")));
        }
        let mut repository = repo.to_owned();
        if registry == "docker.io" && !repository.contains('/') {
            repository = format!("library/{repository}");
        }
        let tag = if tag.is_none() && digest.is_none() {
            Some("latest".to_owned())
        } else {
            tag
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// What to ask the registry's manifest endpoint for: the digest if there is one,
    /// else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// True when the registry is on loopback (`127.0.0.1`, `localhost`, `[::1]`, any
    /// port), the only registries the stand-in talks to (over plain HTTP).
    pub fn is_loopback(&self) -> bool {
        let host = if self.registry.starts_with('[') {
            self.registry
                .split_once(']')
                .map_or(self.registry.as_str(), |(h, _)| h)
                .trim_start_matches('[')
        } else {
            self.registry
                .split_once(':')
                .map_or(self.registry.as_str(), |(h, _)| h)
        };
        matches!(host, "127.0.0.1" | "localhost" | "::1")
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn parses_tag_digest_and_port() {
        let r = Reference::parse("127.0.0.1:5000/os/node:v1").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "os/node");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.manifest_reference(), "v1");
        assert!(r.is_loopback());

        let r = Reference::parse(&format!("localhost:5000/os@{D}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(D));
        assert_eq!(r.tag, None);
        assert_eq!(r.manifest_reference(), D);
        assert!(r.is_loopback());

        let r = Reference::parse(&format!("[::1]:5000/os:t@{D}")).unwrap();
        assert_eq!(r.registry, "[::1]:5000");
        assert_eq!(r.manifest_reference(), D);
        assert!(r.is_loopback());

        let r = Reference::parse("quay.io/fedora/fedora-bootc").unwrap();
        assert_eq!(r.tag.as_deref(), Some("latest"));
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), "quay.io/fedora/fedora-bootc:latest");

        let r = Reference::parse("fedora").unwrap();
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.repository, "library/fedora");
    }

    #[test]
    fn rejects_bad_references() {
        for bad in [
            "",
            "-x",
            "--download-only",
            "127.0.0.1:5000/os:v 1",
            "127.0.0.1:5000/os:v1\n",
            "127.0.0.1:5000/os\t:v1",
            "127.0.0.1:5000/OS:v1",
            "127.0.0.1:5000/os@sha256:abc",
            "127.0.0.1:5000/os@md5:aaaa",
            "127.0.0.1:5000/os:-bad",
            "127.0.0.1:5000//os",
            "127.0.0.1:5000/os/",
            "127.0.0.1:x/os",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
