//! The controller's configuration, from flags and environment, checked once at start.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use bootc_crds::selector::{check_dns_label, check_dns_subdomain};
pub use bootc_pool_common::logging::LogFormat;
use bootc_pool_controller::secrets::SecretNamespaces;
use clap::Parser;

/// Command line of `bootc-pool-controller`.
#[derive(Debug, Parser)]
#[command(
    name = "bootc-pool-controller",
    version,
    about = "Resolves each BootcNodePool's image to a digest and decides which nodes may reboot, cordoning and draining them first."
)]
pub struct Args {
    /// Kubeconfig to use; without it, the in-cluster service account (or the usual
    /// kubeconfig inference) is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the /metrics, /healthz and /readyz endpoints.
    #[arg(long, env = "BOOTC_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// A registry (host[:port]) reached over plain HTTP or with an unverified certificate.
    /// Repeat the flag or separate with commas. Never the default for any registry.
    #[arg(
        long = "insecure-registry",
        env = "BOOTC_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,

    /// Name of the coordination.k8s.io Lease used for leader election.
    #[arg(
        long,
        env = "BOOTC_LEASE_NAME",
        default_value = "bootc-pool-controller"
    )]
    pub lease_name: String,

    /// Namespace of the Lease (the controller's own namespace in a cluster).
    #[arg(long, env = "POD_NAMESPACE", default_value = "bootc-system")]
    pub lease_namespace: String,

    /// The install's namespace, where the controller keeps its copy of each pool's pull
    /// Secret (the only Secrets the agents may read). Default: the Lease's namespace.
    #[arg(long, env = "BOOTC_INSTALL_NAMESPACE")]
    pub install_namespace: Option<String>,

    /// The namespaces the controller may read pools' pull Secrets (and webhook Secrets)
    /// in; each needs a Role granting the controller get, list and watch on secrets there.
    /// Repeat the flag or separate with commas. Default: the install's namespace.
    #[arg(
        long = "pull-secret-namespaces",
        env = "BOOTC_PULL_SECRET_NAMESPACES",
        value_delimiter = ','
    )]
    pub pull_secret_namespaces: Vec<String>,

    /// This replica's identity in the Lease (the pod name in a cluster).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Log format.
    #[arg(long, env = "BOOTC_LOG_FORMAT", value_enum, default_value = "json")]
    pub log_format: LogFormat,

    /// At most this many API requests sent and not yet answered; more wait their turn.
    /// The API client holds a connection per request in flight, so this bounds the
    /// connections and their buffers when many pools act at once. A watch counts only
    /// until its stream starts. The Lease is renewed over connections of its own.
    #[arg(long, env = "BOOTC_API_MAX_IN_FLIGHT", default_value = "32")]
    pub api_max_in_flight: NonZeroUsize,

    /// Threads that run the controller's work (1 to 64; default: one per core). One
    /// spares a controller of a single pool the wake-ups between threads (a quarter to a
    /// third less CPU); with many pools, several threads keep their reconciles apart.
    #[arg(
        long,
        env = "BOOTC_WORKER_THREADS",
        value_parser = clap::value_parser!(u16).range(1..=MAX_WORKER_THREADS)
    )]
    pub worker_threads: Option<u16>,
}

/// The most threads `--worker-threads` accepts.
const MAX_WORKER_THREADS: i64 = 64;

/// The checked configuration the controller runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// See [`Args::kubeconfig`].
    pub kubeconfig: Option<PathBuf>,
    /// See [`Args::metrics_addr`].
    pub metrics_addr: SocketAddr,
    /// See [`Args::insecure_registries`]; empty entries dropped.
    pub insecure_registries: Vec<String>,
    /// See [`Args::lease_name`].
    pub lease_name: String,
    /// See [`Args::lease_namespace`].
    pub lease_namespace: String,
    /// See [`Args::install_namespace`] and [`Args::pull_secret_namespaces`].
    pub secrets: SecretNamespaces,
    /// See [`Args::identity`].
    pub identity: Option<String>,
    /// See [`Args::log_format`].
    pub log_format: LogFormat,
    /// See [`Args::api_max_in_flight`].
    pub api_max_in_flight: NonZeroUsize,
    /// See [`Args::worker_threads`]; `None`: one per core.
    pub worker_threads: Option<NonZeroUsize>,
}

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `--insecure-registry` is not `host[:port]`.
    #[error(
        "--insecure-registry {0:?} must be a registry host with an optional port, e.g. 127.0.0.1:5000"
    )]
    InsecureRegistry(String),
    /// `--lease-name` is not an object name.
    #[error("--lease-name {name:?} {message}")]
    LeaseName {
        /// The value given.
        name: String,
        /// Why it is refused.
        message: String,
    },
    /// `--lease-namespace` is not a namespace name.
    #[error("--lease-namespace {name:?} {message}")]
    LeaseNamespace {
        /// The value given.
        name: String,
        /// Why it is refused.
        message: String,
    },
    /// A namespace of `--install-namespace` or `--pull-secret-namespaces` is not a
    /// namespace name.
    #[error("{flag} {name:?} {message}")]
    Namespace {
        /// The flag.
        flag: &'static str,
        /// The value given.
        name: String,
        /// Why it is refused.
        message: String,
    },
}

/// Checks `name` as a namespace of `flag`.
fn namespace(flag: &'static str, name: &str) -> Result<String, ConfigError> {
    check_dns_label(name).map_err(|message| ConfigError::Namespace {
        flag,
        name: name.to_owned(),
        message,
    })?;
    Ok(name.to_owned())
}

