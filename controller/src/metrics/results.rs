//! The closed label values of tag resolutions and drains.

use crate::drain::DrainOutcome;

/// How a tag resolution ended (`result` label of `bootc_pool_tag_resolutions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TagResult {
    /// The tag resolved to a digest.
    Success,
    /// The registry answered 401 or 403.
    Unauthorized,
    /// The registry answered 404.
    NotFound,
    /// The registry answered 429.
    RateLimited,
    /// The request timed out.
    Timeout,
    /// The registry could not be reached (DNS, TCP, TLS).
    Connection,
    /// Anything else.
    Other,
}

impl TagResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            TagResult::Success => "success",
            TagResult::Unauthorized => "unauthorized",
            TagResult::NotFound => "not_found",
            TagResult::RateLimited => "rate_limited",
            TagResult::Timeout => "timeout",
            TagResult::Connection => "connection",
            TagResult::Other => "other",
        }
    }
}

/// How a drain ended (`outcome` label of `bootc_pool_drain_duration_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrainResult {
    /// Every pod that had to go is gone.
    Drained,
    /// The drain timeout passed first.
    TimedOut,
    /// The drain was cancelled.
    Cancelled,
}

impl DrainResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DrainResult::Drained => "drained",
            DrainResult::TimedOut => "timed_out",
            DrainResult::Cancelled => "cancelled",
        }
    }
}

impl From<&DrainOutcome> for DrainResult {
    fn from(outcome: &DrainOutcome) -> Self {
        match outcome {
            DrainOutcome::Drained { .. } => DrainResult::Drained,
            DrainOutcome::TimedOut { .. } => DrainResult::TimedOut,
            DrainOutcome::Cancelled => DrainResult::Cancelled,
        }
    }
}
