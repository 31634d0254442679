//! The agent's configuration, from flags and environment, checked once at start.

use std::path::PathBuf;
use std::time::Duration;

use bootc_crds::selector::check_dns_subdomain;
use bootc_pool_common::logging::LogFormat;
use clap::Parser;

/// The host's system bus, as the DaemonSet mounts it.
pub const DEFAULT_SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// Command line of `bootc-node-agent`.
#[derive(Debug, Parser)]
#[command(
    name = "bootc-node-agent",
    version,
    about = "Stages the image its node's BootcNode asks for with bootc, reboots when the controller allows it, and reports what the host booted."
)]
pub struct Args {
    /// Name of this node; the agent reads and writes only the BootcNode of this name.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// Exit 0 when the agent running beside this command has reported its node's
    /// status (its readiness marker in the work directory, under the host root, names a
    /// live process), 1 otherwise: the DaemonSet's readiness probe.
    #[arg(long)]
    pub check_ready: bool,

    /// Kubeconfig to use (host service); without it, the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// D-Bus address of the host's system bus.
    #[arg(long, env = "BOOTC_SYSTEM_BUS_ADDRESS", default_value = DEFAULT_SYSTEM_BUS)]
    pub system_bus_address: String,

    /// Host directory (absolute, as the host sees it) where command output is kept.
    #[arg(
        long,
        env = "BOOTC_AGENT_WORK_DIR",
        default_value = "/var/lib/bootc-node-agent"
    )]
    pub host_work_dir: PathBuf,

    /// How often bootc status is read when no change is signalled: seconds, or a number
    /// with s, m or h ("300", "90s", "5m", "1h").
    #[arg(long, env = "BOOTC_STATUS_POLL_INTERVAL", default_value = "5m", value_parser = parse_interval)]
    pub status_poll_interval: Duration,

    /// Where the agent sees the host's root file system: the work directory and
    /// /run/ostree/auth.json are reached under it. The DaemonSet mounts those host
    /// directories at their own paths, so the default is /.
    #[arg(long, env = "BOOTC_HOST_ROOT", default_value = "/")]
    pub host_root: PathBuf,

    /// How long one bootc command may run before it is stopped (same forms as the poll
    /// interval).
    #[arg(long, env = "BOOTC_COMMAND_TIMEOUT", default_value = "1h", value_parser = parse_interval)]
    pub command_timeout: Duration,

    /// Log format: text or json.
    #[arg(long, env = "BOOTC_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// The checked configuration the agent runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// See [`Args::node_name`].
    pub node_name: String,
    /// See [`Args::kubeconfig`].
    pub kubeconfig: Option<PathBuf>,
    /// See [`Args::system_bus_address`].
    pub system_bus_address: String,
    /// See [`Args::host_work_dir`].
    pub host_work_dir: PathBuf,
    /// See [`Args::status_poll_interval`].
    pub status_poll_interval: Duration,
    /// See [`Args::host_root`].
    pub host_root: PathBuf,
    /// See [`Args::command_timeout`].
    pub command_timeout: Duration,
    /// See [`Args::log_format`].
    pub log_format: LogFormat,
}

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// No node name was given.
    #[error("the node's name is required: --node-name or NODE_NAME")]
    NoNodeName,
    /// `NODE_NAME` is not a node name.
    #[error("NODE_NAME {name:?} {message}")]
    NodeName {
        /// The value given.
        name: String,
        /// Why it is refused.
        message: String,
    },
    /// The bus address is not a unix socket address.
    #[error(
        "--system-bus-address {0:?} must be a unix socket address such as {DEFAULT_SYSTEM_BUS}"
    )]
    BusAddress(String),
    /// The work directory is relative or has `..`.
    #[error("--host-work-dir {0:?} must be an absolute path without '..'")]
    WorkDir(PathBuf),
    /// The host root is relative or has `..`.
    #[error("--host-root {0:?} must be an absolute path without '..'")]
    HostRoot(PathBuf),
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(args: Args) -> Result<Self, Self::Error> {
        let node_name = args.node_name.ok_or(ConfigError::NoNodeName)?;
        check_dns_subdomain(&node_name).map_err(|message| ConfigError::NodeName {
            name: node_name.clone(),
            message,
        })?;
        let socket = args.system_bus_address.strip_prefix("unix:path=");
        if socket.is_none_or(|p| !p.starts_with('/') || p.contains(',')) {
            return Err(ConfigError::BusAddress(args.system_bus_address));
        }
        let plain = |dir: &PathBuf| {
            dir.is_absolute()
                && !dir
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
        };
        if !plain(&args.host_work_dir) {
            return Err(ConfigError::WorkDir(args.host_work_dir));
        }
        if !plain(&args.host_root) {
            return Err(ConfigError::HostRoot(args.host_root));
        }
        Ok(Config {
            node_name,
            kubeconfig: args.kubeconfig,
            system_bus_address: args.system_bus_address,
            host_work_dir: args.host_work_dir,
            status_poll_interval: args.status_poll_interval,
            host_root: args.host_root,
            command_timeout: args.command_timeout,
            log_format: if args.log_format == "json" {
                LogFormat::Json
            } else {
                LogFormat::Text
            },
        })
    }
}