/// The install's namespace and the namespaces sources may be read in.
fn secret_namespaces(args: &Args) -> Result<SecretNamespaces, ConfigError> {
    let install = args
        .install_namespace
        .as_deref()
        .unwrap_or(&args.lease_namespace);
    let install = namespace("--install-namespace", install)?;
    let allowed = args
        .pull_secret_namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| namespace("--pull-secret-namespaces", n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SecretNamespaces::new(&install, allowed))
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(args: Args) -> Result<Self, Self::Error> {
        let mut insecure_registries = Vec::new();
        for registry in args.insecure_registries.iter().map(|r| r.trim()) {
            if registry.is_empty() {
                continue;
            }
            // A registry is valid when `registry/x` parses with exactly that registry.
            let probe = bootc_crds::ImageRef::parse(&format!("{registry}/x"));
            if probe.as_ref().map(|r| r.registry()) != Ok(registry) {
                return Err(ConfigError::InsecureRegistry(registry.to_string()));
            }
            insecure_registries.push(registry.to_string());
        }
        check_dns_subdomain(&args.lease_name).map_err(|message| ConfigError::LeaseName {
            name: args.lease_name.clone(),
            message,
        })?;
        check_dns_label(&args.lease_namespace).map_err(|message| ConfigError::LeaseNamespace {
            name: args.lease_namespace.clone(),
            message,
        })?;
        let secrets = secret_namespaces(&args)?;
        let worker_threads = args
            .worker_threads
            .and_then(|n| NonZeroUsize::new(usize::from(n)));
        Ok(Config {
            worker_threads,
            secrets,
            kubeconfig: args.kubeconfig,
            metrics_addr: args.metrics_addr,
            insecure_registries,
            lease_name: args.lease_name,
            lease_namespace: args.lease_namespace,
            identity: args.identity,
            log_format: args.log_format,
            api_max_in_flight: args.api_max_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let args = Args::try_parse_from(
            std::iter::once("bootc-pool-controller").chain(args.iter().copied()),
        )
        .map_err(|e| e.to_string())?;
        Config::try_from(args).map_err(|e| e.to_string())
    }

    #[test]
    fn command_line_is_well_formed() {
        Args::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.metrics_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.lease_name, "bootc-pool-controller");
        assert!(c.insecure_registries.is_empty());
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.api_max_in_flight.get(), 32);
        assert_eq!(c.worker_threads, None, "one per core");
        assert_eq!(c.secrets, SecretNamespaces::new(&c.lease_namespace, []));
    }

    #[test]
    fn secrets_are_read_in_the_install_namespace_unless_others_are_allowed() {
        let c = parse(&["--lease-namespace", "ops"]).unwrap();
        assert_eq!(c.secrets.install, "ops");
        assert_eq!(c.secrets.allowed, ["ops".to_owned()].into());
        let c = parse(&[
            "--install-namespace",
            "bootc",
            "--pull-secret-namespaces",
            "bootc, registry-creds",
        ])
        .unwrap();
        assert_eq!(c.secrets.install, "bootc");
        assert!(c.secrets.allows("registry-creds") && c.secrets.allows("bootc"));
        assert!(!c.secrets.allows("default"));
        for bad in [
            ["--install-namespace", "Not_A_Namespace"],
            ["--pull-secret-namespaces", "ok,a.b"],
        ] {
            let err = parse(&bad).unwrap_err();
            assert!(err.starts_with(bad[0]), "{err}");
        }
    }

    #[test]
    fn insecure_registries_are_checked() {
        let c = parse(&[
            "--insecure-registry",
            "127.0.0.1:5000,localhost",
            "--insecure-registry",
            "[::1]:5000",
        ])
        .unwrap();
        assert_eq!(
            c.insecure_registries,
            ["127.0.0.1:5000", "localhost", "[::1]:5000"]
        );
        for bad in [
            "quay.io/x",
            "-x",
            "a b",
            "host:99999",
            "http://127.0.0.1:5000",
        ] {
            let err = parse(&[&format!("--insecure-registry={bad}")]).unwrap_err();
            assert!(err.contains("--insecure-registry"), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_named() {
        assert!(
            parse(&["--lease-name", "Bad Name"])
                .unwrap_err()
                .starts_with("--lease-name")
        );
        assert!(
            parse(&["--lease-namespace", "a.b"])
                .unwrap_err()
                .starts_with("--lease-namespace")
        );
        assert!(
            parse(&["--metrics-addr", "nope"])
                .unwrap_err()
                .contains("--metrics-addr")
        );
        assert!(
            parse(&["--log-format", "xml"])
                .unwrap_err()
                .contains("--log-format")
        );
        for bad in ["0", "-1", "many"] {
            let err = parse(&[&format!("--api-max-in-flight={bad}")]).unwrap_err();
            assert!(err.contains("--api-max-in-flight"), "{bad}: {err}");
        }
        let c = parse(&["--api-max-in-flight", "8"]).unwrap();
        assert_eq!(c.api_max_in_flight.get(), 8);
        for bad in ["0", "65", "-1", "two"] {
            let err = parse(&[&format!("--worker-threads={bad}")]).unwrap_err();
            assert!(err.contains("--worker-threads"), "{bad}: {err}");
        }
        for good in [1, 2, 64] {
            let c = parse(&[&format!("--worker-threads={good}")]).unwrap();
            assert_eq!(c.worker_threads.map(NonZeroUsize::get), Some(good));
        }
    }
}
