//! The alert gate's source (`spec.health.alerts`): an Alertmanager or a Prometheus asked
//! for the alerts that fire, once per URL and interval for all pools, and what a pool's
//! matchers make of the answer ([`GateView`]). Whether the gate fails closed is the
//! planner's business: here a source that cannot be asked is just
//! [`GateView::Unreachable`].
//!
//! Which API a URL serves is found out from its answers and kept per URL:
//!
//! - first `GET {url}/api/v2/alerts?active=true&silenced=false&inhibited=false`, which
//!   only an Alertmanager serves: a JSON array of alerts, each with its `labels` and
//!   `status.state` (every alert but a `suppressed` one counts);
//! - when that path answers 404 (Prometheus serves no `/api/v2`), or answers Prometheus's
//!   envelope (`{"status": …, "data": …}`), `GET {url}/api/v1/alerts`: Prometheus's
//!   `{"status":"success","data":{"alerts":[…]}}`, in which only `state: firing` counts
//!   (`pending` alerts have not fired yet).
//!
//! A URL found to be one kind is asked only that way, until that path answers 404, when
//! it is found out again.
//!
//! Many pools naming one URL share its answer for their `intervalSeconds` (a pool asks
//! anew once the answer is older than its own interval), and callers arriving while the
//! URL is being asked wait for that request instead of making their own. Failures are
//! kept for the interval too, so that a source that is down costs one timeout per
//! interval, not one per reconcile.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bootc_crds::matcher::{Matcher, matches_all, parse_all};
use bootc_crds::pool::AlertGateSpec;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::plan::GateView;

mod credentials;
mod fetch;

pub use credentials::Credentials;
pub use fetch::{Api, MAX_BODY};

/// How many alerts a [`GateView::Firing`] names.
pub const NAMED_ALERTS: usize = 5;
/// The longest description of one alert; a longer one is cut with `…`.
const ALERT_TEXT_MAX: usize = 256;
/// A URL not asked for this long is forgotten (twice the longest interval).
const FORGET_AFTER: Duration = Duration::from_secs(2 * 3600);

/// An alert's labels.
pub type Labels = BTreeMap<String, String>;

/// How the gate asks.
#[derive(Debug, Clone)]
pub struct AlertGateOptions {
    /// The longest a request may take, connection included.
    pub timeout: Duration,
}

impl Default for AlertGateOptions {
    fn default() -> Self {
        AlertGateOptions {
            timeout: Duration::from_secs(5),
        }
    }
}

/// The alert sources of all pools, with what each last answered. Cheap to clone: the
/// clones share the cache.
#[derive(Clone)]
pub struct AlertGate {
    inner: Arc<Inner>,
}

struct Inner {
    /// The HTTP client, or why there is none.
    http: Result<reqwest::Client, String>,
    timeout: Duration,
    sources: Mutex<HashMap<String, Source>>,
}

/// One URL: its state, and when a pool last asked for it.
struct Source {
    state: Arc<tokio::sync::Mutex<SourceState>>,
    used: Instant,
}

/// What is known of one URL.
#[derive(Default)]
struct SourceState {
    /// The API it was found to serve.
    api: Option<Api>,
    /// Its last answer.
    last: Option<Answer>,
}

/// One answer of a URL: the alerts that fire, or why there are none to tell.
#[derive(Clone)]
struct Answer {
    asked: Instant,
    checked: DateTime<Utc>,
    alerts: Result<Arc<Vec<Labels>>, String>,
}

impl std::fmt::Debug for AlertGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls = self.lock_sources().len();
        f.debug_struct("AlertGate")
            .field("timeout", &self.inner.timeout)
            .field("urls", &urls)
            .finish_non_exhaustive()
    }
}

impl Default for AlertGate {
    fn default() -> Self {
        AlertGate::new(AlertGateOptions::default())
    }
}

