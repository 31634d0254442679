//! Where the Lease is and how it is held: its name and namespace, this replica's
//! identity, and the three durations of the protocol.

use std::time::Duration;

/// Where the lease is and how it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Name of the Lease.
    pub name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's identity (unique among replicas; the pod name in a cluster).
    pub identity: String,
    /// How long a lease is valid after its last renewal (written as
    /// `leaseDurationSeconds`, rounded up to whole seconds). Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down. Must be shorter
    /// than `lease_duration`. Default 10 s.
    pub renew_deadline: Duration,
    /// How often the leader renews and a follower tries to acquire. Must be shorter
    /// than `renew_deadline`. Default 2 s.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A configuration with the default durations (15 s, 10 s, 2 s).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks names and that `lease_duration > renew_deadline > retry_period > 0`.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        if self.name.is_empty() || self.namespace.is_empty() {
            return Err(LeaseConfigError::EmptyName);
        }
        if self.identity.is_empty() {
            return Err(LeaseConfigError::EmptyIdentity);
        }
        if self.retry_period.is_zero()
            || self.renew_deadline <= self.retry_period
            || self.lease_duration <= self.renew_deadline
        {
            return Err(LeaseConfigError::Durations {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// `leaseDurationSeconds`: the lease duration rounded up to whole seconds, at least 1.
    pub(super) fn lease_duration_seconds(&self) -> i32 {
        let secs =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    }
}

/// An invalid [`LeaseConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    /// The Lease's name or namespace is empty.
    #[error("the lease name and namespace must not be empty")]
    EmptyName,
    /// The identity is empty.
    #[error("the leader election identity must not be empty")]
    EmptyIdentity,
    /// The durations are not ordered.
    #[error(
        "leader election needs lease duration > renew deadline > retry period > 0, got {lease_duration:?}, {renew_deadline:?}, {retry_period:?}"
    )]
    Durations {
        /// See [`LeaseConfig::lease_duration`].
        lease_duration: Duration,
        /// See [`LeaseConfig::renew_deadline`].
        renew_deadline: Duration,
        /// See [`LeaseConfig::retry_period`].
        retry_period: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_must_be_ordered() {
        let mut c = LeaseConfig::new("l", "ns", "me");
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 15);
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        c.lease_duration = Duration::from_millis(1500);
        c.renew_deadline = Duration::from_millis(700);
        c.retry_period = Duration::from_millis(100);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_duration_seconds(), 2);
        c.identity.clear();
        assert_eq!(c.validate(), Err(LeaseConfigError::EmptyIdentity));
    }
}
