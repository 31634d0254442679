//! The API client of both binaries: from a kubeconfig file when one is given, else the
//! in-cluster service account, with the binary's own User-Agent.

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
    kube::Client::try_from(config)
        .map_err(|e| format!("cannot build the API client: {}", error_chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(kubeconfig: Option<&Path>) -> ClientOptions<'_> {
        ClientOptions {
            kubeconfig,
            user_agent: "test/0",
            retry_transient: false,
        }
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent");
        let Err(err) = client(options(Some(&path))).await else {
            panic!("a client from a missing file");
        };
        assert!(err.starts_with("cannot read kubeconfig "), "{err}");
        assert!(err.contains("absent"), "{err}");
    }

    #[tokio::test]
    async fn a_kubeconfig_file_gives_a_client() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
        )
        .unwrap();
        assert!(client(options(Some(&path))).await.is_ok());
    }
}
