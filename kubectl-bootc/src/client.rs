//! The API client, found as kubectl finds its cluster: `--kubeconfig`, else the files in
//! `KUBECONFIG` (merged), else `~/.kube/config`, else the in-cluster service account;
//! `--context` picks a context.

use std::path::{Path, PathBuf};

use bootc_pool_common::error_chain;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{CliError, Result};

/// The User-Agent of every request.
pub const USER_AGENT: &str = concat!("kubectl-bootc/", env!("CARGO_PKG_VERSION"));

/// Where the cluster is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
}

/// `~/.kube/config`, when `HOME` is set.
fn default_path() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".kube").join("config"))
}

/// The kubeconfig to use, or `None` for the in-cluster account.
fn kubeconfig(target: &Target) -> Result<Option<Kubeconfig>> {
    if let Some(path) = &target.kubeconfig {
        return Kubeconfig::read_from(path).map(Some).map_err(|e| {
            CliError::msg(format!(
                "kubeconfig {}: {}",
                path.display(),
                error_chain(&e)
            ))
        });
    }
    let from_env = Kubeconfig::from_env()
        .map_err(|e| CliError::msg(format!("KUBECONFIG: {}", error_chain(&e))))?;
    if from_env.is_some() {
        return Ok(from_env);
    }
    match default_path() {
        Some(path) if path.exists() => Kubeconfig::read_from(&path).map(Some).map_err(|e| {
            CliError::msg(format!(
                "kubeconfig {}: {}",
                path.display(),
                error_chain(&e)
            ))
        }),
        _ => Ok(None),
    }
}

/// The client configuration for `target`.
pub async fn config(target: &Target) -> Result<Config> {
    let mut config = match kubeconfig(target)? {
        Some(file) => {
            let options = KubeConfigOptions {
                context: target.context.clone(),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| CliError::msg(format!("kubeconfig: {}", error_chain(&e))))?
        }
        None => Config::incluster().map_err(|e| {
            CliError::msg(format!(
                "no kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config) and not running in a cluster: {}",
                error_chain(&e)
            ))
        })?,
    };
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

/// The client for `target`.
pub async fn client(target: &Target) -> Result<Client> {
    let config = config(target).await?;
    Client::try_from(config)
        .map_err(|e| CliError::msg(format!("cannot build the API client: {}", error_chain(&e))))
}
