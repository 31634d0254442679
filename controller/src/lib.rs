//! The bootc node-pool controller: resolves each pool's target, plans its rollout and
//! carries the plan out. Module map:
//!
//! - [`reconcile`]: the shell around the planner: watches, lookups, snapshots, executing
//!   actions, writing the status, leader election around it all;
//! - [`plan`]: every decision for one pool, as one pure call per reconcile;
//! - [`history`]: the pool's `deployHistory`, a pure merge;
//! - [`resolve`]: tags to digests, one resolver for all pools;
//! - [`drain`]: draining a node through the Eviction API, as `kubectl drain` does;
//! - [`gate`]: the alert gate's Alertmanager or Prometheus, asked once per URL and
//!   interval for all pools;
//! - [`leader`]: the Lease that decides which replica leads;
//! - [`metrics`]: the Prometheus families and their registry;
//! - [`notify`]: a pool's rollout events sent to its webhook;
//! - [`secrets`]: where Secrets are read and written: the pull Secrets' copies in the
//!   install's namespace, and the namespaces sources may be read in;
//! - [`server`]: `/metrics`, `/healthz` and `/readyz`;
//! - [`shared`]: what the shell and its services share (the User-Agent, the field
//!   manager, the clock, the HTTP client), below them all.

pub mod drain;
pub mod gate;
pub mod history;
pub mod leader;
pub mod metrics;
pub mod notify;
pub mod plan;
pub mod reconcile;
pub mod resolve;
pub mod secrets;
pub mod server;
pub mod shared;
