//! Container image references: parsing, normalisation and the canonical digest pin.
//!
//! The grammar is the OCI/docker reference grammar (`[registry[:port]/]repo[:tag][@digest]`)
//! with the docker.io defaults (`ubuntu` is `docker.io/library/ubuntu:latest`). Everything
//! that reaches a host command line goes through [`ImageRef`] first, so the parser is
//! deliberately strict: it refuses leading dashes, whitespace, control characters and shell
//! metacharacters with a message that names the offending character and its position.

use std::fmt;
use std::str::FromStr;

/// Registry used when a reference names none.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// Legacy spelling of [`DEFAULT_REGISTRY`], normalised to it.
const LEGACY_DEFAULT_REGISTRY: &str = "index.docker.io";
/// Namespace docker.io gives single-segment repositories.
const OFFICIAL_NAMESPACE: &str = "library";
/// Tag used when a reference has neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";
/// Longest `registry/repository` accepted (the distribution limit).
pub const NAME_MAX_LEN: usize = 255;
/// Longest tag accepted.
pub const TAG_MAX_LEN: usize = 128;
/// Longest reference string accepted at all.
pub const REF_MAX_LEN: usize = 512;
/// Length of a sha256 digest in hex characters.
const SHA256_HEX_LEN: usize = 64;

/// The schema pattern for an image reference: the same grammar as the parser, written for
/// both RE2 (kube-apiserver) and ECMA-262. The parser is stricter in places a pattern cannot
/// say (port range, total length); `validate()` runs the parser.
pub const IMAGE_REF_PATTERN: &str = concat!(
    r"^(?:(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?/)?",
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*",
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
);

/// The schema pattern for a canonical pin, `registry/repo@sha256:<hex>` (no tag).
pub const IMAGE_PIN_PATTERN: &str = concat!(
    r"^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?/",
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*",
    r"@sha256:[a-f0-9]{64}$"
);

/// Characters a POSIX shell gives a meaning to; none can appear in a valid reference.
const SHELL_METACHARACTERS: &[char] = &[
    ';', '&', '|', '$', '`', '(', ')', '<', '>', '\\', '"', '\'', '*', '?', '!', '{', '}', '~', '#',
];

/// Why a string is not a usable image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Nothing at all.
    #[error("the reference is empty")]
    Empty,
    /// Longer than [`REF_MAX_LEN`] or the name longer than [`NAME_MAX_LEN`].
    #[error("{what} is {len} characters long, the limit is {max}")]
    TooLong {
        /// Which part is too long.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Would be read as a command-line option.
    #[error("it starts with '-' and would be read as a command-line option")]
    LeadingDash,
    /// Space, tab, newline or other Unicode whitespace.
    #[error("it contains whitespace at position {pos}")]
    Whitespace {
        /// Character index.
        pos: usize,
    },
    /// A control character such as NUL or ESC.
    #[error("it contains control character U+{code:04X} at position {pos}")]
    ControlCharacter {
        /// Character index.
        pos: usize,
        /// The code point.
        code: u32,
    },
    /// A character a shell would interpret.
    #[error("it contains shell metacharacter '{ch}' at position {pos}")]
    ShellMetacharacter {
        /// The character.
        ch: char,
        /// Character index.
        pos: usize,
    },
    /// Any other character outside the reference grammar (including non-ASCII).
    #[error("it contains '{ch}' at position {pos}, which no image reference may contain")]
    InvalidCharacter {
        /// The character.
        ch: char,
        /// Character index.
        pos: usize,
    },
    /// More than one `@`.
    #[error("it contains more than one '@'")]
    MultipleDigests,
    /// `@` with nothing after it, or `sha256:` with no hex.
    #[error("the digest after '@' is empty")]
    EmptyDigest,
    /// Digest without `algorithm:` prefix.
    #[error("digest \"{digest}\" must have the form sha256:<64 hex characters>")]
    MalformedDigest {
        /// The digest as written.
        digest: String,
    },
    /// A digest algorithm other than sha256.
    #[error("digest algorithm \"{algorithm}\" is not supported (only sha256)")]
    UnsupportedDigestAlgorithm {
        /// The algorithm as written.
        algorithm: String,
    },
    /// sha256 digest of the wrong length.
    #[error("the sha256 digest has {len} hex characters instead of 64")]
    DigestLength {
        /// Number of characters after `sha256:`.
        len: usize,
    },
    /// sha256 digest with characters outside lowercase hex.
    #[error("the sha256 digest contains '{ch}'; only lowercase hex (0-9, a-f) is allowed")]
    DigestNotHex {
        /// First offending character.
        ch: char,
    },
    /// `repo:` with no tag.
    #[error("the tag after ':' is empty")]
    EmptyTag,
    /// A tag outside `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
    #[error(
        "tag \"{tag}\" is invalid: it must start with a letter, digit or '_' and contain only letters, digits, '_', '.' and '-' (at most 128)"
    )]
    InvalidTag {
        /// The tag as written.
        tag: String,
    },
    /// No repository, e.g. `quay.io/` or `:tag`.
    #[error("the repository name is missing")]
    EmptyRepository,
    /// `a//b` or a trailing `/`.
    #[error("repository \"{repository}\" has an empty path component")]
    EmptyPathComponent {
        /// The repository as written.
        repository: String,
    },
    /// Repositories are lowercase only.
    #[error("repository \"{repository}\" must be lowercase")]
    UppercaseRepository {
        /// The repository as written.
        repository: String,
    },
    /// A path component outside the grammar (e.g. `-x`, `a..b`).
    #[error(
        "repository component \"{component}\" is invalid: use lowercase letters and digits, separated by '.', '_', '__' or '-'"
    )]
    InvalidPathComponent {
        /// The component as written.
        component: String,
    },
    /// A registry host that is not a host name, IPv4 or bracketed IPv6 address.
    #[error("registry \"{registry}\" is not a valid host name")]
    InvalidRegistry {
        /// The registry as written.
        registry: String,
    },
    /// A port that is not a number in 1..=65535.
    #[error("registry port \"{port}\" must be a number between 1 and 65535")]
    InvalidPort {
        /// The port as written.
        port: String,
    },
}

