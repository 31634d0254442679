//! Logging of both binaries: to standard error, as text or JSON lines, filtered by
//! `RUST_LOG` (default `info`).

use clap::ValueEnum;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (for clusters).
    Json,
    /// Human-readable lines.
    Text,
}

/// Installs the global subscriber: `format` lines on standard error, filtered by
/// `RUST_LOG`, or at `info` when it is unset or invalid. Call once, at start.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