/// Parses "300", "90s", "5m" or "1h" into a duration from 1 second to 24 hours.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not an interval such as 300, 90s, 5m or 1h");
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60).ok_or_else(bad)?,
        "h" => n.checked_mul(3600).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    if !(1..=86_400).contains(&secs) {
        return Err(format!("{s:?} is out of range: use 1s to 24h"));
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let args =
            Args::try_parse_from(std::iter::once("bootc-node-agent").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        Config::try_from(args).map_err(|e| e.to_string())
    }

    #[test]
    fn command_line_is_well_formed() {
        Args::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let c = parse(&["--node-name", "worker-1"]).unwrap();
        assert_eq!(c.system_bus_address, DEFAULT_SYSTEM_BUS);
        assert_eq!(c.status_poll_interval, Duration::from_secs(300));
        assert_eq!(c.host_work_dir, PathBuf::from("/var/lib/bootc-node-agent"));
        assert_eq!(c.kubeconfig, None);
        assert_eq!(c.host_root, PathBuf::from("/"));
        assert_eq!(c.command_timeout, Duration::from_secs(3600));
    }

    #[test]
    fn node_name_is_required_and_checked() {
        // The flag is also read from NODE_NAME; only run the "missing" check when the
        // test's own environment does not set it.
        if std::env::var_os("NODE_NAME").is_none() {
            assert!(parse(&[]).unwrap_err().contains("--node-name"));
        }
        assert!(
            parse(&["--node-name", "Worker_1"])
                .unwrap_err()
                .starts_with("NODE_NAME")
        );
        assert!(parse(&["--node-name", "-x"]).is_err());
    }

    #[test]
    fn intervals() {
        for (s, secs) in [
            ("300", 300),
            ("90s", 90),
            ("5m", 300),
            ("1h", 3600),
            ("24h", 86_400),
        ] {
            assert_eq!(parse_interval(s), Ok(Duration::from_secs(secs)), "{s}");
        }
        for bad in [
            "",
            "0",
            "0s",
            "25h",
            "5d",
            "1.5m",
            "-1",
            "m",
            "99999999999999999999h",
        ] {
            assert!(parse_interval(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn host_paths_are_checked() {
        let base = ["--node-name", "n"];
        let with = |extra: &[&str]| parse(&[&base[..], extra].concat());
        assert!(
            with(&["--system-bus-address", "tcp:host=x"])
                .unwrap_err()
                .contains("--system-bus-address")
        );
        assert!(with(&["--system-bus-address", "unix:path=relative"]).is_err());
        assert!(
            with(&["--host-work-dir", "relative"])
                .unwrap_err()
                .contains("--host-work-dir")
        );
        assert!(with(&["--host-work-dir", "/var/../etc"]).is_err());
        assert!(
            with(&["--host-root", "proc/1/root"])
                .unwrap_err()
                .contains("--host-root")
        );
        assert_eq!(
            with(&["--command-timeout", "90s"]).unwrap().command_timeout,
            Duration::from_secs(90)
        );
        assert_eq!(
            with(&["--status-poll-interval", "30s"])
                .unwrap()
                .status_poll_interval,
            Duration::from_secs(30)
        );
    }
}
