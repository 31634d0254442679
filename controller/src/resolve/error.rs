//! [`ResolveError`], and how a registry exchange's failures map to it: registry error
//! codes, HTTP statuses and what the network stack said.

use std::time::Duration;

use bootc_crds::image_ref::ImageRef;
use oci_client::errors::{OciEnvelope, OciErrorCode};

use super::Credentials;

/// Why a tag could not be resolved. Messages say what an admin can do about it and never
/// contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// 401/403.
    #[error("{}", unauthorized_message(.registry, .repository, *.with_credentials, .secret.as_deref()))]
    Unauthorized {
        /// `host[:port]`.
        registry: String,
        /// The repository.
        repository: String,
        /// Whether credentials were sent.
        with_credentials: bool,
        /// The Secret they came from (`namespace/name`), when known.
        secret: Option<String>,
    },
    /// 404.
    #[error("tag {tag} not found in {repository}")]
    NotFound {
        /// The tag.
        tag: String,
        /// `registry/repository`.
        repository: String,
    },
    /// 429.
    #[error("registry {registry} is rate limiting requests (HTTP 429){}", retry_message(*.retry_after))]
    RateLimited {
        /// `host[:port]`.
        registry: String,
        /// How long to wait before asking again: the resolver's backoff (the registry's
        /// `Retry-After` is not read), or what is left of it when the error is served
        /// from the cache.
        retry_after: Option<Duration>,
    },
    /// No answer within the configured timeout.
    #[error("registry {registry} did not answer within {}s", .after.as_secs_f64())]
    Timeout {
        /// `host[:port]`.
        registry: String,
        /// The timeout.
        after: Duration,
    },
    /// Connection refused, DNS failure, reset.
    #[error("cannot reach registry {registry}: {detail}")]
    Connection {
        /// `host[:port]`.
        registry: String,
        /// What the network stack said.
        detail: String,
    },
    /// The registry speaks plain HTTP and is not listed as insecure.
    #[error("registry {registry} speaks plain HTTP; list it in --insecure-registry")]
    Insecure {
        /// `host[:port]`.
        registry: String,
    },
    /// TLS failure (certificate, protocol), or a registry listed as insecure that speaks
    /// HTTPS.
    #[error("TLS with registry {registry} failed: {detail}")]
    Tls {
        /// `host[:port]`.
        registry: String,
        /// What went wrong.
        detail: String,
    },
    /// Anything else (5xx, malformed answers, bad digests).
    #[error("resolving {reference} failed: {detail}")]
    Other {
        /// The reference being resolved.
        reference: String,
        /// What went wrong.
        detail: String,
    },
}

pub(super) fn unauthorized_message(
    registry: &str,
    repository: &str,
    with_credentials: bool,
    secret: Option<&str>,
) -> String {
    match (with_credentials, secret) {
        (true, Some(secret)) => format!(
            "registry {registry} refused the credentials of pull secret {secret} for {repository}"
        ),
        (true, None) => {
            format!("registry {registry} refused the supplied credentials for {repository}")
        }
        (false, _) => format!(
            "registry {registry} requires credentials for {repository}: set spec.pullSecretRef"
        ),
    }
}

fn retry_message(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!("; retrying in {}s", d.as_secs().max(1)),
        None => String::new(),
    }
}

impl ResolveError {
    /// How long to wait before asking again after a 429 (the resolver's backoff). Other
    /// errors are retried after the same backoff; asking earlier returns the cached error
    /// without a request.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ResolveError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A short machine-friendly name of the variant, for metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            ResolveError::Unauthorized { .. } => "unauthorized",
            ResolveError::NotFound { .. } => "not_found",
            ResolveError::RateLimited { .. } => "rate_limited",
            ResolveError::Timeout { .. } => "timeout",
            ResolveError::Connection { .. } => "connection",
            ResolveError::Insecure { .. } => "insecure",
            ResolveError::Tls { .. } => "tls",
            ResolveError::Other { .. } => "other",
        }
    }

    /// The cached error as served to one caller: its own Secret's name, the time left of a
    /// rate limit.
    pub(super) fn for_caller(
        &self,
        credentials: Option<&Credentials>,
        left: Duration,
    ) -> ResolveError {
        let mut e = self.clone();
        match &mut e {
            ResolveError::Unauthorized { secret, .. } => {
                *secret = credentials.and_then(|c| c.source().map(str::to_owned));
            }
            ResolveError::RateLimited { retry_after, .. } => *retry_after = Some(left),
            _ => {}
        }
        e
    }
}

/// Renders an error and its sources, `a: b: c`, skipping repeats.
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// What the classifier needs to know about the request.
pub(super) struct FailureContext<'a> {
    pub(super) reference: &'a ImageRef,
    pub(super) with_credentials: bool,
    pub(super) insecure: bool,
}