/// A sha256 content digest (`sha256:<64 lowercase hex>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    /// Written out, `sha256:` included: a digest is written far more often than it is
    /// parsed (every status names the target's).
    text: String,
}

/// What comes before the hex characters.
const SHA256_PREFIX: &str = "sha256:";

impl Digest {
    /// The 64 hex characters.
    pub fn hex(&self) -> &str {
        &self.text[SHA256_PREFIX.len()..]
    }

    /// The first 12 hex characters, as tools print a short digest.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }

    /// Written out: `sha256:<hex>`, as `to_string` gives it, without formatting.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `s` is this digest written out (`sha256:<hex>`): the same answer as
    /// parsing `s` and comparing, without parsing or allocating.
    pub fn is(&self, s: &str) -> bool {
        s == self.text
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Digest {
    type Err = ImageRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_digest(s)
    }
}

/// A parsed, normalised image reference.
///
/// `Display` renders the fully qualified form (`docker.io/library/ubuntu:24.04`), which
/// parses back to an equal value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl ImageRef {
    /// Parses and normalises a reference.
    pub fn parse(s: &str) -> Result<Self, ImageRefError> {
        s.parse()
    }

    /// Registry host, with port when one was given (`quay.io`, `127.0.0.1:5000`).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// Repository path within the registry (`library/ubuntu`, `fedora/fedora-bootc`).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if the reference has one (a reference with neither tag nor digest gets
    /// [`DEFAULT_TAG`]).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if the reference pins one.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `registry/repository`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The canonical pin of this repository at `digest`: `registry/repo@sha256:<hex>`.
    pub fn pin(&self, digest: &Digest) -> String {
        format!("{}/{}@{}", self.registry, self.repository, digest)
    }

    /// The canonical pin when the reference carries a digest (the digest wins over a tag).
    pub fn pinned(&self) -> Option<String> {
        self.digest.as_ref().map(|d| self.pin(d))
    }

    /// True when the reference is exactly a canonical pin (digest, no tag).
    pub fn is_pin(&self) -> bool {
        self.digest.is_some() && self.tag.is_none()
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for ImageRef {
    type Err = ImageRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        check_characters(s)?;
        let (name_and_tag, digest) = match s.split_once('@') {
            Some((_, rest)) if rest.contains('@') => return Err(ImageRefError::MultipleDigests),
            Some((left, right)) => (left, Some(parse_digest(right)?)),
            None => (s, None),
        };
        let (name, tag) = split_tag(name_and_tag)?;
        let (registry, repository) = split_registry(name)?;
        check_registry(registry)?;
        check_repository(repository)?;

        let registry = if registry == LEGACY_DEFAULT_REGISTRY {
            DEFAULT_REGISTRY
        } else {
            registry
        };
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("{OFFICIAL_NAMESPACE}/{repository}")
        } else {
            repository.to_string()
        };
        let name_len = registry.len() + 1 + repository.len();
        if name_len > NAME_MAX_LEN {
            return Err(ImageRefError::TooLong {
                what: "the name (registry/repository)",
                len: name_len,
                max: NAME_MAX_LEN,
            });
        }
        let tag = match (tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_string()),
            (tag, _) => tag.map(str::to_string),
        };
        Ok(ImageRef {
            registry: registry.to_string(),
            repository,
            tag,
            digest,
        })
    }
}

