//! One registry exchange over HTTP: the requests of one resolution to one repository,
//! the credentials a registry asks for (a 401's `WWW-Authenticate` challenge: `Bearer`,
//! with a token from the service it names, or `Basic`), and every answer read up to a
//! cap, so that a registry sending without end cannot make the controller hold more
//! than the cap.

use std::collections::HashMap;
use std::time::Duration;

use http::header::{ACCEPT, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, StatusCode};
use serde::Deserialize;

use super::error::{FailureContext, answered, error_chain, request_failed};
use super::{Credentials, ResolveError};

/// The largest token answer read.
pub(super) const MAX_TOKEN: usize = 1 << 20;
/// The most of an error answer read (what is past it is not needed to tell the error).
const MAX_ERROR_BODY: usize = 64 << 10;

/// The HTTP client of every registry exchange, each step of it bounded by `timeout`.
/// Redirects are followed (registries send blobs from elsewhere); the credentials are
/// not sent to another host.
pub(super) fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    crate::shared::http_client()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build the registry client: {}", error_chain(&e)))
}

/// How a registry is to be asked, once it has said.
enum Authorization {
    Basic,
    Bearer(String),
}

/// A 200 OK: its headers and body.
pub(super) struct Answer {
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

/// The requests of one resolution to one repository.
pub(super) struct Session<'a> {
    http: &'a reqwest::Client,
    ctx: &'a FailureContext<'a>,
    credentials: Option<&'a Credentials>,
    /// `scheme://host[:port]/v2/repository`.
    base: String,
    authorization: Option<Authorization>,
    /// Whether a challenge was answered already (a second 401 is a refusal).
    challenged: bool,
}

/// The token service's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

impl<'a> Session<'a> {
    pub(super) fn new(
        http: &'a reqwest::Client,
        ctx: &'a FailureContext<'a>,
        credentials: Option<&'a Credentials>,
    ) -> Self {
        let reference = ctx.reference;
        let scheme = if ctx.insecure { "http" } else { "https" };
        let host = match reference.registry() {
            // The registry API of Docker Hub is served there.
            bootc_crds::image_ref::DEFAULT_REGISTRY => "index.docker.io",
            other => other,
        };
        Session {
            http,
            ctx,
            credentials,
            base: format!("{scheme}://{host}/v2/{}", reference.repository()),
            authorization: None,
            challenged: false,
        }
    }

    /// An error of the exchange that is none of the registry's answers.
    pub(super) fn other(&self, detail: String) -> ResolveError {
        self.ctx.other(detail)
    }

    /// `HEAD {base}/{path}`: the headers of a 200 OK, `None` for any other answer.
    pub(super) async fn head(
        &mut self,
        path: &str,
        accept: &str,
    ) -> Result<Option<HeaderMap>, ResolveError> {
        let response = self.send(Method::HEAD, path, accept).await?;
        Ok((response.status() == StatusCode::OK).then(|| response.headers().clone()))
    }

    /// `GET {base}/{path}`: a 200 OK with its body, which fails when it is longer than
    /// `max` (naming `what` and the cap); any other answer is the error it means.
    pub(super) async fn get(
        &mut self,
        path: &str,
        accept: &str,
        max: usize,
        what: &str,
    ) -> Result<Answer, ResolveError> {
        let response = self.send(Method::GET, path, accept).await?;
        let status = response.status();
        let headers = response.headers().clone();
        if status != StatusCode::OK {
            let (body, _) = read(response, MAX_ERROR_BODY).await.unwrap_or_default();
            return Err(answered(status.as_u16(), &body, self.ctx));
        }
        let body = self.read_whole(response, max, what).await?;
        Ok(Answer { headers, body })
    }

