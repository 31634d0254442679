//! Delivering one pool's events, one after another: the webhook's URL read from its
//! Secret at each attempt, an HTTP POST of the JSON body, retries with a doubling backoff
//! and jitter for what may pass (no answer, a 5xx, 408 or 429, an API error reading the
//! Secret), and a clear failure for what will not (a missing Secret or key, a value that is
//! no http(s) URL, any other answer). The URL never appears in a log line, an Event or an
//! error: it often embeds a token. Only an answer's status is read, never its body, so a
//! webhook answering without end costs nothing; redirects are not followed.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use bootc_crds::pool::SecretKeyRef;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::events::{Event as KubeEvent, EventType};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{Job, Outcome, Shared};

/// The reason of the Warning Event on a pool whose notification could not be delivered.
pub const NOTIFICATION_FAILED: &str = "NotificationFailed";

/// Why an attempt failed, and whether another may do better.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, for people; never the URL.
    pub message: String,
    /// Whether a later attempt may succeed.
    pub retry: bool,
}

impl Failure {
    fn permanent(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            retry: false,
        }
    }

    fn transient(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            retry: true,
        }
    }
}

/// Runs one pool's queue until every sender is gone.
pub(super) async fn run(shared: Arc<Shared>, mut jobs: mpsc::Receiver<Job>) {
    while let Some(job) = jobs.recv().await {
        let (pool, event) = (job.notice.pool.as_str(), job.notice.event.as_str());
        match deliver(&shared, &job).await {
            Ok(attempts) => {
                info!(%pool, event, attempts, "webhook notification delivered");
                shared.count(pool, job.notice.event, Outcome::Delivered);
            }
            Err(message) => {
                warn!(%pool, event, "webhook notification not delivered: {message}");
                shared.count(pool, job.notice.event, Outcome::Failed);
                report(&shared, &job, &message).await;
            }
        }
    }
}

/// Attempts until one succeeds (the number of attempts), a failure will not pass, or the
/// attempts or the time allowed run out.
async fn deliver(shared: &Shared, job: &Job) -> Result<u32, String> {
    let options = &shared.options;
    let body = job.notice.payload(job.time);
    let started = Instant::now();
    let mut attempt = 0_u32;
    loop {
        attempt = attempt.saturating_add(1);
        let failure = match attempt_once(shared, &job.secret, &body).await {
            Ok(()) => return Ok(attempt),
            Err(failure) => failure,
        };
        let tries = if attempt == 1 {
            "1 attempt".to_owned()
        } else {
            format!("{attempt} attempts")
        };
        if !failure.retry || attempt >= options.attempts {
            return Err(format!("{} (after {tries})", failure.message));
        }
        let wait = jittered(options.backoff.delay(attempt));
        if started.elapsed() + wait > options.give_up_after {
            return Err(format!(
                "{} (after {tries}; giving up after {:?})",
                failure.message, options.give_up_after
            ));
        }
        debug!(pool = %job.notice.pool, attempt, ?wait, "webhook attempt failed, retrying: {}", failure.message);
        tokio::time::sleep(wait).await;
    }
}

/// Half to all of `delay`, at random, so that retries of many pools do not line up.
pub fn jittered(delay: Duration) -> Duration {
    // Each RandomState has keys of its own: hashing anything gives a fresh number.
    let random = std::collections::hash_map::RandomState::new().hash_one(());
    let fraction = 0.5 + (random % 1_000_000) as f64 / 2_000_000.0;
    delay.mul_f64(fraction)
}

async fn attempt_once(
    shared: &Shared,
    secret: &SecretKeyRef,
    body: &serde_json::Value,
) -> Result<(), Failure> {
    let timeout = shared.options.attempt_timeout;
    let url = match tokio::time::timeout(timeout, webhook_url(shared, secret)).await {
        Ok(url) => url?,
        Err(_) => {
            return Err(Failure::transient(format!(
                "reading Secret {}/{} took over {timeout:?}",
                secret.namespace, secret.name
            )));
        }
    };
    let http = shared.http.as_ref().map_err(Failure::permanent)?;
    let answer = http.post(url).json(body).send().await;
    match answer {
        Ok(response) => answer_failure(response.status()).map_or(Ok(()), Err),
        Err(e) if e.is_timeout() => Err(Failure::transient(format!(
            "the webhook did not answer within {timeout:?}"
        ))),
        Err(e) => Err(Failure::transient(format!(
            "cannot reach the webhook: {}",
            error_chain(&e.without_url())
        ))),
    }
}

/// What an answer's status means: nothing for a success, else a failure, transient for
/// 408, 429 and 5xx.
pub fn answer_failure(status: http::StatusCode) -> Option<Failure> {
    if status.is_success() {
        return None;
    }
    let message = format!("the webhook answered {status}");
    let transient = status.is_server_error()
        || status == http::StatusCode::REQUEST_TIMEOUT
        || status == http::StatusCode::TOO_MANY_REQUESTS;
    Some(if transient {
        Failure::transient(message)
    } else if status.is_redirection() {
        Failure::permanent(format!("{message}; redirects are not followed"))
    } else {
        Failure::permanent(message)
    })
}

/// An error and its causes on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The webhook's URL, read from its Secret now.
async fn webhook_url(shared: &Shared, secret: &SecretKeyRef) -> Result<reqwest::Url, Failure> {
    let (ns, name) = (&secret.namespace, &secret.name);
    if !shared.secrets.allows(ns) {
        return Err(Failure::permanent(shared.secrets.not_allowed(
            "webhook Secret",
            ns,
            name,
        )));
    }
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), ns);
    let found = match api.get_opt(name).await {
        Ok(found) => found,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            return Err(Failure::permanent(format!(
                "the controller may not read Secret {ns}/{name}: {}",
                s.message
            )));
        }
        Err(e) => {
            return Err(Failure::transient(format!(
                "cannot read Secret {ns}/{name}: {e}"
            )));
        }
    };
    let Some(found) = found else {
        return Err(Failure::permanent(format!(
            "webhook Secret {ns}/{name} not found"
        )));
    };
    let value = found
        .data
        .as_ref()
        .and_then(|d| d.get(&secret.key))
        .map(|v| v.0.as_slice());
    parse_url(value).map_err(|problem| {
        Failure::permanent(format!(
            "webhook Secret {ns}/{name}: key {:?} {problem}",
            secret.key
        ))
    })
}

/// The URL in a Secret's value (surrounding white space ignored): an absolute http or
/// https URL with a host. The error never repeats the value.
pub fn parse_url(value: Option<&[u8]>) -> Result<reqwest::Url, &'static str> {
    let value = value.ok_or("is missing")?;
    let text = std::str::from_utf8(value).map_err(|_| "is not UTF-8 text")?;
    let text = text.trim();
    if text.is_empty() {
        return Err("is empty");
    }
    let url = reqwest::Url::parse(text).map_err(|_| "does not hold a valid URL")?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("does not hold an http or https URL");
    }
    Ok(url)
}

/// A Warning Event on the pool naming the failure (best effort: the log and the metrics
/// say it too).
async fn report(shared: &Shared, job: &Job, message: &str) {
    let note = format!(
        "{} notification not delivered: {message}",
        job.notice.event.as_str()
    );
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: NOTIFICATION_FAILED.to_owned(),
        action: format!("Notify{}", job.notice.event.as_str()),
        note: Some(bootc_crds::bounds::truncate(note, 1024)),
        secondary: None,
    };
    if let Err(e) = shared.recorder.publish(&event, &job.reference).await {
        warn!(pool = %job.notice.pool, error = %e, "cannot record an event");
    }
}
