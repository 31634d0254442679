//! The Lease record: its times as Kubernetes writes them, its holder, whether someone
//! else's hold has expired (by the record's own times and by how long this replica has
//! seen it unchanged on its monotonic clock), and the spec this replica writes to hold it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

use super::LeaseConfig;

/// Converts chrono time to a Kubernetes `MicroTime` (microsecond precision).
pub fn to_micro_time(t: DateTime<Utc>) -> Option<MicroTime> {
    serde_json::from_value(serde_json::Value::String(
        t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    ))
    .ok()
}

/// Converts a Kubernetes `MicroTime` to chrono.
pub fn from_micro_time(t: &MicroTime) -> Option<DateTime<Utc>> {
    match serde_json::to_value(t).ok()? {
        serde_json::Value::String(s) => DateTime::parse_from_rfc3339(&s)
            .ok()
            .map(|t| t.with_timezone(&Utc)),
        _ => None,
    }
}

/// The Lease's holder, when it has one (an empty `holderIdentity` is none).
pub(super) fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// The lease record as last seen, and since when (local monotonic clock) it has been
/// unchanged.
#[derive(Debug)]
struct LeaseObservation {
    resource_version: Option<String>,
    holder: Option<String>,
    renew_time: Option<DateTime<Utc>>,
    since: Instant,
}

/// What this replica has seen of the record: the last version, and since when.
#[derive(Debug, Default)]
pub(super) struct Observer {
    last: Option<LeaseObservation>,
}

impl Observer {
    /// Remembers `lease` as seen now; the observation time stays while the record is
    /// unchanged.
    pub(super) fn observe(&mut self, lease: &Lease) -> Instant {
        let resource_version = lease.metadata.resource_version.clone();
        let holder = holder_of(lease).map(str::to_owned);
        let renew_time = lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .and_then(from_micro_time);
        match &self.last {
            Some(o)
                if o.resource_version == resource_version
                    && o.holder == holder
                    && o.renew_time == renew_time =>
            {
                o.since
            }
            _ => {
                let since = Instant::now();
                self.last = Some(LeaseObservation {
                    resource_version,
                    holder,
                    renew_time,
                    since,
                });
                since
            }
        }
    }
}

/// Whether a lease held by someone else has expired, by its own times and by how
/// long we have seen it unchanged (`observed_since`, from [`Observer::observe`]).
pub(super) fn expired(config: &LeaseConfig, spec: &LeaseSpec, observed_since: Instant) -> bool {
    let duration = spec
        .lease_duration_seconds
        .filter(|d| *d > 0)
        .unwrap_or_else(|| config.lease_duration_seconds());
    let duration_std = Duration::from_secs(u64::try_from(duration).unwrap_or(0));
    let by_lease = match spec.renew_time.as_ref().and_then(from_micro_time) {
        Some(renew) => renew + chrono::Duration::seconds(i64::from(duration)) < Utc::now(),
        None => true,
    };
    by_lease && observed_since + duration_std <= Instant::now()
}

/// The spec this replica writes to hold the Lease at `now`, over the `previous` one
/// (`acquireTime` kept and `leaseTransitions` unchanged while the holder stays the same).
pub(super) fn spec_for_us(
    config: &LeaseConfig,
    now: DateTime<Utc>,
    previous: Option<&LeaseSpec>,
) -> LeaseSpec {
    let previous_holder = previous
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty());
    let ours = previous_holder == Some(config.identity.as_str());
    let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.lease_duration_seconds()),
        acquire_time: if ours {
            previous.and_then(|s| s.acquire_time.clone())
        } else {
            to_micro_time(now)
        },
        renew_time: to_micro_time(now),
        lease_transitions: Some(if ours || previous.is_none() {
            transitions
        } else {
            transitions.saturating_add(1)
        }),
        ..previous.cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_round_trip() {
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let m = to_micro_time(t).unwrap();
        assert_eq!(from_micro_time(&m), Some(t));
    }
}