impl AlertGate {
    /// A gate asking with `options`.
    pub fn new(options: AlertGateOptions) -> Self {
        // No redirects: one would take the basic authentication, or the question, to
        // another place than the URL the pool names.
        let http = crate::shared::http_client()
            .timeout(options.timeout)
            .connect_timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"));
        AlertGate {
            inner: Arc::new(Inner {
                http,
                timeout: options.timeout,
                sources: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn lock_sources(&self) -> std::sync::MutexGuard<'_, HashMap<String, Source>> {
        self.inner
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What the gate of `spec` says now, asking with `credentials` (`now`: the caller's
    /// clock, kept as the time of a request made for this call).
    pub async fn check(
        &self,
        spec: &AlertGateSpec,
        credentials: Option<&Credentials>,
        now: DateTime<Utc>,
    ) -> GateView {
        let matchers = match parse_all(&spec.matchers) {
            Ok(m) => m,
            Err(e) => {
                return GateView::Unreachable {
                    error: format!("the matchers for {} cannot be read: {e}", shown(&spec.url)),
                    checked: now,
                };
            }
        };
        let interval = Duration::from_secs(spec.interval_seconds.clamp(1, 3600).unsigned_abs());
        let answer = self.answer(&spec.url, credentials, interval, now).await;
        view(&answer, &matchers)
    }

    /// The answer of `url` asked with `credentials`, asked now unless one younger than
    /// `interval` is kept. Answers are kept per URL and credentials: a pool never sees
    /// what was answered to another pool's credentials.
    async fn answer(
        &self,
        url: &str,
        credentials: Option<&Credentials>,
        interval: Duration,
        now: DateTime<Utc>,
    ) -> Answer {
        let key = match credentials {
            Some(c) => format!("{url}\n{}", c.id),
            None => url.to_owned(),
        };
        let state = self.source(&key);
        let mut state = state.lock().await;
        if let Some(last) = &state.last
            && last.asked.elapsed() < interval
        {
            return last.clone();
        }
        let asked = Instant::now();
        let alerts = match &self.inner.http {
            Ok(http) => {
                let source = fetch::Source {
                    http,
                    base: url,
                    credentials,
                    timeout: self.inner.timeout,
                };
                source.alerts(&mut state.api).await.map(Arc::new)
            }
            Err(e) => Err(e.clone()),
        };
        let answer = Answer {
            asked,
            checked: now,
            alerts,
        };
        state.last = Some(answer.clone());
        answer
    }

    /// The state of a URL and credentials (`key`), made on first use; those no pool asked
    /// for a long time go.
    fn source(&self, key: &str) -> Arc<tokio::sync::Mutex<SourceState>> {
        let mut sources = self.lock_sources();
        let now = Instant::now();
        if !sources.contains_key(key) {
            sources.retain(|_, s| now.duration_since(s.used) < FORGET_AFTER);
        }
        let source = sources.entry(key.to_owned()).or_insert_with(|| Source {
            state: Arc::default(),
            used: now,
        });
        source.used = now;
        Arc::clone(&source.state)
    }
}

/// What `matchers` make of `answer`.
fn view(answer: &Answer, matchers: &[Matcher]) -> GateView {
    let checked = answer.checked;
    let alerts = match &answer.alerts {
        Ok(alerts) => alerts,
        Err(error) => {
            return GateView::Unreachable {
                error: error.clone(),
                checked,
            };
        }
    };
    let mut matching: Vec<String> = alerts
        .iter()
        .filter(|labels| matches_all(matchers, labels))
        .map(describe)
        .collect();
    if matching.is_empty() {
        return GateView::Open { checked };
    }
    matching.sort();
    let count = matching.len();
    matching.truncate(NAMED_ALERTS);
    GateView::Firing {
        alerts: matching,
        count,
        checked,
    }
}

/// An alert as `alertname{label="value",…}`, its other labels in name order.
pub fn describe(labels: &Labels) -> String {
    let name = labels.get("alertname").map_or("", String::as_str);
    let mut text = String::from(name);
    text.push('{');
    let mut first = true;
    for (k, v) in labels.iter().filter(|(k, _)| *k != "alertname") {
        if !first {
            text.push(',');
        }
        first = false;
        text.push_str(k);
        text.push_str("=\"");
        for c in v.chars() {
            match c {
                '"' => text.push_str("\\\""),
                '\\' => text.push_str("\\\\"),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('"');
    }
    text.push('}');
    if text.chars().count() > ALERT_TEXT_MAX {
        text = text.chars().take(ALERT_TEXT_MAX - 1).collect();
        text.push('…');
    }
    text
}

pub use bootc_crds::bounds::shown_url as shown;

#[cfg(test)]
mod tests;