    /// `method` on `{base}/{path}`, answering a 401's challenge once.
    async fn send(
        &mut self,
        method: Method,
        path: &str,
        accept: &str,
    ) -> Result<reqwest::Response, ResolveError> {
        let url = format!("{}/{path}", self.base);
        let response = self.request(method.clone(), &url, accept).await?;
        if response.status() == StatusCode::UNAUTHORIZED
            && !self.challenged
            && self.answer_challenge(response.headers()).await?
        {
            return self.request(method, &url, accept).await;
        }
        Ok(response)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        accept: &str,
    ) -> Result<reqwest::Response, ResolveError> {
        let mut request = self.http.request(method, url);
        if !accept.is_empty() {
            request = request.header(ACCEPT, accept);
        }
        request = match (&self.authorization, self.credentials) {
            (Some(Authorization::Bearer(token)), _) => request.bearer_auth(token),
            (Some(Authorization::Basic), Some(c)) => {
                request.basic_auth(c.username(), Some(c.password()))
            }
            _ => request,
        };
        request
            .send()
            .await
            .map_err(|e| request_failed(&e, self.ctx))
    }

    /// The body of a success, whole, or an error when it is longer than `max`.
    async fn read_whole(
        &self,
        response: reqwest::Response,
        max: usize,
        what: &str,
    ) -> Result<Vec<u8>, ResolveError> {
        let (body, whole) = read(response, max)
            .await
            .map_err(|e| request_failed(&e, self.ctx))?;
        if whole {
            Ok(body)
        } else {
            Err(self.ctx.other(format!(
                "the registry answered {what} larger than {}, more than is read",
                size(max)
            )))
        }
    }

    /// Takes up the challenge of a 401: whether asking again may be let in.
    async fn answer_challenge(&mut self, headers: &HeaderMap) -> Result<bool, ResolveError> {
        self.challenged = true;
        let Some(challenge) = headers.get(WWW_AUTHENTICATE).and_then(|h| h.to_str().ok()) else {
            return Ok(false);
        };
        let (scheme, params) = challenge
            .trim()
            .split_once(' ')
            .unwrap_or((challenge.trim(), ""));
        if scheme.eq_ignore_ascii_case("basic") {
            self.authorization = self.credentials.map(|_| Authorization::Basic);
            return Ok(self.authorization.is_some());
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(false);
        }
        let params = challenge_params(params);
        let Some(realm) = params.get("realm") else {
            return Ok(false);
        };
        let token = self.token(realm, params.get("service")).await?;
        self.authorization = Some(Authorization::Bearer(token));
        Ok(true)
    }

    /// A pull token for the repository from the token service at `realm`, with the
    /// credentials when there are some.
    async fn token(&self, realm: &str, service: Option<&String>) -> Result<String, ResolveError> {
        let ctx = self.ctx;
        let mut url = reqwest::Url::parse(realm)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                ctx.other("the registry named a token service that is no http(s) URL".to_owned())
            })?;
        let scope = format!("repository:{}:pull", ctx.reference.repository());
        url.query_pairs_mut().append_pair("scope", &scope);
        if let Some(service) = service {
            url.query_pairs_mut().append_pair("service", service);
        }
        let mut request = self.http.get(url);
        if let Some(c) = self.credentials {
            request = request.basic_auth(c.username(), Some(c.password()));
        }
        let response = request.send().await.map_err(|e| request_failed(&e, ctx))?;
        let status = response.status();
        if !status.is_success() {
            return Err(match status.as_u16() {
                429 => ctx.rate_limited(),
                s if s >= 500 => {
                    ctx.other(format!("the registry's token service answered {status}"))
                }
                _ => ctx.unauthorized(),
            });
        }
        let body = self.read_whole(response, MAX_TOKEN, "a token").await?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|e| {
            ctx.other(format!(
                "the registry's token service answered what is no token: {e}"
            ))
        })?;
        answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ctx.other("the registry's token service answered no token".to_owned()))
    }
}

/// At most `max` bytes of a body, and whether that is all of it. A body announced longer
/// is not read at all.
async fn read(
    mut response: reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Ok((Vec::new(), false));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            let room = max - body.len();
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// The parameters of a challenge, `key="value", key=token`, by lowercase key.
pub(super) fn challenge_params(text: &str) -> HashMap<String, String> {
    let mut params = HashMap::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        let Some((key, after)) = rest.split_once('=') else {
            return params;
        };
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut end = quoted.len();
                let mut chars = quoted.char_indices();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next().map(|(_, c)| c)),
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_owned(), &after[end..])
            }
        };
        params.insert(key.trim().to_ascii_lowercase(), value);
        rest = next;
    }
}

/// A cap as people read it: `4 MiB`, `64 KiB`.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}
