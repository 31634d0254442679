//! What the reconcile shell and the services it calls (the alert gate, the notifier, the
//! resolver, the metrics…) share, below all of them: the controller's name in what it
//! sends and writes, the clock, and the HTTP client every request outside the cluster
//! starts from.

use std::sync::Arc;

use chrono::{DateTime, Utc};

/// The User-Agent of the controller's requests (for audit logs and request counts).
pub const USER_AGENT: &str = concat!("bootc-pool-controller/", env!("CARGO_PKG_VERSION"));
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "bootc-pool-controller";

/// A clock, injectable for tests.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The HTTP client of a request outside the cluster (a registry, an alert source, a
/// webhook), before each caller's timeouts and redirect policy: it sends the
/// controller's [`USER_AGENT`].
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().user_agent(USER_AGENT)
}
