//! Asking one URL for the alerts that fire: Alertmanager's v2 API or Prometheus's v1 API,
//! found out from the answers (see [`super`]), every failure an error naming the URL.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{Labels, shown};

/// The largest answer read; a longer one is an error.
pub const MAX_BODY: usize = 16 << 20;

/// The path and query of Alertmanager's alerts.
const ALERTMANAGER_PATH: &str = "/api/v2/alerts?active=true&silenced=false&inhibited=false";
/// The path of Prometheus's alerts.
const PROMETHEUS_PATH: &str = "/api/v1/alerts";

/// The API a URL serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Alertmanager's `/api/v2/alerts`.
    Alertmanager,
    /// Prometheus's `/api/v1/alerts`.
    Prometheus,
}

/// A URL to ask, and how.
pub(super) struct Source<'a> {
    pub http: &'a reqwest::Client,
    pub base: &'a str,
    pub credentials: Option<&'a super::Credentials>,
    pub timeout: Duration,
}

/// What one request brought back.
enum Reply {
    /// A success, with its body.
    Body(Vec<u8>),
    /// 404: the path is not served there.
    NotFound,
}

/// Alertmanager's alert, as much of it as is read.
#[derive(Deserialize)]
struct AmAlert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    status: Option<AmStatus>,
}

#[derive(Deserialize)]
struct AmStatus {
    #[serde(default)]
    state: String,
}

/// Prometheus's answer.
#[derive(Deserialize)]
struct PromAnswer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<PromData>,
}

#[derive(Deserialize)]
struct PromData {
    alerts: Vec<PromAlert>,
}

#[derive(Deserialize)]
struct PromAlert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    state: String,
}

impl Source<'_> {
    /// The labels of the alerts that fire; `api` is what the URL is known to serve, kept
    /// up to date.
    pub async fn alerts(&self, api: &mut Option<Api>) -> Result<Vec<Labels>, String> {
        if *api == Some(Api::Prometheus) {
            match self.get(PROMETHEUS_PATH).await? {
                Reply::Body(body) => return self.prometheus(&body),
                // Found out again below.
                Reply::NotFound => *api = None,
            }
        }
        match self.get(ALERTMANAGER_PATH).await? {
            Reply::Body(body) if !looks_like_prometheus(&body) => {
                let alerts = self.alertmanager(&body)?;
                *api = Some(Api::Alertmanager);
                Ok(alerts)
            }
            Reply::Body(_) | Reply::NotFound => match self.get(PROMETHEUS_PATH).await? {
                Reply::Body(body) => {
                    let alerts = self.prometheus(&body)?;
                    *api = Some(Api::Prometheus);
                    Ok(alerts)
                }
                Reply::NotFound => {
                    *api = None;
                    Err(format!(
                        "{} is neither an Alertmanager nor a Prometheus: both {} and {} answered 404 Not Found",
                        shown(self.base),
                        path_of(ALERTMANAGER_PATH),
                        PROMETHEUS_PATH
                    ))
                }
            },
        }
    }

    /// `GET {base}{path}`: the body of a success, or 404, or an error naming the URL.
    async fn get(&self, path: &str) -> Result<Reply, String> {
        let base = self.base.trim_end_matches('/');
        let shown_url = format!("{}{}", shown(base), path_of(path));
        let url = reqwest::Url::parse(&format!("{base}{path}"))
            .map_err(|e| format!("{} is not a URL that can be asked: {e}", shown(base)))?;
        let timeout = self.timeout;
        let read = async {
            let mut request = self
                .http
                .get(url)
                .header(http::header::ACCEPT, "application/json");
            if let Some(credentials) = self.credentials {
                request = credentials.apply(request);
            }
            let mut response = request
                .send()
                .await
                .map_err(|e| request_error(&shown_url, e, timeout))?;
            let status = response.status();
            if status == http::StatusCode::NOT_FOUND {
                return Ok(Reply::NotFound);
            }
            if status.is_redirection() {
                let to = response
                    .headers()
                    .get(http::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .map(|l| format!(" to {}", shown(l)))
                    .unwrap_or_default();
                return Err(format!(
                    "{shown_url} answered {status}, a redirect{to}; redirects are not followed: set spec.health.alerts.url to where it leads"
                ));
            }
            if !status.is_success() {
                return Err(format!("{shown_url} answered {status}"));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| request_error(&shown_url, e, timeout))?
            {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(format!(
                        "{shown_url} answered more than {} MiB",
                        MAX_BODY >> 20
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Reply::Body(body))
        };
        // The client's timeout covers the request; this one also covers a slow body.
        tokio::time::timeout(timeout, read)
            .await
            .unwrap_or_else(|_| Err(format!("{shown_url} did not answer within {timeout:?}")))
    }

    fn alertmanager(&self, body: &[u8]) -> Result<Vec<Labels>, String> {
        let alerts: Vec<AmAlert> = serde_json::from_slice(body).map_err(|e| {
            format!(
                "{}{} answered what is not Alertmanager's list of alerts: {e}",
                shown(self.base.trim_end_matches('/')),
                path_of(ALERTMANAGER_PATH)
            )
        })?;
        Ok(alerts
            .into_iter()
            .filter(|a| a.status.as_ref().is_none_or(|s| s.state != "suppressed"))
            .map(|a| a.labels)
            .collect())
    }

    fn prometheus(&self, body: &[u8]) -> Result<Vec<Labels>, String> {
        let url = format!(
            "{}{PROMETHEUS_PATH}",
            shown(self.base.trim_end_matches('/'))
        );
        let answer: PromAnswer = serde_json::from_slice(body).map_err(|e| {
            format!("{url} answered what is not Prometheus's answer with alerts: {e}")
        })?;
        if answer.status != "success" {
            return Err(format!(
                "{url} answered status {:?}: {}",
                answer.status,
                answer.error.as_deref().unwrap_or("no error given")
            ));
        }
        let Some(data) = answer.data else {
            return Err(format!("{url} answered no data"));
        };
        Ok(data
            .alerts
            .into_iter()
            .filter(|a| a.state == "firing")
            .map(|a| a.labels)
            .collect())
    }
}

/// Whether a body is Prometheus's envelope (an object with `status`) rather than
/// Alertmanager's array.
fn looks_like_prometheus(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body)
        .is_ok_and(|o| o.contains_key("status"))
}

/// A path without its query.
fn path_of(path: &str) -> &str {
    path.split_once('?').map_or(path, |(p, _)| p)
}

/// Why a request failed, naming the URL (as shown) and the cause.
fn request_error(url: &str, e: reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("{url} did not answer within {timeout:?}");
    }
    // The error's own URL would bring back a query the shown one leaves out.
    let e = e.without_url();
    let cause = error_chain(&e);
    if e.is_connect() {
        format!("cannot connect to {url}: {cause}")
    } else {
        format!("cannot ask {url}: {cause}")
    }
}

/// The innermost causes of an error, which say the most, on one line (the outer ones
/// repeat the URL).
fn error_chain(e: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    if causes.is_empty() {
        e.to_string()
    } else {
        causes.join(": ")
    }
}