/// Refuses anything that could be misread by a shell or a command-line parser before the
/// grammar is even looked at, so the message names the dangerous character.
fn check_characters(s: &str) -> Result<(), ImageRefError> {
    if s.is_empty() {
        return Err(ImageRefError::Empty);
    }
    let len = s.chars().count();
    if len > REF_MAX_LEN {
        return Err(ImageRefError::TooLong {
            what: "the reference",
            len,
            max: REF_MAX_LEN,
        });
    }
    if s.starts_with('-') {
        return Err(ImageRefError::LeadingDash);
    }
    for (pos, ch) in s.chars().enumerate() {
        // Most of a reference: none of the checks below refuses these.
        if ch.is_ascii_alphanumeric() {
            continue;
        }
        if ch.is_whitespace() {
            return Err(ImageRefError::Whitespace { pos });
        }
        if ch.is_control() {
            return Err(ImageRefError::ControlCharacter {
                pos,
                code: u32::from(ch),
            });
        }
        if SHELL_METACHARACTERS.contains(&ch) {
            return Err(ImageRefError::ShellMetacharacter { ch, pos });
        }
        if !matches!(ch, '.' | '_' | '-' | '/' | ':' | '@' | '[' | ']') {
            return Err(ImageRefError::InvalidCharacter { ch, pos });
        }
    }
    Ok(())
}

fn parse_digest(s: &str) -> Result<Digest, ImageRefError> {
    if s.is_empty() {
        return Err(ImageRefError::EmptyDigest);
    }
    let Some((algorithm, hex)) = s.split_once(':') else {
        return Err(ImageRefError::MalformedDigest {
            digest: s.to_string(),
        });
    };
    if algorithm.is_empty() || !algorithm.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(ImageRefError::MalformedDigest {
            digest: s.to_string(),
        });
    }
    if algorithm != "sha256" {
        return Err(ImageRefError::UnsupportedDigestAlgorithm {
            algorithm: algorithm.to_string(),
        });
    }
    if hex.is_empty() {
        return Err(ImageRefError::EmptyDigest);
    }
    if let Some(ch) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(ImageRefError::DigestNotHex { ch });
    }
    if hex.len() != SHA256_HEX_LEN {
        return Err(ImageRefError::DigestLength { len: hex.len() });
    }
    // `s` is `sha256:` and the hex characters, nothing else.
    Ok(Digest { text: s.to_owned() })
}

/// Splits `name[:tag]`: a `:` after the last `/` starts the tag (a `:` before it is a port).
fn split_tag(s: &str) -> Result<(&str, Option<&str>), ImageRefError> {
    let last_slash = s.rfind('/');
    match s.rfind(':') {
        Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
            let (name, tag) = (&s[..colon], &s[colon + 1..]);
            if tag.is_empty() {
                return Err(ImageRefError::EmptyTag);
            }
            if !is_valid_tag(tag) {
                return Err(ImageRefError::InvalidTag {
                    tag: tag.to_string(),
                });
            }
            Ok((name, Some(tag)))
        }
        _ => Ok((s, None)),
    }
}

fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first_ok
        && tag.len() <= TAG_MAX_LEN
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Splits `[registry/]repository` the way docker does: the first component is a registry
/// when it contains `.` or `:`, is `localhost`, is a bracketed IPv6 address, or has
/// uppercase letters (which a repository cannot have).
fn split_registry(name: &str) -> Result<(&str, &str), ImageRefError> {
    if name.is_empty() {
        return Err(ImageRefError::EmptyRepository);
    }
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':', '['])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            if rest.is_empty() {
                return Err(ImageRefError::EmptyRepository);
            }
            Ok((first, rest))
        }
        _ => Ok((DEFAULT_REGISTRY, name)),
    }
}

fn check_registry(registry: &str) -> Result<(), ImageRefError> {
    let invalid = || ImageRefError::InvalidRegistry {
        registry: registry.to_string(),
    };
    let port = if let Some(rest) = registry.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(invalid)?;
        if inside.is_empty()
            || !inside.contains(':')
            || !inside.chars().all(|c| c.is_ascii_hexdigit() || c == ':')
        {
            return Err(invalid());
        }
        match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(invalid)?),
        }
    } else {
        let (host, port) = match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        };
        check_host_name(host).ok_or_else(invalid)?;
        port
    };
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.len() <= 5
            && port.chars().all(|c| c.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
        if !valid {
            return Err(ImageRefError::InvalidPort {
                port: port.to_string(),
            });
        }
    }
    Ok(())
}

/// `Some(())` when `host` is dot-separated labels of letters, digits and inner hyphens.
fn check_host_name(host: &str) -> Option<()> {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    (!host.is_empty() && host.split('.').all(label_ok)).then_some(())
}

fn check_repository(repository: &str) -> Result<(), ImageRefError> {
    if repository.is_empty() {
        return Err(ImageRefError::EmptyRepository);
    }
    if repository.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ImageRefError::UppercaseRepository {
            repository: repository.to_string(),
        });
    }
    for component in repository.split('/') {
        if component.is_empty() {
            return Err(ImageRefError::EmptyPathComponent {
                repository: repository.to_string(),
            });
        }
        if !is_valid_path_component(component) {
            return Err(ImageRefError::InvalidPathComponent {
                component: component.to_string(),
            });
        }
    }
    Ok(())
}

/// `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
fn is_valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let sep_start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < bytes.len() && bytes[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < bytes.len() && bytes[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == sep_start || i == bytes.len() {
            return false;
        }
    }
}

mod digest_text;
pub use digest_text::{digest_in, digest_text_in, is_digest, runs_digest};

#[cfg(test)]
mod tests;
