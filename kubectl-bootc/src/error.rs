//! The one error type of the plugin: a message for stderr, after `error: `.

use std::fmt;

use bootc_pool_common::error_chain;

/// What went wrong, worded for the person at the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(String);

/// The plugin's result.
pub type Result<T> = std::result::Result<T, CliError>;

impl CliError {
    /// An error with this message.
    pub fn msg(message: impl Into<String>) -> Self {
        CliError(message.into())
    }

    /// A failed API call: the API server's own message when it answered (`nodes "x" not
    /// found`), else what `what` was and why it failed.
    pub fn api(what: &str, error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if !status.message.is_empty() => {
                CliError(status.message.clone())
            }
            _ => CliError(format!("{what}: {}", error_chain(&error))),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}
