//! The API client of both binaries: from a kubeconfig file when one is given, else the
//! in-cluster service account, with the binary's own User-Agent.

use std::num::NonZeroUsize;
use std::path::Path;

use crate::error::error_chain;

/// How to build the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions<'a> {
    /// The kubeconfig file (`--kubeconfig`); `None` for the in-cluster service account.
    pub kubeconfig: Option<&'a Path>,
    /// The User-Agent of every request.
    pub user_agent: &'static str,
    /// Whether the client itself retries transient answers (429, 503, 504). A caller
    /// that must see a 429 at once (an eviction refused by a disruption budget) retries
    /// with its own backoff instead.
    pub retry_transient: bool,
    /// At most this many requests sent and not yet answered (their headers, so a
    /// watch's stream does not hold one). The client speaks HTTP/1.1, one request per
    /// connection at a time: without a bound, a burst of concurrent requests opens as
    /// many connections, and their buffers stay until the idle ones close. `None`: no
    /// bound (the agent sends a request or two at a time).
    pub max_in_flight: Option<NonZeroUsize>,
}

/// Builds the client; the error is one line naming the file or the missing cluster, for
/// the binary to log before it exits.
pub async fn client(options: ClientOptions<'_>) -> Result<kube::Client, String> {
    let mut config = match options.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                format!(
                    "cannot read kubeconfig {}: {}",
                    path.display(),
                    error_chain(&e)
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {}", path.display(), error_chain(&e)))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("no --kubeconfig and not in a cluster: {}", error_chain(&e)))?,
    };
    // A plain-HTTP API server needs no TLS, so no trust store: give the client an empty
    // one rather than let it load the system's, which a host without a CA bundle lacks
    // (the client would refuse to start: "No CA certificates were loaded from the
    // system"). HTTPS keeps the kubeconfig's authority, or the system's when it has none.
    if config.cluster_url.scheme_str() == Some("http") && config.root_cert.is_none() {
        config.root_cert = Some(Vec::new());
    }
    config.default_retry = options.retry_transient;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(options.user_agent),
    ));
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| format!("cannot build the API client: {}", error_chain(&e)))?;
    Ok(match options.max_in_flight {
        Some(n) => builder
            .with_layer(&tower::limit::ConcurrencyLimitLayer::new(n.get()))
            .build(),
        None => builder.build(),
    })
}

#[cfg(test)]
mod tests;