impl FailureContext<'_> {
    pub(super) fn registry(&self) -> String {
        self.reference.registry().to_owned()
    }

    pub(super) fn unauthorized(&self) -> ResolveError {
        ResolveError::Unauthorized {
            registry: self.registry(),
            repository: self.reference.name(),
            with_credentials: self.with_credentials,
            secret: None,
        }
    }

    fn not_found(&self) -> ResolveError {
        ResolveError::NotFound {
            tag: self.reference.tag().unwrap_or_default().to_owned(),
            repository: self.reference.name(),
        }
    }

    pub(super) fn rate_limited(&self) -> ResolveError {
        ResolveError::RateLimited {
            registry: self.registry(),
            retry_after: None,
        }
    }

    pub(super) fn other(&self, detail: String) -> ResolveError {
        ResolveError::Other {
            reference: self.reference.to_string(),
            detail,
        }
    }

    /// 401/403, 404 and 429 by their status; anything else is `Other(detail)`.
    fn by_status(&self, status: u16, detail: impl FnOnce() -> String) -> ResolveError {
        match status {
            401 | 403 => self.unauthorized(),
            404 => self.not_found(),
            429 => self.rate_limited(),
            _ => self.other(detail()),
        }
    }
}

/// The [`ResolveError`] of a request that got no answer (or whose answer broke off).
pub(super) fn request_failed(e: &reqwest::Error, ctx: &FailureContext<'_>) -> ResolveError {
    classify_request(
        &RequestFailure {
            timeout: e.is_timeout(),
            connect: e.is_connect(),
            status: e.status().map(|s| s.as_u16()),
            detail: error_chain(e),
            // What the network stack said, without the top-level message (it carries
            // the URL, whose host name must not steer the classification).
            network: std::error::Error::source(e)
                .map(error_chain)
                .unwrap_or_default()
                .to_ascii_lowercase(),
        },
        ctx,
    )
}

/// The [`ResolveError`] of an answer other than 200 OK, from its status and the start of
/// its body: 401 refuses the credentials, a client error's error document decides by its
/// codes, anything else by its status.
pub(super) fn answered(status: u16, body: &[u8], ctx: &FailureContext<'_>) -> ResolveError {
    if status == 401 {
        return ctx.unauthorized();
    }
    if (400..500).contains(&status)
        && let Ok(envelope) = serde_json::from_slice::<OciEnvelope>(body)
    {
        return classify_envelope(&envelope, ctx);
    }
    let message = String::from_utf8_lossy(body);
    if status == 400 && ctx.insecure && message.contains("HTTPS server") {
        return ResolveError::Tls {
            registry: ctx.registry(),
            detail: "it speaks HTTPS; remove it from --insecure-registry".to_owned(),
        };
    }
    ctx.by_status(status, || {
        format!(
            "registry answered HTTP {status}: {}",
            truncate(message.trim(), 200)
        )
    })
}

/// A registry's error document: its codes decide.
fn classify_envelope(envelope: &OciEnvelope, ctx: &FailureContext<'_>) -> ResolveError {
    let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
    let any = |f: fn(&OciErrorCode) -> bool| codes.iter().any(|c| f(c));
    if any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
        ctx.unauthorized()
    } else if any(|c| {
        matches!(
            c,
            OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
        )
    }) {
        ctx.not_found()
    } else if any(|c| matches!(c, OciErrorCode::Toomanyrequests)) {
        ctx.rate_limited()
    } else {
        let msgs: Vec<String> = envelope.errors.iter().map(|e| e.message.clone()).collect();
        ctx.other(format!("registry answered: {}", msgs.join("; ")))
    }
}

/// What the HTTP client said about a failed request.
struct RequestFailure {
    timeout: bool,
    connect: bool,
    status: Option<u16>,
    /// The whole error chain.
    detail: String,
    /// The error's sources, lowercase.
    network: String,
}

/// A failure of the HTTP client: timeout, plain HTTP where TLS was expected, TLS,
/// connection, or an error status.
fn classify_request(f: &RequestFailure, ctx: &FailureContext<'_>) -> ResolveError {
    let registry = ctx.registry();
    let detail = f.detail.clone();
    let lower = f.network.as_str();
    if f.timeout {
        ResolveError::Timeout {
            registry,
            after: Duration::ZERO,
        }
    } else if !ctx.insecure
        && (lower.contains("invalidcontenttype")
            || lower.contains("corrupt message")
            || lower.contains("wrong version number"))
    {
        ResolveError::Insecure { registry }
    } else if lower.contains("certificate")
        || lower.contains("handshake")
        || lower.contains("received fatal alert")
        || lower.contains("peer is incompatible")
    {
        ResolveError::Tls { registry, detail }
    } else if f.connect {
        ResolveError::Connection { registry, detail }
    } else if let Some(status) = f.status {
        ctx.by_status(status, || detail)
    } else {
        ctx.other(detail)
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
